// Hosts that resolve their peers' MACs (run.resolve_macs): no static MACs
// anywhere, the endpoints announce themselves and answer ARP, and the
// switches flood group-addressed frames over host links and a spanning
// tree of the fabric. Every flow completes byte-exact, every host resolved
// the peers it talks to, and each flooded frame reached each host once.
#include <gtest/gtest.h>

#include <string>

#include "droce/endpoint/endpoint.h"
#include "droce/sim/simulator.h"

namespace droce::sim {
namespace {

Scenario example(const char* name) {
  Scenario sc = load_scenario(std::string(DROCE_EXAMPLES_DIR) + "/" + name);
  sc.run.resolve_macs = true;
  return sc;
}

// 2 leaves x 2 spines, 2 hosts per leaf: a loop (leaf0-spine0-leaf1-spine1)
// that floods must not go round. Every host writes to the host on the
// other leaf and to its leaf neighbour.
Scenario leaf_spine() {
  std::string text =
      "[run]\nduration = \"20ms\"\ncsv_interval = 0\nresolve_macs = true\n"
      "[topology]\nkind = \"leaf_spine\"\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\n"
      "host_rate = \"100G\"\nspine_rate = \"100G\"\ndelay = \"1us\"\n"
      "[flow]\nbytes = \"256KiB\"\nmessage = \"64KiB\"\n";
  const char* pairs[][2] = {{"h0", "h2"}, {"h2", "h1"}, {"h1", "h3"},
                            {"h3", "h0"}, {"h0", "h1"}, {"h3", "h2"}};
  for (const auto& p : pairs)
    text += std::string("[[flows]]\nsrc = \"") + p[0] + "\"\ndst = \"" + p[1] + "\"\n";
  return parse_scenario(text, "leaf-spine");
}

uint64_t arp_in(const endpoint::EndpointCounters& c) {
  return c.arp_requests_in + c.arp_replies_in + c.arp_other;
}

void expect_resolved_without_storm(Simulator& s) {
  const Summary sum = s.summary();
  ASSERT_TRUE(sum.all_done);
  for (size_t f = 0; f < s.num_flows(); ++f) {
    EXPECT_TRUE(s.flow(f).done()) << s.flow_spec(f).name;
    EXPECT_EQ(s.flow(f).failed, 0u) << s.flow_spec(f).name;
    EXPECT_TRUE(s.verify(f)) << s.flow_spec(f).name;
  }
  EXPECT_EQ(sum.switch_drops, 0u);
  // No static MACs: each flow's two QPs found their peer by ARP.
  uint64_t resolved = 0, arp_out = 0;
  for (size_t h = 0; h < s.num_hosts(); ++h) {
    const auto& c = s.host_endpoint(h).counters();
    resolved += c.neigh_resolved;
    arp_out += c.arp_requests_out + c.arp_replies_out;
    EXPECT_EQ(c.neigh_failed, 0u) << "h" << h;
  }
  EXPECT_GT(resolved, 0u);
  // ... and hold the right one: the MAC of the host at the other end.
  for (size_t f = 0; f < s.num_flows(); ++f) {
    const wire::PathSpec& src = s.source_qp(f).attr().path;
    const wire::PathSpec& dst = s.sink_qp(f).attr().path;
    EXPECT_FALSE(wire::is_zero_mac(src.dst_mac)) << s.flow_spec(f).name;
    EXPECT_EQ(src.dst_mac, dst.src_mac) << s.flow_spec(f).name;
    EXPECT_EQ(dst.dst_mac, src.src_mac) << s.flow_spec(f).name;
  }
  // Every ARP frame sent (announcements, requests, replies) reaches each
  // other host at most once: a flood that looped would deliver it again.
  for (size_t h = 0; h < s.num_hosts(); ++h) {
    const auto& c = s.host_endpoint(h).counters();
    EXPECT_LE(arp_in(c), arp_out - (c.arp_requests_out + c.arp_replies_out)) << "h" << h;
  }
  // Each group frame (announcement, request) reaches every switch of the
  // tree and is flooded there once; only ARP replies to a MAC not learned
  // yet could add to that.
  uint64_t group_out = 0, replies = 0;
  for (size_t h = 0; h < s.num_hosts(); ++h) {
    const auto& c = s.host_endpoint(h).counters();
    group_out += c.arp_requests_out + c.nd_solicits_out + c.nd_adverts_out;
    replies += c.arp_replies_out;
  }
  for (size_t sw = 0; sw < s.num_switches(); ++sw) {
    const fabric::Switch& x = s.switch_at(sw);
    uint64_t flooded = 0;
    for (uint16_t p = 0; p < x.num_ports(); ++p) flooded += x.counters(p).flooded;
    EXPECT_GE(flooded, group_out) << "switch " << sw;
    EXPECT_LE(flooded, group_out + replies) << "switch " << sw;
    EXPECT_EQ(x.mac_table_entries(), s.num_hosts()) << "switch " << sw;
  }
}

TEST(SimResolve, IncastTwoToOneResolvesPeers) {
  Simulator s(example("incast-2to1.toml"));
  s.run();
  expect_resolved_without_storm(s);
}

TEST(SimResolve, LeafSpineFloodsOverASpanningTree) {
  Simulator s(leaf_spine());
  s.run();
  expect_resolved_without_storm(s);
  // Flood ports: every host port, and both ends of the S - 1 links of a
  // spanning tree of the S switches; the other leaf-spine links none.
  size_t host_ports = 0, tree_ends = 0, blocked = 0;
  for (size_t sw = 0; sw < s.num_switches(); ++sw) {
    const fabric::Switch& x = s.switch_at(sw);
    for (uint16_t p = 0; p < x.num_ports(); ++p) {
      const bool host = s.port_peer(sw, p)[0] == 'h';
      const bool flood = x.config().ports[p].flood;
      EXPECT_TRUE(flood || !host) << "switch " << sw << " port " << p;
      host_ports += host;
      tree_ends += flood && !host;
      blocked += !flood;
    }
  }
  EXPECT_EQ(host_ports, s.num_hosts());
  EXPECT_EQ(tree_ends, 2 * (s.num_switches() - 1));
  EXPECT_EQ(blocked, 2u);  // 4 leaf-spine links, 3 in the tree
}

TEST(SimResolve, OffByDefault) {
  EXPECT_FALSE(parse_scenario("[run]\n").run.resolve_macs);
  EXPECT_TRUE(parse_scenario("[run]\nresolve_macs = true\n").run.resolve_macs);
}

TEST(SimResolve, RefusesANonBooleanValue) {
  try {
    parse_scenario("[run]\nresolve_macs = 1\n", "bad");
    FAIL() << "accepted";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("run.resolve_macs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace droce::sim
