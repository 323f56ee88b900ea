// HPCC, Li et al. SIGCOMM 2019, Algorithm 1 (MeasureInflight, ComputeWind,
// NewAck). Sequence numbers are byte counts: the cumulative acked bytes play
// ack.seq and the bytes given to on_send play snd_nxt.
#include "droce/cc/hpcc.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "droce/cc/registry.h"

namespace droce::cc {
namespace {

constexpr HpccConfig kDefaults{};

// clang-format off
constexpr ParamSpec kSpecs[] = {
  {"eta", kDefaults.eta, 0.01, 1, false, "",
   "target link utilisation (paper §3.3 and §5: 95%)", ""},
  {"max_stage", kDefaults.max_stage, 0, 100, true, "",
   "additive-increase stages before a multiplicative step (paper: 5)", ""},
  {"w_ai", kDefaults.w_ai, 0, 1e9, false, "bytes",
   "additive increase per step; paper §3.3 sizes it W_init*(1-eta)/N "
   "(droce default 80 B: 100G, T=8us, N~62)", ""},
  {"base_rtt", kDefaults.base_rtt_us, 0.001, 1e6, false, "us",
   "T, base RTT: W_init = line rate * T, rate = W / T (droce default 8us)",
   ""},
  {"min_rate", kDefaults.min_rate_mbps, 0.001, 1e7, false, "Mbit/s",
   "rate floor (HPCC authors' ns-3 simulator MinRate: 100Mb/s)", ""},
};
// clang-format on

std::unique_ptr<Algorithm> create(const Params& params,
                                  uint64_t line_rate_bytes_per_sec) {
  return std::make_unique<Hpcc>(HpccConfig::from_params(params),
                                line_rate_bytes_per_sec);
}

}  // namespace

HpccConfig HpccConfig::from_params(const Params& p) {
  HpccConfig c;
  c.eta = p.get("eta");
  c.max_stage = p.get("max_stage");
  c.w_ai = p.get("w_ai");
  c.base_rtt_us = p.get("base_rtt");
  c.min_rate_mbps = p.get("min_rate");
  return c;
}

Hpcc::Hpcc(const HpccConfig& c, uint64_t line_rate_bytes_per_sec)
    : Algorithm(line_rate_bytes_per_sec),
      eta_(c.eta),
      max_stage_(static_cast<uint32_t>(c.max_stage)),
      w_ai_(c.w_ai),
      t_ns_(us_to_ns(c.base_rtt_us)) {
  const double line = static_cast<double>(line_rate_bytes_per_sec);
  const double min_rate = mbps_to_bytes_per_sec(c.min_rate_mbps);
  if (min_rate > line) {
    throw ConfigError(fmt::format(
        "hpcc parameter 'min_rate': {} Mbit/s exceeds the line rate {} "
        "Mbit/s; accepted range [0.001, {}]",
        c.min_rate_mbps, line * 8 / 1e6, line * 8 / 1e6));
  }
  // W_init = B_nic * T (§3.3): a flow starts at line rate.
  max_window_ = line * t_ns_ / 1e9;
  min_window_ = min_rate * t_ns_ / 1e9;
  window_ = wc_ = max_window_;
}

// MeasureInflight: per hop, u' = min(qlen, qlen_prev) / (B*T) + txRate / B
// (queue drained over one base RTT plus the measured output rate), pick the
// most utilised hop, then EWMA over the interval it covers:
// U = (1 - tau/T) * U + (tau/T) * u', tau = min(ts - ts_prev, T).
// Returns false when there is no usable previous record (first INT ACK, path
// change), in which case the window is left alone.
//
// droce extension for multipath: the paper compares hop i with hop i of the
// previous ACK, which on one path is the same link. A sprayed or adaptively
// routed QP crosses a different uplink and spine from one packet to the
// next, and two different ports' byte counters make no rate. So each hop
// is compared with the last record of the same link (IntHop::link_id) at
// the same position on a path of as many hops; on one path that is the
// previous ACK's, as in the paper.
bool Hpcc::measure_inflight(const IntRecord& ack) {
  double u_max = -1;
  double tau = 0;
  for (std::size_t i = 0; i < ack.n_hops; ++i) {
    const IntHop& now = ack.hops[i];
    const std::optional<IntHop> last = remember(ack.n_hops, static_cast<uint8_t>(i), now);
    if (!last) continue;
    const IntHop& prev = *last;
    if (now.ts_ns <= prev.ts_ns || now.link_rate_bytes_per_sec == 0) continue;
    const double dt_ns = static_cast<double>(now.ts_ns - prev.ts_ns);
    const double b = static_cast<double>(now.link_rate_bytes_per_sec);
    // txBytes is a wrapping hardware counter; unsigned subtraction handles
    // one wrap.
    const double tx_rate =
        static_cast<double>(now.tx_bytes - prev.tx_bytes) * 1e9 / dt_ns;
    const double qlen =
        static_cast<double>(std::min(now.qlen_bytes, prev.qlen_bytes));
    const double u = qlen / (b * t_ns_ / 1e9) + tx_rate / b;
    if (u > u_max) {
      u_max = u;
      tau = dt_ns;
    }
  }
  if (u_max < 0) return false;
  tau = std::min(tau, t_ns_);
  // droce choice: the EWMA is seeded with the first measurement instead of an
  // arbitrary prior, which the paper leaves unspecified.
  u_ = have_u_ ? (1 - tau / t_ns_) * u_ + (tau / t_ns_) * u_max : u_max;
  have_u_ = true;
  return true;
}

// The link's record before `hop` (none for a new link), which `hop`
// replaces. The table holds the links of every path the QP used, at most
// kMaxLinks; beyond that the link heard from longest ago gives way.
std::optional<IntHop> Hpcc::remember(uint8_t n_hops, uint8_t index, const IntHop& hop) {
  LinkRecord* oldest = nullptr;
  for (LinkRecord& r : links_) {
    if (r.link_id == hop.link_id && r.index == index && r.n_hops == n_hops) {
      return std::exchange(r.hop, hop);
    }
    if (!oldest || r.hop.ts_ns < oldest->hop.ts_ns) oldest = &r;
  }
  const LinkRecord fresh{hop.link_id, n_hops, index, hop};
  if (links_.size() < kMaxLinks) {
    links_.push_back(fresh);
  } else {
    *oldest = fresh;
  }
  return std::nullopt;
}

// ComputeWind: multiplicative step towards eta when over target (or after
// max_stage additive steps, to converge faster from far below), additive
// otherwise; W^c and incStage change only when update_wc (once per RTT).
double Hpcc::compute_window(bool update_wc) {
  double w;
  if (u_ >= eta_ || inc_stage_ >= max_stage_) {
    w = wc_ / (u_ / eta_) + w_ai_;
    if (update_wc) inc_stage_ = 0;
  } else {
    w = wc_ + w_ai_;
    if (update_wc) ++inc_stage_;
  }
  w = std::clamp(w, min_window_, max_window_);
  if (update_wc) wc_ = w;
  return w;
}

void Hpcc::on_send(uint64_t /*now_ns*/, uint64_t bytes) { snd_nxt_ += bytes; }

// NewAck: the first ACK beyond last_update_seq (data sent after the previous
// reference update) closes an RTT and updates W^c; ACKs in between react
// immediately from the same W^c (§3.3 "fast reaction without overreaction").
void Hpcc::on_ack(uint64_t /*now_ns*/, const AckEvent& ack) {
  acked_ += ack.acked_bytes;
  if (ack.int_hops.n_hops == 0) return;
  if (measure_inflight(ack.int_hops)) {
    if (acked_ > last_update_seq_) {
      window_ = compute_window(true);
      last_update_seq_ = snd_nxt_;
    } else {
      window_ = compute_window(false);
    }
  }
}

uint64_t Hpcc::rate_bytes_per_sec() const {
  // R = W / T (Algorithm 1, NewAck).
  return static_cast<uint64_t>(std::llround(window_ * 1e9 / t_ns_));
}

std::optional<uint64_t> Hpcc::window_bytes() const {
  return static_cast<uint64_t>(std::llround(window_));
}

const AlgorithmInfo& hpcc_algorithm() {
  static const AlgorithmInfo kInfo{
      "hpcc", "HPCC INT-driven window + pacing (Li et al. SIGCOMM 2019)",
      kSpecs, &create, /*needs_int=*/true};
  return kInfo;
}

}  // namespace droce::cc
