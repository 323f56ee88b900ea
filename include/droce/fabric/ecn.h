// ECN marking policy of an egress queue: RED-style probabilistic marking as
// DCQCN deploys it (Zhu et al., "Congestion Control for Large-Scale RDMA
// Deployments", SIGCOMM 2015, section 3.1: probability 0 below Kmin, rising
// linearly to Pmax at Kmax, 1 above Kmax) or DCTCP's step marking (Alizadeh
// et al., SIGCOMM 2010: mark every packet while the queue exceeds K).
#pragma once

#include <cstdint>

#include "droce/fabric/rng.h"

namespace droce::fabric {

enum class MarkMode : uint8_t { kOff, kRed, kStep };
// Where the queue is sampled. Dequeue marking tells the sender about the
// queue its packet actually waited behind, one queueing delay sooner (the
// DCQCN paper's switches mark on egress); enqueue marking is what classic
// RED does.
enum class MarkPoint : uint8_t { kEnqueue, kDequeue };

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kGbps = 1'000'000'000ull;

struct EcnConfig {
  MarkMode mode = MarkMode::kRed;
  MarkPoint point = MarkPoint::kDequeue;
  // Defaults: the 25 Gb/s values of common RoCE deployments; use
  // ecn_defaults_for_rate() for other speeds.
  uint64_t kmin_bytes = 100 * kKiB;
  uint64_t kmax_bytes = 400 * kKiB;
  double pmax = 0.2;
  uint64_t step_bytes = 100 * kKiB;  // K for MarkMode::kStep
};

// The 25 G defaults scaled linearly with the link rate: thresholds track the
// bandwidth-delay product, so the same queueing delay triggers marking at
// every speed (100 KB at 25 G is 32 us; at 100 G it becomes 400 KB).
EcnConfig ecn_defaults_for_rate(uint64_t rate_bps, MarkMode mode = MarkMode::kRed);

// Marking probability for a queue of `qlen_bytes`.
double mark_probability(const EcnConfig& cfg, uint64_t qlen_bytes);

// One marking decision; draws from `rng` only in the probabilistic band.
inline bool should_mark(const EcnConfig& cfg, uint64_t qlen_bytes, Rng& rng) {
  const double p = mark_probability(cfg, qlen_bytes);
  if (p <= 0) return false;
  if (p >= 1) return true;
  return rng.uniform() < p;
}

}  // namespace droce::fabric
