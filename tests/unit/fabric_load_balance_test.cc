// Adaptive routing: the least-loaded member of an ECMP group, per packet
// and per flowlet (fabric/load_balance.h), in the switch.
#include "droce/fabric/load_balance.h"

#include <gtest/gtest.h>

#include <map>

#include "fabric_test_util.h"

namespace droce::fabric {
namespace {

TEST(LoadBalance, LeastLoadedPicksTheMemberWithFewestBytes) {
  const std::vector<uint16_t> ports{4, 5, 6, 7};
  const std::map<uint16_t, uint64_t> load{{4, 900}, {5, 300}, {6, 100}, {7, 500}};
  auto l = [&](uint16_t p) { return load.at(p); };
  for (uint32_t h : {0u, 0x40000000u, 0x80000000u, 0xFFFFFFFFu})
    EXPECT_EQ(least_loaded(ports, h, {}, l), 6) << h;
}

TEST(LoadBalance, TiesGoToTheHashedMemberAndDownPortsAreSkipped) {
  const std::vector<uint16_t> ports{0, 1, 2, 3};
  auto idle = [](uint16_t) { return uint64_t{0}; };
  // Equal loads: the member ECMP's multiply-shift would pick.
  EXPECT_EQ(least_loaded(ports, 0x00000000u, {}, idle), 0);
  EXPECT_EQ(least_loaded(ports, 0x50000000u, {}, idle), 1);
  EXPECT_EQ(least_loaded(ports, 0xC0000000u, {}, idle), 3);
  std::vector<bool> up{true, false, true, true};
  EXPECT_EQ(least_loaded(ports, 0x50000000u, up, idle), 2) << "1 is down: the next";
  EXPECT_EQ(least_loaded(ports, 0, std::vector<bool>(4, false), idle), -1);
}

TEST(LoadBalance, FlowletKeepsItsMemberWithinTheGapAndChoosesAfterIt) {
  FlowletTable t(16);
  EXPECT_EQ(t.lookup(7, 0, 1000), -1) << "first packet: a new flowlet";
  t.assign(7, 3);
  EXPECT_EQ(t.lookup(7, 500, 1000), 3);
  EXPECT_EQ(t.lookup(7, 1500, 1000), 3) << "gap of 1000 ns is not longer than 1000";
  EXPECT_EQ(t.lookup(7, 2501, 1000), -1) << "gap of 1001 ns: a new flowlet";
  t.assign(7, 1);
  EXPECT_EQ(t.lookup(7, 2600, 1000), 1);
  EXPECT_EQ(t.lookup(7 + 16, 2700, 1000), 1) << "same bucket, same flowlet (as in hardware)";
  EXPECT_EQ(t.flowlets(), 2u);
}

// A switch with one host port (0) and an ECMP group of two uplinks (1, 2)
// toward 10.0.0.99: a burst of one flow is split over both uplinks packet by
// packet in adaptive mode, and stays on one in ECMP mode.
std::map<uint16_t, int> spread(LoadBalance lb, uint64_t gap_ns, uint64_t spacing_ns) {
  SwitchConfig cfg = testing::simple_config(3, 100 * kGbps);
  cfg.routes.add_host(wire::IpAddress::v4(0x0A000063), 1);
  cfg.routes.add(wire::IpAddress::v4(0x0A000063), 32, {1, 2});
  cfg.load_balance = lb;
  cfg.flowlet_gap_ns = gap_ns;
  Switch sw(cfg);
  std::map<uint16_t, int> out;
  uint64_t now = 0;
  for (uint32_t i = 0; i < 40; ++i) {
    testing::RoceSpec s;
    s.dst_ip = 0x0A000063;
    s.psn = i;
    sw.receive(0, testing::roce_packet(s), now);
    now += spacing_ns;
    for (auto& d : testing::drain(sw, now)) ++out[d.port];
  }
  for (auto& d : testing::drain(sw)) ++out[d.port];
  return out;
}

TEST(LoadBalance, SwitchSpreadsOneFlowPerPacketOnlyWhenAdaptive) {
  // Back to back (10 ns apart): faster than one uplink drains them.
  const auto ecmp = spread(LoadBalance::kEcmp, 0, 10);
  EXPECT_EQ(ecmp.size(), 1u) << "one flow, one hash, one uplink";
  const auto ada = spread(LoadBalance::kAdaptivePacket, 0, 10);
  ASSERT_EQ(ada.size(), 2u);
  EXPECT_EQ(ada.at(1), 20);
  EXPECT_EQ(ada.at(2), 20);
}

TEST(LoadBalance, FlowletModeMovesAFlowOnlyAcrossIdleGaps) {
  // Back to back: one flowlet, one uplink.
  EXPECT_EQ(spread(LoadBalance::kAdaptiveFlowlet, 1000, 10).size(), 1u);
  // 2 us between packets, gap 1 us: every packet starts a flowlet and goes
  // to the least-loaded uplink; both are empty by then, so the tie goes to
  // the hashed member every time: still one uplink, and no queue anywhere.
  const auto idle = spread(LoadBalance::kAdaptiveFlowlet, 1000, 2000);
  EXPECT_EQ(idle.size(), 1u);
}

}  // namespace
}  // namespace droce::fabric
