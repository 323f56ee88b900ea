// Connects one QP's transport to its congestion-control algorithm and its
// pacer state: the transport asks may_send() before each request packet and
// reports sends, ACKs, CNPs and losses (transport/cc_hooks.h); the binding
// turns those into cc::Algorithm events and keeps the QP's next allowed send
// time (rate) and bytes in flight (window).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "droce/cc/algorithm.h"
#include "droce/transport/cc_hooks.h"

namespace droce::endpoint {

// When a frame sent at `now` starts on a link or pacer booked until
// `booked`: at `now` if nothing was waiting (backlog_since == UINT64_MAX),
// else as early as when the work began to wait, reclaiming at most
// `catch_up_ns` of time a late loop lost (EndpointConfig::tx_catch_up_ns),
// and never before `booked`.
inline uint64_t pacing_start(uint64_t booked, uint64_t now, uint64_t backlog_since,
                             uint64_t catch_up_ns) {
  const uint64_t earliest = std::max(backlog_since, now > catch_up_ns ? now - catch_up_ns : 0);
  return std::max(booked, std::min(now, earliest));
}

class CcBinding {
 public:
  // `run_ahead_ns`: how far ahead of now the pacer may be booked
  // (EndpointConfig::tx_run_ahead_ns); `catch_up_ns`: how much pacing time
  // a late loop lost while the QP had work is made up
  // (EndpointConfig::tx_catch_up_ns).
  explicit CcBinding(std::unique_ptr<cc::Algorithm> algorithm, uint64_t run_ahead_ns = 0,
                     uint64_t catch_up_ns = 0);

  // The hooks to install on the QP with this binding as their context
  // (QueuePair::set_cc_hooks), which must therefore not move while the QP
  // uses them. The table itself is shared by every binding.
  const transport::CcHooks& hooks() const;

  cc::Algorithm& algorithm() { return *algorithm_; }
  // The algorithm steers by INT records (cc::AlgorithmInfo::needs_int).
  bool needs_int() const { return needs_int_; }
  uint64_t next_send_ns() const { return next_send_ns_; }
  // When the pacer lets the next packet go, run-ahead included.
  uint64_t next_allowed_ns() const {
    return next_send_ns_ > run_ahead_ns_ ? next_send_ns_ - run_ahead_ns_ : 0;
  }
  uint64_t inflight_bytes() const { return inflight_bytes_; }
  // The pacer lets a packet go now (the rate; the window is may_send's).
  bool rate_allows(uint64_t now) const { return now >= next_allowed_ns(); }

  // The QP has had work since `now` (or earlier: the first call counts),
  // or it has none (idle or held by PFC): see pacing_start.
  void mark_waiting(uint64_t now) { backlog_since_ = std::min(backlog_since_, now); }
  void mark_idle() { backlog_since_ = UINT64_MAX; }

  bool may_send(uint32_t bytes, uint64_t now) const;
  // transport::CcHooks::may_send_response and on_response_sent: the rate
  // alone, no window.
  bool may_send_response(uint64_t now) const { return rate_allows(now); }
  void on_response_sent(uint64_t bytes, uint64_t now);
  // See transport::CcHooks::fills_window.
  bool fills_window(uint32_t bytes, uint32_t next_bytes) const;
  // transport::CcHooks::admit and window_room.
  uint32_t admit(uint32_t first_bytes, uint32_t bytes_each, uint32_t max, uint64_t now);
  uint64_t window_room() const;
  // A packet (or a run of packets) of `bytes` left; a retransmission
  // adds nothing in flight (transport::CcHooks::on_send).
  void on_send(uint64_t bytes, bool retransmit, uint64_t now);
  void on_ack(uint64_t acked_bytes, uint64_t rtt_ns, uint64_t now);
  // transport::CcHooks::on_delivered: the window's packets in flight.
  void on_delivered(uint64_t bytes) { inflight_bytes_ -= std::min(inflight_bytes_, bytes); }
  void on_cnp(uint64_t now);
  void on_loss(transport::LossEvent event);
  // The algorithm's timer is due (Algorithm::next_timer).
  void on_timer(uint64_t now);

  // INT hops echoed on the ACK being processed: the endpoint sets them
  // around QueuePair::on_packet so the transport's on_ack hook (which knows
  // nothing of INT) hands them to the algorithm. nullptr = none.
  void set_pending_int(const cc::IntRecord* hops) { pending_int_ = hops; }

 private:
  std::unique_ptr<cc::Algorithm> algorithm_;
  bool needs_int_ = false;    // cc::AlgorithmInfo, looked up once
  bool samples_rtt_ = false;
  uint64_t run_ahead_ns_ = 0;
  uint64_t catch_up_ns_ = 0;
  uint64_t backlog_since_ = UINT64_MAX;
  uint64_t next_send_ns_ = 0;
  uint64_t inflight_bytes_ = 0;
  bool resends_after_timeout_ = false;  // on_loss, on_send
  const cc::IntRecord* pending_int_ = nullptr;
  // The last packet's pacing: when it started, its size, and the rate its
  // gap was computed at. After every event the algorithm saw, a new rate
  // re-times the booked departure (retime): a flow cut to the floor would
  // otherwise keep a departure booked milliseconds out after its rate has
  // long recovered, as NICs and HPCC's ns-3 code (ChangeRate) avoid.
  uint64_t last_start_ns_ = 0;
  uint64_t last_bytes_ = 0;
  uint64_t paced_rate_ = 0;
  void retime();
  // Books a packet of `bytes` at the rate (on_send, on_response_sent).
  void pace(uint64_t bytes, uint64_t now);
  uint64_t pacing_gap(uint64_t bytes, uint64_t rate);
  uint64_t gap_bytes_ = 0;  // pacing_gap's last arguments and result
  uint64_t gap_rate_ = 0;
  uint64_t gap_ns_ = 0;
};

}  // namespace droce::endpoint
