#include "flood_tree.h"

#include <cstdint>
#include <deque>

namespace droce::sim {

std::vector<bool> flood_links(const Scenario& sc) {
  const size_t L = sc.links.size(), S = sc.switches.size();
  std::vector<bool> flood(L, false);
  // Switch-to-switch links per switch: (link, other switch).
  std::vector<std::vector<std::pair<size_t, size_t>>> adj(S);
  for (size_t l = 0; l < L; ++l) {
    const int a = sc.switch_index(sc.links[l].a), b = sc.switch_index(sc.links[l].b);
    if (a < 0 || b < 0) {
      flood[l] = true;  // a host link
      continue;
    }
    if (a == b) continue;  // a loopback cable never carries a flood
    adj[static_cast<size_t>(a)].push_back({l, static_cast<size_t>(b)});
    adj[static_cast<size_t>(b)].push_back({l, static_cast<size_t>(a)});
  }
  std::vector<bool> seen(S, false);
  std::deque<size_t> todo;
  for (size_t root = 0; root < S; ++root) {
    if (seen[root]) continue;
    seen[root] = true;
    todo.push_back(root);
    while (!todo.empty()) {
      const size_t s = todo.front();
      todo.pop_front();
      for (const auto& [l, peer] : adj[s]) {
        if (seen[peer]) continue;
        seen[peer] = true;
        flood[l] = true;
        todo.push_back(peer);
      }
    }
  }
  return flood;
}

}  // namespace droce::sim
