// Responder: requests from the network (IBA 9.7.5.2 "Responder side
// behavior", 9.8 for UC, 9.8 / 11.4.1.2 for UD). Everything here comes from
// the wire: every field is checked before it is used, and nothing is written
// outside a registered region (IBA 10.6.3 access rights).
//
// This file is the dispatch and the step sequence of an in-order request
// (responder_steps.h): validate -> check the PSN -> execute by opcode
// family -> answer, and the queue of answers it feeds. The families live
// in responder_send.cc (SEND, UD), responder_write.cc, responder_read.cc
// and responder_atomic.cc; the predicted WRITE path in
// responder_fast_path.cc, selective repeat's out-of-order placement in
// responder_selective_repeat.cc, the notification point in
// notification_point.cc.
#include <algorithm>

#include "responder_steps.h"

namespace droce::transport {

using wire::NakCode;
using wire::Operation;
using wire::Position;

void QueuePair::on_request(const wire::ParsedPacket& pkt, uint64_t) {
  // After a fatal error the request is only dropped, counted as such (and
  // not as taken: rx_packets_accounted() counts each packet once).
  if (responder_fatal_ && type_ == QpType::kRc) {
    ++rare_counters().rx_dropped_bad_state;
    return;
  }
  ++counters_.rx_request_packets;
  if (type_ == QpType::kUd) return on_request_ud(pkt);
  if (type_ == QpType::kUc) return on_request_uc(pkt);
  // Check the PSN (IBA 9.7.5.2.1): behind the expected one is a duplicate,
  // ahead of it a gap.
  const int32_t d = wire::psn_diff(pkt.psn, epsn_);
  if (d < 0) return on_duplicate(pkt);
  if (d > 0) return on_out_of_order(pkt);
  if (execute(pkt, false)) {
    nak_seq_sent_ = false;
    if (attr_.recovery == Recovery::kSelectiveRepeat) sr_advance();
  }
}

void QueuePair::on_request_uc(const wire::ParsedPacket& pkt) {
  // IBA 9.8.3: UC has no retransmission; a PSN gap loses the message in
  // progress (its receive WQE is reused) and the responder resynchronises
  // on the next first/only packet.
  if (pkt.psn != epsn_) {
    ++rare_counters().rx_out_of_sequence;
    if (in_msg_ != InMsg::kNone) ++rare_counters().rx_dropped_uc;
    in_msg_ = InMsg::kNone;
    epsn_ = pkt.psn;
  }
  if (!execute(pkt, true)) in_msg_ = InMsg::kNone;
  epsn_ = wire::psn_add(pkt.psn, 1);
}

// The in-order request at epsn_, step by step.
bool QueuePair::execute(const wire::ParsedPacket& pkt, bool uc) {
  Verdict v = validate_request(pkt, uc);
  if (v == Verdict::kNext) {
    switch (pkt.info->operation) {
      case Operation::kSend: v = execute_send(pkt); break;
      case Operation::kWrite: v = execute_write(pkt); break;
      case Operation::kReadRequest: v = execute_read(pkt); break;
      case Operation::kCompareSwap:
      case Operation::kFetchAdd: v = execute_atomic(pkt); break;
      default: v = Verdict::kInvalidRequest; break;
    }
  }
  return answer(pkt, v, uc);
}

// What every request must pass before its family looks at it: room for the
// answer it may need, the opcode in sequence, a legal payload length.
Verdict QueuePair::validate_request(const wire::ParsedPacket& pkt, bool uc) {
  const Operation op = pkt.info->operation;
  const Position pos = pkt.info->position;
  if (!uc && !room_for_answer()) {
    ++rare_counters().rx_response_queue_full;
    return Verdict::kDrop;
  }
  if (!in_sequence(op, pos)) {
    if (uc && in_msg_ != InMsg::kNone) {
      // UC: the previous message lost its tail; drop it and start over
      // with this packet if it begins a message.
      in_msg_ = InMsg::kNone;
      ++rare_counters().rx_dropped_uc;
      if (pos == Position::kMiddle || pos == Position::kLast) return Verdict::kDrop;
    } else {
      return Verdict::kInvalidRequest;
    }
  }
  if (!legal_payload_length(pos, pkt.payload_length)) return Verdict::kInvalidRequest;
  return Verdict::kNext;
}

// The last step: the verdict becomes the PSN's advance and the ACK, an RNR
// NAK or a NAK. True when the request was executed.
bool QueuePair::answer(const wire::ParsedPacket& pkt, Verdict v, bool uc) {
  switch (v) {
    case Verdict::kAck:
      advance_after_request(pkt.psn, pkt.ack_req, uc);
      return true;
    case Verdict::kResponded:
      return true;
    case Verdict::kRnr:
      // IBA 9.7.5.2.8: no receive WQE -> RNR NAK; the PSN is not consumed.
      // UC has no NAKs: the message is lost.
      if (uc) {
        in_msg_ = InMsg::kNone;
        ++rare_counters().rx_dropped_uc;
        return false;
      }
      queue_rnr_nak(pkt.psn);
      return false;
    case Verdict::kNext:
    case Verdict::kDrop:
      return false;
    case Verdict::kInvalidRequest:
    case Verdict::kRemoteAccessError:
    case Verdict::kRemoteOperationalError:
      return reject(pkt, nak_code(v), uc);
  }
  return false;
}

// Class of error -> NAK (RC) or silent drop (UC, IBA 9.8.3: UC has no
// acknowledgements; the damaged message is discarded).
bool QueuePair::reject(const wire::ParsedPacket& pkt, NakCode code, bool uc) {
  if (uc) {
    ++rare_counters().rx_dropped_uc;
    in_msg_ = InMsg::kNone;
    return false;
  }
  queue_nak(pkt.psn, code, msn_, /*fatal=*/true);
  return false;
}

// IBA 9.7.5.2 (duplicate requests): SEND/WRITE are acknowledged again,
// READ is executed again from the PSN and RETH the retransmission carries
// (responder_read.cc), an atomic returns its saved result
// (responder_atomic.cc).
void QueuePair::on_duplicate(const wire::ParsedPacket& pkt) {
  ++rare_counters().rx_duplicate_packets;
  const Operation op = pkt.info->operation;
  if (op == Operation::kReadRequest) return replay_read(pkt);
  if (op == Operation::kCompareSwap || op == Operation::kFetchAdd) return replay_atomic(pkt);
  queue_ack(wire::psn_add(epsn_, wire::kPsnMask));  // epsn - 1
}

// IBA 9.7.5.2.1: a PSN ahead of the expected one means lost packets; go-back-N
// sends one sequence-error NAK per gap and drops until the hole is filled.
void QueuePair::on_out_of_order(const wire::ParsedPacket& pkt) {
  ++rare_counters().rx_out_of_sequence;
  reorder_depth_max_ = std::max(reorder_depth_max_, wire::psn_distance(epsn_, pkt.psn));
  if (attr_.recovery == Recovery::kSelectiveRepeat) {
    if (sr_accept(pkt)) {
      ++rare_counters().rx_ooo_accepted;
      // The packet is placed whether or not its SACK finds room: on a
      // network that reorders, a burst of overtaking packets fills the
      // response queue, and dropping what arrived would turn reordering
      // into loss. A SACK not sent is a lost ACK; the cumulative ACK that
      // follows the hole covers the packet.
      if (room_for_answer()) {
        queue_nak(epsn_, NakCode::kPsnSequenceError, pkt.psn, false);
      } else {
        ++rare_counters().rx_response_queue_full;
      }
      nak_seq_sent_ = true;
      return;
    }
    if (sr_placed(pkt.psn)) {
      // Placed before: its SACK was lost, or this is a resend the requester
      // made for want of it (a timeout or a tail loss probe). SACKed again,
      // as IBA 9.7.5.2 has a duplicate acknowledged again; nothing is
      // written a second time.
      ++rare_counters().rx_duplicate_packets;
      if (room_for_answer()) queue_nak(epsn_, NakCode::kPsnSequenceError, pkt.psn, false);
      return;
    }
  }
  if (!nak_seq_sent_) {
    queue_nak(epsn_, NakCode::kPsnSequenceError,
              attr_.recovery == Recovery::kSelectiveRepeat ? epsn_ : msn_, false);
    nak_seq_sent_ = true;
  }
}

Response* QueuePair::push_response() {
  if ((resp_count_ >= resp_size_ || resp_count_ >= resp_limit_) && !grow_responses())
    return nullptr;
  Response* r = &resp_at(resp_head_ + resp_count_);
  ++resp_count_;
  return r;
}

// Grows the answer ring from its one entry in the QP to 4 on the heap, then
// doubles it, keeping the queued answers in order; false when it is at
// resp_limit_ already.
bool QueuePair::grow_responses() {
  if (resp_size_ >= resp_limit_) return false;
  const uint32_t size = std::min(resp_limit_, std::max(4u, 2 * resp_size_));
  auto bigger = std::make_unique<Response[]>(size);
  for (uint32_t i = 0; i < resp_count_; ++i) bigger[i] = resp_at(resp_head_ + i);
  resp_grown_ = std::move(bigger);
  resp_ = resp_grown_.get();
  resp_size_ = size;
  resp_head_ = 0;
  return true;
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
  r->kind = Response::Kind::kAck;  // its syndrome (the credits) when it is written
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

// The oldest queued answer as a frame; READ responses are
// responder_read.cc's.
size_t QueuePair::produce_response(uint64_t now, std::span<uint8_t> buf) {
  Response& r = resp_[resp_head_];
  switch (r.kind) {
    case Response::Kind::kAck:
    case Response::Kind::kNak: {
      // The frame build() would write, from the QP's ACK template. An ACK
      // advertises the receive queue as it is now (qp_credits.cc).
      const uint8_t syndrome = r.kind == Response::Kind::kAck ? ack_syndrome() : r.syndrome;
      const size_t n = wire::build_ack(ack_template_, r.psn, syndrome, r.msn, buf);
      if (!n) return 0;
      ++counters_.tx_packets;
      const bool fatal = r.fatal;
      if (r.kind == Response::Kind::kAck) {
        ++counters_.acks_sent;
      } else if (wire::aeth_type(r.syndrome) == wire::AethType::kRnrNak) {
        ++rare_counters().rnr_naks_sent;
      } else {
        switch (static_cast<NakCode>(wire::aeth_value(r.syndrome))) {
          case NakCode::kPsnSequenceError: ++rare_counters().naks_seq_sent; break;
          case NakCode::kInvalidRequest: ++rare_counters().naks_invalid_request_sent; break;
          case NakCode::kRemoteAccessError: ++rare_counters().naks_remote_access_sent; break;
          default: ++rare_counters().naks_remote_operational_sent; break;
        }
      }
      pop_response();
      if (fatal) enter_error();
      return n;
    }
    case Response::Kind::kAtomicAck: {
      wire::TransportSpec t = response_spec(r);
      t.opcode = IBV_OPCODE_RC_ATOMIC_ACKNOWLEDGE;
      t.aeth_syndrome = ack_syndrome();
      t.atomic_ack_original = r.atomic_original;
      const size_t n = build(t, {}, buf);
      if (!n) return 0;
      ++counters_.atomic_acks_sent;
      pop_response();
      return n;
    }
    case Response::Kind::kRead:
      return produce_read_response(now, r, buf);
  }
  return 0;
}

}  // namespace droce::transport
