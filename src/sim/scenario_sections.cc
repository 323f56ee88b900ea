// One reader per section of a scenario file: [run], the defaults, and the
// explicit nodes, links, flows and outages (any topology kind may add
// more). Each checks its keys and fails with the file, line and key path.
#include "scenario_reader.h"

namespace droce::sim {

void read_run(ScenarioParse& p) {
  const Reader& r = p.r;
  const toml::table* t = r.table(p.root, "run", "");
  if (!t) return;
  RunSpec& run = p.sc.run;
  r.check_keys(*t, "run", {"duration", "seed", "csv_interval", "stop_when_done", "ecmp",
                           "reconverge", "resolve_macs"});
  r.time(*t, "duration", "run", run.duration_ns);
  r.integer(*t, "seed", "run", run.seed, 0, UINT64_MAX >> 1);
  r.time(*t, "csv_interval", "run", run.csv_interval_ns);
  r.boolean(*t, "stop_when_done", "run", run.stop_when_done);
  r.boolean(*t, "ecmp", "run", p.sc.ecmp);
  r.boolean(*t, "resolve_macs", "run", run.resolve_macs);
  if (uint64_t ns = 0; r.time(*t, "reconverge", "run", ns)) run.reconverge_ns = ns;
}

// [switch], [link], [flow]: what every switch, link and flow starts from.
void read_defaults(ScenarioParse& p) {
  const Reader& r = p.r;
  if (const toml::table* t = r.table(p.root, "switch", ""))
    read_switch_table(r, *t, "switch", p.switch_default, {"name"});
  if (const toml::table* t = r.table(p.root, "link", "")) {
    r.check_keys(*t, "link", kLinkParamKeys);
    read_link_params(r, *t, "link", p.link_default);
  }
  if (const toml::table* t = r.table(p.root, "flow", "")) {
    r.check_keys(*t, "flow", with(kFlowParamKeys, {"bytes", "start"}));
    read_flow_params(r, *t, "flow", p.flow_default);
    r.bytes(*t, "bytes", "flow", p.flow_default.bytes, 1);
    r.time(*t, "start", "flow", p.flow_default.start_ns);
  }
}

namespace {

// The entries of [[key]], or nullptr when there are none.
const toml::array* array_of_tables(const ScenarioParse& p, std::string_view key) {
  const toml::node* n = p.root.get(key);
  if (!n) return nullptr;
  if (!n->is_array_of_tables())
    p.r.fail(n->source(), std::string(key), "expected [[" + std::string(key) + "]] tables");
  return n->as_array();
}

// A new node's name: present, not empty, not taken.
std::string require_name(ScenarioParse& p, const toml::table& t, const std::string& path) {
  std::string n;
  if (!p.r.str(t, "name", path, n)) p.r.fail(t.source(), path + ".name", "missing");
  if (n.empty()) p.r.fail(t.get("name")->source(), path + ".name", "must not be empty");
  if (!p.names.insert(n).second)
    p.r.fail(t.get("name")->source(), path + ".name", "\"" + n + "\" is defined twice");
  return n;
}

// `key` of `t` names an existing host or switch.
void require_node(const ScenarioParse& p, const toml::table& t, const char* key,
                  const std::string& path, std::string& out) {
  if (!p.r.str(t, key, path, out)) p.r.fail(t.source(), path + "." + key, "missing");
  if (!p.names.count(out))
    p.r.fail(t.get(key)->source(), path + "." + key, "no host or switch named \"" + out + "\"");
}

std::string entry(const char* section, size_t i) {
  return std::string(section) + "[" + std::to_string(i) + "]";
}

}  // namespace

void read_hosts(ScenarioParse& p) {
  const toml::array* a = array_of_tables(p, "hosts");
  for (size_t i = 0; a && i < a->size(); ++i) {
    const toml::table& t = *a->get(i)->as_table();
    const std::string path = entry("hosts", i);
    p.r.check_keys(t, path, {"name"});
    HostSpec h = p.host_default;
    h.name = require_name(p, t, path);
    h.line = static_cast<int>(t.source().begin.line);
    p.sc.hosts.push_back(h);
  }
}

void read_switches(ScenarioParse& p) {
  const toml::array* a = array_of_tables(p, "switches");
  for (size_t i = 0; a && i < a->size(); ++i) {
    const toml::table& t = *a->get(i)->as_table();
    const std::string path = entry("switches", i);
    SwitchSpec s = p.switch_default;
    read_switch_table(p.r, t, path, s, {"name"});
    s.name = require_name(p, t, path);
    p.sc.switches.push_back(s);
  }
}

void read_links(ScenarioParse& p) {
  p.link_tables.assign(p.sc.links.size(), nullptr);  // the generated ones
  const toml::array* a = array_of_tables(p, "links");
  for (size_t i = 0; a && i < a->size(); ++i) {
    const toml::table& t = *a->get(i)->as_table();
    const std::string path = entry("links", i);
    p.r.check_keys(t, path, with(kLinkParamKeys, {"a", "b", "down"}));
    LinkSpec l = p.link_default;
    l.line = static_cast<int>(t.source().begin.line);
    require_node(p, t, "a", path, l.a);
    require_node(p, t, "b", path, l.b);
    if (l.a == l.b) p.r.fail(t.source(), path, "a link needs two different nodes");
    read_link_params(p.r, t, path, l);
    read_down_intervals(p.r, t, path, l);
    p.sc.links.push_back(std::move(l));
    p.link_tables.push_back(&t);
  }
}

void read_flows(ScenarioParse& p) {
  const Reader& r = p.r;
  const toml::array* a = array_of_tables(p, "flows");
  for (size_t i = 0; a && i < a->size(); ++i) {
    const toml::table& t = *a->get(i)->as_table();
    const std::string path = entry("flows", i);
    r.check_keys(t, path, with(kFlowParamKeys, {"name", "src", "dst", "bytes", "start"}));
    FlowSpec f = p.flow_default;
    f.line = static_cast<int>(t.source().begin.line);
    f.name = "flow" + std::to_string(p.sc.flows.size());
    r.str(t, "name", path, f.name);
    for (auto [key, out] : {std::pair{"src", &f.src}, std::pair{"dst", &f.dst}}) {
      if (!r.str(t, key, path, *out)) r.fail(t.source(), path + "." + key, "missing");
      if (p.sc.host_index(*out) < 0)
        r.fail(t.get(key)->source(), path + "." + key, "no host named \"" + *out + "\"");
    }
    if (f.src == f.dst) r.fail(t.get("dst")->source(), path + ".dst", "same host as src");
    r.bytes(t, "bytes", path, f.bytes, 1);
    r.time(t, "start", path, f.start_ns);
    read_flow_params(r, t, path, f);
    p.sc.flows.push_back(std::move(f));
  }
}

// [[outages]]: down intervals for a link named by its ends, so links of a
// generated topology can fail too.
void read_outages(ScenarioParse& p) {
  const Reader& r = p.r;
  const toml::array* a = array_of_tables(p, "outages");
  for (size_t i = 0; a && i < a->size(); ++i) {
    const toml::table& t = *a->get(i)->as_table();
    const std::string path = entry("outages", i);
    r.check_keys(t, path, {"a", "b", "down"});
    std::string ends[2];
    require_node(p, t, "a", path, ends[0]);
    require_node(p, t, "b", path, ends[1]);
    std::vector<size_t> found;
    for (size_t l = 0; l < p.sc.links.size(); ++l) {
      const LinkSpec& ls = p.sc.links[l];
      if ((ls.a == ends[0] && ls.b == ends[1]) || (ls.a == ends[1] && ls.b == ends[0]))
        found.push_back(l);
    }
    const std::string between = ends[0] + " and " + ends[1];
    if (found.empty()) r.fail(t.source(), path, "no link between " + between);
    if (found.size() > 1)
      r.fail(t.source(), path,
             std::to_string(found.size()) + " links between " + between +
                 ": give down on the [[links]] entry of the one to fail");
    LinkSpec& l = p.sc.links[found[0]];
    if (!l.down.empty())
      r.fail(t.source(), path,
             "the link between " + between + " already has down intervals (its "
             "[[links]] entry or an earlier [[outages]]); give them all in one place");
    if (!t.contains("down")) r.fail(t.source(), path + ".down", "missing");
    read_down_intervals(r, t, path, l);
  }
}

// [collective]: pattern, bytes, iterations and the hosts taking part (in
// rank order); its QPs use [flow]'s keys.
void read_collective(ScenarioParse& p) {
  const Reader& r = p.r;
  const toml::table* t = r.table(p.root, "collective", "");
  if (!t) return;
  r.check_keys(*t, "collective",
               {"pattern", "bytes", "iterations", "hosts", "window", "trigger", "slices"});
  CollectiveSpec c;
  using Pattern = CollectiveSpec::Pattern;
  r.choice(*t, "pattern", "collective", c.pattern,
           {{"ring", Pattern::kRing}, {"all_to_all", Pattern::kAllToAll}});
  r.bytes(*t, "bytes", "collective", c.bytes, 1);
  uint64_t v = 0;
  if (r.integer(*t, "iterations", "collective", v, 1, 1000))
    c.iterations = static_cast<uint32_t>(v);
  if (const toml::node* n = t->get("hosts")) {
    const toml::array* a = n->as_array();
    if (!a) r.fail(n->source(), "collective.hosts", "expected an array of host names");
    std::set<uint32_t> seen;
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      const std::string ep = "collective.hosts[" + std::to_string(i) + "]";
      if (!e.is_string()) r.fail(e.source(), ep, "expected a host name");
      const int h = p.sc.host_index(e.as_string()->get());
      if (h < 0) r.fail(e.source(), ep, "no host named \"" + e.as_string()->get() + "\"");
      if (!seen.insert(static_cast<uint32_t>(h)).second)
        r.fail(e.source(), ep, "host \"" + e.as_string()->get() + "\" is listed twice");
      c.ranks.push_back(static_cast<uint32_t>(h));
    }
  } else {
    for (uint32_t h = 0; h < p.sc.hosts.size(); ++h) c.ranks.push_back(h);
  }
  if (c.ranks.size() < 2) r.fail(t->source(), "collective", "needs at least 2 hosts");
  const uint64_t n = c.ranks.size();
  if (c.bytes % n != 0 || (c.bytes / n) % 4 != 0)
    r.fail(t->get("bytes") ? t->get("bytes")->source() : t->source(), "collective.bytes",
           "must be a multiple of 4 x the number of ranks (" + std::to_string(n) + ")");
  if (c.bytes / n > transport::kMaxMessageBytes)
    r.fail(t->source(), "collective.bytes", "a chunk (bytes / ranks) is larger than an RC message");
  if (const toml::node* w = t->get("window")) {
    if (r.integer(*t, "window", "collective", v, 0, n - 1)) c.window = static_cast<uint32_t>(v);
    if (c.window && c.pattern != Pattern::kAllToAll)
      r.fail(w->source(), "collective.window", "only for pattern = \"all_to_all\"");
  }
  if (const toml::node* g = t->get("trigger")) {
    using Trigger = CollectiveSpec::Trigger;
    r.choice(*t, "trigger", "collective", c.trigger,
             {{"sender", Trigger::kSender}, {"receiver", Trigger::kReceiver}});
    if (c.pattern != Pattern::kRing)
      r.fail(g->source(), "collective.trigger", "only for pattern = \"ring\"");
  }
  if (const toml::node* s = t->get("slices")) {
    if (r.integer(*t, "slices", "collective", v, 1, 64)) c.slices = static_cast<uint32_t>(v);
    if (c.slices > 1 && c.pattern != Pattern::kRing)
      r.fail(s->source(), "collective.slices", "only for pattern = \"ring\"");
    if (c.bytes / n < c.slices)
      r.fail(s->source(), "collective.slices", "more slices than a chunk (bytes / ranks) has bytes");
  }
  c.qp = p.flow_default;
  p.sc.collective = std::move(c);
}

}  // namespace droce::sim
