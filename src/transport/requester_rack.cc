// Selective repeat's record of each send and what it serves: time-based
// loss detection, RACK (Cheng et al., RFC 8985), on top of the
// requester's hole walk (qp.h "Loss recovery"), its tail loss probe, and
// the round trips and losses path-aware entropy steers by (entropy.h).
//
// RACK takes a packet for lost when a packet sent after it was delivered
// and it has been out for longer than that packet's round trip plus a
// reorder window (RFC 8985 6.2). Delivered, here: the PSN a SACK names or
// an ACK covers. First transmissions leave in PSN order, so their send
// times rise with the PSN and the holes lost by time are every hole below
// one PSN, rack_high_, found by bisection. A resend is judged by the same
// rule on its own send time.
#include <algorithm>
#include <utility>

#include "droce/transport/qp.h"
#include "droce/wire/psn.h"

namespace droce::transport {

uint64_t QueuePair::reorder_window() const {
  return attr_.sr_reorder_window_min_ns ? reo_wnd_ns_ : attr_.sr_reorder_window_ns;
}

void QueuePair::sr_configure_send_record(uint64_t window_ns, uint64_t window_min_ns,
                                         bool tail_probe) {
  attr_.sr_reorder_window_ns = window_ns;
  attr_.sr_tail_probe = tail_probe;
  // Only for the QPs that use it: an idle QP's size is what a million QPs
  // cost.
  const bool sr = attr_.recovery == Recovery::kSelectiveRepeat;
  // The adaptive window only where RACK runs (so a floor means the resend
  // record below exists); one already adapting keeps its width within the
  // new bounds.
  const uint64_t floor = sr && window_ns ? std::min(window_min_ns, window_ns) : 0;
  attr_.sr_reorder_window_min_ns = floor;
  reo_wnd_ns_ = floor ? std::clamp(reo_wnd_ns_ ? reo_wnd_ns_ : floor, floor, window_ns) : 0;
  const bool path_aware = sr && attr_.entropy.mode == EntropyMode::kPathAware;
  const uint32_t n = attr_.sack_window;
  if (sr && (window_ns || path_aware)) {
    if (sr_sent_ns_.size() != n) sr_sent_ns_.assign(n, 0);
  } else {
    sr_sent_ns_.clear();
  }
  if (sr && window_ns) {
    if (sr_resent_ns_.size() != n) sr_resent_ns_.assign(n, 0);
  } else {
    sr_resent_ns_.clear();
  }
  if (path_aware) {
    if (sr_path_.size() != n) sr_path_.assign(n, 0);
  } else {
    sr_path_.clear();
  }
}

void QueuePair::rack_restart() {
  rack_rewalk_armed_ = false;
  rack_valid_ = false;
  rack_deadline_ = 0;
  rack_high_ = send_high_;
  tlp_pending_ = tlp_sent_ = false;
  sr_srtt_ns_ = 0;
  reo_wnd_ns_ = attr_.sr_reorder_window_min_ns;
  sr_min_rtt_ns_ = 0;
  reo_grown_ns_ = 0;
  reo_persist_ = 0;
}

void QueuePair::sr_note_first_send(uint32_t psn, uint32_t span, uint64_t now) {
  if (sr_sent_ns_.empty()) return;
  tlp_from_ns_ = now;
  const uint32_t n = std::min<uint32_t>(span, static_cast<uint32_t>(sr_sent_ns_.size()));
  for (uint32_t i = 0; i < n; ++i) sr_sent_ns_[wire::psn_add(psn, i) % sr_sent_ns_.size()] = now;
}

uint16_t QueuePair::request_port(uint32_t psn, uint64_t now) {
  const uint16_t port = entropy_.next(now);
  if (!sr_path_.empty()) sr_path_[psn % sr_path_.size()] = static_cast<uint16_t>(entropy_.index());
  return port;
}

void QueuePair::sr_delivered(uint32_t psn, uint64_t now) {
  if (sr_sent_ns_.empty()) return;
  const uint8_t state = sack_state(psn);
  if (state == kSackResent && attr_.sr_reorder_window_min_ns) rack_check_spurious(psn, now);
  if (state != kSackNone) return;
  const uint64_t sent = sr_sent_ns_[psn % sr_sent_ns_.size()];
  if (sent > now) return;
  if (!sr_path_.empty()) entropy_.on_delivered(sr_path_[psn % sr_path_.size()], now - sent, now);
  if (attr_.sr_reorder_window_min_ns && (!sr_min_rtt_ns_ || now - sent < sr_min_rtt_ns_))
    sr_min_rtt_ns_ = now - sent;
  // RFC 8985 6.2: the most recently sent of the delivered packets
  // sets both the time line and the round trip.
  if (rack_on() && (!rack_valid_ || sent >= rack_xmit_ns_)) {
    rack_valid_ = true;
    rack_xmit_ns_ = sent;
    rack_rtt_ns_ = now - sent;
  }
  // The smoothed round trip the tail loss probe waits two of (RFC 6298's
  // SRTT, gain 1/8); kept only for the probe.
  if (!attr_.sr_tail_probe) return;
  const uint64_t rtt = now - sent;
  sr_srtt_ns_ = sr_srtt_ns_ ? sr_srtt_ns_ - sr_srtt_ns_ / 8 + rtt / 8 : rtt;
}

void QueuePair::rack_check_spurious(uint32_t psn, uint64_t now) {
  // RFC 8985 6.2.4, with time for the DSACK: no answer to the resend can
  // come sooner than the smallest round trip, so this one answered the
  // first copy, which was only late.
  // Judged once: the ACK that covers it may also name it.
  uint64_t& slot = sr_resent_ns_[psn % sr_resent_ns_.size()];
  const uint64_t resent = std::exchange(slot, 0);
  if (!sr_min_rtt_ns_ || !resent || resent > now || now - resent >= sr_min_rtt_ns_) return;
  ++rare_counters().retransmit_spurious;
  reo_persist_ = 16;
  // Doubled once per round trip, however many resends of that round were
  // spurious. RFC 8985 6.2.4 adds a quarter of the smallest round trip
  // instead: on the 16-rank ring at 2:1 that grew too slowly for queues
  // that reorder by tens of us (0.71 of the bound against 0.77 doubling).
  if (reo_grown_ns_ && now - reo_grown_ns_ < sr_min_rtt_ns_) return;
  reo_grown_ns_ = now;
  reo_wnd_ns_ = std::min(attr_.sr_reorder_window_ns, reo_wnd_ns_ * 2);
}

void QueuePair::sr_note_lost(uint32_t psn, uint64_t now) {
  if (!sr_path_.empty()) entropy_.on_lost(sr_path_[psn % sr_path_.size()], now);
}

void QueuePair::rack_detect(uint64_t now) {
  rack_deadline_ = 0;
  const uint32_t first = wire::psn_add(acked_psn_, 1);
  if (wire::psn_lt(rack_high_, first)) rack_high_ = first;
  if (!rack_valid_ || !wire::psn_gt(sr_sack_high_, acked_psn_)) return;
  // RFC 8985 6.2: lost when sent before the newest delivered packet
  // and out for longer than its round trip plus the reorder window.
  const uint64_t wait = rack_rtt_ns_ + reorder_window();
  const auto sent = [&](uint32_t i) {
    return sr_sent_ns_[wire::psn_add(first, i) % sr_sent_ns_.size()];
  };
  const auto lost = [&](uint64_t t) { return t < rack_xmit_ns_ && t + wait <= now; };
  // Every candidate is below the highest SACKed (or ACKed) PSN.
  uint32_t lo = 0;
  uint32_t hi = wire::psn_distance(first, sr_sack_high_);
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (lost(sent(mid))) lo = mid + 1;
    else hi = mid;
  }
  const uint32_t boundary = wire::psn_add(first, lo);
  // RACK's reorder timer (RFC 8985 6.2), for when the oldest packet not yet
  // lost will be (if it was sent before the newest delivered one).
  if (lo < wire::psn_distance(first, sr_sack_high_) && sent(lo) < rack_xmit_ns_)
    rack_deadline_ = sent(lo) + wait;
  if (wire::psn_gt(boundary, rack_high_)) {
    uint32_t holes = 0;
    for (uint32_t p = rack_high_; p != boundary; p = wire::psn_add(p, 1))
      holes += sack_state(p) == kSackNone;
    rack_high_ = boundary;
    if (holes) {
      rare_counters().retransmit_rack += holes;
      // A round of losses found by time: after 16 without a spurious
      // resend the window is back at its floor (RFC 8985 6.2.4).
      if (attr_.sr_reorder_window_min_ns && reo_persist_ && --reo_persist_ == 0)
        reo_wnd_ns_ = attr_.sr_reorder_window_min_ns;
      sr_extend_recovery(first, boundary);
    }
  }
  // The oldest resend not yet known lost (rack_note_resend,
  // rack_resend_lost): walk the holes again once it is, or wake up when
  // it will be.
  if (rack_rewalk_armed_ && rack_rewalk_ns_ < rack_xmit_ns_) {
    if (rack_rewalk_ns_ + wait <= now) {
      rack_rewalk_armed_ = false;
      if (sr_recovery_) sr_cursor_ = first;
    } else if (!rack_deadline_ || rack_rewalk_ns_ + wait < rack_deadline_) {
      rack_deadline_ = rack_rewalk_ns_ + wait;
    }
  }
}

