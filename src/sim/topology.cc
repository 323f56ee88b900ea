#include "droce/sim/topology.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace droce::sim {

namespace {

// "leaf3": a string prefix, so GCC 12's -Wrestrict false positive on
// const char* + std::string&& (release builds) does not fire.
std::string numbered(const std::string& prefix, uint64_t i) { return prefix + std::to_string(i); }

}  // namespace

uint64_t leaf_spine_uplink_rate(uint32_t hosts_per_leaf, uint64_t host_rate_bps, uint32_t spines,
                                double oversubscription) {
  return static_cast<uint64_t>(std::llround(static_cast<double>(hosts_per_leaf * host_rate_bps) /
                                            (oversubscription * static_cast<double>(spines))));
}

void add_leaf_spine(Scenario& sc, const LeafSpineShape& shape, const SwitchSpec& switch_defaults,
                    const LinkSpec& link_defaults, int line) {
  const uint64_t capacity = uint64_t{shape.leaves} * shape.hosts_per_leaf;
  const uint64_t hosts = shape.hosts ? shape.hosts : capacity;
  if (shape.leaves == 0 || shape.spines == 0 || shape.hosts_per_leaf == 0)
    throw std::invalid_argument("leaf-spine: leaves, spines and hosts_per_leaf must be at least 1");
  if (hosts > capacity || hosts <= capacity - shape.hosts_per_leaf)
    throw std::invalid_argument("leaf-spine: " + std::to_string(hosts) + " hosts on " +
                                std::to_string(shape.leaves) + " leaves of " +
                                std::to_string(shape.hosts_per_leaf) +
                                " leave a leaf empty or do not fit");
  auto add_link = [&](std::string a, std::string b, uint64_t rate) {
    LinkSpec l = link_defaults;
    l.a = std::move(a);
    l.b = std::move(b);
    l.rate_bps = rate;
    l.line = line;
    sc.links.push_back(std::move(l));
  };
  for (uint32_t l = 0; l < shape.leaves; ++l) {
    SwitchSpec s = switch_defaults;
    s.name = numbered("leaf", l);
    sc.switches.push_back(std::move(s));
  }
  for (uint32_t p = 0; p < shape.spines; ++p) {
    SwitchSpec s = switch_defaults;
    s.name = numbered("spine", p);
    sc.switches.push_back(std::move(s));
  }
  for (uint32_t l = 0; l < shape.leaves; ++l) {
    const std::string leaf = numbered("leaf", l);
    const uint64_t first = uint64_t{l} * shape.hosts_per_leaf;
    for (uint64_t h = first; h < std::min(hosts, first + shape.hosts_per_leaf); ++h) {
      const std::string name = numbered("h", h);
      sc.hosts.push_back(HostSpec{name, shape.host_rate_bps, line});
      add_link(name, leaf, shape.host_rate_bps);
    }
    for (uint32_t p = 0; p < shape.spines; ++p)
      add_link(leaf, numbered("spine", p), shape.spine_rate_bps);
  }
}

}  // namespace droce::sim
