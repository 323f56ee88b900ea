// Swift-like delay-based window control, droce's worked example of adding an
// algorithm (docs/CC.md). After Kumar et al., "Swift: Delay is Simple and
// Effective for Congestion Control in the Datacenter", SIGCOMM 2020, §3.1
// Algorithm 1, reduced to its core: a fixed target delay (no flow- or
// topology-based scaling), additive increase below target, multiplicative
// decrease proportional to the excess delay at most once per RTT, and pacing
// when the window drops below one MTU.
#pragma once

#include <cstdint>
#include <optional>

#include "droce/cc/algorithm.h"
#include "droce/cc/params.h"

namespace droce::cc {

struct AlgorithmInfo;

struct SwiftConfig {
  double target_delay_us = 25;  // end-to-end delay target
  double ai = 4096;             // bytes added per window of ACKs
  double beta = 0.8;            // decrease gain
  double max_mdf = 0.5;         // largest fraction removed by one decrease
  double min_cwnd = 64;         // bytes
  double max_cwnd = 262144;     // bytes
  double init_cwnd = 0;         // bytes, 0 = max_cwnd
  double mtu = 4096;            // below one MTU the window is paced

  static SwiftConfig from_params(const Params& params);
};

class Swift final : public Algorithm {
 public:
  Swift(const SwiftConfig& config, uint64_t line_rate_bytes_per_sec);

  std::string_view name() const override { return "swift"; }
  void on_ack(uint64_t now_ns, const AckEvent& ack) override;
  uint64_t rate_bytes_per_sec() const override;
  std::optional<uint64_t> window_bytes() const override;

  double cwnd() const { return cwnd_; }

 private:
  double target_ns_;
  double ai_;
  double beta_;
  double max_mdf_;
  double min_cwnd_;
  double max_cwnd_;
  double mtu_;

  double cwnd_;
  double last_rtt_ns_ = 0;
  bool decreased_ = false;
  uint64_t last_decrease_ns_ = 0;
};

const AlgorithmInfo& swift_algorithm();

}  // namespace droce::cc
