// The responder's steps, private to the transport. An incoming request runs
// the sequence an RNIC's receive engine runs (responder.cc): validate it
// (room for an answer, opcode sequence, payload length), check its PSN,
// execute it by opcode family (responder_send.cc, responder_write.cc,
// responder_read.cc, responder_atomic.cc), answer it. Each step returns a
// Verdict: go on to the next step, or how the request ends.
//
// The checks below are shared by the general path and the predicted path
// (responder_fast_path.cc), so both apply the same rules and leave the same
// state. They are always inlined: the library is compiled as position-
// independent code, where GCC does not inline a function with external
// linkage unless told, and even `inline` left finish_write and place_write
// as calls; these run per packet, and on the 64-byte WRITE ONLY path each
// call showed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "droce/transport/device.h"
#include "droce/transport/qp.h"
#include "droce/wire/psn.h"
#include "payload_copy.h"
#include "prefetch.h"

namespace droce::transport {

enum class ResponderVerdict : uint8_t {
  kNext,        // the step passed: go on to the next
  kAck,         // executed: the expected PSN moves on, an ACK when one is due
  kResponded,   // executed: the READ response or atomic ACK it queued answers it
  kRnr,         // no receive WQE: RNR NAK, nothing consumed (IBA 9.7.5.2.8)
  kDrop,        // counted and dropped, nothing to answer
  // NAKs that end the connection (IBA 9.7.5.2, 9.9.3); UC drops instead.
  kInvalidRequest,
  kRemoteAccessError,
  kRemoteOperationalError,
};

using Verdict = ResponderVerdict;

constexpr Verdict nak_verdict(wire::NakCode code) {
  switch (code) {
    case wire::NakCode::kRemoteAccessError: return Verdict::kRemoteAccessError;
    case wire::NakCode::kRemoteOperationalError:
      return Verdict::kRemoteOperationalError;
    default: return Verdict::kInvalidRequest;
  }
}

constexpr wire::NakCode nak_code(Verdict v) {
  switch (v) {
    case Verdict::kRemoteAccessError: return wire::NakCode::kRemoteAccessError;
    case Verdict::kRemoteOperationalError:
      return wire::NakCode::kRemoteOperationalError;
    default: return wire::NakCode::kInvalidRequest;
  }
}

// IBA 10.6.3.2: the R_Key must name a valid region of the QP's PD that
// grants the access and holds the range.
[[gnu::always_inline]] inline AccessCheck QueuePair::check_remote(
    uint32_t rkey, uint64_t va, uint64_t len, uint32_t access, const MemoryRegion** out) const {
  const MemoryRegion* mr = device_.find_mr(rkey);
  if (!mr || mr->pd() != pd_ || !mr->remote_valid()) return AccessCheck::kBadKey;
  if (!mr->allows(access)) return AccessCheck::kNoPermission;
  if (!mr->translate(va, len)) return AccessCheck::kOutOfRange;
  *out = mr;
  return AccessCheck::kOk;
}

// The RETH of a WRITE (first/only) or READ request: the QP must grant the
// access, the length must be a legal message size, and a non-empty range
// must lie in an MR of this PD that grants it (IBA 9.7.5.1.3 / 10.6.3).
// The region found is left in `*checked` (untouched for a zero length).
[[gnu::always_inline]] inline std::optional<wire::NakCode> QueuePair::check_reth_of(
    uint32_t access, uint32_t rkey, uint64_t va, uint32_t dma_length,
    const MemoryRegion** checked) const {
  if (!(attr_.qp_access_flags & access)) return wire::NakCode::kRemoteAccessError;
  if (dma_length > kMaxMessageBytes) return wire::NakCode::kInvalidRequest;
  if (dma_length > 0 && check_remote(rkey, va, dma_length, access, checked) != AccessCheck::kOk)
    return wire::NakCode::kRemoteAccessError;
  return std::nullopt;
}

// Opcode sequence (IBA 9.7.5.2.2): middle and last continue the message in
// progress, of the same operation; first and only start one, when none is.
[[gnu::always_inline]] inline bool QueuePair::in_sequence(wire::Operation op,
                                                          wire::Position pos) const {
  const bool cont = pos == wire::Position::kMiddle || pos == wire::Position::kLast;
  if (in_msg_ == InMsg::kNone) return !cont;
  const bool same = (in_msg_ == InMsg::kSend && op == wire::Operation::kSend) ||
                    (in_msg_ == InMsg::kWrite && op == wire::Operation::kWrite);
  return cont && same;
}

// Payload length rules (IBA 9.7.5.2): first and middle packets carry
// exactly the path MTU; last carries 1..MTU; only carries 0..MTU.
[[gnu::always_inline]] inline bool QueuePair::legal_payload_length(wire::Position pos,
                                                                   uint32_t len) const {
  const bool whole_mtu = pos == wire::Position::kFirst || pos == wire::Position::kMiddle;
  return len <= mtu_ && !(whole_mtu && len != mtu_) && !(pos == wire::Position::kLast && len == 0);
}

[[gnu::always_inline]] inline void QueuePair::start_write(uint32_t psn, uint64_t va,
                                                          uint32_t length, uint32_t rkey) {
  write_first_psn_ = psn;
  write_va_ = va;
  write_length_ = length;
  write_rkey_ = rkey;
  in_msg_ = InMsg::kWrite;
}

// Offset from the PSN distance to the first packet: exact because every
// packet but the last carries exactly one MTU.
[[gnu::always_inline]] inline uint64_t QueuePair::write_offset(uint32_t psn) const {
  return uint64_t{wire::psn_distance(write_first_psn_, psn)} * mtu_;
}

// The payload agrees with the RETH DMA length `length` (IBA 9.7.5.2): it
// stays inside, and the last packet ends exactly there.
[[gnu::always_inline]] inline bool QueuePair::write_fits(uint64_t offset, uint32_t len,
                                                         uint64_t length, bool last) {
  return offset + len <= length && (!last || offset + len == length);
}

[[gnu::always_inline]] inline void QueuePair::place_write(const MemoryRegion& mr, uint64_t offset,
                                                          const uint8_t* src, uint32_t len) {
  if (!mr.virtual_payload()) copy_payload(mr.translate(write_va_ + offset, len), src, len);
}

// The message's next packet lands right after this one (prefetch.h);
// nothing follows a LAST or ONLY.
[[gnu::always_inline]] inline void QueuePair::prefetch_next_packet(const MemoryRegion& mr,
                                                                   uint64_t offset, uint32_t len) {
  if (mr.virtual_payload()) return;
  const uint64_t ahead = next_packet_bytes(offset + len, len, write_length_);
  if (uint8_t* next = ahead ? mr.translate(write_va_ + offset + len, ahead) : nullptr)
    prefetch_for_write(next, ahead);
}

[[gnu::always_inline]] inline void QueuePair::finish_write() {
  in_msg_ = InMsg::kNone;
  msn_ = wire::psn_add(msn_, 1);
  if (attr_.recovery == Recovery::kSelectiveRepeat) retire_write_contexts(wire::psn_add(epsn_, 1));
}

// The end of every executed request (see qp.h).
[[gnu::always_inline]] inline void QueuePair::advance_after_request(uint32_t psn, bool ack_req,
                                                                    bool uc) {
  epsn_ = wire::psn_add(epsn_, 1);
  if (!uc) {
    // Coalesced ACKs (IBA 9.7.5.1.2 lets the responder acknowledge several
    // packets with one ACK): on AckReq, or every ack_every_n packets.
    ++unacked_;
    if (ack_req || (attr_.ack_every_n && unacked_ >= attr_.ack_every_n)) {
      queue_ack(psn);
      unacked_ = 0;
    }
  }
}

// The BTH and AETH fields every response to the peer carries.
inline wire::TransportSpec QueuePair::response_spec(const Response& r) const {
  wire::TransportSpec t;
  t.dest_qp = attr_.dest_qpn;
  t.pkey = attr_.pkey;
  t.psn = r.psn;
  t.aeth_msn = r.msn;
  return t;
}

// The oldest answer has gone out.
inline void QueuePair::pop_response() {
  resp_head_ = (resp_head_ + 1) & (resp_size_ - 1);
  --resp_count_;
}

// Packets a READ's response takes: one per MTU, at least one (IBA 9.7.5.2:
// a READ consumes one PSN per response packet).
inline uint32_t read_response_packets(uint32_t dma_length, uint32_t mtu) {
  return std::max<uint32_t>(1, (dma_length + mtu - 1) / mtu);
}

}  // namespace droce::transport
