// Routes from the topology: every switch gets a /32 (or /128) route to every
// host over each of its ports that lies on a shortest path to it (hop count,
// breadth-first from the host), an ECMP group where there are several. This
// is what a fabric's routing protocol converges to (BGP in a Clos with
// multipath, OSPF with ECMP), computed at once over the links that are up.
#pragma once

#include <cstdint>
#include <vector>

#include "droce/fabric/routing.h"
#include "droce/wire/packet.h"

namespace droce::fabric {

// The fabric as a graph: nodes 0..hosts-1 are the hosts, then the switches
// (node hosts + s is switch s). Each edge is one direction of a cable, as
// seen from its node: the neighbour, the node's port it leaves by (0 for a
// host) and the cable's index.
class FabricGraph {
 public:
  struct Edge {
    uint32_t node;
    uint16_t port;
    uint32_t link;
  };
  FabricGraph(size_t hosts, size_t switches) : hosts_(hosts), adj_(hosts + switches) {}
  // Cable `link` from `node` by its `port` to `peer`; give each cable once
  // per end.
  void add_edge(uint32_t node, uint16_t port, uint32_t peer, uint32_t link) {
    adj_.at(node).push_back({peer, port, link});
  }
  size_t hosts() const { return hosts_; }
  size_t switches() const { return adj_.size() - hosts_; }
  const std::vector<Edge>& edges(uint32_t node) const { return adj_[node]; }

 private:
  size_t hosts_;
  std::vector<std::vector<Edge>> adj_;
};

// One route table per switch, routing host h's address `host_ips[h]` over
// the ports one hop closer to h, in the order the edges were added; with
// `ecmp` false only the first of them. Hosts do not forward: a path never
// crosses another host. `link_up[l]` false leaves cable l out (empty: all
// up); a host no switch can reach gets no route there, so frames for it
// are no_route drops.
std::vector<RouteTable> shortest_path_routes(const FabricGraph& graph,
                                             const std::vector<wire::IpAddress>& host_ips,
                                             bool ecmp,
                                             const std::vector<bool>& link_up = {});

}  // namespace droce::fabric
