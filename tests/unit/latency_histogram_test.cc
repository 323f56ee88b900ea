#include "droce/telemetry/latency_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace droce::telemetry {
namespace {

// The oracle: nearest-rank percentile of a sorted array of every sample.
uint64_t oracle(std::vector<uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  rank = std::max<size_t>(rank, 1);
  return v[rank - 1];
}

TEST(LatencyHistogram, EmptyReportsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.percentile(0.99), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
}

TEST(LatencyHistogram, SmallValuesAreExact) {
  LatencyHistogram h;
  std::vector<uint64_t> v;
  for (uint64_t i = 1; i <= 1000; ++i) {
    h.record(i);
    v.push_back(i);
  }
  for (double q : {0.01, 0.5, 0.9, 0.99, 0.999, 1.0}) EXPECT_EQ(h.percentile(q), oracle(v, q)) << q;
  EXPECT_EQ(h.min(), 1u);
  EXPECT_EQ(h.max(), 1000u);
  EXPECT_DOUBLE_EQ(h.mean(), 500.5);
}

TEST(LatencyHistogram, BucketsTileTheRangeWithoutGaps) {
  for (uint32_t b = 0; b + 1 < 20000; ++b) {
    ASSERT_EQ(LatencyHistogram::bucket_high(b) + 1, LatencyHistogram::bucket_low(b + 1)) << b;
    ASSERT_EQ(LatencyHistogram::bucket_of(LatencyHistogram::bucket_low(b)), b);
    ASSERT_EQ(LatencyHistogram::bucket_of(LatencyHistogram::bucket_high(b)), b);
  }
  EXPECT_NO_THROW(LatencyHistogram().record(UINT64_MAX));
}

TEST(LatencyHistogram, PercentilesMatchSortedOracleWithinResolution) {
  // Heavy-tailed samples like RDMA latencies: lognormal around 3 us.
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> dist(std::log(3000.0), 0.6);
  LatencyHistogram h;
  std::vector<uint64_t> v;
  for (int i = 0; i < 200000; ++i) {
    const auto x = static_cast<uint64_t>(dist(rng));
    h.record(x);
    v.push_back(x);
  }
  const double resolution = 1.0 / static_cast<double>(LatencyHistogram::kSubCount / 2);
  for (double q : {0.5, 0.9, 0.99, 0.999, 0.9999}) {
    const double want = static_cast<double>(oracle(v, q));
    const double got = static_cast<double>(h.percentile(q));
    // Expect: never below the true value, at most one bucket width above.
    EXPECT_GE(got, want) << q;
    EXPECT_LE(got, want * (1 + resolution) + 1) << q;
  }
  EXPECT_EQ(h.percentile(1.0), *std::max_element(v.begin(), v.end()));
}

TEST(LatencyHistogram, MergeEqualsRecordingEverything) {
  LatencyHistogram a, b, all;
  for (uint64_t i = 0; i < 5000; ++i) {
    (i % 3 ? a : b).record(i * 37);
    all.record(i * 37);
  }
  a.merge(b);
  EXPECT_EQ(a.count(), all.count());
  for (double q : {0.5, 0.99, 0.999}) EXPECT_EQ(a.percentile(q), all.percentile(q));
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
}

TEST(LatencyHistogram, BucketGroupsAreAllocatedWhenFirstUsed) {
  LatencyHistogram h;
  EXPECT_EQ(h.groups_allocated(), 0u);
  h.record(2'000);  // [2^10, 2^11)
  h.record(2'047);
  EXPECT_EQ(h.groups_allocated(), 1u);
  h.record(5'000);  // [2^12, 2^13)
  h.record(3);      // the exact ones
  EXPECT_EQ(h.groups_allocated(), 3u);
  EXPECT_EQ(h.percentile(0.25), 3u);
  EXPECT_EQ(h.percentile(1.0), 5'000u);
  // Merging allocates only the groups the other has.
  LatencyHistogram m;
  m.merge(h);
  EXPECT_EQ(m.groups_allocated(), 3u);
  EXPECT_EQ(m.percentile(0.5), h.percentile(0.5));
}

TEST(LatencyHistogram, CopiesAreIndependent) {
  LatencyHistogram a;
  for (uint64_t i = 1; i <= 1000; ++i) a.record(i * 100);
  const uint64_t p99 = a.percentile(0.99);
  LatencyHistogram b = a;
  EXPECT_EQ(b.percentile(0.99), p99);
  b.record(1'000'000'000);
  EXPECT_EQ(a.count(), 1000u);
  EXPECT_EQ(b.count(), 1001u);
  EXPECT_EQ(a.percentile(0.99), p99);
  EXPECT_EQ(a.max(), 100'000u);
  a = b;
  EXPECT_EQ(a.max(), 1'000'000'000u);
  EXPECT_EQ(a.groups_allocated(), b.groups_allocated());
  a.reset();
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(a.groups_allocated(), 0u);
}

TEST(LatencyHistogram, StddevOfKnownSet) {
  LatencyHistogram h;
  for (uint64_t x : {2, 4, 4, 4, 5, 5, 7, 9}) h.record(x);
  EXPECT_DOUBLE_EQ(h.stddev(), 2.0);  // population stddev of the classic set
}

}  // namespace
}  // namespace droce::telemetry
