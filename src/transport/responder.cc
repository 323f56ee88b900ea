// Responder: requests from the network (IBA 9.7.5.2 "Responder side
// behavior", 9.8 for UC, 9.8 / 11.4.1.2 for UD). Everything here comes from
// the wire: every field is checked before it is used, and nothing is written
// outside a registered region (IBA 10.6.3 access rights).
#include <algorithm>
#include <cstring>
#include <optional>

#include "droce/transport/device.h"
#include "droce/transport/qp.h"
#include "droce/wire/psn.h"
#include "payload_copy.h"
#include "prefetch.h"

namespace droce::transport {

using wire::NakCode;
using wire::Operation;
using wire::Position;

namespace {
constexpr uint32_t kGrhSize = 40;  // IBA 11.4.1.2: UD receive buffers start with a GRH
}

// Always inlined (see below): a call per WRITE packet on the predicted path.
[[gnu::always_inline]] inline AccessCheck QueuePair::check_remote(
    uint32_t rkey, uint64_t va, uint64_t len, uint32_t access, const MemoryRegion** out) const {
  const MemoryRegion* mr = device_.find_mr(rkey);
  // IBA 10.6.3.2: the R_Key must name a valid region of the QP's PD.
  if (!mr || mr->pd() != pd_ || !mr->remote_valid()) return AccessCheck::kBadKey;
  if (!mr->allows(access)) return AccessCheck::kNoPermission;
  if (!mr->translate(va, len)) return AccessCheck::kOutOfRange;
  *out = mr;
  return AccessCheck::kOk;
}

// The checks and steps of execute() that the predicted path
// (try_predicted_write) shares. Always inlined: the library is compiled as
// position-independent code, where GCC does not inline a function with
// external linkage unless told, and even `inline` left finish_write and
// place_write as calls; these run per packet, and on the 64-byte WRITE ONLY
// path each call showed.

// The RETH of a WRITE (first/only) or READ request: the QP must grant the
// access, the length must be a legal message size, and a non-empty range
// must lie in an MR of this PD that grants it (IBA 9.7.5.1.3 / 10.6.3).
// The region found is left in `*checked` (untouched for a zero length).
[[gnu::always_inline]] inline std::optional<NakCode> QueuePair::check_reth_of(
    uint32_t access, uint32_t rkey, uint64_t va, uint32_t dma_length,
    const MemoryRegion** checked) const {
  if (!(attr_.qp_access_flags & access)) return NakCode::kRemoteAccessError;
  if (dma_length > kMaxMessageBytes) return NakCode::kInvalidRequest;
  if (dma_length > 0 && check_remote(rkey, va, dma_length, access, checked) != AccessCheck::kOk)
    return NakCode::kRemoteAccessError;
  return std::nullopt;
}

// Opcode sequence (IBA 9.7.5.2.2): middle and last continue the message in
// progress, of the same operation; first and only start one, when none is.
[[gnu::always_inline]] inline bool QueuePair::in_sequence(Operation op, Position pos) const {
  const bool cont = pos == Position::kMiddle || pos == Position::kLast;
  if (in_msg_ == InMsg::kNone) return !cont;
  const bool same = (in_msg_ == InMsg::kSend && op == Operation::kSend) ||
                    (in_msg_ == InMsg::kWrite && op == Operation::kWrite);
  return cont && same;
}

// Payload length rules (IBA 9.7.5.2): first and middle packets carry
// exactly the path MTU; last carries 1..MTU; only carries 0..MTU.
[[gnu::always_inline]] inline bool QueuePair::legal_payload_length(Position pos, uint32_t len) const {
  const bool whole_mtu = pos == Position::kFirst || pos == Position::kMiddle;
  return len <= mtu_ && !(whole_mtu && len != mtu_) && !(pos == Position::kLast && len == 0);
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

void QueuePair::on_request(const wire::ParsedPacket& pkt, uint64_t) {
  ++counters_.rx_request_packets;
  if (type_ == QpType::kUd) return on_request_ud(pkt);
  if (type_ == QpType::kUc) return on_request_uc(pkt);
  if (responder_fatal_) {
    ++counters_.rx_dropped_bad_state;
    return;
  }
  const int32_t d = wire::psn_diff(pkt.psn, epsn_);
  if (d < 0) return on_duplicate(pkt);
  if (d > 0) return on_out_of_order(pkt);
  if (execute(pkt, false)) {
    nak_seq_sent_ = false;
    if (attr_.recovery == Recovery::kSelectiveRepeat) sr_advance();
  }
}

// Class of error -> NAK (RC) or silent drop (UC, IBA 9.8.3: UC has no
// acknowledgements; the damaged message is discarded).
bool QueuePair::reject(const wire::ParsedPacket& pkt, NakCode code, bool uc) {
  if (uc) {
    ++counters_.rx_dropped_uc;
    in_msg_ = InMsg::kNone;
    return false;
  }
  queue_nak(pkt.psn, code, msn_, /*fatal=*/true);
  return false;
}

bool QueuePair::execute(const wire::ParsedPacket& pkt, bool uc) {
  const wire::OpcodeInfo& info = *pkt.info;
  const Operation op = info.operation;
  const Position pos = info.position;
  const uint32_t len = pkt.payload_length;
  // The region a RETH check found (null for a zero-length RETH).
  const MemoryRegion* checked = nullptr;
  auto check_reth = [&](uint32_t access) {
    return check_reth_of(access, pkt.reth_rkey, pkt.reth_va, pkt.reth_dma_length, &checked);
  };
  if (!uc && !room_for_answer()) {
    ++counters_.rx_response_queue_full;
    return false;
  }
  if (!in_sequence(op, pos)) {
    if (uc && in_msg_ != InMsg::kNone) {
      // UC: the previous message lost its tail; drop it and start over
      // with this packet if it begins a message.
      in_msg_ = InMsg::kNone;
      ++counters_.rx_dropped_uc;
      if (pos == Position::kMiddle || pos == Position::kLast) return false;
    } else {
      return reject(pkt, NakCode::kInvalidRequest, uc);
    }
  }
  if (!legal_payload_length(pos, len)) return reject(pkt, NakCode::kInvalidRequest, uc);

  switch (op) {
    case Operation::kSend: {
      if (pos == Position::kFirst || pos == Position::kOnly) {
        if (!recv_wqe_available()) {
          // IBA 9.7.5.2.8: no receive WQE -> RNR NAK; the PSN is not consumed.
          if (uc) {
            ++counters_.rx_dropped_uc;
            return false;
          }
          queue_rnr_nak(pkt.psn);
          return false;
        }
        in_msg_ = InMsg::kSend;
        recv_offset_ = 0;
      }
      const RecvWqe& r = *recv_wqe();
      if (recv_offset_ + len > r.length) {
        // Message longer than the receive buffer: the receive WQE completes
        // with a local length error, the requester gets Invalid Request
        // (IBA 9.7.5.2 / verbs IBV_WC_REM_INV_REQ_ERR).
        complete_recv(r, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, 0, 0, 0, 0);
        consume_recv_wqe();
        in_msg_ = InMsg::kNone;
        return reject(pkt, NakCode::kInvalidRequest, uc);
      }
      if (!scatter(r, recv_offset_, pkt.payload, len)) {
        // The receive buffer's MR went away: local protection error here,
        // Remote Operational Error for the requester (IBA 9.7.5.2).
        complete_recv(r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, 0, 0, 0, 0);
        consume_recv_wqe();
        in_msg_ = InMsg::kNone;
        return reject(pkt, NakCode::kRemoteOperationalError, uc);
      }
      recv_offset_ += len;
      if (info.is_last_or_only()) {
        unsigned flags = 0;
        uint32_t inv = 0;
        if (pkt.has(wire::kExtImmDt)) flags |= IBV_WC_WITH_IMM;
        if (pkt.has(wire::kExtIeth)) {
          // IBA 10.6.7.2 (Send with Invalidate): the named R_Key must be a
          // region of this PD.
          MemoryRegion* mr = const_cast<MemoryRegion*>(device_.find_mr(pkt.ieth_rkey));
          if (!mr || mr->pd() != pd_) {
            complete_recv(r, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV, 0, 0, 0, 0, 0);
            consume_recv_wqe();
            in_msg_ = InMsg::kNone;
            return reject(pkt, NakCode::kInvalidRequest, uc);
          }
          mr->invalidate_remote();
          inv = pkt.ieth_rkey;
          flags |= IBV_WC_WITH_INV;
        }
        complete_recv(r, IBV_WC_SUCCESS, IBV_WC_RECV, static_cast<uint32_t>(recv_offset_),
                      flags, pkt.imm_data, inv, 0, pkt.solicited);
        consume_recv_wqe();
        in_msg_ = InMsg::kNone;
        msn_ = wire::psn_add(msn_, 1);
      }
      break;
    }
    case Operation::kWrite: {
      if (pos == Position::kFirst || pos == Position::kOnly) {
        if (const auto nak = check_reth(IBV_ACCESS_REMOTE_WRITE)) return reject(pkt, *nak, uc);
        start_write(pkt.psn, pkt.reth_va, pkt.reth_dma_length, pkt.reth_rkey);
        // Selective repeat: remember the RETH so later packets of this
        // message can be placed out of order. No free context only means
        // they will not be (they are dropped and resent as holes).
        if (attr_.recovery == Recovery::kSelectiveRepeat && pos == Position::kFirst) {
          if (WriteContext* c = alloc_write_context())
            *c = WriteContext{true, pkt.psn, (write_length_ + mtu_ - 1) / mtu_, write_va_,
                              write_length_, write_rkey_};
        }
      }
      const uint64_t offset = write_offset(pkt.psn);
      if (!write_fits(offset, len, write_length_, info.is_last_or_only())) {
        in_msg_ = InMsg::kNone;
        return reject(pkt, NakCode::kInvalidRequest, uc);
      }
      if (pkt.has(wire::kExtImmDt) && !recv_wqe_available()) {
        // WRITE with immediate consumes a receive WQE at its last packet.
        // IBA 9.7.5.2.8: an RNR NAK consumes no PSN and leaves no responder
        // state, so the retry finds the responder as this packet did. An
        // ONLY started its message just above: undo that, or the retry
        // (an ONLY again) would be out of sequence. A LAST continues the
        // message its FIRST started, which stays in progress: go-back-N
        // resends from the NAKed PSN, i.e. this LAST.
        if (pos == Position::kOnly) in_msg_ = InMsg::kNone;
        if (uc) {
          in_msg_ = InMsg::kNone;
          ++counters_.rx_dropped_uc;
          return false;
        }
        queue_rnr_nak(pkt.psn);
        return false;
      }
      if (len > 0) {
        // A first or only packet's bytes lie in the range its RETH check
        // just validated (offset 0, len <= the DMA length): same region.
        const MemoryRegion* mr = checked;
        if (!mr && check_remote(write_rkey_, write_va_ + offset, len, IBV_ACCESS_REMOTE_WRITE,
                                &mr) != AccessCheck::kOk) {
          in_msg_ = InMsg::kNone;
          return reject(pkt, NakCode::kRemoteAccessError, uc);
        }
        place_write(*mr, offset, pkt.payload, len);
        prefetch_next_packet(*mr, offset, len);
      }
      if (info.is_last_or_only()) {
        if (pkt.has(wire::kExtImmDt)) {
          const RecvWqe& r = *recv_wqe();
          complete_recv(r, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, write_length_,
                        IBV_WC_WITH_IMM, pkt.imm_data, 0, 0, pkt.solicited);
          consume_recv_wqe();
        }
        finish_write();
      }
      break;
    }
    case Operation::kReadRequest: {
      if (const auto nak = check_reth(IBV_ACCESS_REMOTE_READ)) return reject(pkt, *nak, uc);
      // IBA 9.7.5.2 : more outstanding READ/atomics than the responder
      // advertised (max_dest_rd_atomic) is an invalid request.
      uint32_t reads = 0;
      for (uint32_t i = 0; i < resp_count_; ++i)
        if (resp_at(resp_head_ + i).kind == Response::Kind::kRead) ++reads;
      if (reads >= attr_.max_dest_rd_atomic)
        return reject(pkt, NakCode::kInvalidRequest, uc);
      const uint32_t npkts = std::max<uint32_t>(1, (pkt.reth_dma_length + mtu_ - 1) / mtu_);
      msn_ = wire::psn_add(msn_, 1);
      Response* r = push_response();
      *r = Response{};
      r->kind = Response::Kind::kRead;
      r->psn = pkt.psn;
      r->end_psn = wire::psn_add(pkt.psn, npkts);
      r->msn = msn_;
      r->rkey = pkt.reth_rkey;
      r->registration = checked ? checked->registration() : 0;
      r->va = pkt.reth_va;
      r->remaining = pkt.reth_dma_length;
      // IBA 9.7.5.2 : a READ consumes one PSN per response packet.
      epsn_ = r->end_psn;
      unacked_ = 0;  // the responses acknowledge everything before them
      return true;
    }
    case Operation::kCompareSwap:
    case Operation::kFetchAdd: {
      if (!(attr_.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC))
        return reject(pkt, NakCode::kRemoteAccessError, uc);
      // Atomics address a naturally aligned 8-byte word (IBA 9.4.5); a
      // misaligned VA is an invalid request.
      if (pkt.atomic_va & 7) return reject(pkt, NakCode::kInvalidRequest, uc);
      const MemoryRegion* mr = nullptr;
      if (check_remote(pkt.atomic_rkey, pkt.atomic_va, 8, IBV_ACCESS_REMOTE_ATOMIC, &mr) !=
          AccessCheck::kOk)
        return reject(pkt, NakCode::kRemoteAccessError, uc);
      uint8_t* p = mr->translate(pkt.atomic_va, 8);
      uint64_t original;
      std::memcpy(&original, p, 8);  // the target is a host-order 64-bit word
      uint64_t value = original;
      if (op == Operation::kCompareSwap) {
        if (original == pkt.atomic_compare) value = pkt.atomic_swap_add;
      } else {
        value = original + pkt.atomic_swap_add;
      }
      std::memcpy(p, &value, 8);
      atomic_cache_[atomic_cache_next_++ % kAtomicCacheSize] =
          AtomicCacheEntry{true, pkt.psn, original};
      msn_ = wire::psn_add(msn_, 1);
      Response* r = push_response();
      *r = Response{};
      r->kind = Response::Kind::kAtomicAck;
      r->psn = pkt.psn;
      r->msn = msn_;
      r->atomic_original = original;
      epsn_ = wire::psn_add(epsn_, 1);
      unacked_ = 0;
      return true;
    }
    default:
      return reject(pkt, NakCode::kInvalidRequest, uc);
  }
  advance_after_request(pkt.psn, pkt.ack_req, uc);
  return true;
}

// The predicted case of on_packet() -> on_request() -> execute() for an RDMA
// WRITE packet without immediate at position `kPos` (ONLY, FIRST, MIDDLE,
// LAST): every condition under which those would do anything but place the
// payload and move on sends the frame there instead, so this tests, then
// acts through the same functions. One instance per position, inlined
// where it is dispatched (try_predicted_write, try_message_packet): the
// position's rules fold to a few compares, and the WRITE ONLY of the
// 64-byte hot path pays no second call (as a call of its own it cost ~20
// instructions a frame, ~5 % at 64 B).
// The receive-path test drives both ways with the same frames and compares.
template <Position kPos>
[[gnu::always_inline]] inline bool QueuePair::try_write_packet(const wire::PredictedWrite& w) {
  constexpr bool kStarts = kPos == Position::kFirst || kPos == Position::kOnly;
  constexpr bool kEnds = kPos == Position::kLast || kPos == Position::kOnly;
  const bool uc = type_ == QpType::kUc;
  const uint32_t len = w.payload_length;
  // on_packet(): states that take requests; on_request(): a responder that
  // has not failed, the expected PSN (for UC too: no resynchronisation).
  if (!receives() || responder_fatal_ || w.psn != epsn_) return false;
  // execute(): room for an answer; the opcode in sequence (IBA 9.7.5.2.2:
  // no message in progress for FIRST/ONLY, a WRITE for MIDDLE/LAST; UC's
  // restart on a lost tail is left to execute()); the payload length rule
  // for the position, and not empty (an empty ONLY places nothing: rare,
  // left to execute()). Selective repeat's write contexts are left to it.
  if (attr_.recovery != Recovery::kGoBackN || (!uc && !room_for_answer())) return false;
  if (!in_sequence(Operation::kWrite, kPos) || !legal_payload_length(kPos, len) || len == 0)
    return false;
  // The RETH's access (FIRST/ONLY, IBA 9.7.5.1.3, 10.6.3) or the message's
  // region at this packet's offset (MIDDLE/LAST: it may have gone since);
  // the payload inside the DMA length, the last packet ending it (IBA
  // 9.7.5.2).
  const MemoryRegion* mr = nullptr;
  uint64_t offset = 0;
  if constexpr (kStarts) {
    if (check_reth_of(IBV_ACCESS_REMOTE_WRITE, w.rkey, w.va, w.dma_length, &mr) ||
        !write_fits(offset, len, w.dma_length, kEnds))
      return false;
  } else {
    offset = write_offset(w.psn);
    if (check_remote(write_rkey_, write_va_ + offset, len, IBV_ACCESS_REMOTE_WRITE, &mr) !=
            AccessCheck::kOk ||
        !write_fits(offset, len, write_length_, kEnds))
      return false;
  }
  // What execute() does for such a WRITE packet, and on_request() after it.
  ++counters_.rx_request_packets;
  if constexpr (kStarts) start_write(w.psn, w.va, w.dma_length, w.rkey);
  place_write(*mr, offset, w.payload, len);
  if constexpr (!kEnds) prefetch_next_packet(*mr, offset, len);
  if constexpr (kEnds) finish_write();
  advance_after_request(w.psn, w.ack_req, uc);
  if (!uc) nak_seq_sent_ = false;
  return true;
}

// A run of WRITE ONLY packets, the bulk at small sizes: try_write_packet
// <kOnly> packet after packet, with what no packet of the run can change
// tested once (QP state, go-back-N, no message in progress, the QP's remote
// write access), the expected PSN and the MSN kept in registers (the copy
// into the region may alias the QP, so fields would be reloaded after it),
// the region of the previous packet's R_Key reused (nothing runs between
// the packets of a run that could deregister or invalidate it), and each
// ACK after the run's first written into the
// queued one, as queue_ack would coalesce it (IBA 9.7.5.1.2). Returns how
// many packets it took; the next is left untouched.
size_t QueuePair::try_write_only_run(std::span<const wire::PredictedWrite> ws) {
  if (!receives() || responder_fatal_ || attr_.recovery != Recovery::kGoBackN ||
      in_msg_ != InMsg::kNone || !(attr_.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
    return 0;
  const bool uc = type_ == QpType::kUc;
  const uint32_t mtu = mtu_, every_n = attr_.ack_every_n;
  uint32_t epsn = epsn_, msn = msn_, unacked = unacked_;
  // The region of the last R_Key, its bounds in registers (the copy into
  // it may alias the MemoryRegion, whose fields would be reloaded).
  const MemoryRegion* mr = nullptr;
  uint32_t mr_key = 0;
  uint64_t mr_iova = 0, mr_length = 0;
  uint8_t* mr_addr = nullptr;
  bool copy = false;  // mr holds its bytes (not virtual_payload)
  Response* ack = nullptr;  // the queued ACK this run's ACKs coalesce into
  bool room = uc || room_for_answer();  // changes only when an ACK is queued
  size_t n = 0;
  for (; n < ws.size(); ++n) {
    const wire::PredictedWrite& w = ws[n];
    const uint32_t len = w.payload_length;
    // The PSN, room for the ACK, the length rules of an ONLY (1..MTU, all
    // of the DMA length, which is then a legal message size: write_fits at
    // offset 0, check_reth_of), the RETH's range.
    static_assert(kMaxMessageBytes >= 4096, "an MTU is a legal message size");
    if (w.position != Position::kOnly || w.psn != epsn || !room || len > mtu || len == 0 ||
        len != w.dma_length)
      break;
    if (!mr || w.rkey != mr_key) {
      mr = nullptr;
      if (check_remote(w.rkey, w.va, len, IBV_ACCESS_REMOTE_WRITE, &mr) != AccessCheck::kOk) break;
      mr_key = w.rkey;
      mr_iova = mr->iova();
      mr_length = mr->length();
      mr_addr = mr->addr();
      copy = !mr->virtual_payload();
    }
    // MemoryRegion::translate on the registers.
    const uint64_t offset = w.va - mr_iova;
    if (w.va < mr_iova || offset > mr_length || len > mr_length - offset) break;
    if (copy) {
      // The destination of the packet after next: the region's lines are
      // usually not in cache (a burst fills a line per 64 B packet), and
      // a store to one that is not waits for it.
      if (n + 2 < ws.size()) {
        const uint64_t ahead = ws[n + 2].va - mr_iova;
        if (ahead < mr_length) __builtin_prefetch(mr_addr + ahead, 1);
      }
      copy_payload(mr_addr + offset, w.payload, len);
    }
    msn = wire::psn_add(msn, 1);  // finish_write
    epsn = wire::psn_add(epsn, 1);  // advance_after_request
    if (uc) continue;
    ++unacked;
    if (w.ack_req || (every_n && unacked >= every_n)) {
      unacked = 0;
      if (ack) {
        ack->psn = w.psn;
        ack->msn = msn;
      } else {
        msn_ = msn;
        queue_ack(w.psn);
        ack = tail_ack();
        room = room_for_answer();
      }
    }
  }
  if (n == 0) return 0;
  const wire::PredictedWrite& last = ws[n - 1];
  start_write(last.psn, last.va, last.dma_length, last.rkey);
  in_msg_ = InMsg::kNone;
  epsn_ = epsn;
  msn_ = msn;
  unacked_ = unacked;
  counters_.rx_request_packets += n;
  if (!uc) nak_seq_sent_ = false;
  return n;
}

// `ws` come from rx_template_match: WRITEs without immediate of this QP's
// transport, at the positions the match took from the opcode table. Runs
// of WRITE ONLY take the loop above; the other positions live in a
// function of their own, so the hot path saves no registers it does not use.
size_t QueuePair::try_predicted_writes(std::span<const wire::PredictedWrite> ws) {
  size_t done = 0;
  while (done < ws.size()) {
    const size_t took = ws[done].position == Position::kOnly
                            ? try_write_only_run(ws.subspan(done))
                            : try_message_packet(ws[done]);
    if (took == 0) break;
    done += took;
  }
  return done;
}

bool QueuePair::try_message_packet(const wire::PredictedWrite& w) {
  switch (w.position) {
    case Position::kFirst: return try_write_packet<Position::kFirst>(w);
    case Position::kMiddle: return try_write_packet<Position::kMiddle>(w);
    case Position::kLast: return try_write_packet<Position::kLast>(w);
    default: return false;
  }
}

// IBA 9.7.5.2 (duplicate requests): SEND/WRITE are acknowledged again,
// READ is executed again from the PSN and RETH the retransmission carries,
// an atomic returns its saved result.
void QueuePair::on_duplicate(const wire::ParsedPacket& pkt) {
  ++counters_.rx_duplicate_packets;
  const Operation op = pkt.info->operation;
  if (op == Operation::kReadRequest) {
    const uint32_t npkts = std::max<uint32_t>(1, (pkt.reth_dma_length + mtu_ - 1) / mtu_);
    // The re-issued range must lie inside what was executed.
    if (pkt.reth_dma_length > kMaxMessageBytes ||
        wire::psn_gt(wire::psn_add(pkt.psn, npkts), epsn_))
      return;
    const MemoryRegion* mr = nullptr;
    if (pkt.reth_dma_length > 0 && check_remote(pkt.reth_rkey, pkt.reth_va, pkt.reth_dma_length,
                                                IBV_ACCESS_REMOTE_READ, &mr) != AccessCheck::kOk)
      return;
    // Already answering that range: the queued stream covers it.
    for (uint32_t i = 0; i < resp_count_; ++i) {
      const Response& q = resp_at(resp_head_ + i);
      if (q.kind == Response::Kind::kRead && wire::psn_le(q.psn, pkt.psn) &&
          wire::psn_lt(pkt.psn, q.end_psn))
        return;
    }
    Response* r = push_response();
    if (!r) {
      ++counters_.rx_response_queue_full;
      return;
    }
    ++counters_.rx_duplicate_reads;
    *r = Response{};
    r->kind = Response::Kind::kRead;
    r->psn = pkt.psn;
    r->end_psn = wire::psn_add(pkt.psn, npkts);
    r->msn = msn_;
    r->rkey = pkt.reth_rkey;
    r->registration = mr ? mr->registration() : 0;
    r->va = pkt.reth_va;
    r->remaining = pkt.reth_dma_length;
    return;
  }
  if (op == Operation::kCompareSwap || op == Operation::kFetchAdd) {
    for (const AtomicCacheEntry& e : atomic_cache_) {
      if (e.valid && e.psn == pkt.psn) {
        Response* r = push_response();
        if (!r) return;
        ++counters_.rx_duplicate_atomics_replayed;
        *r = Response{};
        r->kind = Response::Kind::kAtomicAck;
        r->psn = pkt.psn;
        r->msn = msn_;
        r->atomic_original = e.original;
        return;
      }
    }
    ++counters_.rx_duplicate_atomics_unknown;
    return;
  }
  queue_ack(wire::psn_add(epsn_, wire::kPsnMask));  // epsn - 1
}

// IBA 9.7.5.2.1: a PSN ahead of the expected one means lost packets; go-back-N
// sends one sequence-error NAK per gap and drops until the hole is filled.
void QueuePair::on_out_of_order(const wire::ParsedPacket& pkt) {
  ++counters_.rx_out_of_sequence;
  if (attr_.recovery == Recovery::kSelectiveRepeat) {
    if (sr_accept(pkt)) {
      ++counters_.rx_ooo_accepted;
      queue_nak(epsn_, NakCode::kPsnSequenceError, pkt.psn, false);
      nak_seq_sent_ = true;
      return;
    }
  }
  if (!nak_seq_sent_) {
    queue_nak(epsn_, NakCode::kPsnSequenceError,
              attr_.recovery == Recovery::kSelectiveRepeat ? epsn_ : msn_, false);
    nak_seq_sent_ = true;
  }
}

// Selective repeat write contexts. A context is live from the FIRST packet
// that creates it until the expected PSN passes the message's last PSN:
// until then, packets of that message placed out of order (and the walk in
// sr_advance over a placed FIRST) depend on it. Only dead or free slots are
// reused; a live context is never evicted, whatever the arrival order.
bool QueuePair::write_context_live(const WriteContext& c, uint32_t epsn) const {
  return c.valid && wire::psn_lt(epsn, wire::psn_add(c.first_psn, c.npkts));
}

WriteContext* QueuePair::find_write_context(uint32_t psn) {
  for (WriteContext& c : write_ctx_) {
    if (write_context_live(c, epsn_) && wire::psn_ge(psn, c.first_psn) &&
        wire::psn_distance(c.first_psn, psn) < c.npkts)
      return &c;
  }
  return nullptr;
}

WriteContext* QueuePair::alloc_write_context() {
  for (WriteContext& c : write_ctx_)
    if (!write_context_live(c, epsn_)) return &c;
  return nullptr;
}

// Called when a WRITE message ends in order (epsn = the PSN after it):
// every context it or earlier messages used is dead. Invalidating them here,
// not only by comparison, keeps a context from looking live again once the
// 24-bit PSN space wraps (IBA 9.7.1).
void QueuePair::retire_write_contexts(uint32_t epsn) {
  for (WriteContext& c : write_ctx_)
    if (c.valid && !write_context_live(c, epsn)) c.valid = false;
}

// Selective repeat: place an out-of-order RDMA WRITE packet if its message
// context is known (see qp.h). Anything doubtful is dropped, not NAKed: the
// requester resends it as a hole and the in-order path judges it.
bool QueuePair::sr_accept(const wire::ParsedPacket& pkt) {
  const uint32_t d = wire::psn_distance(epsn_, pkt.psn);
  if (d >= ooo_.size() || resp_count_ + 2 > resp_.size()) return false;
  uint8_t& slot = ooo_[pkt.psn % ooo_.size()];
  if (slot) return false;  // already placed
  const wire::OpcodeInfo& info = *pkt.info;
  if (info.operation != Operation::kWrite || pkt.has(wire::kExtImmDt)) return false;
  const uint32_t len = pkt.payload_length;
  if (len > mtu_) return false;
  WriteContext learned;            // FIRST: the context this packet creates
  WriteContext* store = nullptr;   // ... and where it will be kept
  const WriteContext* c = nullptr;
  if (info.is_first_or_only()) {
    if (!(attr_.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) ||
        pkt.reth_dma_length > kMaxMessageBytes)
      return false;
    if (info.position == Position::kFirst ? len != mtu_ : len != pkt.reth_dma_length)
      return false;
    if (info.position == Position::kFirst) {
      // Claim a slot before placing anything: with every context live the
      // packet is dropped rather than placed without a context to find it.
      store = alloc_write_context();
      if (!store) return false;
      learned = WriteContext{true, pkt.psn, (pkt.reth_dma_length + mtu_ - 1) / mtu_,
                             pkt.reth_va, pkt.reth_dma_length, pkt.reth_rkey};
      c = &learned;
    } else if (len > 0) {
      const MemoryRegion* mr = nullptr;
      if (check_remote(pkt.reth_rkey, pkt.reth_va, len, IBV_ACCESS_REMOTE_WRITE, &mr) !=
          AccessCheck::kOk)
        return false;
      if (!mr->virtual_payload()) std::memcpy(mr->translate(pkt.reth_va, len), pkt.payload, len);
    }
  } else {
    c = find_write_context(pkt.psn);
    if (!c || c->first_psn == pkt.psn) return false;
  }
  if (c) {
    const uint64_t offset = uint64_t{wire::psn_distance(c->first_psn, pkt.psn)} * mtu_;
    const bool last = info.position == Position::kLast;
    if ((info.position == Position::kMiddle && len != mtu_) ||
        offset + len > c->length || (last && offset + len != c->length))
      return false;
    if (len > 0) {
      const MemoryRegion* mr = nullptr;
      if (check_remote(c->rkey, c->va + offset, len, IBV_ACCESS_REMOTE_WRITE, &mr) !=
          AccessCheck::kOk)
        return false;
      if (!mr->virtual_payload()) std::memcpy(mr->translate(c->va + offset, len), pkt.payload, len);
    }
  }
  if (store) *store = learned;
  slot = static_cast<uint8_t>(pkt.opcode + 1);
  return true;
}

// After the in-order packet: walk over packets already placed out of order,
// replaying their sequencing effects (message start/end, MSN).
void QueuePair::sr_advance() {
  bool moved = false;
  for (;;) {
    uint8_t& slot = ooo_[epsn_ % ooo_.size()];
    if (!slot) break;
    const wire::OpcodeInfo& info = wire::opcode_info(static_cast<uint8_t>(slot - 1));
    slot = 0;
    if (info.position == Position::kFirst) {
      // The context of a placed FIRST stays live until this message ends
      // (alloc_write_context never evicts it), so it is always found.
      if (const WriteContext* c = find_write_context(epsn_)) {
        write_first_psn_ = c->first_psn;
        write_va_ = c->va;
        write_length_ = c->length;
        write_rkey_ = c->rkey;
      }
      in_msg_ = InMsg::kWrite;
    } else if (info.is_last_or_only()) {
      in_msg_ = InMsg::kNone;
      msn_ = wire::psn_add(msn_, 1);
      retire_write_contexts(wire::psn_add(epsn_, 1));
    }
    epsn_ = wire::psn_add(epsn_, 1);
    moved = true;
  }
  if (moved) {
    queue_ack(wire::psn_add(epsn_, wire::kPsnMask));
    unacked_ = 0;
  }
}

void QueuePair::on_request_uc(const wire::ParsedPacket& pkt) {
  // IBA 9.8.3: UC has no retransmission; a PSN gap loses the message in
  // progress (its receive WQE is reused) and the responder resynchronises
  // on the next first/only packet.
  if (pkt.psn != epsn_) {
    ++counters_.rx_out_of_sequence;
    if (in_msg_ != InMsg::kNone) ++counters_.rx_dropped_uc;
    in_msg_ = InMsg::kNone;
    epsn_ = pkt.psn;
  }
  if (!execute(pkt, true)) in_msg_ = InMsg::kNone;
  epsn_ = wire::psn_add(pkt.psn, 1);
}

void QueuePair::on_request_ud(const wire::ParsedPacket& pkt) {
  // IBA 10.2.5 / 9.6.1: the Q_Key must match, otherwise silently dropped.
  if (pkt.deth_qkey != attr_.qkey) {
    ++counters_.rx_dropped_ud_qkey;
    return;
  }
  if (!recv_wqe_available()) {
    ++counters_.rx_dropped_ud_no_wqe;  // UD has no RNR: the datagram is lost
    return;
  }
  const RecvWqe& r = *recv_wqe();
  const uint32_t total = kGrhSize + pkt.payload_length;
  if (total > r.length) {
    ++counters_.rx_dropped_ud_too_long;
    complete_recv(r, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, 0, 0, 0, pkt.deth_src_qp);
    consume_recv_wqe();
    return;
  }
  // The first 40 bytes receive the GRH; for RoCEv2 over IPv4 that is 20
  // zero bytes and the IPv4 header (as rdma-core documents for RoCE).
  uint8_t grh[kGrhSize] = {};
  const uint8_t* frame = pkt.payload - pkt.payload_offset;
  if (pkt.ipv6())
    std::memcpy(grh, frame + pkt.l3_offset, kGrhSize);
  else
    std::memcpy(grh + 20, frame + pkt.l3_offset, 20);
  if (!scatter(r, 0, grh, kGrhSize) ||
      !scatter(r, kGrhSize, pkt.payload, pkt.payload_length)) {
    complete_recv(r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, 0, 0, 0, pkt.deth_src_qp);
    consume_recv_wqe();
    return;
  }
  unsigned flags = IBV_WC_GRH;
  if (pkt.has(wire::kExtImmDt)) flags |= IBV_WC_WITH_IMM;
  complete_recv(r, IBV_WC_SUCCESS, IBV_WC_RECV, total, flags, pkt.imm_data, 0,
                pkt.deth_src_qp, pkt.solicited);
  consume_recv_wqe();
}

Response* QueuePair::push_response() {
  if (resp_count_ >= resp_.size()) return nullptr;
  Response* r = &resp_at(resp_head_ + resp_count_);
  ++resp_count_;
  return r;
}

Response* QueuePair::tail_ack() {
  if (resp_count_ == 0) return nullptr;
  Response& tail = resp_at(resp_head_ + resp_count_ - 1);
  return tail.kind == Response::Kind::kAck ? &tail : nullptr;
}

void QueuePair::queue_ack(uint32_t psn) {
  if (Response* tail = tail_ack()) {  // coalesce: ACKs are cumulative
    tail->psn = psn;
    tail->msn = msn_;
    return;
  }
  Response* r = push_response();
  if (!r) return;  // a later ACK covers it
  *r = Response{};
  r->kind = Response::Kind::kAck;
  r->syndrome = wire::make_syndrome(wire::AethType::kAck, wire::kAethCreditsInvalid);
  r->psn = psn;
  r->msn = msn_;
}

void QueuePair::queue_nak(uint32_t psn, NakCode code, uint32_t msn_field, bool fatal) {
  Response* r = push_response();
  if (!r) return;
  *r = Response{};
  r->kind = Response::Kind::kNak;
  r->syndrome = wire::make_syndrome(wire::AethType::kNak, static_cast<uint8_t>(code));
  r->psn = psn;
  r->msn = msn_field & wire::kPsnMask;
  r->fatal = fatal;
  if (fatal) {
    // IBA 9.9.3 (responder errors): after an invalid request / access /
    // operational NAK the QP goes to the error state.
    responder_fatal_ = true;
    in_msg_ = InMsg::kNone;
  }
}

void QueuePair::queue_rnr_nak(uint32_t psn) {
  Response* r = push_response();
  if (!r) return;
  *r = Response{};
  r->kind = Response::Kind::kNak;
  r->syndrome = wire::make_syndrome(wire::AethType::kRnrNak, attr_.min_rnr_timer);
  r->psn = psn;
  r->msn = msn_;
}

size_t QueuePair::produce_response(uint64_t now, std::span<uint8_t> buf) {
  Response& r = resp_[resp_head_];
  wire::TransportSpec t;
  t.dest_qp = attr_.dest_qpn;
  t.pkey = attr_.pkey;
  t.psn = r.psn;
  t.aeth_msn = r.msn;
  auto pop = [&] {
    resp_head_ = (resp_head_ + 1) & static_cast<uint32_t>(resp_.size() - 1);
    --resp_count_;
  };
  switch (r.kind) {
    case Response::Kind::kAck:
    case Response::Kind::kNak: {
      // The frame build() would write, from the QP's ACK template.
      const size_t n = wire::build_ack(ack_template_, r.psn, r.syndrome, r.msn, buf);
      if (!n) return 0;
      ++counters_.tx_packets;
      const bool fatal = r.fatal;
      if (r.kind == Response::Kind::kAck) {
        ++counters_.acks_sent;
      } else if (wire::aeth_type(r.syndrome) == wire::AethType::kRnrNak) {
        ++counters_.rnr_naks_sent;
      } else {
        switch (static_cast<NakCode>(wire::aeth_value(r.syndrome))) {
          case NakCode::kPsnSequenceError: ++counters_.naks_seq_sent; break;
          case NakCode::kInvalidRequest: ++counters_.naks_invalid_request_sent; break;
          case NakCode::kRemoteAccessError: ++counters_.naks_remote_access_sent; break;
          default: ++counters_.naks_remote_operational_sent; break;
        }
      }
      pop();
      if (fatal) enter_error();
      return n;
    }
    case Response::Kind::kAtomicAck: {
      t.opcode = IBV_OPCODE_RC_ATOMIC_ACKNOWLEDGE;
      t.aeth_syndrome = wire::make_syndrome(wire::AethType::kAck, wire::kAethCreditsInvalid);
      t.atomic_ack_original = r.atomic_original;
      const size_t n = build(t, {}, buf);
      if (!n) return 0;
      ++counters_.atomic_acks_sent;
      pop();
      return n;
    }
    case Response::Kind::kRead: {
      const uint32_t len = std::min(r.remaining, mtu_);
      const bool last = r.remaining <= mtu_;
      if (r.first && last) t.opcode = IBV_OPCODE_RC_RDMA_READ_RESPONSE_ONLY;
      else if (r.first) t.opcode = IBV_OPCODE_RC_RDMA_READ_RESPONSE_FIRST;
      else if (last) t.opcode = IBV_OPCODE_RC_RDMA_READ_RESPONSE_LAST;
      else t.opcode = IBV_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE;
      t.aeth_syndrome = wire::make_syndrome(wire::AethType::kAck, wire::kAethCreditsInvalid);
      std::span<const uint8_t> payload;
      if (len > 0) {
        // The READ's R_Key was checked when it was accepted (IBA 10.6.3.2)
        // and the READ is served from that region to its end: a Send with
        // Invalidate accepted after it (IBA 10.6.7.2) revokes the R_Key
        // for the requests that follow, not for one already taken, whose
        // responses still go out in order (IBA 9.7.5.1). The closest
        // clause found is o9-5.2.1, which lets the invalidation happen
        // only once the Send with Invalidate's own header checks passed;
        // none found speaks of requests accepted before it. So no
        // remote_valid() here; the region must still be the same
        // registration, though: a deregistered one's memory is not ours.
        const MemoryRegion* mr = device_.find_mr(r.rkey);
        const uint8_t* src =
            mr && mr->registration() == r.registration ? mr->translate(r.va, len) : nullptr;
        if (!src) {
          // Deregistered while queued: the READ cannot complete. Answer
          // it, in its place in the queue, with the NAK for an error local
          // to the responder, Remote Operational Error (IBA 9.7.5.2; it
          // ends the connection, IBA 9.9.3), at the PSN of the response
          // packet that could not be sent; the MSN is the last completed
          // request's, the one before this READ's.
          ++counters_.read_responses_region_gone;
          r.kind = Response::Kind::kNak;
          r.syndrome = wire::make_syndrome(wire::AethType::kNak,
                                           static_cast<uint8_t>(NakCode::kRemoteOperationalError));
          r.msn = wire::psn_add(r.msn, wire::kPsnMask);
          r.fatal = true;
          responder_fatal_ = true;
          in_msg_ = InMsg::kNone;
          return produce_response(now, buf);
        }
        payload = {src, len};
      }
      const size_t n = build(t, payload, buf);
      if (!n) return 0;
      ++counters_.read_response_packets_sent;
      r.first = false;
      r.psn = wire::psn_add(r.psn, 1);
      r.va += len;
      r.remaining -= len;
      if (last) pop();
      return n;
    }
  }
  return 0;
}

}  // namespace droce::transport
