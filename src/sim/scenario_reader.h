// Reading a scenario file, one reader per section (docs/SIM.md "Scenario
// file reference"), shared by the files that make up parse_scenario:
//
//   scenario.cc           parse_scenario: the sections in order, then checks
//   scenario_sections.cc  [run], the defaults ([switch], [link], [flow]),
//                         [[hosts]], [[switches]], [[links]], [[flows]],
//                         [[outages]], [collective]
//   scenario_params.cc    the keys a section shares with its defaults: a
//                         switch's, a link's, a flow's; down intervals
//   scenario_topology.cc  [topology]: incast and leaf-spine (topology.h)
//   scenario_validate.cc  whole-scenario checks: links per host, loops
//                         without ECMP, every flow's CC
//   units.cc              "100G", "1us", "4KiB"
#pragma once

#include <toml++/toml.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "droce/sim/scenario.h"
#include "droce/sim/toml_reader.h"

namespace droce::sim {

// What the section readers share while one file is read.
struct ScenarioParse {
  Reader r;
  const toml::table& root;
  Scenario& sc;
  // Defaults every switch, host, link and flow starts from.
  SwitchSpec switch_default;
  HostSpec host_default;
  LinkSpec link_default;
  FlowSpec flow_default;
  std::set<std::string> names;  // hosts and switches so far: names are unique
  // Per scenario link, the [[links]] table it came from (nullptr for a
  // generated one), for messages that point at it.
  std::vector<const toml::table*> link_tables;
};

// Keys of a link's and a flow's parameters, in [link]/[flow] and in each
// [[links]]/[[flows]] entry.
extern const std::vector<std::string_view> kLinkParamKeys;
extern const std::vector<std::string_view> kFlowParamKeys;
std::vector<std::string_view> with(const std::vector<std::string_view>& a,
                                   std::initializer_list<std::string_view> b);

void read_link_params(const Reader& r, const toml::table& t, const std::string& path, LinkSpec& l);
void read_down_intervals(const Reader& r, const toml::table& t, const std::string& path,
                         LinkSpec& l);
void read_flow_params(const Reader& r, const toml::table& t, const std::string& path, FlowSpec& f);

void read_run(ScenarioParse& p);
void read_defaults(ScenarioParse& p);
void read_topology(ScenarioParse& p);
void read_hosts(ScenarioParse& p);
void read_switches(ScenarioParse& p);
void read_links(ScenarioParse& p);
void read_flows(ScenarioParse& p);
void read_outages(ScenarioParse& p);
void read_collective(ScenarioParse& p);
void validate_scenario(ScenarioParse& p);

}  // namespace droce::sim
