// Egress scheduling: strict priority order and DWRR byte shares.
#include "droce/fabric/scheduler.h"

#include <gtest/gtest.h>

#include "droce/fabric/switch.h"
#include "fabric_test_util.h"

namespace droce::fabric {
namespace {

using testing::drain;
using testing::roce_packet;
using testing::simple_config;

TEST(Scheduler, StrictPicksHighestEligible) {
  ClassScheduler s(SchedulerConfig::strict_priority());
  std::array<uint32_t, kNumClasses> head{};
  head.fill(1000);
  EXPECT_EQ(s.select(0b0010'0110, head), 5);
  EXPECT_EQ(s.select(0b0000'0110, head), 2);
  EXPECT_EQ(s.select(0, head), -1);
}

TEST(Scheduler, DwrrSharesFollowWeights) {
  const std::array<uint32_t, kNumClasses> w{1, 2, 4, 1, 1, 1, 1, 1};
  SchedulerConfig cfg = SchedulerConfig::dwrr(w);
  cfg.quantum_bytes = 1500;
  ClassScheduler s(cfg);
  // Different packet sizes per class: DRR shares are in bytes, not packets.
  const std::array<uint32_t, kNumClasses> head{1500, 300, 900, 0, 0, 0, 0, 0};
  std::array<uint64_t, kNumClasses> bytes{};
  for (int i = 0; i < 100'000; ++i) {
    const int c = s.select(0b111, head);
    ASSERT_GE(c, 0);
    bytes[c] += head[c];
    s.sent(c, false);
  }
  const double total = static_cast<double>(bytes[0] + bytes[1] + bytes[2]);
  EXPECT_NEAR(bytes[0] / total, 1.0 / 7, 0.01);
  EXPECT_NEAR(bytes[1] / total, 2.0 / 7, 0.01);
  EXPECT_NEAR(bytes[2] / total, 4.0 / 7, 0.01);
}

TEST(Scheduler, StrictClassesPreemptDwrr) {
  SchedulerConfig cfg = SchedulerConfig::dwrr({1, 1, 1, 1, 1, 1, 1, 1});
  cfg.strict[7] = true;  // e.g. CNPs and control
  ClassScheduler s(cfg);
  std::array<uint32_t, kNumClasses> head{};
  head.fill(100);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.select(0b1000'0011, head), 7);
  EXPECT_NE(s.select(0b0000'0011, head), 7);
}

// Through the switch: a backlogged port shares its rate by weight.
TEST(Scheduler, SwitchDwrrByteShares) {
  auto cfg = simple_config(2, 25 * kGbps);
  cfg.ports[1].scheduler = SchedulerConfig::dwrr({1, 3, 1, 6, 1, 1, 1, 1});
  cfg.shared_buffer_bytes = 1 << 30;
  Switch sw(cfg);
  // Classes 1 (DSCP 8), 3 (DSCP 26) and 5 (DSCP 40); class 3 uses small packets.
  for (int i = 0; i < 3000; ++i) {
    sw.receive(0, roce_packet({.dscp = 8, .payload = 1024}), 0);
    sw.receive(0, roce_packet({.dscp = 26, .payload = 256}), 0);
    sw.receive(0, roce_packet({.dscp = 40, .payload = 2048}), 0);
  }
  // Measure while all three are still backlogged.
  std::array<uint64_t, kNumClasses> bytes{};
  for (auto& d : drain(sw, 300'000)) bytes[d.packet.tc] += d.packet.size();
  ASSERT_GT(sw.queue_packets(1, 1), 0u);
  ASSERT_GT(sw.queue_packets(1, 3), 0u);
  ASSERT_GT(sw.queue_packets(1, 5), 0u);
  const double total = static_cast<double>(bytes[1] + bytes[3] + bytes[5]);
  EXPECT_NEAR(bytes[1] / total, 3.0 / 10, 0.02);
  EXPECT_NEAR(bytes[3] / total, 6.0 / 10, 0.02);
  EXPECT_NEAR(bytes[5] / total, 1.0 / 10, 0.02);
}

TEST(Scheduler, SwitchStrictPriorityStarvesLower) {
  auto cfg = simple_config(2, 25 * kGbps);
  Switch sw(cfg);  // strict priority is the default
  for (int i = 0; i < 50; ++i) {
    sw.receive(0, roce_packet({.dscp = 8}, 1), 0);
    sw.receive(0, roce_packet({.dscp = 48}, 6), 0);
  }
  auto out = drain(sw);
  ASSERT_EQ(out.size(), 100u);
  // The first packet (class 1) was already on the wire; then all of class 6.
  EXPECT_EQ(out[0].packet.tag, 1u);
  for (int i = 1; i <= 50; ++i) EXPECT_EQ(out[i].packet.tag, 6u) << i;
  for (int i = 51; i < 100; ++i) EXPECT_EQ(out[i].packet.tag, 1u) << i;
}

}  // namespace
}  // namespace droce::fabric
