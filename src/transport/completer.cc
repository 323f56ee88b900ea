// Completer: ACKs, NAKs, READ responses and atomic ACKs coming back to the
// requester (IBA 9.7.5.1 "Requester side: receiving responses", 9.7.6),
// retiring send WQEs strictly in order with the right completion status.
#include <algorithm>
#include <cstring>

#include "droce/transport/completer.h"
#include "droce/transport/qp.h"
#include "droce/transport/requester.h"
#include "droce/wire/psn.h"

namespace droce::transport {

void QueuePair::on_response(const wire::ParsedPacket& pkt, uint64_t now) {
  ++counters_.rx_response_packets;
  switch (pkt.info->operation) {
    case wire::Operation::kAck: {
      const wire::AethType type = wire::aeth_type(pkt.aeth_syndrome);
      if (type == wire::AethType::kAck) {
        ++counters_.acks_received;
        if (ack_up_to(pkt.psn, now)) note_credits(pkt);
      } else if (type == wire::AethType::kNak || type == wire::AethType::kRnrNak) {
        on_nak(pkt, now);
      } else {
        ++rare_counters().acks_ghost;  // reserved syndrome
      }
      break;
    }
    case wire::Operation::kAtomicAck:
      on_atomic_ack(pkt, now);
      break;
    case wire::Operation::kReadResponse:
      on_read_response(pkt, now);
      break;
    default:
      break;
  }
}

// Cumulative acknowledgement of every PSN up to and including `psn`
// (IBA 9.7.5.1.2; "implied" when it comes from a READ response or NAK).
bool QueuePair::ack_up_to(uint32_t psn, uint64_t now) {
  if (!wire::psn_lt(psn, send_high_)) {
    ++rare_counters().acks_ghost;  // acknowledges something never sent
    return false;
  }
  if (wire::psn_le(psn, acked_psn_)) {
    ++rare_counters().acks_stale;
    // A READ/atomic finished by this response may be retirable now that a
    // later ACK had already covered its PSN.
    retire(now);
    return true;
  }
  const uint32_t newly = wire::psn_distance(acked_psn_, psn);
  sr_delivered(psn, now);
  const uint32_t sacked = clear_sacks_through(wire::psn_add(acked_psn_, 1), psn, now);
  if (cc_->on_delivered && newly > sacked)
    cc_->on_delivered(cc_ctx_, uint64_t{newly - sacked} * mtu_);
  acked_psn_ = psn;
  if (sr_recovery_ && wire::psn_ge(wire::psn_add(psn, 1), sr_point_)) {
    sr_recovery_ = false;
    rack_rewalk_armed_ = false;
  }
  if (wire::psn_gt(psn, sr_sack_high_)) sr_sack_high_ = psn;
  // Forward progress resets the retry budgets (IBA 9.7.6.1.3: the retry
  // counter counts consecutive failures) and re-enables RTO_low.
  retry_left_ = attr_.retry_cnt;
  rnr_retry_left_ = attr_.rnr_retry;
  rto_low_fired_ = 0;
  tail_probe_answered(now);
  uint64_t rtt = 0;
  if (rtt_probe_ && wire::psn_ge(psn, rtt_psn_)) {
    rtt = std::max<uint64_t>(1, now - rtt_sent_ns_);
    rtt_probe_ = false;
  }
  if (cc_->on_ack) cc_->on_ack(cc_ctx_, qpn_, uint64_t{newly} * mtu_, rtt, now);
  retire(now);
  if (state_ == QpState::kErr) return true;
  const bool outstanding = sq_head_ != sq_tail_ && sq_at(sq_head_).started;
  if (outstanding) {
    if (!rnr_wait_until_) arm_timer(now);
  } else {
    timer_deadline_ = 0;
  }
  return true;
}

void QueuePair::retire(uint64_t) {
  while (sq_head_ != sq_tail_) {
    SendWqe& w = sq_at(sq_head_);
    if (!w.started) break;
    if (w.is_read_or_atomic()) {
      if (!w.done) {
        // IBA 9.7.5.1 (implied NAK): the responder acknowledged a PSN
        // beyond this READ/atomic but its response never arrived — ask again.
        const uint32_t want = wire::psn_add(w.first_psn, w.resp_received);
        if (wire::psn_ge(acked_psn_, want) &&
            !(read_gap_reissued_ && read_gap_psn_ == want)) {
          ++rare_counters().retransmit_implied_nak;
          read_gap_reissued_ = true;
          read_gap_psn_ = want;
          rewind_to(want);
        }
        break;
      }
      --outstanding_rd_atomic_;
    } else if (wire::psn_gt(w.last_psn(), acked_psn_)) {
      break;
    }
    complete_send(w, IBV_WC_SUCCESS);
    if (sq_send_ == sq_head_) {
      ++sq_send_;
      send_pkt_ = 0;
    }
    ++sq_head_;
  }
}

void QueuePair::fail_head(uint32_t psn, ibv_wc_status status) {
  uint64_t idx;
  uint32_t k;
  if (!find_psn(psn, &idx, &k)) idx = sq_head_;
  fail_wqe(idx, status);
}

// The oldest READ/atomic still waiting for its response.
static SendWqe* first_pending_read(ZeroedArray<SendWqe>& sq, uint64_t head, uint64_t tail) {
  for (uint64_t i = head; i != tail; ++i) {
    SendWqe& w = sq[i & (sq.size() - 1)];  // a power of two (qp.h)
    if (!w.started) return nullptr;
    if (w.is_read_or_atomic() && !w.done) return &w;
  }
  return nullptr;
}

void QueuePair::on_read_response(const wire::ParsedPacket& pkt, uint64_t now) {
  SendWqe* wp = first_pending_read(sq_, sq_head_, sq_tail_);
  if (!wp || wp->opcode != IBV_WR_RDMA_READ) {
    ++rare_counters().read_responses_unexpected;
    return;
  }
  SendWqe& w = *wp;
  const uint32_t expected = wire::psn_add(w.first_psn, w.resp_received);
  if (pkt.psn != expected) {
    const uint32_t d = wire::psn_distance(expected, pkt.psn);
    if (d < w.npkts - w.resp_received) {
      // A response is missing (IBA 9.7.5.1): re-issue the READ for the
      // remainder, once per gap.
      ++rare_counters().read_responses_out_of_order;
      if (!(read_gap_reissued_ && read_gap_psn_ == expected)) {
        ++rare_counters().retransmit_read_gap;
        read_gap_reissued_ = true;
        read_gap_psn_ = expected;
        rewind_to(expected);
        if (cc_->on_loss) cc_->on_loss(cc_ctx_, qpn_, LossEvent::kSeqNak, now);
      }
    } else {
      ++rare_counters().read_responses_unexpected;  // duplicate or stray
    }
    return;
  }
  const uint32_t k = w.resp_received;
  const uint64_t off = uint64_t{k} * mtu_;
  const uint64_t remaining = w.length - std::min<uint64_t>(off, w.length);
  const bool last = k + 1 == w.npkts;
  const wire::Position pos = pkt.info->position;
  // A re-issued READ is answered as a new response message (it starts
  // with FIRST/ONLY at the resumed PSN), so only "is this the last packet"
  // is checked against our own count.
  const bool pos_ok = last == (pos == wire::Position::kLast || pos == wire::Position::kOnly) &&
                      (k == 0 ? (pos == wire::Position::kFirst || pos == wire::Position::kOnly)
                              : true);
  const uint32_t want_len = static_cast<uint32_t>(std::min<uint64_t>(mtu_, remaining));
  if (!pos_ok || pkt.payload_length != want_len) {
    ++rare_counters().read_responses_bad_length;
    return;
  }
  if (pkt.has(wire::kExtAeth)) note_credits(pkt);  // FIRST, LAST, ONLY
  // The response implicitly acknowledges every earlier request
  // (IBA 9.7.5.1.3).
  const uint32_t before = wire::psn_add(pkt.psn, wire::kPsnMask);
  if (wire::psn_gt(before, acked_psn_)) ack_up_to(before, now);
  if (state_ == QpState::kErr) return;
  if (want_len > 0 && !scatter_sges(sges(w), w.num_sge, off, pkt.payload, want_len)) {
    ++rare_counters().local_errors;
    uint64_t idx;
    uint32_t kk;
    if (find_psn(pkt.psn, &idx, &kk)) fail_wqe(idx, IBV_WC_LOC_PROT_ERR);
    return;
  }
  ++w.resp_received;
  if (read_gap_reissued_ && wire::psn_gt(wire::psn_add(pkt.psn, 1), read_gap_psn_))
    read_gap_reissued_ = false;
  if (last) {
    w.done = true;
    ack_up_to(pkt.psn, now);
  } else {
    arm_timer(now);
    retry_left_ = attr_.retry_cnt;
    rto_low_fired_ = 0;
  }
}

void QueuePair::on_atomic_ack(const wire::ParsedPacket& pkt, uint64_t now) {
  SendWqe* wp = first_pending_read(sq_, sq_head_, sq_tail_);
  if (!wp || !wp->is_atomic() || wp->first_psn != pkt.psn) {
    ++rare_counters().atomic_acks_unexpected;
    return;
  }
  note_credits(pkt);
  SendWqe& w = *wp;
  const uint32_t before = wire::psn_add(pkt.psn, wire::kPsnMask);
  if (wire::psn_gt(before, acked_psn_)) ack_up_to(before, now);
  if (state_ == QpState::kErr) return;
  uint8_t original[8];
  std::memcpy(original, &pkt.atomic_ack_original, 8);  // host order, like the target
  if (!scatter_sges(sges(w), w.num_sge, 0, original, 8)) {
    ++rare_counters().local_errors;
    uint64_t idx;
    uint32_t kk;
    if (find_psn(pkt.psn, &idx, &kk)) fail_wqe(idx, IBV_WC_LOC_PROT_ERR);
    return;
  }
  w.done = true;
  w.resp_received = 1;
  ack_up_to(pkt.psn, now);
}

void QueuePair::on_nak(const wire::ParsedPacket& pkt, uint64_t now) {
  const uint32_t psn = pkt.psn;
  if (wire::psn_gt(psn, send_high_)) {
    ++rare_counters().acks_ghost;
    return;
  }
  if (wire::psn_le(psn, acked_psn_)) {
    ++rare_counters().acks_stale;  // a later ACK already moved past it
    return;
  }
  // A NAK acknowledges every PSN before the one it names (IBA 9.7.5.1).
  const uint32_t before = wire::psn_add(psn, wire::kPsnMask);
  if (wire::psn_gt(before, acked_psn_)) {
    ack_up_to(before, now);
    if (state_ == QpState::kErr) return;
  }
  const uint8_t syn = pkt.aeth_syndrome;
  if (wire::aeth_type(syn) == wire::AethType::kRnrNak) {
    ++rare_counters().rnr_naks_received;
    if (cc_->on_loss) cc_->on_loss(cc_ctx_, qpn_, LossEvent::kRnrNak, now);
    if (attr_.rnr_retry != kRnrRetryInfinite) {
      if (rnr_retry_left_ == 0) {
        ++rare_counters().rnr_retry_exceeded;
        fail_head(psn, IBV_WC_RNR_RETRY_EXC_ERR);
        return;
      }
      --rnr_retry_left_;
    }
    ++rare_counters().rnr_retries;
    // IBA 9.7.5.2.8: wait the time the responder asked for, then resend.
    rnr_wait_until_ = now + rnr_timer_ns(wire::aeth_value(syn));
    rnr_psn_ = psn;
    timer_deadline_ = 0;
    sr_recovery_ = false;
    return;
  }
  const auto code = static_cast<wire::NakCode>(wire::aeth_value(syn));
  if (code == wire::NakCode::kPsnSequenceError) {
    ++rare_counters().seq_naks_received;
    if (cc_->on_loss) cc_->on_loss(cc_ctx_, qpn_, LossEvent::kSeqNak, now);
    if (attr_.recovery == Recovery::kSelectiveRepeat) {
      const uint32_t sack = pkt.aeth_msn & wire::kPsnMask;
      uint32_t high = wire::psn_add(psn, 1);
      if (sack != psn && wire::psn_gt(sack, psn) && wire::psn_lt(sack, send_high_)) {
        sr_delivered(sack, now);
        sack_mark(sack);
        tail_probe_answered(now);
        high = sack;
        if (wire::psn_gt(sack, sr_sack_high_)) sr_sack_high_ = sack;
      }
      // On a network that reorders, only holes at least
      // sr_reorder_tolerance_pkts below the highest SACK are losses, or
      // (RACK) holes out for longer than a later packet's round trip plus
      // the reorder window; the rest may still be on their way (qp.h).
      bool counted_lost = true;
      if (const uint32_t tol = attr_.sr_reorder_tolerance_pkts) {
        counted_lost =
            wire::psn_distance(psn, sr_sack_high_) >= tol && wire::psn_gt(sr_sack_high_, psn);
        const uint32_t limit = wire::psn_add(sr_sack_high_, (wire::kPsnMask + 1 - tol) & wire::kPsnMask);
        high = wire::psn_add(limit, 1);
      }
      if (counted_lost) {
        if (!sr_recovery_) ++rare_counters().retransmit_seq_nak;
        sr_extend_recovery(psn, high);
      }
      if (rack_on()) rack_detect(now);
      else if (!counted_lost) return;
      // IRN §3.2: a SACK for a PSN first sent after some hole was resent
      // means that resend was lost as well: walk the holes again from the
      // first missing PSN (produce_sack_hole resends only those whose
      // resend is now known lost).
      if (sr_recovery_ && sr_rewalk_armed_ && wire::psn_ge(sr_sack_high_, sr_rewalk_at_)) {
        sr_rewalk_armed_ = false;
        sr_cursor_ = psn;
      }
      return;
    }
    // Go-back-N (IBA 9.7.5.1): resend from the PSN the responder expects.
    ++rare_counters().retransmit_seq_nak;
    rewind_to(psn);
    return;
  }
  switch (code) {
    case wire::NakCode::kInvalidRequest:
    case wire::NakCode::kRemoteAccessError:
    case wire::NakCode::kRemoteOperationalError:
    case wire::NakCode::kInvalidRdRequest:
      ++rare_counters().fatal_naks_received;
      fail_head(psn, wc_status_for_nak(code));
      return;
    default:
      ++rare_counters().acks_ghost;  // reserved NAK code
      return;
  }
}

void QueuePair::sr_extend_recovery(uint32_t first_missing, uint32_t high) {
  if (!sr_recovery_) {
    sr_recovery_ = true;
    sr_cursor_ = first_missing;
    sr_high_ = high;
    // IRN: each hole is resent once per recovery episode; the episode
    // lasts until everything sent before it is acknowledged.
    sr_point_ = send_high_;
  } else if (wire::psn_gt(high, sr_high_)) {
    sr_high_ = high;
  }
}

void QueuePair::sack_mark(uint32_t psn) {
  if (sack_.empty()) return;
  if (wire::psn_distance(acked_psn_, psn) > sack_.size()) return;
  uint8_t& st = sack_[psn % sack_.size()];
  if (st == kSackReceived) return;
  ++sack_count_;
  st = kSackReceived;
  if (cc_->on_delivered) cc_->on_delivered(cc_ctx_, mtu_);
}

uint8_t QueuePair::sack_state(uint32_t psn) const {
  if (sack_.empty() || wire::psn_distance(acked_psn_, psn) > sack_.size()) return kSackNone;
  return sack_[psn % sack_.size()];
}

// A hole just resent: remember the first PSN not yet sent at that moment.
void QueuePair::sr_note_resent(uint32_t psn) {
  if (sack_.empty() || wire::psn_distance(acked_psn_, psn) > sack_.size()) return;
  sack_[psn % sack_.size()] = kSackResent;
  sr_mark_[psn % sr_mark_.size()] = send_high_;
  if (!sr_rewalk_armed_ || wire::psn_lt(send_high_, sr_rewalk_at_)) {
    sr_rewalk_armed_ = true;
    sr_rewalk_at_ = send_high_;
  }
}

uint32_t QueuePair::clear_sacks_through(uint32_t from, uint32_t to, uint64_t now) {
  if (sack_.empty()) return 0;
  const uint32_t n = std::min<uint32_t>(wire::psn_distance(from, to) + 1,
                                        static_cast<uint32_t>(sack_.size()));
  const bool adaptive = attr_.sr_reorder_window_min_ns != 0;  // sr_configure_send_record
  uint32_t sacked = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t psn = wire::psn_add(from, i);
    uint8_t& st = sack_[psn % sack_.size()];
    // A resent hole the ACK covers: the late first copy may be what
    // filled it.
    if (st == kSackResent && adaptive) rack_check_spurious(psn, now);
    if (st == kSackReceived) {
      --sack_count_;
      ++sacked;
    }
    st = kSackNone;
  }
  return sacked;
}

}  // namespace droce::transport
