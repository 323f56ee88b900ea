// Latency histogram over every sample (no sampling ring), log-linear like
// HdrHistogram: values below 2^kSubBits ns are counted exactly; above, each
// power-of-two range is split into 2^(kSubBits-1) equal buckets, so a
// reported percentile is within 1/2^(kSubBits-1) of the true sample value
// (0.2% for kSubBits = 10). Fixed memory (~half a MiB up to 2^63 ns), O(1)
// record, no allocation after construction.
#pragma once

#include <cstdint>
#include <vector>

namespace droce::telemetry {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 10;
  static constexpr uint64_t kSubCount = uint64_t{1} << kSubBits;

  LatencyHistogram();

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

 private:
  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  // Sums for mean/stddev, in double to survive 2^64 overflow of squares.
  double sum_ = 0;
  double sum_sq_ = 0;
};

}  // namespace droce::telemetry