void QueuePair::rack_arm_rewalk(uint64_t resent_ns) {
  if (!rack_rewalk_armed_ || resent_ns < rack_rewalk_ns_) {
    rack_rewalk_armed_ = true;
    rack_rewalk_ns_ = resent_ns;
  }
}

void QueuePair::rack_note_resend(uint32_t psn, uint64_t now) {
  sr_resent_ns_[psn % sr_resent_ns_.size()] = now;
  rack_arm_rewalk(now);
}

bool QueuePair::rack_resend_lost(uint32_t psn, uint64_t now) {
  if (!rack_on()) return false;
  const uint64_t t = sr_resent_ns_[psn % sr_resent_ns_.size()];
  if (rack_valid_ && t < rack_xmit_ns_ && t + rack_rtt_ns_ + reorder_window() <= now)
    return true;
  rack_arm_rewalk(t);
  return false;
}

// RFC 8985 7.2: the probe is due two smoothed round trips after the last
// new packet or answer, while the newest packet is unanswered and asked
// for its answer (one that did not may wait in the responder's ACK
// coalescing). One at a time: the next waits for an answer.
uint64_t QueuePair::tail_probe_deadline() const {
  if (!attr_.sr_tail_probe || !rack_on() || tlp_sent_ || tlp_pending_ || !timer_deadline_ ||
      !sr_srtt_ns_ || !tail_ack_req_)
    return 0;
  const uint32_t newest = wire::psn_add(send_high_, wire::kPsnMask);
  if (!wire::psn_gt(newest, acked_psn_) || sack_state(newest) == kSackReceived) return 0;
  return tlp_from_ns_ + 2 * sr_srtt_ns_;
}

