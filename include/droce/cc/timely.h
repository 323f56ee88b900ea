// TIMELY (Mittal et al., "TIMELY: RTT-based Congestion Control for the
// Datacenter", SIGCOMM 2015, §4 and Algorithm 1): rate control from the RTT
// gradient, normalised by the minimum RTT, with T_low/T_high guards and
// hyperactive increase (HAI).
#pragma once

#include <cstdint>
#include <optional>

#include "droce/cc/algorithm.h"
#include "droce/cc/params.h"

namespace droce::cc {

struct AlgorithmInfo;

// Defaults from the paper's Table 1 (docs/CC.md); times in microseconds,
// rates in Mbit/s.
struct TimelyConfig {
  double alpha = 0.875;       // EWMA weight of the new RTT difference
  double beta = 0.8;          // multiplicative decrease factor
  double delta_mbps = 10;     // additive increment
  double t_low_us = 50;       // below: always increase
  double t_high_us = 500;     // above: always decrease
  double min_rtt_us = 0;      // gradient normaliser; 0 = smallest sample seen
  double hai_threshold = 5;   // consecutive non-positive gradients for HAI
  double hai_factor = 5;      // N: HAI increment is N * delta
  double min_rate_mbps = 10;  // rate floor
  double initial_rate_mbps = 0;  // 0 = line rate

  static TimelyConfig from_params(const Params& params);
};

class Timely final : public Algorithm {
 public:
  Timely(const TimelyConfig& config, uint64_t line_rate_bytes_per_sec);

  std::string_view name() const override { return "timely"; }
  void on_ack(uint64_t now_ns, const AckEvent& ack) override;
  uint64_t rate_bytes_per_sec() const override;

  double rate() const { return rate_; }  // bytes/s, unrounded
  double rtt_diff_ns() const { return rtt_diff_ns_; }
  uint32_t negative_gradient_count() const { return neg_count_; }

 private:
  double alpha_;
  double beta_;
  double delta_;  // bytes/s
  double t_low_ns_;
  double t_high_ns_;
  double fixed_min_rtt_ns_;  // 0 = track
  uint32_t hai_threshold_;
  double hai_factor_;
  double min_rate_;

  double rate_;
  bool have_prev_ = false;
  double prev_rtt_ns_ = 0;
  double rtt_diff_ns_ = 0;
  double min_rtt_ns_ = 0;
  uint32_t neg_count_ = 0;
};

const AlgorithmInfo& timely_algorithm();

}  // namespace droce::cc
