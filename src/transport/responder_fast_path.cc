// Responder, the predicted path: RDMA WRITE packets without immediate that
// the QP's receive template matched (wire/rx_template.h) and that are the
// plain case, placed without parse() and without the general step sequence
// but through the same checks (responder_steps.h), so both leave the same
// state. Anything else is left to on_packet().
#include "responder_steps.h"

namespace droce::transport {

using wire::Operation;
using wire::Position;

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

}  // namespace droce::transport
