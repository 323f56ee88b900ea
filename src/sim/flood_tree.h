// The links that carry floods (broadcast, multicast, unknown unicast) when
// hosts resolve their peers' MACs (run.resolve_macs): every host link and
// the links of a spanning tree of the switches, so a flood reaches every
// host once and never circulates in a fabric with loops (leaf-spine).
#pragma once

#include <vector>

#include "droce/sim/scenario.h"

namespace droce::sim {

// Per scenario link, whether its switch ports are flood ports. The tree is
// a breadth-first search from the first switch (then from each switch not
// yet reached, in scenario order), taking links in file order; of parallel
// links between two switches only the first can be in it.
std::vector<bool> flood_links(const Scenario& sc);

}  // namespace droce::sim
