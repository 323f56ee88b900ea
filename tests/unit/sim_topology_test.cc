// The leaf-spine generator: names, host placement, link order (and so port
// numbering), rates, a part-full last leaf, and shapes it refuses.
#include "droce/sim/topology.h"

#include <gtest/gtest.h>

namespace droce::sim {
namespace {

TEST(LeafSpine, FullLeavesLinkHostsThenUplinksPerLeaf) {
  Scenario sc;
  LeafSpineShape shape;
  shape.leaves = 2;
  shape.spines = 3;
  shape.hosts_per_leaf = 2;
  shape.host_rate_bps = 25 * fabric::kGbps;
  shape.spine_rate_bps = 50 * fabric::kGbps;
  LinkSpec link;
  link.link.propagation_ns = 700;
  SwitchSpec sw;
  sw.port_buffer_bytes = 12345;
  add_leaf_spine(sc, shape, sw, link, 9);
  ASSERT_EQ(sc.hosts.size(), 4u);
  ASSERT_EQ(sc.switches.size(), 5u);
  EXPECT_EQ(sc.switches[0].name, "leaf0");
  EXPECT_EQ(sc.switches[1].name, "leaf1");
  EXPECT_EQ(sc.switches[2].name, "spine0");
  EXPECT_EQ(sc.switches[4].name, "spine2");
  for (const SwitchSpec& s : sc.switches) EXPECT_EQ(s.port_buffer_bytes, 12345u);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"h0", "leaf0"},     {"h1", "leaf0"},     {"leaf0", "spine0"}, {"leaf0", "spine1"},
      {"leaf0", "spine2"}, {"h2", "leaf1"},     {"h3", "leaf1"},     {"leaf1", "spine0"},
      {"leaf1", "spine1"}, {"leaf1", "spine2"}};
  ASSERT_EQ(sc.links.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const LinkSpec& l = sc.links[i];
    EXPECT_EQ(l.a, want[i].first) << i;
    EXPECT_EQ(l.b, want[i].second) << i;
    EXPECT_EQ(l.rate_bps, l.a[0] == 'h' ? 25 * fabric::kGbps : 50 * fabric::kGbps) << i;
    EXPECT_EQ(l.link.propagation_ns, 700u);
    EXPECT_EQ(l.line, 9);
  }
  for (const HostSpec& h : sc.hosts) EXPECT_EQ(h.rate_bps, 25 * fabric::kGbps);
}

TEST(LeafSpine, TheLastLeafTakesTheHostsLeftOver) {
  Scenario sc;
  LeafSpineShape shape;
  shape.leaves = 3;
  shape.spines = 1;
  shape.hosts_per_leaf = 4;
  shape.hosts = 10;
  add_leaf_spine(sc, shape, {}, {}, 0);
  ASSERT_EQ(sc.hosts.size(), 10u);
  EXPECT_EQ(sc.hosts.back().name, "h9");
  size_t on_leaf2 = 0;
  for (const LinkSpec& l : sc.links) on_leaf2 += l.b == "leaf2" && l.a[0] == 'h';
  EXPECT_EQ(on_leaf2, 2u);
  EXPECT_EQ(sc.links.size(), 10u + 3u);
}

TEST(LeafSpine, RefusesAnEmptyLeafOrTooManyHosts) {
  LeafSpineShape shape;
  shape.leaves = 3;
  shape.hosts_per_leaf = 4;
  for (uint32_t hosts : {8u, 13u}) {
    Scenario sc;
    shape.hosts = hosts;
    EXPECT_THROW(add_leaf_spine(sc, shape, {}, {}), std::invalid_argument) << hosts;
  }
  Scenario sc;
  shape.hosts = 0;
  shape.spines = 0;
  EXPECT_THROW(add_leaf_spine(sc, shape, {}, {}), std::invalid_argument);
}

TEST(LeafSpine, UplinkRateGivesTheOversubscription) {
  // 4 x 100 G into a leaf over 2 uplinks: 200 G each at 1:1, 100 G at 2:1.
  EXPECT_EQ(leaf_spine_uplink_rate(4, 100 * fabric::kGbps, 2, 1), 200 * fabric::kGbps);
  EXPECT_EQ(leaf_spine_uplink_rate(4, 100 * fabric::kGbps, 2, 2), 100 * fabric::kGbps);
  EXPECT_EQ(leaf_spine_uplink_rate(3, 10, 2, 1), 15u);
}

}  // namespace
}  // namespace droce::sim
