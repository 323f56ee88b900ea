// HPCC (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019,
// §3.3 Algorithm 1): window control from per-hop INT, with a reference window
// W^c updated once per RTT and a fast per-ACK reaction in between; the
// pacing rate is W / T.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "droce/cc/algorithm.h"
#include "droce/cc/params.h"

namespace droce::cc {

struct AlgorithmInfo;

struct HpccConfig {
  double eta = 0.95;           // target utilisation
  double max_stage = 5;        // additive stages before a multiplicative step
  double w_ai = 80;            // additive increase, bytes
  double base_rtt_us = 8;      // T, the base RTT
  double min_rate_mbps = 100;  // window floor = min_rate * T

  static HpccConfig from_params(const Params& params);
};

class Hpcc final : public Algorithm {
 public:
  Hpcc(const HpccConfig& config, uint64_t line_rate_bytes_per_sec);

  std::string_view name() const override { return "hpcc"; }
  void on_ack(uint64_t now_ns, const AckEvent& ack) override;
  void on_send(uint64_t now_ns, uint64_t bytes) override;
  uint64_t rate_bytes_per_sec() const override;
  std::optional<uint64_t> window_bytes() const override;

  double window() const { return window_; }        // W, bytes
  double reference_window() const { return wc_; }  // W^c, bytes
  double utilisation() const { return u_; }        // U
  uint32_t inc_stage() const { return inc_stage_; }

 private:
  bool measure_inflight(const IntRecord& hops);
  std::optional<IntHop> remember(uint8_t n_hops, uint8_t index, const IntHop& hop);
  double compute_window(bool update_wc);

  double eta_;
  uint32_t max_stage_;
  double w_ai_;
  double t_ns_;
  double max_window_;  // line rate * T
  double min_window_;  // min rate * T

  double window_;
  double wc_;
  double u_ = 0;
  bool have_u_ = false;
  uint32_t inc_stage_ = 0;
  uint64_t snd_nxt_ = 0;  // bytes handed to on_send so far
  uint64_t acked_ = 0;    // cumulative acked bytes (the ACK "seq")
  uint64_t last_update_seq_ = 0;
  // L, the previous INT record: here per link and position on the path
  // (measure_inflight).
  struct LinkRecord {
    uint64_t link_id;
    uint8_t n_hops;
    uint8_t index;
    IntHop hop;
  };
  static constexpr std::size_t kMaxLinks = 64;
  std::vector<LinkRecord> links_;
};

const AlgorithmInfo& hpcc_algorithm();

}  // namespace droce::cc
