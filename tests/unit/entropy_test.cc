// Flow entropy: the UDP source port sequences of transport/entropy.h, and a
// QP that sprays its packets, whose responder (selective repeat) takes them
// in any order.
#include "droce/transport/entropy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "droce/wire/bytes.h"
#include "droce/wire/headers.h"
#include "droce/wire/packet.h"
#include "transport_link.h"

namespace droce::transport {
namespace {

TEST(Entropy, PortsAreDistinctInTheDynamicRangeAndIndexZeroIsTheBase) {
  std::set<uint16_t> seen;
  for (uint32_t i = 0; i < kMaxEntropyPaths; ++i) {
    const uint16_t p = entropy_port(0xC123, i);
    EXPECT_EQ(p & 0xC000, 0xC000);
    seen.insert(p);
  }
  EXPECT_EQ(seen.size(), kMaxEntropyPaths);
  EXPECT_EQ(entropy_port(0xC123, 0), 0xC123);
  EXPECT_EQ(entropy_port(0x1234, 0), 0x1234);  // a port set by hand stays
}

TEST(Entropy, FixedAlwaysSendsTheBasePort) {
  EntropySource e;
  e.reset({EntropyMode::kFixed, 64, 1000}, 0xC777);
  for (uint64_t t = 0; t < 100'000; t += 5'000) EXPECT_EQ(e.next(t), 0xC777);
  EXPECT_EQ(e.changes(), 0u);
}

TEST(Entropy, SprayCyclesThroughNPortsPacketByPacket) {
  EntropySource e;
  e.reset({EntropyMode::kSpray, 8, 1000}, 0xC010);
  std::vector<uint16_t> first;
  for (int i = 0; i < 8; ++i) first.push_back(e.next(0));
  EXPECT_EQ(first[0], 0xC010);
  EXPECT_EQ(std::set<uint16_t>(first.begin(), first.end()).size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(e.next(0), first[i]) << "period N";
  EXPECT_EQ(e.changes(), 15u);
}

TEST(Entropy, FlowletChangesOnlyAfterAGapLongerThanConfigured) {
  EntropySource e;
  e.reset({EntropyMode::kFlowlet, 4, 10'000}, 0xC020);
  const uint16_t a = e.next(0);
  EXPECT_EQ(e.next(5'000), a);
  EXPECT_EQ(e.next(15'000), a) << "gaps of 5 and 10 us are not longer than 10 us";
  const uint16_t b = e.next(25'001);
  EXPECT_NE(b, a) << "a gap of 10.001 us starts a flowlet";
  EXPECT_EQ(e.next(26'000), b);
  EXPECT_EQ(e.changes(), 1u);
  // Four flowlets later the first port comes back (N = 4).
  uint64_t t = 26'000;
  for (int i = 0; i < 3; ++i) e.next(t += 20'000);
  EXPECT_EQ(e.next(t + 1), a);
}

TEST(Entropy, OneConfiguredPathNeverChanges) {
  EntropySource e;
  e.reset({EntropyMode::kSpray, 1, 0}, 0xC030);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(e.next(i * 100'000), 0xC030);
  EXPECT_EQ(e.changes(), 0u);
}

// Path-aware: with no feedback it sprays round robin like kSpray.
TEST(Entropy, PathAwareWithoutFeedbackSpraysRoundRobin) {
  EntropySource pa, sp;
  pa.reset({EntropyMode::kPathAware, 8, 0, 4'000}, 0xC040);
  sp.reset({EntropyMode::kSpray, 8, 0}, 0xC040);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(pa.next(i * 100), sp.next(i * 100));
  EXPECT_EQ(pa.avoided(), 0u);
}

// A round trip 10 us above the smallest seen (threshold 4 us) makes that
// path avoided for 10 us; a sample under the threshold changes nothing.
TEST(Entropy, PathAwareAvoidsAPathWithQueueingForAsLongAsItsExcess) {
  EntropySource e;
  e.reset({EntropyMode::kPathAware, 4, 0, 4'000}, 0xC050);
  EXPECT_EQ(e.next(0), entropy_port(0xC050, 0));
  e.on_delivered(0, 5'000, 100);   // the smallest round trip: 5 us
  e.on_delivered(1, 8'000, 100);   // 3 us of queueing: under the threshold
  e.on_delivered(2, 15'000, 100);  // 10 us: avoided until 10.1 us
  std::vector<uint32_t> order;
  for (int i = 0; i < 6; ++i) {
    e.next(200);
    order.push_back(e.index());
  }
  EXPECT_EQ(order, (std::vector<uint32_t>{1, 3, 0, 1, 3, 0}));
  EXPECT_EQ(e.avoided(), 2u);
  e.next(10'100);
  EXPECT_EQ(e.index(), 1u);
  e.next(10'100);
  EXPECT_EQ(e.index(), 2u) << "free again once its excess has passed";
}

// A loss avoids the path for the smallest round trip plus the threshold;
// with every path avoided the one free soonest is taken.
TEST(Entropy, PathAwareAvoidsALossyPathAndFallsBackToTheSoonestFree) {
  EntropySource e;
  e.reset({EntropyMode::kPathAware, 2, 0, 4'000}, 0xC060);
  e.next(0);                      // path 0
  e.on_delivered(0, 5'000, 5'000);
  e.on_lost(1, 6'000);            // until 6 + 5 + 4 = 15 us
  e.next(7'000);
  EXPECT_EQ(e.index(), 0u);
  e.next(8'000);
  EXPECT_EQ(e.index(), 0u);
  e.on_lost(0, 9'000);            // until 18 us: both avoided now
  e.next(10'000);
  EXPECT_EQ(e.index(), 1u) << "path 1 is free first (15 us)";
  e.next(15'000);
  EXPECT_EQ(e.index(), 1u);
  e.next(18'000);
  EXPECT_EQ(e.index(), 0u);
}

// Feedback is path-aware's alone: spraying ignores it.
TEST(Entropy, SprayIgnoresFeedback) {
  EntropySource e;
  e.reset({EntropyMode::kSpray, 4, 0}, 0xC070);
  e.next(0);
  e.on_delivered(0, 1'000, 0);
  e.on_delivered(1, 100'000, 0);
  e.on_lost(2, 0);
  std::vector<uint32_t> order;
  for (int i = 0; i < 4; ++i) {
    e.next(10);
    order.push_back(e.index());
  }
  EXPECT_EQ(order, (std::vector<uint32_t>{1, 2, 3, 0}));
}

using testing::TwoEnds;

TEST(Entropy, QpRefusesReorderingEntropyWithoutSelectiveRepeat) {
  TwoEnds ends(16, 16);
  QpAttr attr;
  attr.entropy.mode = EntropyMode::kSpray;
  attr.recovery = Recovery::kGoBackN;
  EXPECT_FALSE(testing::connect(*ends.qa, *ends.qb, attr, 1, 1));
  TwoEnds ok(16, 16);
  attr.recovery = Recovery::kSelectiveRepeat;
  EXPECT_TRUE(testing::connect(*ok.qa, *ok.qb, attr, 1, 1));
  TwoEnds bad(16, 16);
  attr.entropy.paths = 0;
  EXPECT_FALSE(testing::connect(*bad.qa, *bad.qb, attr, 1, 1));
}

// A sprayed WRITE of 64 packets: every frame has a valid ICRC and one of
// the 16 source ports. Delivered FIRST, then the other 63 in reverse order
// (the FIRST carries the RETH the responder needs to place the others,
// qp.h), the responder places all of them (62 out of order, none dropped),
// the data arrive intact and the message completes without a
// retransmission.
TEST(Entropy, SprayedWriteArrivingOutOfOrderIsPlacedAndCompletes) {
  TwoEnds ends(16, 16);
  auto& [da, db, pa, pb, a_cq, b_cq, qa, qb] = ends;
  QpAttr attr;
  attr.path_mtu = IBV_MTU_1024;
  attr.recovery = Recovery::kSelectiveRepeat;
  attr.entropy = {EntropyMode::kSpray, 16, 0};
  attr.sr_reorder_tolerance_pkts = 64;
  ASSERT_TRUE(testing::connect(*qa, *qb, attr, 100, 900));
  constexpr size_t kLen = 64 * 1024;
  std::vector<uint8_t> src(kLen), dst(kLen, 0);
  for (size_t i = 0; i < kLen; ++i) src[i] = static_cast<uint8_t>(i * 13 + 5);
  ASSERT_EQ(ends.post_write(src, dst), 0);

  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint8_t> buf(8192);
  uint64_t now = 1000;
  while (qa->has_work(now)) {
    const size_t n = qa->produce(now, buf);
    if (n == 0) break;
    frames.emplace_back(buf.begin(), buf.begin() + n);
    now += 100;
  }
  ASSERT_EQ(frames.size(), 64u);
  std::set<uint16_t> ports;
  for (const auto& f : frames) {
    wire::ParsedPacket p;
    ASSERT_EQ(wire::parse(f, p), wire::ParseError::kOk);
    ports.insert(p.udp_src_port);
  }
  EXPECT_EQ(ports.size(), 16u);
  EXPECT_EQ(qa->entropy_changes(), 63u);

  std::reverse(frames.begin() + 1, frames.end());
  for (const auto& f : frames) {
    wire::ParsedPacket p;
    ASSERT_EQ(wire::parse(f, p), wire::ParseError::kOk);
    qb->on_packet(p, now);
  }
  EXPECT_EQ(qb->counters().rx_ooo_accepted, 62u);
  EXPECT_EQ(qb->reorder_depth_max(), 62u);
  EXPECT_EQ(dst, src);
  // The responder's answers (SACKs, then the cumulative ACK) complete it.
  while (qb->has_work(now)) {
    const size_t n = qb->produce(now, buf);
    if (n == 0) break;
    wire::ParsedPacket p;
    ASSERT_EQ(wire::parse({buf.data(), n}, p), wire::ParseError::kOk);
    qa->on_packet(p, now);
  }
  WorkCompletion wc[4];
  ASSERT_EQ(a_cq->poll(wc), 1);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(qa->counters().tx_retransmit_packets, 0u)
      << "every hole is within the reorder tolerance: nothing is resent";
}

}  // namespace
}  // namespace droce::transport
