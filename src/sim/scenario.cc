// Scenario files: TOML (toml++) -> Scenario. Every key is checked against
// the list its table accepts, every value against its range, and every
// message names the file, the line and column, and the key's path.
#include "droce/sim/scenario.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

#include "droce/cc/registry.h"
#include "droce/sim/toml_reader.h"

namespace droce::sim {

std::string_view to_string(Opcode op) {
  switch (op) {
    case Opcode::kWrite: return "write";
    case Opcode::kSend: return "send";
    case Opcode::kRead: return "read";
  }
  return "?";
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

// ---- unit parsers -------------------------------------------------------

namespace {

// "<number><suffix>" with a decimal number; suffix looked up in `units`.
bool parse_scaled(std::string_view s, const std::map<std::string_view, double>& units,
                  double default_scale, double& out) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  size_t i = 0;
  while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == 'e' ||
                          s[i] == 'E' || (i > 0 && (s[i] == '+' || s[i] == '-') &&
                                          (s[i - 1] == 'e' || s[i - 1] == 'E'))))
    ++i;
  // 'e' may start a unit only if nothing numeric follows; no unit here does.
  if (i == 0) return false;
  double v = 0;
  const std::string num(s.substr(0, i));
  char* end = nullptr;
  v = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !std::isfinite(v) || v < 0) return false;
  std::string_view unit = s.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  double scale = default_scale;
  if (!unit.empty()) {
    auto it = units.find(unit);
    if (it == units.end()) return false;
    scale = it->second;
  }
  out = v * scale;
  return true;
}

bool to_u64(double v, uint64_t& out) {
  if (!(v >= 0) || v > 1.8e19) return false;
  out = static_cast<uint64_t>(std::llround(v));
  return true;
}

}  // namespace

bool parse_rate_bps(std::string_view s, uint64_t& out) {
  static const std::map<std::string_view, double> kUnits = {
      {"bps", 1},     {"b/s", 1},      {"K", 1e3},     {"Kbps", 1e3},  {"Kb/s", 1e3},
      {"M", 1e6},     {"Mbps", 1e6},   {"Mb/s", 1e6},  {"G", 1e9},     {"Gbps", 1e9},
      {"Gb/s", 1e9},  {"T", 1e12},     {"Tbps", 1e12}, {"Tb/s", 1e12},
  };
  double v;
  return parse_scaled(s, kUnits, 1, v) && to_u64(v, out);
}

