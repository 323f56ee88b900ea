// Routes computed from the topology: ECMP groups over every shortest path,
// one port without ECMP, no transit through hosts, and links that are down
// left out (a host cut off gets no route).
#include "droce/fabric/shortest_paths.h"

#include <gtest/gtest.h>

namespace droce::fabric {
namespace {

using Ports = std::vector<uint16_t>;

// A 2x2 leaf-spine, two hosts per leaf, cables in this order:
//   0: h0-leaf0  1: h1-leaf0  2: leaf0-spine0  3: leaf0-spine1
//   4: h2-leaf1  5: h3-leaf1  6: leaf1-spine0  7: leaf1-spine1
// Nodes: h0..h3 = 0..3, leaf0 4, leaf1 5, spine0 6, spine1 7. Leaf ports:
// hosts 0, 1, spines 2, 3; spine ports: leaf0 0, leaf1 1.
struct LeafSpine {
  FabricGraph g{4, 4};
  std::vector<wire::IpAddress> ips;
  LeafSpine() {
    for (uint32_t h = 0; h < 4; ++h) ips.push_back(wire::IpAddress::v4(0x0A000001u + h));
    uint32_t link = 0;
    auto cable = [&](uint32_t a, uint16_t pa, uint32_t b, uint16_t pb) {
      g.add_edge(a, pa, b, link);
      g.add_edge(b, pb, a, link);
      ++link;
    };
    for (uint32_t leaf = 0; leaf < 2; ++leaf) {
      cable(2 * leaf, 0, 4 + leaf, 0);
      cable(2 * leaf + 1, 0, 4 + leaf, 1);
      cable(4 + leaf, 2, 6, static_cast<uint16_t>(leaf));
      cable(4 + leaf, 3, 7, static_cast<uint16_t>(leaf));
    }
  }
  static Ports ports(const RouteTable& t, const wire::IpAddress& ip) {
    const Ports* p = t.host_ports(ip);
    return p ? *p : Ports{};
  }
};

TEST(ShortestPaths, LeafSpineRoutesLocalHostsDownAndRemoteOnesOverEverySpine) {
  LeafSpine f;
  const auto t = shortest_path_routes(f.g, f.ips, /*ecmp=*/true);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(LeafSpine::ports(t[0], f.ips[0]), Ports{0});
  EXPECT_EQ(LeafSpine::ports(t[0], f.ips[1]), Ports{1});
  EXPECT_EQ(LeafSpine::ports(t[0], f.ips[2]), (Ports{2, 3}));  // ECMP over both spines
  EXPECT_EQ(LeafSpine::ports(t[1], f.ips[1]), (Ports{2, 3}));
  EXPECT_EQ(LeafSpine::ports(t[1], f.ips[3]), Ports{1});
  for (size_t spine : {2u, 3u}) {
    EXPECT_EQ(LeafSpine::ports(t[spine], f.ips[0]), Ports{0});
    EXPECT_EQ(LeafSpine::ports(t[spine], f.ips[3]), Ports{1});
  }
}

TEST(ShortestPaths, WithoutEcmpTheFirstShortestPathAlone) {
  LeafSpine f;
  const auto t = shortest_path_routes(f.g, f.ips, /*ecmp=*/false);
  EXPECT_EQ(LeafSpine::ports(t[0], f.ips[2]), Ports{2});
  EXPECT_EQ(LeafSpine::ports(t[1], f.ips[0]), Ports{2});
}

TEST(ShortestPaths, DownLinksAreLeftOut) {
  LeafSpine f;
  std::vector<bool> up(8, true);
  up[3] = false;  // leaf0-spine1
  auto t = shortest_path_routes(f.g, f.ips, true, up);
  EXPECT_EQ(LeafSpine::ports(t[0], f.ips[2]), Ports{2});
  EXPECT_EQ(LeafSpine::ports(t[1], f.ips[0]), Ports{2});  // leaf1 avoids spine1 too
  // spine1 reaches leaf0's hosts the long way: leaf1, spine0, leaf0.
  EXPECT_EQ(LeafSpine::ports(t[3], f.ips[0]), Ports{1});
  up[0] = false;  // h0's own cable: nobody can reach h0
  t = shortest_path_routes(f.g, f.ips, true, up);
  for (const RouteTable& rt : t) EXPECT_EQ(rt.host_ports(f.ips[0]), nullptr);
}

TEST(ShortestPaths, NoPathThroughAHost) {
  // s0 - h0 - s1 would be a path if hosts forwarded; h1 hangs off s1.
  FabricGraph g(2, 2);
  g.add_edge(0, 0, 2, 0);
  g.add_edge(2, 0, 0, 0);
  g.add_edge(0, 0, 3, 1);
  g.add_edge(3, 0, 0, 1);
  g.add_edge(1, 0, 3, 2);
  g.add_edge(3, 1, 1, 2);
  const std::vector<wire::IpAddress> ips = {wire::IpAddress::v4(0x0A000001u),
                                            wire::IpAddress::v4(0x0A000002u)};
  const auto t = shortest_path_routes(g, ips, true);
  EXPECT_EQ(t[0].host_ports(ips[1]), nullptr);
  EXPECT_EQ(LeafSpine::ports(t[1], ips[1]), Ports{1});
  EXPECT_EQ(LeafSpine::ports(t[0], ips[0]), Ports{0});
}

TEST(ShortestPaths, RefusesAnIpListOfTheWrongSize) {
  LeafSpine f;
  f.ips.pop_back();
  EXPECT_THROW(shortest_path_routes(f.g, f.ips, true), std::invalid_argument);
}

}  // namespace
}  // namespace droce::fabric
