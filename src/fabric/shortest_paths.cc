#include "droce/fabric/shortest_paths.h"

#include <stdexcept>

namespace droce::fabric {

std::vector<RouteTable> shortest_path_routes(const FabricGraph& g,
                                             const std::vector<wire::IpAddress>& host_ips,
                                             bool ecmp, const std::vector<bool>& link_up) {
  const size_t H = g.hosts(), S = g.switches();
  if (host_ips.size() != H) throw std::invalid_argument("shortest_path_routes: one IP per host");
  const auto up = [&](const FabricGraph::Edge& e) { return link_up.empty() || link_up[e.link]; };
  std::vector<RouteTable> tables(S);
  std::vector<uint32_t> dist(H + S);
  std::vector<uint32_t> queue;
  queue.reserve(H + S);
  std::vector<uint16_t> ports;
  for (size_t h = 0; h < H; ++h) {
    // Hop counts to host h over the links that are up.
    std::fill(dist.begin(), dist.end(), UINT32_MAX);
    dist[h] = 0;
    queue.assign(1, static_cast<uint32_t>(h));
    for (size_t head = 0; head < queue.size(); ++head) {
      const uint32_t n = queue[head];
      if (n < H && n != h) continue;  // hosts do not forward
      for (const FabricGraph::Edge& e : g.edges(n)) {
        if (up(e) && dist[e.node] == UINT32_MAX) {
          dist[e.node] = dist[n] + 1;
          queue.push_back(e.node);
        }
      }
    }
    for (size_t s = 0; s < S; ++s) {
      const uint32_t d = dist[H + s];
      if (d == UINT32_MAX) continue;
      ports.clear();
      for (const FabricGraph::Edge& e : g.edges(static_cast<uint32_t>(H + s))) {
        if (!up(e) || dist[e.node] + 1 != d || (e.node < H && e.node != h)) continue;
        ports.push_back(e.port);
        if (!ecmp) break;  // without ECMP the first shortest path alone
      }
      if (!ports.empty()) tables[s].add(host_ips[h], host_ips[h].v6 ? 128 : 32, ports);
    }
  }
  return tables;
}

}  // namespace droce::fabric
