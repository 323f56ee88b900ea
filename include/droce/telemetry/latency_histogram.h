// Latency histogram over every sample (no sampling ring), log-linear like
// HdrHistogram: values below 2^kSubBits ns are counted exactly; above, each
// power-of-two range is split into 2^(kSubBits-1) equal buckets, so a
// reported percentile is within 1/2^(kSubBits-1) of the true sample value
// (0.2% for kSubBits = 10). O(1) record. The buckets come in groups (the
// exact ones, then one group per power of two, 4 KiB each), each allocated
// the first time a value falls in it: latencies of one run fill a handful of
// groups, so a histogram costs tens of KiB, not the 224 KiB of all of them
// (a generator's receiver makes one at a stream's first probe, and zeroing
// and faulting in all of them there held up the probes behind it for most
// of a millisecond), and a report's histogram per step stays small at
// thousands of steps.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

namespace droce::telemetry {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 10;
  static constexpr uint64_t kSubCount = uint64_t{1} << kSubBits;

  LatencyHistogram() = default;
  LatencyHistogram(const LatencyHistogram& o);
  LatencyHistogram& operator=(const LatencyHistogram& o);
  LatencyHistogram(LatencyHistogram&&) noexcept = default;
  LatencyHistogram& operator=(LatencyHistogram&&) noexcept = default;

  void record(uint64_t value_ns, uint64_t count = 1);
  void merge(const LatencyHistogram& other);
  void reset();

  uint64_t count() const { return total_; }
  uint64_t min() const { return total_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const;
  double stddev() const;
  // The smallest recorded value v such that at least q (0..1] of the
  // samples are <= v ("nearest rank"), reported as the highest value its
  // bucket can hold, clamped to the true max. 0 when empty.
  uint64_t percentile(double q) const;

  // Bucket index <-> value range, exposed for tests.
  static uint32_t bucket_of(uint64_t value);
  static uint64_t bucket_low(uint32_t bucket);
  static uint64_t bucket_high(uint32_t bucket);
  // The bucket groups allocated so far (at most kGroups).
  size_t groups_allocated() const;

  // Group 0: the kSubCount exact buckets; group g >= 1: the kSubCount/2
  // buckets of values in [2^(kSubBits+g-1), 2^(kSubBits+g)).
  static constexpr size_t kGroups = 1 + (64 - kSubBits);

 private:
  uint64_t& count_at(uint32_t bucket);

  std::array<std::unique_ptr<uint64_t[]>, kGroups> groups_;
  uint64_t total_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  // Sums for mean/stddev, in double to survive 2^64 overflow of squares.
  double sum_ = 0;
  double sum_sq_ = 0;
};

}  // namespace droce::telemetry
