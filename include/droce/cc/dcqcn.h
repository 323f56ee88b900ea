// DCQCN reaction point (Zhu et al., "Congestion Control for Large-Scale RDMA
// Deployments", SIGCOMM 2015, §3.1 and Fig. 7), with the parameter names and
// units of the mlx5 driver's congestion-control knobs (debugfs cc_params,
// drivers/infiniband/hw/mlx5/cong.c; mlxconfig ROCE_CC_* / RPG_* defaults).
#pragma once

#include <cstdint>
#include <optional>

#include "droce/cc/algorithm.h"
#include "droce/cc/params.h"

namespace droce::cc {

struct AlgorithmInfo;

// Field defaults are the mlx5 firmware defaults (docs/CC.md has the table
// with sources); times in microseconds and rates in Mbit/s like mlx5.
struct DcqcnConfig {
  double rp_time_reset_us = 300;  // rate-increase timer period
  double rp_byte_reset = 32767;   // bytes per byte-counter stage; 0 = off
  double rp_threshold = 1;        // F: stages of fast recovery
  double rp_ai_rate_mbps = 5;     // R_AI
  double rp_hai_rate_mbps = 50;   // R_HAI
  double rp_gd = 11;              // log2 of the decrease divisor (1/1024)
  double rp_min_dec_fac = 50;     // % floor of the multiplicative cut
  double rp_min_rate_mbps = 1;    // rate floor
  double rp_rate_to_set_on_first_cnp_mbps = 0;  // 0 = cut from line rate
  double rp_dce_tcp_g = 1019;    // alpha gain g = (1024 - this) / 1024
  double rp_dce_tcp_rtt_us = 1;  // alpha timer period (paper's K)
  double rp_rate_reduce_monitor_period_us = 4;  // min time between cuts
  double rp_initial_alpha_value = 1023;         // alpha, units of 1/1024
  double np_min_time_between_cnps_us = 4;       // exposed for the NP
  // 1: every cut sets R_T = R_C (the paper). 0: only a cut after a timer
  // increase does; mlx5 clamp_tgt_rate (docs/CC.md).
  double clamp_tgt_rate = 1;

  static DcqcnConfig from_params(const Params& params);
};

class Dcqcn final : public Algorithm {
 public:
  // Throws ConfigError when the config does not fit the line rate.
  Dcqcn(const DcqcnConfig& config, uint64_t line_rate_bytes_per_sec);

  std::string_view name() const override { return "dcqcn"; }
  void on_cnp(uint64_t now_ns) override;
  void on_send(uint64_t now_ns, uint64_t bytes) override;
  void on_ack(uint64_t now_ns, const AckEvent& ack) override;
  void on_timer(uint64_t now_ns) override;
  std::optional<uint64_t> next_timer() const override;
  uint64_t rate_bytes_per_sec() const override;
  uint64_t np_min_time_between_cnps_ns() const override {
    return np_min_time_between_cnps_ns_;
  }

  // Introspection for tests and traces (state as of the last event).
  double current_rate() const { return rc_; }  // R_C, bytes/s
  double target_rate() const { return rt_; }   // R_T, bytes/s
  double alpha() const { return alpha_; }
  bool rate_limited() const { return limited_; }
  uint32_t time_stage() const { return time_stage_; }
  uint32_t byte_stage() const { return byte_stage_; }

 private:
  void advance(uint64_t now_ns);
  void decay_alpha(uint64_t now_ns);
  void cut(uint64_t now_ns);
  void increase();
  void clamp();

  // Parameters converted to bytes/s, ns and fractions.
  uint64_t time_reset_ns_;
  uint64_t byte_reset_;
  uint32_t threshold_;
  double ai_rate_;
  double hai_rate_;
  double decrease_scale_;  // 2^(10 - rp_gd): cut = alpha * this
  double min_factor_;      // rp_min_dec_fac / 100
  double min_rate_;
  double first_cnp_rate_;  // 0 = none
  double g_;
  uint64_t alpha_period_ns_;
  uint64_t reduce_period_ns_;
  double initial_alpha_;
  uint64_t np_min_time_between_cnps_ns_;
  bool clamp_tgt_rate_;

  // Reaction-point state (paper Fig. 7 names in comments).
  bool limited_ = false;  // a rate limiter is allocated (after 1st CNP)
  double rc_;             // R_C, current rate
  double rt_;             // R_T, target rate
  double alpha_ = 0;
  uint64_t alpha_epoch_ns_ = 0;  // start of the running alpha-timer period
  uint32_t time_stage_ = 0;      // T: timer expiries since the last cut
  uint32_t byte_stage_ = 0;      // BC: byte-counter expiries since the cut
  uint64_t bytes_since_stage_ = 0;
  uint64_t increase_deadline_ns_ = 0;
  bool cut_pending_ = false;  // CNP seen inside the monitor period
  uint64_t last_cut_ns_ = 0;
};

const AlgorithmInfo& dcqcn_algorithm();

}  // namespace droce::cc
