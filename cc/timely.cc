// TIMELY, Mittal et al. SIGCOMM 2015. Every RTT sample (one per completion
// event in the paper) runs Algorithm 1 once.
#include "droce/cc/timely.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "droce/cc/registry.h"

namespace droce::cc {
namespace {

constexpr TimelyConfig kDefaults{};

// clang-format off
constexpr ParamSpec kSpecs[] = {
  {"alpha", kDefaults.alpha, 0, 1, false, "",
   "EWMA weight of a new RTT difference (paper Table 1: 0.875)", ""},
  {"beta", kDefaults.beta, 0, 1, false, "",
   "multiplicative decrease factor (paper Table 1: 0.8)", ""},
  {"delta", kDefaults.delta_mbps, 0, 1e7, false, "Mbit/s",
   "additive increment (paper Table 1: 10 Mbps)", ""},
  {"t_low", kDefaults.t_low_us, 0, 1e7, false, "us",
   "RTT below which the rate always increases (paper Table 1: 50us)", ""},
  {"t_high", kDefaults.t_high_us, 0, 1e7, false, "us",
   "RTT above which the rate always decreases (paper Table 1: 500us)", ""},
  {"min_rtt", kDefaults.min_rtt_us, 0, 1e7, false, "us",
   "gradient normaliser; 0 = smallest RTT sample seen (paper: fixed 20us)",
   ""},
  {"hai_threshold", kDefaults.hai_threshold, 1, 1000, true, "",
   "consecutive non-positive gradients before HAI (paper §4.3: 5)", ""},
  {"hai_factor", kDefaults.hai_factor, 1, 1000, false, "",
   "N: HAI adds N*delta (paper Algorithm 1: 5)", ""},
  {"min_rate", kDefaults.min_rate_mbps, 0.001, 1e7, false, "Mbit/s",
   "rate floor (droce choice)", ""},
  {"initial_rate", kDefaults.initial_rate_mbps, 0, 1e7, false, "Mbit/s",
   "starting rate, 0 = line rate (droce choice)", ""},
};
// clang-format on

std::unique_ptr<Algorithm> create(const Params& params,
                                  uint64_t line_rate_bytes_per_sec) {
  return std::make_unique<Timely>(TimelyConfig::from_params(params),
                                  line_rate_bytes_per_sec);
}

}  // namespace

TimelyConfig TimelyConfig::from_params(const Params& p) {
  TimelyConfig c;
  c.alpha = p.get("alpha");
  c.beta = p.get("beta");
  c.delta_mbps = p.get("delta");
  c.t_low_us = p.get("t_low");
  c.t_high_us = p.get("t_high");
  c.min_rtt_us = p.get("min_rtt");
  c.hai_threshold = p.get("hai_threshold");
  c.hai_factor = p.get("hai_factor");
  c.min_rate_mbps = p.get("min_rate");
  c.initial_rate_mbps = p.get("initial_rate");
  return c;
}

Timely::Timely(const TimelyConfig& c, uint64_t line_rate_bytes_per_sec)
    : Algorithm(line_rate_bytes_per_sec),
      alpha_(c.alpha),
      beta_(c.beta),
      delta_(mbps_to_bytes_per_sec(c.delta_mbps)),
      t_low_ns_(us_to_ns(c.t_low_us)),
      t_high_ns_(us_to_ns(c.t_high_us)),
      fixed_min_rtt_ns_(us_to_ns(c.min_rtt_us)),
      hai_threshold_(static_cast<uint32_t>(c.hai_threshold)),
      hai_factor_(c.hai_factor),
      min_rate_(mbps_to_bytes_per_sec(c.min_rate_mbps)) {
  const double line = static_cast<double>(line_rate_bytes_per_sec);
  if (t_low_ns_ > t_high_ns_) {
    throw ConfigError(fmt::format(
        "timely parameter 't_low': {} us exceeds t_high {} us; accepted "
        "range [0, t_high]",
        c.t_low_us, c.t_high_us));
  }
  if (min_rate_ > line) {
    throw ConfigError(fmt::format(
        "timely parameter 'min_rate': {} Mbit/s exceeds the line rate {} "
        "Mbit/s; accepted range [0.001, {}]",
        c.min_rate_mbps, line * 8 / 1e6, line * 8 / 1e6));
  }
  const double initial = mbps_to_bytes_per_sec(c.initial_rate_mbps);
  rate_ = initial > 0 ? std::clamp(initial, min_rate_, line) : line;
}

void Timely::on_ack(uint64_t /*now_ns*/, const AckEvent& ack) {
  if (!ack.rtt_ns) return;
  const double new_rtt = static_cast<double>(*ack.rtt_ns);
  const double line = static_cast<double>(line_rate_bytes_per_sec());

  min_rtt_ns_ = have_prev_ ? std::min(min_rtt_ns_, new_rtt) : new_rtt;
  // The first sample has no predecessor, so it carries no gradient; it still
  // obeys the absolute T_low/T_high guards below.
  double gradient = 0;
  bool have_gradient = false;
  if (have_prev_) {
    // Algorithm 1 lines 1-4: EWMA of successive RTT differences,
    // normalised by the minimum RTT.
    const double new_rtt_diff = new_rtt - prev_rtt_ns_;
    rtt_diff_ns_ = (1 - alpha_) * rtt_diff_ns_ + alpha_ * new_rtt_diff;
    const double min_rtt =
        fixed_min_rtt_ns_ > 0 ? fixed_min_rtt_ns_ : min_rtt_ns_;
    gradient = min_rtt > 0 ? rtt_diff_ns_ / min_rtt : 0;
    have_gradient = true;
    // HAI counts consecutive completions whose gradient is not positive
    // (§4.3: "N = 5 if gradient < 0 for five completion events").
    neg_count_ = gradient <= 0 ? neg_count_ + 1 : 0;
  }
  prev_rtt_ns_ = new_rtt;
  have_prev_ = true;

  if (new_rtt < t_low_ns_) {
    rate_ += delta_;  // line 5-7: RTT is low, additive increase
  } else if (new_rtt > t_high_ns_) {
    // lines 8-10: cap the queue: decrease in proportion to the excess.
    rate_ *= 1 - beta_ * (1 - t_high_ns_ / new_rtt);
  } else if (have_gradient) {
    if (gradient <= 0) {
      // lines 11-13: N = hai_factor once in HAI mode, else 1.
      const double n = neg_count_ >= hai_threshold_ ? hai_factor_ : 1;
      rate_ += n * delta_;
    } else {
      rate_ *= 1 - beta_ * gradient;  // lines 14-15
    }
  }
  rate_ = std::clamp(rate_, min_rate_, line);
}

uint64_t Timely::rate_bytes_per_sec() const {
  return static_cast<uint64_t>(std::llround(rate_));
}

const AlgorithmInfo& timely_algorithm() {
  static const AlgorithmInfo kInfo{
      "timely", "TIMELY RTT-gradient rate control (Mittal et al. SIGCOMM 2015)",
      kSpecs, &create, /*needs_int=*/false, /*samples_rtt=*/true};
  return kInfo;
}

}  // namespace droce::cc
