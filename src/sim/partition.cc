// Splitting a scenario's topology into partitions (partition.h): by leaf,
// the lookahead, and what a partitioned run refuses.
#include "droce/sim/partition.h"

#include <algorithm>
#include <string>

namespace droce::sim {

namespace {

// Features whose effects are not frames on links, and so would need more
// than the frame exchange to stay identical across partitions: connections
// made during the run, and a ring step started by another host's
// completion (no delay to look ahead by). Links that go down are carried:
// their times are in the scenario, so every partition knows every link's
// state (event_loop.cc, partitioned_run.cc).
void refuse_unsupported(const Scenario& sc) {
  if (const auto& c = sc.collective) {
    if (c->window)
      throw ScenarioError(sc.file +
                          ": collective.window: connections made during the run are not "
                          "supported in a partitioned run yet");
    if (c->pattern == CollectiveSpec::Pattern::kRing &&
        c->trigger != CollectiveSpec::Trigger::kReceiver)
      throw ScenarioError(sc.file +
                          ": collective.trigger: a ring split over processes needs trigger = "
                          "\"receiver\" (a rank learns of its predecessor's step only from "
                          "the data's arrival)");
  }
}

}  // namespace

PartitionPlan plan_partitions(const Scenario& sc, uint32_t count) {
  if (count == 0) throw ScenarioError("partitions: at least one");
  PartitionPlan plan;
  plan.count = count;
  const size_t H = sc.hosts.size(), S = sc.switches.size();
  plan.host.assign(H, 0);
  plan.sw.assign(S, 0);
  if (count == 1) return plan;
  refuse_unsupported(sc);
  // Each host's switch (the far end of its link); hosts cabled to hosts
  // have none.
  std::vector<int> host_switch(H, -1);
  std::vector<bool> leaf(S, false);
  for (const LinkSpec& l : sc.links) {
    const int ha = sc.host_index(l.a), hb = sc.host_index(l.b);
    const int sa = sc.switch_index(l.a), sb = sc.switch_index(l.b);
    if (ha >= 0 && sb >= 0) host_switch[static_cast<size_t>(ha)] = sb;
    if (hb >= 0 && sa >= 0) host_switch[static_cast<size_t>(hb)] = sa;
  }
  for (int s : host_switch)
    if (s >= 0) leaf[static_cast<size_t>(s)] = true;
  const size_t leaves = static_cast<size_t>(std::count(leaf.begin(), leaf.end(), true));
  size_t j = 0, k = 0;
  for (size_t s = 0; s < S; ++s) {
    if (leaf[s]) {
      plan.sw[s] = static_cast<uint32_t>(j++ * count / leaves);
    } else {
      plan.sw[s] = static_cast<uint32_t>(k++ % count);
    }
  }
  for (size_t h = 0; h < H; ++h)
    plan.host[h] = host_switch[h] >= 0 ? plan.sw[static_cast<size_t>(host_switch[h])]
                                       : static_cast<uint32_t>(h * count / H);
  auto part_of = [&](const std::string& name) {
    const int h = sc.host_index(name);
    return h >= 0 ? plan.host[static_cast<size_t>(h)]
                  : plan.sw[static_cast<size_t>(sc.switch_index(name))];
  };
  for (const LinkSpec& l : sc.links) {
    if (part_of(l.a) == part_of(l.b)) continue;
    // The earliest a frame can arrive after it left: propagation plus the
    // fixed extra delay (jitter and reordering only add).
    const uint64_t d = l.link.propagation_ns + l.link.impairments.extra_delay_ns;
    if (d == 0)
      throw ScenarioError(sc.file + ":" + std::to_string(l.line) + ": links " + l.a + "-" + l.b +
                          ": a link between partitions needs a delay above 0 (the lookahead)");
    plan.lookahead_ns = std::min(plan.lookahead_ns, d);
  }
  return plan;
}

}  // namespace droce::sim
