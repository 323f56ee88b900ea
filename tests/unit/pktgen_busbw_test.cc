#include "droce/pktgen/busbw.h"

#include <gtest/gtest.h>

namespace droce::pktgen {
namespace {

TEST(PktgenBusbw, FactorsAsNcclTestsDefineThem) {
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllReduce, 8), 2.0 * 7 / 8);  // 1.75
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllToAll, 16), 15.0 / 16);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kBroadcast, 16), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kReduce, 16), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kIncast, 5), 4.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kSendRecv, 5), 1.0);
  for (Pattern p : {Pattern::kRingAllReduce, Pattern::kHalvingDoubling, Pattern::kTreeAllReduce}) {
    EXPECT_EQ(collective_of(p), Collective::kAllReduce);
  }
}

TEST(PktgenBusbw, HandComputedExamples) {
  // 1 GiB all-reduce over 8 ranks in 100 ms: algbw = 1073741824 / 0.1 / 1e9
  // = 10.737 GB/s; busbw = 10.737 * 1.75 = 18.790 GB/s.
  EXPECT_NEAR(algbw_gbps(1 << 30, 0.1), 10.73741824, 1e-9);
  EXPECT_NEAR(busbw_gbps(Collective::kAllReduce, 8, 1 << 30, 0.1), 18.79048192, 1e-9);
  // 400 MB all-gather on 4 ranks in 10 ms: 40 GB/s alg, 30 GB/s bus.
  EXPECT_NEAR(busbw_gbps(Collective::kAllGather, 4, 400'000'000, 0.01), 30.0, 1e-9);
  EXPECT_EQ(algbw_gbps(100, 0), 0.0);
}

TEST(PktgenBusbw, SizeSweepLikeNcclTests) {
  // -b 8 -e 128M -f 2: 8, 16, ..., 128 MiB.
  const auto s = size_sweep({8, 128 << 20, 2, 0});
  ASSERT_EQ(s.size(), 25u);
  EXPECT_EQ(s.front(), 8u);
  EXPECT_EQ(s.back(), uint64_t{128} << 20);
  // -b 1000 -e 5000 -f 3: stops at the last size <= max.
  EXPECT_EQ(size_sweep({1000, 5000, 3, 0}), (std::vector<uint64_t>{1000, 3000}));
  // -i: additive steps when the factor is 1.
  EXPECT_EQ(size_sweep({64, 256, 1, 64}), (std::vector<uint64_t>{64, 128, 192, 256}));
  EXPECT_EQ(size_sweep({64, 64, 2, 0}), (std::vector<uint64_t>{64}));
  EXPECT_TRUE(size_sweep({65, 64, 2, 0}).empty());
  EXPECT_EQ(size_sweep({64, 1024, 1, 0}), (std::vector<uint64_t>{64}));  // does not advance
  // No overflow near the top of uint64_t.
  EXPECT_EQ(size_sweep({uint64_t{1} << 62, UINT64_MAX, 4, 0}).size(), 1u);
}

}  // namespace
}  // namespace droce::pktgen