void QueuePair::tail_probe_answered(uint64_t now) {
  tlp_sent_ = false;
  tlp_from_ns_ = now;
}

// RFC 8985 7.3: with no new packet to send, the newest one goes again,
// asking for its answer. A READ or atomic is left to the timeouts: its
// answer is a response, which the probe would duplicate.
size_t QueuePair::produce_tail_probe(uint64_t now, std::span<uint8_t> buf) {
  tlp_pending_ = false;
  const uint32_t psn = wire::psn_add(send_high_, wire::kPsnMask);
  uint64_t idx;
  uint32_t k;
  if (!wire::psn_gt(psn, acked_psn_) || sack_state(psn) == kSackReceived) return 0;
  if (!find_psn(psn, &idx, &k) || sq_at(idx).is_read_or_atomic()) {
    tlp_sent_ = true;  // spent: no other probe before an answer
    return 0;
  }
  SendWqe& w = sq_at(idx);
  const uint32_t bytes = static_cast<uint32_t>(
      std::min<uint64_t>(mtu_, w.length - std::min<uint64_t>(w.length, uint64_t{k} * mtu_)));
  force_ack_req_ = true;
  const size_t n = gated_request(idx, k, bytes, now, buf, true);
  force_ack_req_ = false;
  if (!n) {
    // Congestion control said not now: the probe stays due.
    if (state_ != QpState::kErr) tlp_pending_ = true;
    return 0;
  }
  tlp_sent_ = true;
  sr_note_resent(psn);
  rack_note_resend(psn, now);
  ++counters_.tx_request_packets;
  ++rare_counters().tx_retransmit_packets;
  ++rare_counters().retransmit_tail_probes;
  w.retransmitted = true;
  w.last_sent_ns = now;
  rtt_probe_ = false;
  if (cc_->on_send) cc_->on_send(cc_ctx_, qpn_, bytes, true, now);
  rto_low_from_ns_ = now;  // RTO_low gives the probe its round trip
  return n;
}

}  // namespace droce::transport
