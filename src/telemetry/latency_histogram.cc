#include "droce/telemetry/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace droce::telemetry {

namespace {
constexpr uint64_t kHalf = LatencyHistogram::kSubCount / 2;

// Values < kSubCount: one bucket each, group 0. Then one group of kHalf
// buckets per power of two from 2^kSubBits to 2^63.
size_t group_size(size_t g) { return g == 0 ? LatencyHistogram::kSubCount : kHalf; }
size_t group_of(uint32_t b) {
  return b < LatencyHistogram::kSubCount ? 0 : 1 + (b - LatencyHistogram::kSubCount) / kHalf;
}
size_t index_in_group(uint32_t b) {
  return b < LatencyHistogram::kSubCount ? b : (b - LatencyHistogram::kSubCount) % kHalf;
}
uint32_t first_bucket(size_t g) {
  return static_cast<uint32_t>(g == 0 ? 0 : LatencyHistogram::kSubCount + (g - 1) * kHalf);
}
}  // namespace

LatencyHistogram::LatencyHistogram(const LatencyHistogram& o)
    : total_(o.total_), min_(o.min_), max_(o.max_), sum_(o.sum_), sum_sq_(o.sum_sq_) {
  for (size_t g = 0; g < kGroups; ++g) {
    if (!o.groups_[g]) continue;
    groups_[g] = std::make_unique<uint64_t[]>(group_size(g));
    std::copy_n(o.groups_[g].get(), group_size(g), groups_[g].get());
  }
}

LatencyHistogram& LatencyHistogram::operator=(const LatencyHistogram& o) {
  if (this != &o) *this = LatencyHistogram(o);
  return *this;
}

size_t LatencyHistogram::groups_allocated() const {
  return static_cast<size_t>(std::count_if(groups_.begin(), groups_.end(),
                                           [](const auto& g) { return g != nullptr; }));
}

uint64_t& LatencyHistogram::count_at(uint32_t b) {
  std::unique_ptr<uint64_t[]>& g = groups_[group_of(b)];
  if (!g) g = std::make_unique<uint64_t[]>(group_size(group_of(b)));  // zeroed
  return g[index_in_group(b)];
}

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
  count_at(bucket_of(v)) += n;
  total_ += n;
  min_ = std::min(min_, v);
  max_ = std::max(max_, v);
  const double d = static_cast<double>(v);
  sum_ += d * static_cast<double>(n);
  sum_sq_ += d * d * static_cast<double>(n);
}

void LatencyHistogram::merge(const LatencyHistogram& o) {
  for (size_t g = 0; g < kGroups; ++g) {
    if (!o.groups_[g]) continue;
    const uint32_t first = first_bucket(g);
    for (size_t i = 0; i < group_size(g); ++i)
      if (const uint64_t n = o.groups_[g][i]) count_at(first + static_cast<uint32_t>(i)) += n;
  }
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
  for (size_t g = 0; g < kGroups; ++g) {
    if (!groups_[g]) continue;
    const uint32_t first = first_bucket(g);
    for (size_t i = 0; i < group_size(g); ++i) {
      seen += groups_[g][i];
      if (seen >= rank)
        return std::clamp(bucket_high(first + static_cast<uint32_t>(i)), min_, max_);
    }
  }
  return max_;
}

}  // namespace droce::telemetry
