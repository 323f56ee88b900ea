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

int Scenario::host_index(std::string_view name) const {
  for (size_t i = 0; i < hosts.size(); ++i)
    if (hosts[i].name == name) return static_cast<int>(i);
  return -1;
}

int Scenario::switch_index(std::string_view name) const {
  for (size_t i = 0; i < switches.size(); ++i)
    if (switches[i].name == name) return static_cast<int>(i);
  return -1;
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
