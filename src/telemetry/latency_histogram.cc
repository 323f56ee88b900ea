#include "droce/telemetry/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace droce::telemetry {

namespace {
constexpr uint64_t kHalf = LatencyHistogram::kSubCount / 2;
// Values < kSubCount: one bucket each. Then one group of kHalf buckets per
// power of two from 2^kSubBits to 2^63.
constexpr uint32_t kBuckets = static_cast<uint32_t>(
    LatencyHistogram::kSubCount + (64 - LatencyHistogram::kSubBits) * kHalf);
}  // namespace

LatencyHistogram::LatencyHistogram() : counts_(kBuckets, 0) {}

uint32_t LatencyHistogram::bucket_of(uint64_t v) {
  if (v < kSubCount) return static_cast<uint32_t>(v);
  const int msb = 63 - std::countl_zero(v);         // >= kSubBits
  const int shift = msb - (kSubBits - 1);           // keep kSubBits bits
  const uint64_t sub = (v >> shift) - kHalf;        // 0 .. kHalf-1
  return static_cast<uint32_t>(kSubCount + (msb - kSubBits) * kHalf + sub);
}

uint64_t LatencyHistogram::bucket_low(uint32_t b) {
  if (b < kSubCount) return b;
  const uint32_t group = static_cast<uint32_t>((b - kSubCount) / kHalf);
  const uint64_t sub = (b - kSubCount) % kHalf;
  const int shift = static_cast<int>(group) + 1;
  return (kHalf + sub) << shift;
}

uint64_t LatencyHistogram::bucket_high(uint32_t b) {
  if (b < kSubCount) return b;
  const uint32_t group = static_cast<uint32_t>((b - kSubCount) / kHalf);
  return bucket_low(b) + ((uint64_t{1} << (group + 1)) - 1);
}

void LatencyHistogram::record(uint64_t v, uint64_t n) {
  if (n == 0) return;
  counts_[bucket_of(v)] += n;
  total_ += n;
  min_ = std::min(min_, v);
  max_ = std::max(max_, v);
  const double d = static_cast<double>(v);
  sum_ += d * static_cast<double>(n);
  sum_sq_ += d * d * static_cast<double>(n);
}

void LatencyHistogram::merge(const LatencyHistogram& o) {
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += o.counts_[i];
  total_ += o.total_;
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
  sum_ += o.sum_;
  sum_sq_ += o.sum_sq_;
}

void LatencyHistogram::reset() { *this = LatencyHistogram(); }

double LatencyHistogram::mean() const {
  return total_ ? sum_ / static_cast<double>(total_) : 0.0;
}

double LatencyHistogram::stddev() const {
  if (total_ < 2) return 0.0;
  const double m = mean();
  const double var = sum_sq_ / static_cast<double>(total_) - m * m;
  return var > 0 ? std::sqrt(var) : 0.0;
}

uint64_t LatencyHistogram::percentile(double q) const {
  if (total_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // Nearest rank: the ceil(q*N)-th smallest sample (at least the first).
  uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(total_)));
  rank = std::max<uint64_t>(rank, 1);
  uint64_t seen = 0;
  for (uint32_t b = 0; b < counts_.size(); ++b) {
    seen += counts_[b];
    if (seen >= rank) return std::clamp(bucket_high(b), min_, max_);
  }
  return max_;
}

}  // namespace droce::telemetry
