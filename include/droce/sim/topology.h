// Generated topologies: the nodes and links of a leaf-spine fabric added to
// a Scenario, the one generator behind `[topology] kind = "leaf_spine"`
// (docs/SIM.md) and droce-pktgen's `--topology leaf_spine`.
#pragma once

#include <cstdint>

#include "droce/sim/scenario.h"

namespace droce::sim {

struct LeafSpineShape {
  uint32_t leaves = 2, spines = 2, hosts_per_leaf = 4;
  // Hosts in all; 0 fills every leaf. Fewer leave the last leaf part
  // full (droce-pktgen's rank count need not be a multiple of a leaf).
  uint32_t hosts = 0;
  uint64_t host_rate_bps = 100 * fabric::kGbps;
  uint64_t spine_rate_bps = 100 * fabric::kGbps;  // every leaf-spine link
};

// The leaf-spine link rate at which a full leaf's host bandwidth is
// `oversubscription` times its uplink bandwidth (rounded to a bit/s).
uint64_t leaf_spine_uplink_rate(uint32_t hosts_per_leaf, uint64_t host_rate_bps, uint32_t spines,
                                double oversubscription);

// Adds hosts h0.. (leaf l has h(l*hosts_per_leaf)..), switches leaf0..
// then spine0.., and the links: for each leaf its hosts' links, then one to
// every spine. So a leaf's ports are its hosts, then the spines; a spine's
// port l faces leaf l. Switches start from `switch_defaults`, links from
// `link_defaults` with the shape's rates; `line` goes into every node and
// link for messages. Throws std::invalid_argument for a shape that leaves
// a leaf without hosts or has more hosts than its leaves hold.
void add_leaf_spine(Scenario& sc, const LeafSpineShape& shape, const SwitchSpec& switch_defaults,
                    const LinkSpec& link_defaults, int line = 0);

}  // namespace droce::sim
