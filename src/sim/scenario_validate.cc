// Checks of the whole scenario, once every section is read: every host on
// exactly one link and no host-to-host link; without ECMP no loop (with
// single-path routing a loop leaves links unused or, worse, traffic chasing
// its tail when routes disagree); every flow's CC algorithm and
// parameters, so the message points at the file rather than a run failing.
#include <map>
#include <numeric>
#include <sstream>

#include "droce/cc/registry.h"
#include "scenario_reader.h"

namespace droce::sim {

namespace {

void check_host_links(Scenario& sc) {
  std::map<std::string, int> host_links;
  for (const auto& l : sc.links) {
    for (const auto& n : {l.a, l.b})
      if (sc.host_index(n) >= 0) ++host_links[n];
    if (sc.host_index(l.a) >= 0 && sc.host_index(l.b) >= 0)
      throw ScenarioError(sc.file + ":" + std::to_string(l.line) +
                          ":1: links: host-to-host links are not supported (" + l.a + " - " +
                          l.b + "); put a switch between them");
  }
  for (auto& h : sc.hosts) {
    for (const auto& l : sc.links)
      if (l.a == h.name || l.b == h.name) h.rate_bps = l.rate_bps;
    if (host_links[h.name] != 1)
      throw ScenarioError(sc.file + ":" + std::to_string(h.line) + ":1: hosts." + h.name +
                          ": a host needs exactly one link (has " +
                          std::to_string(host_links[h.name]) + ")");
  }
}

// Union-find over the nodes: a link between two nodes already connected
// closes a loop.
struct Components {
  std::vector<int> parent;
  int find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
};

void check_loops(const ScenarioParse& p) {
  const Scenario& sc = p.sc;
  Components g;
  std::map<std::string, int> id;
  for (const auto& n : p.names) id.emplace(n, static_cast<int>(id.size()));
  g.parent.resize(id.size());
  std::iota(g.parent.begin(), g.parent.end(), 0);
  for (size_t i = 0; i < sc.links.size(); ++i) {
    const auto& l = sc.links[i];
    const int a = g.find(id[l.a]), b = g.find(id[l.b]);
    if (a == b && !sc.ecmp) {
      const toml::table* t = i < p.link_tables.size() ? p.link_tables[i] : nullptr;
      std::ostringstream m;
      m << sc.file << ':' << (t ? t->source().begin.line : static_cast<uint32_t>(l.line))
        << ':' << (t ? t->source().begin.column : 1u) << ": links[" << i << "]: link " << l.a
        << " - " << l.b << " closes a loop, which needs ECMP (set run.ecmp = true)";
      throw ScenarioError(m.str());
    }
    g.parent[a] = b;
  }
}

void check_flow_cc(const Scenario& sc) {
  for (const auto& f : sc.flows) {
    try {
      const uint64_t rate = sc.hosts[sc.host_index(f.src)].rate_bps / 8;
      (void)cc::make_algorithm(f.cc, f.cc_params, rate);
    } catch (const droce::ConfigError& e) {
      throw ScenarioError(sc.file + ":" + std::to_string(f.line) + ":1: flow " + f.name +
                          ": cc: " + e.what());
    }
  }
}

}  // namespace

void validate_scenario(ScenarioParse& p) {
  check_host_links(p.sc);
  check_loops(p);
  check_flow_cc(p.sc);
}

}  // namespace droce::sim
