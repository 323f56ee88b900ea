#include "droce/endpoint/cc_binding.h"

#include <algorithm>

#include "droce/cc/registry.h"

namespace droce::endpoint {

CcBinding::CcBinding(std::unique_ptr<cc::Algorithm> algorithm, uint64_t run_ahead_ns,
                     uint64_t catch_up_ns)
    : algorithm_(std::move(algorithm)), run_ahead_ns_(run_ahead_ns), catch_up_ns_(catch_up_ns) {
  if (const cc::AlgorithmInfo* info = cc::find_algorithm(algorithm_->name())) {
    needs_int_ = info->needs_int;
    samples_rtt_ = info->samples_rtt;
  }
}

namespace {

transport::CcHooks make_hooks(bool samples_rtt) {
  transport::CcHooks h;
  h.may_send = [](void* c, uint32_t, uint32_t bytes, uint64_t now) {
    return static_cast<CcBinding*>(c)->may_send(bytes, now);
  };
  h.fills_window = [](void* c, uint32_t bytes, uint32_t next_bytes) {
    return static_cast<CcBinding*>(c)->fills_window(bytes, next_bytes);
  };
  h.on_send = [](void* c, uint32_t, uint32_t bytes, bool retransmit, uint64_t now) {
    static_cast<CcBinding*>(c)->on_send(bytes, retransmit, now);
  };
  h.admit = [](void* c, uint32_t first, uint32_t each, uint32_t max, uint64_t now) {
    return static_cast<CcBinding*>(c)->admit(first, each, max, now);
  };
  h.window_room = [](void* c) { return static_cast<CcBinding*>(c)->window_room(); };
  h.on_send_run = [](void* c, uint64_t bytes, uint32_t, uint64_t now) {
    static_cast<CcBinding*>(c)->on_send(bytes, false, now);
  };
  h.on_ack = [](void* c, uint32_t, uint64_t acked, uint64_t rtt, uint64_t now) {
    static_cast<CcBinding*>(c)->on_ack(acked, rtt, now);
  };
  h.on_delivered = [](void* c, uint64_t bytes) { static_cast<CcBinding*>(c)->on_delivered(bytes); };
  h.on_loss = [](void* c, uint32_t, transport::LossEvent e, uint64_t) {
    static_cast<CcBinding*>(c)->on_loss(e);
  };
  h.on_cnp = [](void* c, uint32_t, uint64_t now) {
    static_cast<CcBinding*>(c)->on_cnp(now);
  };
  h.may_send_response = [](void* c, uint64_t now) {
    return static_cast<CcBinding*>(c)->may_send_response(now);
  };
  h.on_response_sent = [](void* c, uint32_t bytes, uint64_t now) {
    static_cast<CcBinding*>(c)->on_response_sent(bytes, now);
  };
  h.samples_rtt = samples_rtt;
  return h;
}

}  // namespace

const transport::CcHooks& CcBinding::hooks() const {
  // Two tables for every binding there is: the context is the binding.
  static const transport::CcHooks with_rtt = make_hooks(true), without = make_hooks(false);
  return samples_rtt_ ? with_rtt : without;
}

bool CcBinding::may_send(uint32_t bytes, uint64_t now) const {
  if (!rate_allows(now)) return false;
  const auto window = algorithm_->window_bytes();
  // A window smaller than one packet still lets one packet out, or the flow
  // could never send again.
  return !window || inflight_bytes_ == 0 || inflight_bytes_ + bytes <= *window;
}

uint32_t CcBinding::admit(uint32_t first_bytes, uint32_t bytes_each, uint32_t max,
                          uint64_t now) {
  if (max == 0 || !may_send(first_bytes, now)) return 0;
  if (max == 1) return 1;
  // The rate: packets start one gap apart from when the first may start
  // (on_send's pacing_start) while they start no later than the run-ahead
  // allows (next_allowed_ns).
  const uint64_t rate = std::max<uint64_t>(algorithm_->rate_bytes_per_sec(), 1);
  const uint64_t first_start = pacing_start(next_send_ns_, now, backlog_since_, catch_up_ns_);
  const uint64_t after_first = first_start + pacing_gap(first_bytes, rate);
  const uint64_t latest = now + run_ahead_ns_;
  uint64_t n = 1;
  if (after_first <= latest) n += (latest - after_first) / pacing_gap(bytes_each, rate) + 1;
  // The window: after the first, whole packets of bytes_each that fit.
  if (const auto window = algorithm_->window_bytes()) {
    const uint64_t used = inflight_bytes_ + first_bytes;
    n = std::min<uint64_t>(n, 1 + (used < *window ? (*window - used) / bytes_each : 0));
  }
  return static_cast<uint32_t>(std::min<uint64_t>(n, max));
}

uint64_t CcBinding::window_room() const {
  const auto window = algorithm_->window_bytes();
  if (!window) return UINT64_MAX;
  return inflight_bytes_ < *window ? *window - inflight_bytes_ : 0;
}

bool CcBinding::fills_window(uint32_t bytes, uint32_t next_bytes) const {
  const auto window = algorithm_->window_bytes();
  return window && inflight_bytes_ + bytes + next_bytes > *window;
}

// The time `bytes` take at `rate` bytes/s, rounded up; remembered for the
// last pair (a QP's packets are mostly its path MTU, at one rate for long
// runs), since a division per packet showed on the send path.
uint64_t CcBinding::pacing_gap(uint64_t bytes, uint64_t rate) {
  if (bytes != gap_bytes_ || rate != gap_rate_) {
    gap_bytes_ = bytes;
    gap_rate_ = rate;
    gap_ns_ = (bytes * 1'000'000'000ull + rate - 1) / rate;
  }
  return gap_ns_;
}

void CcBinding::on_send(uint64_t bytes, bool retransmit, uint64_t now) {
  // A resend replaces a copy still counted, unless a timeout wrote the
  // copies off; the first new packet ends that.
  if (!retransmit) {
    resends_after_timeout_ = false;
    inflight_bytes_ += bytes;
  } else if (resends_after_timeout_) {
    inflight_bytes_ += bytes;
  }
  pace(bytes, now);
}

// A READ response counts for the rate (and the algorithm's byte counters)
// but is never in flight: nothing acknowledges it.
void CcBinding::on_response_sent(uint64_t bytes, uint64_t now) { pace(bytes, now); }

void CcBinding::pace(uint64_t bytes, uint64_t now) {
  const uint64_t rate = std::max<uint64_t>(algorithm_->rate_bytes_per_sec(), 1);
  // Pacing: the next packet may leave once this one has been "sent" at the
  // CC rate. Start from now when the QP was idle, so idleness earns no
  // burst; a QP that had work makes up (bounded) what a late loop lost.
  last_start_ns_ = pacing_start(next_send_ns_, now, backlog_since_, catch_up_ns_);
  last_bytes_ = bytes;
  paced_rate_ = rate;
  next_send_ns_ = last_start_ns_ + pacing_gap(bytes, rate);
  algorithm_->on_send(now, bytes);
  retime();  // on_send may have fired an overdue timer that moved the rate
}

void CcBinding::retime() {
  const uint64_t rate = std::max<uint64_t>(algorithm_->rate_bytes_per_sec(), 1);
  if (rate == paced_rate_ || last_bytes_ == 0) return;
  // The departure after the last packet, as if that packet had been paced
  // at the new rate: earlier when the rate rose, later when it fell.
  paced_rate_ = rate;
  next_send_ns_ = last_start_ns_ + pacing_gap(last_bytes_, rate);
}

void CcBinding::on_ack(uint64_t acked_bytes, uint64_t rtt_ns, uint64_t now) {
  // Reused rather than built per ACK (its INT record is ~260 bytes), and
  // one per thread rather than one per QP: the algorithm reads it only
  // during the call, and a million idle QPs should not carry one each.
  static thread_local cc::AckEvent ack;
  ack.acked_bytes = acked_bytes;
  ack.rtt_ns.reset();
  if (rtt_ns != 0) ack.rtt_ns = rtt_ns;
  ack.int_hops.n_hops = 0;
  if (pending_int_) {
    ack.int_hops.n_hops = pending_int_->n_hops;
    std::copy_n(pending_int_->hops.begin(), pending_int_->n_hops, ack.int_hops.hops.begin());
  }
  algorithm_->on_ack(now, ack);
  retime();
}

void CcBinding::on_cnp(uint64_t now) {
  algorithm_->on_cnp(now);
  retime();
}

void CcBinding::on_timer(uint64_t now) {
  algorithm_->on_timer(now);
  retime();
}

void CcBinding::on_loss(transport::LossEvent event) {
  // A timeout takes everything outstanding for lost, as a TCP sender does
  // after its RTO: what is resent next counts afresh. Without it a window
  // shrunk below what was lost would never let a resend out.
  if (event != transport::LossEvent::kTimeout) return;
  inflight_bytes_ = 0;
  resends_after_timeout_ = true;
}

}  // namespace droce::endpoint
