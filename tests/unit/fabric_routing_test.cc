// Routing: longest-prefix match, ECMP spreading over the UDP source port,
// flow affinity, per-switch seeds, and failover away from down ports.
#include "droce/fabric/routing.h"

#include <gtest/gtest.h>

#include <set>

#include "droce/fabric/switch.h"
#include "fabric_test_util.h"

namespace droce::fabric {
namespace {

using testing::drain;
using testing::roce_packet;

FlowKey key(uint32_t dst, uint16_t sport) {
  FlowKey k;
  wire::store_be32(k.src_ip, 0x0A000001);
  wire::store_be32(k.dst_ip, dst);
  k.protocol = 17;
  k.src_port = sport;
  k.dst_port = 4791;
  return k;
}

TEST(Routing, LongestPrefixWins) {
  RouteTable rt;
  rt.add_default(false, {9});
  rt.add(wire::IpAddress::v4(0x0A000000), 8, {1});
  rt.add(wire::IpAddress::v4(0x0A010000), 16, {2});
  rt.add_host(wire::IpAddress::v4(0x0A010005), 3);
  EXPECT_EQ(rt.lookup(key(0x0A010005, 1), 0), 3);
  EXPECT_EQ(rt.lookup(key(0x0A010006, 1), 0), 2);
  EXPECT_EQ(rt.lookup(key(0x0A020006, 1), 0), 1);
  EXPECT_EQ(rt.lookup(key(0x0B000001, 1), 0), 9);
  RouteTable none;
  EXPECT_EQ(none.lookup(key(0x0B000001, 1), 0), -1);
  EXPECT_THROW(rt.add(wire::IpAddress::v4(0), 33, {1}), std::invalid_argument);
}

TEST(Routing, Ipv6Prefix) {
  RouteTable rt;
  wire::IpAddress p;
  p.v6 = true;
  p.bytes[0] = 0xFD;
  rt.add(p, 8, {4});
  FlowKey k;
  k.ip_version = 6;
  k.dst_ip[0] = 0xFD;
  k.dst_ip[15] = 9;
  EXPECT_EQ(rt.lookup(k, 0), 4);
  k.dst_ip[0] = 0xFE;
  EXPECT_EQ(rt.lookup(k, 0), -1);
}

TEST(Routing, EcmpSpreadsFlowsAndKeepsAffinity) {
  RouteTable rt;
  rt.add_default(false, {4, 5, 6, 7});
  std::array<size_t, 8> count{};
  const size_t flows = 8000;
  for (size_t i = 0; i < flows; ++i) {
    const uint16_t sport = static_cast<uint16_t>(0xC000 | ((i * 2654435761u) & 0x3FFF));
    const int p = rt.lookup(key(0x0B000001, sport), 42);
    ASSERT_GE(p, 4);
    ++count[p];
    EXPECT_EQ(rt.lookup(key(0x0B000001, sport), 42), p);  // same 5-tuple, same port
  }
  for (int p = 4; p < 8; ++p)
    EXPECT_NEAR(static_cast<double>(count[p]), flows / 4.0, 0.1 * flows / 4) << p;
}

TEST(Routing, EcmpAvoidsDownMembers) {
  RouteTable rt;
  rt.add_default(false, {0, 1, 2});
  std::vector<bool> up{true, false, true};
  std::set<int> used;
  for (uint16_t s = 0; s < 500; ++s) used.insert(rt.lookup(key(0x0B000001, s), 1, up));
  EXPECT_EQ(used, (std::set<int>{0, 2}));
  EXPECT_EQ(rt.lookup(key(0x0B000001, 1), 1, {false, false, false}), -1);
}

TEST(Routing, SeedsDecorrelateSwitches) {
  // Flows that one switch sends up member 0 spread over all members at a
  // switch with another seed (no polarization across tiers).
  RouteTable rt;
  rt.add_default(false, {0, 1, 2, 3});
  std::array<size_t, 4> second{};
  for (uint16_t s = 0; s < 4000; ++s) {
    if (rt.lookup(key(0x0B000001, s), 1) == 0) ++second[rt.lookup(key(0x0B000001, s), 2)];
  }
  for (size_t c : second) EXPECT_GT(c, 150u);
}

TEST(Routing, LeafSpineThroughSwitches) {
  // A leaf with hosts on ports 0-1 and four uplinks (2-5): traffic to remote
  // hosts uses every uplink; local traffic stays local.
  SwitchConfig cfg;
  cfg.ports.resize(6);
  for (auto& p : cfg.ports) p.ecn.mode = MarkMode::kOff;
  cfg.routes.add_host(wire::IpAddress::v4(0x0A000001), 0);
  cfg.routes.add_host(wire::IpAddress::v4(0x0A000002), 1);
  cfg.routes.add_default(false, {2, 3, 4, 5});
  cfg.shared_buffer_bytes = 1 << 30;
  Switch sw(cfg);
  for (uint16_t i = 0; i < 400; ++i)
    sw.receive(0, roce_packet({.dst_ip = 0x0A010001, .src_port = static_cast<uint16_t>(0xC000 + i), .payload = 64}), 0);
  sw.receive(0, roce_packet({.dst_ip = 0x0A000002}), 0);
  std::array<size_t, 6> per{};
  for (auto& d : drain(sw)) ++per[d.port];
  EXPECT_EQ(per[1], 1u);
  for (int p = 2; p < 6; ++p) EXPECT_NEAR(static_cast<double>(per[p]), 100, 35) << p;
}

// Host routes are kept in an array over dense addresses and a hash map for
// the rest; which one holds a route must not show.
TEST(Routing, HostRoutesDenseSparseAndReplacedAllLookUp) {
  RouteTable rt;
  std::vector<std::pair<uint32_t, uint16_t>> want;
  // Dense from the middle outwards, then far-away addresses, then some
  // replaced.
  for (uint32_t i = 0; i < 200; ++i) {
    const uint32_t ip = 0x0A000000u + (i % 2 ? 100 + i : 100 - i / 2);
    want.emplace_back(ip, static_cast<uint16_t>(i % 7));
  }
  for (uint32_t i = 0; i < 20; ++i) want.emplace_back(0xC0A80000u + i * 4099, static_cast<uint16_t>(i));
  for (auto& [ip, port] : want) rt.add_host(wire::IpAddress::v4(ip), port);
  for (size_t i = 0; i < want.size(); i += 3) {
    want[i].second = static_cast<uint16_t>(want[i].second + 20);
    rt.add_host(wire::IpAddress::v4(want[i].first), want[i].second);
  }
  for (const auto& [ip, port] : want) {
    EXPECT_EQ(rt.lookup(key(ip, 1000), 1), port) << std::hex << ip;
    ASSERT_NE(rt.host_ports(wire::IpAddress::v4(ip)), nullptr);
    EXPECT_EQ(*rt.host_ports(wire::IpAddress::v4(ip)), std::vector<uint16_t>{port});
  }
  EXPECT_EQ(rt.lookup(key(0x0A000066u, 1000), 1), -1);  // a hole in the dense range
  EXPECT_EQ(rt.lookup(key(0x0A0001FFu, 1000), 1), -1);  // beyond it
  EXPECT_EQ(rt.host_ports(wire::IpAddress::v4(0x0B000000u)), nullptr);
  // A default route still answers for what no host route covers.
  rt.add_default(false, {42});
  EXPECT_EQ(rt.lookup(key(0x0A000066u, 1000), 1), 42);
  EXPECT_EQ(rt.lookup(key(want[1].first, 1000), 1), want[1].second);
}

}  // namespace
}  // namespace droce::fabric