bool parse_time_ns(std::string_view s, uint64_t& out) {
  static const std::map<std::string_view, double> kUnits = {
      {"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9},
  };
  double v;
  return parse_scaled(s, kUnits, 1, v) && to_u64(v, out);
}

bool parse_bytes(std::string_view s, uint64_t& out) {
  static const std::map<std::string_view, double> kUnits = {
      {"B", 1},          {"KB", 1e3},       {"MB", 1e6},       {"GB", 1e9},
      {"KiB", 1024.0},   {"MiB", 1048576.0}, {"GiB", 1073741824.0},
  };
  double v;
  return parse_scaled(s, kUnits, 1, v) && to_u64(v, out);
}

// ---- sections ----------------------------------------------------------

void read_switch_table(const Reader& r, const toml::table& t, const std::string& path,
                       SwitchSpec& s, std::initializer_list<std::string_view> extra_keys) {
  std::vector<std::string_view> keys = {"buffer", "buffer_mode", "port_buffer", "ecn", "pfc",
                                        "int", "scheduler", "classifier"};
  keys.insert(keys.end(), extra_keys.begin(), extra_keys.end());
  r.check_keys(t, path, keys);
  fabric::SwitchConfig& c = s.cfg;
  r.bytes(t, "buffer", path, c.shared_buffer_bytes, 4096);
  r.choice(t, "buffer_mode", path, c.buffer_mode,
           {{"shared", fabric::BufferMode::kShared}, {"per_port", fabric::BufferMode::kPerPort}});
  r.bytes(t, "port_buffer", path, s.port_buffer_bytes, 4096);
  r.choice(t, "classifier", path, c.classifier,
           {{"dscp", fabric::Classifier::kDscp}, {"pcp", fabric::Classifier::kPcp}});
  if (const toml::table* e = r.table(t, "ecn", path)) {
    const std::string p = Reader::join(path, "ecn");
    r.check_keys(*e, p, {"mode", "point", "kmin", "kmax", "pmax", "k"});
    r.choice(*e, "mode", p, s.ecn.mode,
             {{"red", fabric::MarkMode::kRed}, {"step", fabric::MarkMode::kStep},
              {"off", fabric::MarkMode::kOff}});
    r.choice(*e, "point", p, s.ecn.point,
             {{"dequeue", fabric::MarkPoint::kDequeue}, {"enqueue", fabric::MarkPoint::kEnqueue}});
    const bool kmin = r.bytes(*e, "kmin", p, s.ecn.kmin_bytes);
    const bool kmax = r.bytes(*e, "kmax", p, s.ecn.kmax_bytes);
    const bool k = r.bytes(*e, "k", p, s.ecn.step_bytes);
    r.number(*e, "pmax", p, s.ecn.pmax, 0, 1);
    if (kmin || kmax || k) s.ecn_auto = false;
    if (s.ecn.mode == fabric::MarkMode::kRed && !s.ecn_auto &&
        s.ecn.kmin_bytes >= s.ecn.kmax_bytes)
      r.fail(e->source(), p, "kmin must be below kmax");
  }
  if (const toml::table* f = r.table(t, "pfc", path)) {
    const std::string p = Reader::join(path, "pfc");
    r.check_keys(*f, p, {"enabled", "priorities", "xoff", "xon", "quanta", "refresh_fraction",
                         "watchdog", "watchdog_restore", "watchdog_action"});
    bool enabled = false;
    r.boolean(*f, "enabled", p, enabled);
    uint8_t prios = 1u << 3;
    if (const toml::node* n = f->get("priorities")) {
      if (!n->is_array()) r.fail(n->source(), p + ".priorities", "expected an array like [3]");
      prios = 0;
      for (const toml::node& e : *n->as_array()) {
        if (!e.is_integer() || e.as_integer()->get() < 0 || e.as_integer()->get() > 7)
          r.fail(e.source(), p + ".priorities", "priorities are 0..7");
        prios |= static_cast<uint8_t>(1u << e.as_integer()->get());
      }
    }
    c.pfc.enabled_priorities = enabled ? prios : 0;
    r.bytes(*f, "xoff", p, c.pfc.xoff_bytes, 1);
    r.bytes(*f, "xon", p, c.pfc.xon_bytes);
    if (c.pfc.xon_bytes > c.pfc.xoff_bytes)
      r.fail(f->source(), p + ".xon", "must not exceed xoff");
    uint64_t q = 0;
    if (r.integer(*f, "quanta", p, q, 1, 0xFFFF)) c.pfc.pause_quanta = static_cast<uint16_t>(q);
    r.number(*f, "refresh_fraction", p, c.pfc.refresh_fraction, 0.01, 1);
    r.time(*f, "watchdog", p, c.pfc.watchdog_ns);
    r.time(*f, "watchdog_restore", p, c.pfc.watchdog_restore_ns);
    r.choice(*f, "watchdog_action", p, c.pfc.watchdog_action,
             {{"drop", fabric::WatchdogAction::kDrop},
              {"ignore_pause", fabric::WatchdogAction::kIgnorePause}});
  }
  if (const toml::table* i = r.table(t, "int", path)) {
    const std::string p = Reader::join(path, "int");
    r.check_keys(*i, p, {"enabled", "max_hops", "data_only"});
    r.boolean(*i, "enabled", p, c.int_cfg.enabled);
    r.boolean(*i, "data_only", p, c.int_cfg.data_only);
    uint64_t h = 0;
    if (r.integer(*i, "max_hops", p, h, 1, wire::kIntMaxHops))
      c.int_cfg.max_hops = static_cast<uint8_t>(h);
  }
  if (const toml::table* sc = r.table(t, "scheduler", path)) {
    const std::string p = Reader::join(path, "scheduler");
    r.check_keys(*sc, p, {"strict", "weights", "quantum"});
    bool strict_all = true;
    r.boolean(*sc, "strict", p, strict_all);
    s.scheduler.strict.fill(strict_all);
    if (const toml::node* n = sc->get("weights")) {
      const toml::array* a = n->as_array();
      if (!a || a->size() != fabric::kNumClasses)
        r.fail(n->source(), p + ".weights", "expected 8 weights, one per class");
      for (size_t k = 0; k < fabric::kNumClasses; ++k) {
        const toml::node& e = *a->get(k);
        if (!e.is_integer() || e.as_integer()->get() < 1 || e.as_integer()->get() > 1000)
          r.fail(e.source(), p + ".weights", "weights are 1..1000");
        s.scheduler.weights[k] = static_cast<uint32_t>(e.as_integer()->get());
      }
    }
    uint64_t q = 0;
    if (r.bytes(*sc, "quantum", p, q, 64, 1 << 20)) s.scheduler.quantum_bytes = static_cast<uint32_t>(q);
  }
}

namespace {

void read_link_params(const Reader& r, const toml::table& t, const std::string& path,
                      LinkSpec& l) {
  r.rate(t, "rate", path, l.rate_bps);
  r.time(t, "delay", path, l.link.propagation_ns, 1'000'000'000);
  fabric::Impairments& im = l.link.impairments;
  r.number(t, "loss", path, im.loss, 0, 1);
  r.number(t, "corrupt", path, im.corrupt, 0, 1);
  r.number(t, "duplicate", path, im.duplicate, 0, 1);
  r.number(t, "reorder", path, im.reorder, 0, 1);
  r.time(t, "reorder_delay", path, im.reorder_delay_ns, 1'000'000'000);
  r.time(t, "extra_delay", path, im.extra_delay_ns, 1'000'000'000);
  r.time(t, "jitter", path, im.jitter_ns, 1'000'000'000);
  if (const toml::table* b = r.table(t, "burst_loss", path)) {
    const std::string p = Reader::join(path, "burst_loss");
    r.check_keys(*b, p, {"p_good_to_bad", "p_bad_to_good", "loss_good", "loss_bad"});
    r.number(*b, "p_good_to_bad", p, im.burst.p_good_to_bad, 0, 1);
    r.number(*b, "p_bad_to_good", p, im.burst.p_bad_to_good, 1e-9, 1);
    r.number(*b, "loss_good", p, im.burst.loss_good, 0, 1);
    r.number(*b, "loss_bad", p, im.burst.loss_bad, 0, 1);
  }
}

// [[links]] down = [{ from = "100us", until = "150us" }, ...]: intervals in
// time order, each ending before the next begins; no `until` keeps the link
// down to the end of the run (so only the last interval may omit it).
void read_down_intervals(const Reader& r, const toml::table& t, const std::string& path,
                         LinkSpec& l) {
  const toml::node* n = t.get("down");
  if (!n) return;
  const std::string p = Reader::join(path, "down");
  const char* kShape = "expected an array of { from = \"...\", until = \"...\" } tables";
  const toml::array* a = n->as_array();
  if (!a) r.fail(n->source(), p, kShape);
  for (size_t i = 0; i < a->size(); ++i) {
    const toml::node& e = *a->get(i);
    const std::string ep = p + "[" + std::to_string(i) + "]";
    if (!e.is_table()) r.fail(e.source(), ep, kShape);
    const toml::table& it = *e.as_table();
    r.check_keys(it, ep, {"from", "until"});
    DownInterval d;
    if (!r.time(it, "from", ep, d.from_ns)) r.fail(it.source(), ep + ".from", "missing");
    if (r.time(it, "until", ep, d.until_ns) && d.until_ns <= d.from_ns)
      r.fail(it.get("until")->source(), ep + ".until",
             "must be after from (" + std::to_string(d.from_ns) + " ns)");
    if (!l.down.empty()) {
      const DownInterval& prev = l.down.back();
      if (prev.until_ns == fabric::kNever)
        r.fail(it.source(), ep,
               "the interval before it has no until (down to the end of the run)");
      if (d.from_ns <= prev.until_ns)
        r.fail(it.get("from")->source(), ep + ".from",
               "must be after the previous interval's until (" +
                   std::to_string(prev.until_ns) + " ns): intervals in time order, "
                   "not overlapping");
    }
    l.down.push_back(d);
  }
}

const std::vector<std::string_view> kLinkParamKeys = {
    "rate", "delay", "loss", "corrupt", "duplicate", "reorder", "reorder_delay",
    "extra_delay", "jitter", "burst_loss"};

std::vector<std::string_view> with(const std::vector<std::string_view>& a,
                                   std::initializer_list<std::string_view> b) {
  std::vector<std::string_view> v(a);
  v.insert(v.end(), b);
  return v;
}

const std::vector<std::string_view> kFlowParamKeys = {
    "opcode", "cc", "cc_params", "recovery", "mtu", "message", "max_outstanding",
    "dscp", "timeout", "retry_cnt", "verify", "ack_every_n", "payload"};

void read_flow_params(const Reader& r, const toml::table& t, const std::string& path,
                      FlowSpec& f) {
  r.choice(t, "opcode", path, f.opcode,
           {{"write", Opcode::kWrite}, {"send", Opcode::kSend}, {"read", Opcode::kRead}});
  if (r.str(t, "cc", path, f.cc) && !cc::find_algorithm(f.cc))
    r.fail(t.get("cc")->source(), Reader::join(path, "cc"),
           "unknown algorithm \"" + f.cc + "\" (known: " + cc::algorithm_names() + ")");
  if (const toml::table* p = r.table(t, "cc_params", path)) {
    for (auto&& [k, v] : *p) {
      std::string val;
      if (v.is_integer()) {
        val = std::to_string(v.as_integer()->get());
      } else if (v.is_floating_point()) {
        std::ostringstream o;
        o.precision(17);
        o << v.as_floating_point()->get();
        val = o.str();
      } else if (v.is_string()) {
        val = v.as_string()->get();
      } else {
        r.fail(v.source(), Reader::join(path, "cc_params." + std::string(k.str())),
               "expected a number");
      }
      f.cc_params[std::string(k.str())] = val;
    }
  }
  r.choice(t, "recovery", path, f.recovery,
           {{"go_back_n", transport::Recovery::kGoBackN},
            {"gbn", transport::Recovery::kGoBackN},
            {"selective_repeat", transport::Recovery::kSelectiveRepeat},
            {"sr", transport::Recovery::kSelectiveRepeat}});
  uint64_t v = 0;
  if (const toml::node* n = t.get("mtu")) {
    if (!r.integer(t, "mtu", path, v, 256, 4096) || (v & (v - 1)) != 0)
      r.fail(n->source(), Reader::join(path, "mtu"), "one of 256, 512, 1024, 2048, 4096");
    f.mtu = static_cast<uint32_t>(v);
  }
  r.bytes(t, "message", path, f.message_bytes, 0, transport::kMaxMessageBytes);
  if (r.integer(t, "max_outstanding", path, v, 1, 1024)) f.max_outstanding = static_cast<uint32_t>(v);
  if (r.integer(t, "dscp", path, v, 0, 63)) f.dscp = static_cast<uint8_t>(v);
  if (r.integer(t, "timeout", path, v, 1, 31)) f.timeout = static_cast<uint8_t>(v);
  if (r.integer(t, "retry_cnt", path, v, 0, 7)) f.retry_cnt = static_cast<uint8_t>(v);
  if (r.integer(t, "ack_every_n", path, v, 0, 1 << 20)) f.ack_every_n = static_cast<uint32_t>(v);
  r.boolean(t, "verify", path, f.verify);
  using Payload = FlowSpec::Payload;
  r.choice(t, "payload", path, f.payload,
           {{"auto", Payload::kAuto}, {"real", Payload::kReal}, {"virtual", Payload::kVirtual}});
  // Virtual payload never reaches the destination memory, so there is
  // nothing to verify: refuse the combination rather than report every
  // flow corrupt. Blame the key of this table that makes it so (verify
  // defaults to true; defaults in [flow] were checked when read).
  if (f.payload == Payload::kVirtual && f.verify) {
    const char* key = t.get("payload") ? "payload" : "verify";
    const toml::node* n = t.get(key);
    r.fail(n ? n->source() : t.source(), Reader::join(path, key),
           "payload = \"virtual\" moves no bytes into the destination memory: "
           "it needs verify = false");
  }
}

std::string name_at(const std::string& prefix, uint64_t i) {
  return prefix + std::to_string(i);
}

struct Graph {
  std::vector<int> parent;
  int find(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
};

}  // namespace

Scenario parse_scenario(std::string_view text, const std::string& name) {
  Reader r(name);
  toml::table root;
  try {
    root = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    std::ostringstream m;
    m << name << ':' << e.source().begin.line << ':' << e.source().begin.column
      << ": syntax: " << e.description();
    throw ScenarioError(m.str());
  }
  Scenario sc;
  sc.file = name;
  r.check_keys(root, "", {"run", "topology", "switch", "link", "flow", "hosts", "switches",
                          "links", "flows", "outages"});

  if (const toml::table* t = r.table(root, "run", "")) {
    r.check_keys(*t, "run", {"duration", "seed", "csv_interval", "stop_when_done", "ecmp",
                             "reconverge", "resolve_macs"});
    r.time(*t, "duration", "run", sc.run.duration_ns);
    r.integer(*t, "seed", "run", sc.run.seed, 0, UINT64_MAX >> 1);
    r.time(*t, "csv_interval", "run", sc.run.csv_interval_ns);
    r.boolean(*t, "stop_when_done", "run", sc.run.stop_when_done);
    r.boolean(*t, "ecmp", "run", sc.ecmp);
    r.boolean(*t, "resolve_macs", "run", sc.run.resolve_macs);
    if (uint64_t ns = 0; r.time(*t, "reconverge", "run", ns)) sc.run.reconverge_ns = ns;
  }

  // Defaults every switch / host / link / flow starts from.
  SwitchSpec sw_default;
  if (const toml::table* t = r.table(root, "switch", "")) read_switch_table(r, *t, "switch", sw_default, {"name"});
  HostSpec host_default;
  LinkSpec link_default;
  if (const toml::table* t = r.table(root, "link", "")) {
    r.check_keys(*t, "link", kLinkParamKeys);
    read_link_params(r, *t, "link", link_default);
  }
  FlowSpec flow_default;
  if (const toml::table* t = r.table(root, "flow", "")) {
    r.check_keys(*t, "flow", with(kFlowParamKeys, {"bytes", "start"}));
    read_flow_params(r, *t, "flow", flow_default);
    r.bytes(*t, "bytes", "flow", flow_default.bytes, 1);
    r.time(*t, "start", "flow", flow_default.start_ns);
  }

  // Generated topologies.
  std::string kind = "custom";
  const toml::table* topo = r.table(root, "topology", "");
  int topo_line = 0;
  if (topo) {
    topo_line = static_cast<int>(topo->source().begin.line);
    r.str(*topo, "kind", "topology", kind);
  }
  auto add_link = [&](const std::string& a, const std::string& b, uint64_t rate, int line) {
    LinkSpec l = link_default;
    l.a = a;
    l.b = b;
    l.rate_bps = rate;
    l.line = line;
    sc.links.push_back(std::move(l));
  };
  if (kind == "incast") {
    r.check_keys(*topo, "topology", {"kind", "senders", "rate", "delay", "flow_bytes", "start"});
    uint64_t senders = 2;
    r.integer(*topo, "senders", "topology", senders, 1, 1024);
    uint64_t rate = link_default.rate_bps;
    r.rate(*topo, "rate", "topology", rate);
    r.time(*topo, "delay", "topology", link_default.link.propagation_ns, 1'000'000'000);
    uint64_t flow_bytes = 0, start = flow_default.start_ns;
    r.bytes(*topo, "flow_bytes", "topology", flow_bytes);
    r.time(*topo, "start", "topology", start);
    SwitchSpec s = sw_default;
    s.name = "s0";
    sc.switches.push_back(s);
    for (uint64_t i = 0; i <= senders; ++i) {
      sc.hosts.push_back(HostSpec{name_at("h", i), rate, topo_line});
      add_link(name_at("h", i), "s0", rate, topo_line);
    }
    for (uint64_t i = 1; flow_bytes && i <= senders; ++i) {
      FlowSpec f = flow_default;
      f.name = name_at("f", i);
      f.line = topo_line;
      f.src = name_at("h", i);
      f.dst = "h0";
      f.bytes = flow_bytes;
      f.start_ns = start;
      sc.flows.push_back(std::move(f));
    }
  } else if (kind == "leaf_spine") {
    r.check_keys(*topo, "topology", {"kind", "leaves", "spines", "hosts_per_leaf", "host_rate",
                                     "spine_rate", "oversubscription", "delay"});
    uint64_t leaves = 2, spines = 2, hpl = 4;
    r.integer(*topo, "leaves", "topology", leaves, 1, 256);
    r.integer(*topo, "spines", "topology", spines, 1, 256);
    r.integer(*topo, "hosts_per_leaf", "topology", hpl, 1, 256);
    uint64_t host_rate = link_default.rate_bps;
    r.rate(*topo, "host_rate", "topology", host_rate);
    double over = 1;
    const bool has_over = r.number(*topo, "oversubscription", "topology", over, 0.01, 1000);
    uint64_t spine_rate = 0;
    if (r.rate(*topo, "spine_rate", "topology", spine_rate) && has_over)
      r.fail(topo->source(), "topology.spine_rate",
             "give spine_rate or oversubscription, not both");
    if (!spine_rate) {
      // Oversubscription = host bandwidth into a leaf / its uplink bandwidth.
      spine_rate = static_cast<uint64_t>(
          std::llround(static_cast<double>(hpl * host_rate) / (over * static_cast<double>(spines))));
      if (spine_rate < kMinRate || spine_rate > kMaxRate)
        r.fail(topo->get("oversubscription") ? topo->get("oversubscription")->source()
                                             : topo->source(),
               "topology.oversubscription",
               "gives a spine link rate of " + std::to_string(spine_rate) +
                   " bit/s, outside 1 Mb/s .. 1.6 Tb/s");
    }
    r.time(*topo, "delay", "topology", link_default.link.propagation_ns, 1'000'000'000);
    for (uint64_t l = 0; l < leaves; ++l) {
      SwitchSpec s = sw_default;
      s.name = name_at("leaf", l);
      sc.switches.push_back(s);
    }
    for (uint64_t p = 0; p < spines; ++p) {
      SwitchSpec s = sw_default;
      s.name = name_at("spine", p);
      sc.switches.push_back(s);
    }
    for (uint64_t l = 0; l < leaves; ++l) {
      for (uint64_t h = 0; h < hpl; ++h) {
        const std::string hn = name_at("h", l * hpl + h);
        sc.hosts.push_back(HostSpec{hn, host_rate, topo_line});
        add_link(hn, name_at("leaf", l), host_rate, topo_line);
      }
      for (uint64_t p = 0; p < spines; ++p)
        add_link(name_at("leaf", l), name_at("spine", p), spine_rate, topo_line);
    }
  } else if (kind == "custom") {
    if (topo) r.check_keys(*topo, "topology", {"kind"});
  } else {
    r.fail(topo->get("kind")->source(), "topology.kind",
           "\"" + kind + "\" is not one of: incast, leaf_spine, custom");
  }

  // Explicit nodes, links and flows (any topology kind may add more).
  auto array_of_tables = [&](std::string_view key) -> const toml::array* {
    const toml::node* n = root.get(key);
    if (!n) return nullptr;
    if (!n->is_array_of_tables())
      r.fail(n->source(), std::string(key), "expected [[" + std::string(key) + "]] tables");
    return n->as_array();
  };
  std::set<std::string> names;
  for (auto& h : sc.hosts) names.insert(h.name);
  for (auto& s : sc.switches) names.insert(s.name);
  auto require_name = [&](const toml::table& t, const std::string& path) {
    std::string n;
    if (!r.str(t, "name", path, n)) r.fail(t.source(), path + ".name", "missing");
    if (n.empty()) r.fail(t.get("name")->source(), path + ".name", "must not be empty");
    if (!names.insert(n).second)
      r.fail(t.get("name")->source(), path + ".name", "\"" + n + "\" is defined twice");
    return n;
  };
  if (const toml::array* a = array_of_tables("hosts")) {
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::table& t = *a->get(i)->as_table();
      const std::string path = "hosts[" + std::to_string(i) + "]";
      r.check_keys(t, path, {"name"});
      HostSpec h = host_default;
      h.name = require_name(t, path);
      h.line = static_cast<int>(t.source().begin.line);
      sc.hosts.push_back(h);
    }
  }
  if (const toml::array* a = array_of_tables("switches")) {
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::table& t = *a->get(i)->as_table();
      const std::string path = "switches[" + std::to_string(i) + "]";
      SwitchSpec s = sw_default;
      read_switch_table(r, t, path, s, {"name"});
      s.name = require_name(t, path);
      sc.switches.push_back(s);
    }
  }
  std::vector<const toml::table*> link_tables(sc.links.size(), nullptr);
  if (const toml::array* a = array_of_tables("links")) {
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::table& t = *a->get(i)->as_table();
      const std::string path = "links[" + std::to_string(i) + "]";
      r.check_keys(t, path, with(kLinkParamKeys, {"a", "b", "down"}));
      LinkSpec l = link_default;
      l.line = static_cast<int>(t.source().begin.line);
      for (auto [key, out] : {std::pair{"a", &l.a}, std::pair{"b", &l.b}}) {
        if (!r.str(t, key, path, *out)) r.fail(t.source(), path + "." + key, "missing");
        if (!names.count(*out))
          r.fail(t.get(key)->source(), path + "." + key,
                 "no host or switch named \"" + *out + "\"");
      }
      if (l.a == l.b) r.fail(t.source(), path, "a link needs two different nodes");
      read_link_params(r, t, path, l);
      read_down_intervals(r, t, path, l);
      sc.links.push_back(std::move(l));
      link_tables.push_back(&t);
    }
  }
  if (const toml::array* a = array_of_tables("flows")) {
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::table& t = *a->get(i)->as_table();
      const std::string path = "flows[" + std::to_string(i) + "]";
      r.check_keys(t, path, with(kFlowParamKeys, {"name", "src", "dst", "bytes", "start"}));
      FlowSpec f = flow_default;
      f.line = static_cast<int>(t.source().begin.line);
      f.name = "flow" + std::to_string(sc.flows.size());
      r.str(t, "name", path, f.name);
      for (auto [key, out] : {std::pair{"src", &f.src}, std::pair{"dst", &f.dst}}) {
        if (!r.str(t, key, path, *out)) r.fail(t.source(), path + "." + key, "missing");
        if (sc.host_index(*out) < 0)
          r.fail(t.get(key)->source(), path + "." + key, "no host named \"" + *out + "\"");
      }
      if (f.src == f.dst) r.fail(t.get("dst")->source(), path + ".dst", "same host as src");
      r.bytes(t, "bytes", path, f.bytes, 1);
      r.time(t, "start", path, f.start_ns);
      read_flow_params(r, t, path, f);
      sc.flows.push_back(std::move(f));
    }
  }

  // [[outages]]: down intervals for a link named by its ends, so links of
  // a generated topology can fail too.
  if (const toml::array* a = array_of_tables("outages")) {
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::table& t = *a->get(i)->as_table();
      const std::string path = "outages[" + std::to_string(i) + "]";
      r.check_keys(t, path, {"a", "b", "down"});
      std::string ends[2];
      for (int e = 0; e < 2; ++e) {
        const char* key = e == 0 ? "a" : "b";
        if (!r.str(t, key, path, ends[e])) r.fail(t.source(), path + "." + key, "missing");
        if (!names.count(ends[e]))
          r.fail(t.get(key)->source(), path + "." + key,
                 "no host or switch named \"" + ends[e] + "\"");
      }
      std::vector<size_t> found;
      for (size_t l = 0; l < sc.links.size(); ++l)
        if ((sc.links[l].a == ends[0] && sc.links[l].b == ends[1]) ||
            (sc.links[l].a == ends[1] && sc.links[l].b == ends[0]))
          found.push_back(l);
      const std::string between = ends[0] + " and " + ends[1];
      if (found.empty()) r.fail(t.source(), path, "no link between " + between);
      if (found.size() > 1)
        r.fail(t.source(), path,
               std::to_string(found.size()) + " links between " + between +
                   ": give down on the [[links]] entry of the one to fail");
      LinkSpec& l = sc.links[found[0]];
      if (!l.down.empty())
        r.fail(t.source(), path,
               "the link between " + between + " already has down intervals (its "
               "[[links]] entry or an earlier [[outages]]); give them all in one place");
      if (!t.contains("down")) r.fail(t.source(), path + ".down", "missing");
      read_down_intervals(r, t, path, l);
    }
  }

  // Structural checks: every host on exactly one link, and without ECMP no
  // loops (with single-path routing a loop leaves links unused or, worse,
  // traffic chasing its tail when routes disagree).
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
      throw ScenarioError(sc.file + ":" + std::to_string(h.line) + ":1: hosts." +
                          h.name + ": a host needs exactly one link (has " +
                          std::to_string(host_links[h.name]) + ")");
  }
  Graph g;
  std::map<std::string, int> id;
  for (const auto& n : names) id.emplace(n, static_cast<int>(id.size()));
  g.parent.resize(id.size());
  std::iota(g.parent.begin(), g.parent.end(), 0);
  for (size_t i = 0; i < sc.links.size(); ++i) {
    const auto& l = sc.links[i];
    const int a = g.find(id[l.a]), b = g.find(id[l.b]);
    if (a == b && !sc.ecmp) {
      const toml::table* t = i < link_tables.size() ? link_tables[i] : nullptr;
      std::ostringstream m;
      m << sc.file << ':' << (t ? t->source().begin.line : static_cast<uint32_t>(l.line))
        << ':' << (t ? t->source().begin.column : 1u) << ": links[" << i
        << "]: link " << l.a << " - " << l.b
        << " closes a loop, which needs ECMP (set run.ecmp = true)";
      throw ScenarioError(m.str());
    }
    g.parent[a] = b;
  }
  // Every flow's algorithm and parameters, checked now so the message can
  // point at the file rather than fail mid-run.
  for (const auto& f : sc.flows) {
    try {
      const uint64_t rate = sc.hosts[sc.host_index(f.src)].rate_bps / 8;
      (void)cc::make_algorithm(f.cc, f.cc_params, rate);
    } catch (const cc::ConfigError& e) {
      throw ScenarioError(sc.file + ":" + std::to_string(f.line) + ":1: flow " + f.name +
                          ": cc: " + e.what());
    }
  }
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
