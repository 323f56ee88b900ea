// Scenario files: TOML (toml++) -> Scenario. The sections are read in the
// order their contents build on (scenario_reader.h): run options, the
// defaults, a generated topology, explicit nodes, links, flows and
// outages; then the checks of the whole. Every message names the file,
// the line and column, and the key's path.
#include "droce/sim/scenario.h"

#include <fstream>
#include <sstream>

#include "scenario_reader.h"

namespace droce::sim {

std::string_view to_string(Opcode op) {
  switch (op) {
    case Opcode::kWrite: return "write";
    case Opcode::kSend: return "send";
    case Opcode::kRead: return "read";
  }
  return "?";
}

std::string_view to_string(CollectiveSpec::Pattern p) {
  return p == CollectiveSpec::Pattern::kRing ? "ring" : "all_to_all";
}

namespace {

// Through the index while it covers every node (names are unique), else a
// search.
template <class Node>
int node_index(const std::vector<Node>& nodes, const Scenario::NameIndex& index,
               std::string_view name) {
  if (index.size() == nodes.size()) {
    const auto it = index.find(name);
    return it == index.end() ? -1 : it->second;
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].name == name) return static_cast<int>(i);
  return -1;
}

template <class Node>
void index_nodes(const std::vector<Node>& nodes, Scenario::NameIndex& index) {
  index.clear();
  index.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) index.emplace(nodes[i].name, static_cast<int>(i));
}

}  // namespace

int Scenario::host_index(std::string_view name) const {
  return node_index(hosts, host_names, name);
}

int Scenario::switch_index(std::string_view name) const {
  return node_index(switches, switch_names, name);
}

void Scenario::index_names() {
  index_nodes(hosts, host_names);
  index_nodes(switches, switch_names);
}

namespace {

toml::table parse_toml(std::string_view text, const std::string& name) {
  try {
    return toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    std::ostringstream m;
    m << name << ':' << e.source().begin.line << ':' << e.source().begin.column
      << ": syntax: " << e.description();
    throw ScenarioError(m.str());
  }
}

}  // namespace

Scenario parse_scenario(std::string_view text, const std::string& name) {
  const toml::table root = parse_toml(text, name);
  Scenario sc;
  sc.file = name;
  ScenarioParse p{Reader(name), root, sc, {}, {}, {}, {}, {}, {}};
  p.r.check_keys(root, "", {"run", "topology", "switch", "link", "flow", "hosts", "switches",
                            "links", "flows", "outages", "collective"});
  read_run(p);
  read_defaults(p);
  read_topology(p);
  for (const HostSpec& h : sc.hosts) p.names.insert(h.name);
  for (const SwitchSpec& s : sc.switches) p.names.insert(s.name);
  read_hosts(p);
  read_switches(p);
  sc.index_names();
  read_links(p);
  read_flows(p);
  read_outages(p);
  read_collective(p);
  validate_scenario(p);
  return sc;
}

Scenario load_scenario(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ScenarioError(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return parse_scenario(s.str(), path);
}

}  // namespace droce::sim
