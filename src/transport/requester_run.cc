// The requester's run (the send side's fast path, the twin of the
// responder's run of predicted WRITEs): the new packets of SEND and RDMA
// WRITE WQEs of an RC or UC QP in RTS, built one after the other from the
// send template with what stays the same between them read once, and
// congestion control asked once for the run (CcHooks::admit,
// window_room, on_send_run) instead of once per packet.
//
// Each packet follows produce_request's rules for a new packet (IBA 9.7.4:
// PSN assignment, segmentation by the path MTU, AckReq, the PSN window)
// and leaves the same state; anything else (a retransmission, a READ or
// an atomic, UD, a response or a CNP to send first, an RNR wait, selective
// repeat's holes) is not the run's and goes through produce_request.
// A run of one packet is what produce_request makes of it (tested).
#include <algorithm>

#include "droce/transport/qp.h"
#include "droce/wire/psn.h"

namespace droce::transport {

bool QueuePair::run_may_start() const {
  return state_ == QpState::kRts && type_ != QpType::kUd && tx_template_.valid() && !cnp_pending_ &&
         resp_count_ == 0 && !rnr_wait_until_ && !sr_recovery_ && !tlp_pending_ && !cq_error_ &&
         cc_->admit != nullptr;
}

// The WQE whose next packet is new and of the run's kind, or nullptr.
SendWqe* QueuePair::run_wqe() {
  if (sq_send_ == sq_tail_) return nullptr;
  SendWqe& w = sq_at(sq_send_);
  if (w.is_read_or_atomic()) return nullptr;
  if (w.started) {
    // A packet sent before (going back N, or past an acknowledged one) is
    // produce_request's.
    if (type_ == QpType::kRc &&
        wire::psn_lt(wire::psn_add(w.first_psn, send_pkt_), send_high_))
      return nullptr;
    return &w;
  }
  if (!can_start(w)) return nullptr;
  if (type_ == QpType::kRc &&
      wire::psn_distance(resume_psn(), next_psn_) >= attr_.max_inflight_psns)
    return nullptr;
  return &w;
}

size_t QueuePair::produce_run(uint64_t now, std::span<const std::span<uint8_t>> bufs,
                              uint32_t* lens) {
  if (bufs.empty() || !run_may_start()) return 0;
  SendWqe* wp = run_wqe();
  if (!wp) return 0;
  const bool rc = type_ == QpType::kRc;
  const auto packet_bytes = [&](const SendWqe& w, uint32_t k) {
    return static_cast<uint32_t>(std::min<uint64_t>(mtu_, w.length - uint64_t{k} * mtu_));
  };
  const uint32_t allowed =
      cc_->admit(cc_ctx_, packet_bytes(*wp, wp->started ? send_pkt_ : 0), mtu_,
                static_cast<uint32_t>(bufs.size()), now);
  if (allowed == 0) return 0;  // produce_request counts the stall
  const uint64_t room = cc_->window_room(cc_ctx_);
  uint64_t run_bytes = 0;
  size_t n = 0;
  while (n < allowed) {
    SendWqe& w = *wp;
    if (!w.started) start_wqe(w);
    const uint32_t k = send_pkt_;
    const uint32_t psn = wire::psn_add(w.first_psn, k);
    // The PSN window (produce_request counts the stall when it is asked
    // next).
    if (rc && wire::psn_distance(resume_psn(), psn) >= attr_.max_inflight_psns) break;
    const uint32_t bytes = packet_bytes(w, k);
    // gated_request's AckReq beyond wants_ack(), the window's part from
    // what the run has sent so far (CcBinding::fills_window).
    const bool timed = rc && !rtt_probe_;
    const bool overdue = last_ack_req_ns_ != UINT64_MAX && attr_.ack_req_interval_ns &&
                         now - last_ack_req_ns_ >= attr_.ack_req_interval_ns;
    const bool fills =
        room != UINT64_MAX && run_bytes + bytes + mtu_ > room;
    const bool ask_ack = overdue || (timed && cc_->samples_rtt) || fills;
    uint32_t len;
    uint64_t off;
    const wire::TxRequest r = send_write_fields(w, k, ask_ack, &len, &off);
    built_ack_req_ = r.ack_req;
    bool ok = true;
    const size_t frame = build_templated(w, r, off, len, bufs[n], &ok, now);
    if (!ok) {
      ++rare_counters().local_errors;
      fail_wqe(sq_send_, IBV_WC_LOC_PROT_ERR);
      break;
    }
    if (frame == 0) break;
    lens[n++] = static_cast<uint32_t>(frame);
    run_bytes += bytes;
    ++counters_.tx_request_packets;
    send_high_ = wire::psn_add(psn, 1);
    if (!sr_sent_ns_.empty()) sr_note_first_send(psn, 1, now);
    tail_ack_req_ = r.ack_req;
    if (r.ack_req || last_ack_req_ns_ == UINT64_MAX) last_ack_req_ns_ = now;
    if (timed && r.ack_req) {
      rtt_probe_ = true;
      rtt_psn_ = psn;
      rtt_sent_ns_ = now;
    }
    w.last_sent_ns = now;
    const bool last = k + 1 >= w.npkts;
    advance_cursor_after(w, k);
    if (rc) {
      if (!timer_deadline_) arm_timer(now);
    } else if (last) {
      // UC: the WQE completes once its last packet is on the wire (IBA 9.8).
      complete_send(w, IBV_WC_SUCCESS);
      ++sq_head_;
      if (cq_error_) break;
    }
    if (n == allowed) break;
    if (!last) continue;
    // The next WQE, if it is the run's too.
    wp = run_wqe();
    if (!wp) break;
  }
  if (n != 0) cc_hold_ = kCcHoldNone;
  if (n != 0 && cc_->on_send_run)
    cc_->on_send_run(cc_ctx_, run_bytes, static_cast<uint32_t>(n), now);
  return n;
}

}  // namespace droce::transport
