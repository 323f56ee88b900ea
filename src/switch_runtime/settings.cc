#include "droce/switch_runtime/settings.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "droce/options/values.h"
#include "droce/sim/scenario.h"
#include "droce/sim/toml_reader.h"

namespace droce::switch_runtime {
namespace {

constexpr uint64_t kMinRate = 1'000'000ull;           // 1 Mb/s
constexpr uint64_t kMaxRate = 1'600'000'000'000ull;   // 1.6 Tb/s

[[noreturn]] void bad(const std::string& option, const std::string& msg) {
  throw ConfigError(option, msg);
}

uint64_t parse_rate(const std::string& option, const std::string& text) {
  uint64_t v = 0;
  if (!sim::parse_rate_bps(text, v))
    bad(option, fmt::format("'{}' is not a rate (\"10G\", \"500M\", \"25Gbps\", bit/s)", text));
  if (v < kMinRate || v > kMaxRate)
    bad(option, fmt::format("'{}' is out of range 1 Mb/s .. 1.6 Tb/s", text));
  return v;
}

uint64_t parse_size(const std::string& option, const std::string& text, uint64_t min = 0) {
  uint64_t v = 0;
  if (!sim::parse_bytes(text, v))
    bad(option, fmt::format("'{}' is not a size (bytes, or \"64KiB\", \"1MiB\", \"100KB\")",
                            text));
  if (v < min) bad(option, fmt::format("'{}' is below the minimum of {} bytes", text, min));
  return v;
}

uint64_t parse_time(const std::string& option, const std::string& text) {
  uint64_t v = 0;
  if (!sim::parse_time_ns(text, v))
    bad(option, fmt::format("'{}' is not a time (ns, or \"10us\", \"1ms\")", text));
  return v;
}

// "PREFIX[/LEN]" or "default" / "default6".
void parse_prefix(const std::string& option, const std::string& text, RouteSpec& r) {
  if (text == "default" || text == "default6") {
    r.prefix = wire::IpAddress{};
    r.prefix.v6 = text == "default6";
    r.len = 0;
    return;
  }
  const auto slash = text.find('/');
  r.prefix = options::parse_ip(option, text.substr(0, slash));
  const unsigned max = r.prefix.v6 ? 128 : 32;
  r.len = static_cast<uint8_t>(max);
  if (slash != std::string::npos) {
    const std::string l = text.substr(slash + 1);
    char* end = nullptr;
    const unsigned long v = std::strtoul(l.c_str(), &end, 10);
    if (l.empty() || *end || v > max)
      bad(option, fmt::format("'{}': prefix length must be 0..{}", text, max));
    r.len = static_cast<uint8_t>(v);
  }
}

}  // namespace

// "NAME[+NAME...][@RATE]"
PortSpec parse_port_spec(const std::string& option, const std::string& text) {
  PortSpec p;
  p.origin = option;
  std::string names = text;
  if (const auto at = text.rfind('@'); at != std::string::npos) {
    names = text.substr(0, at);
    p.rate_bps = parse_rate(option, text.substr(at + 1));
  }
  size_t start = 0;
  while (start <= names.size()) {
    const auto plus = names.find('+', start);
    const std::string n =
        names.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
    if (n.empty())
      bad(option, fmt::format("'{}': expected NAME[+NAME...][@RATE], e.g. net_memif0@10G",
                              text));
    p.members.push_back(n);
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  return p;
}

// "PREFIX[/LEN]=PORT[,PORT...]" (several ports: an ECMP group).
RouteSpec parse_route_spec(const std::string& option, const std::string& text) {
  RouteSpec r;
  r.origin = option;
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq + 1 >= text.size())
    bad(option, fmt::format("'{}': expected PREFIX[/LEN]=PORT[,PORT...] (e.g. "
                            "10.0.0.1/32=0, default=1,2)",
                            text));
  parse_prefix(option, text.substr(0, eq), r);
  std::string rest = text.substr(eq + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    const auto comma = rest.find(',', start);
    const std::string n =
        rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    r.ports.push_back(static_cast<uint16_t>(options::parse_uint(option, n, 0xFFFF)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return r;
}

uint8_t parse_priorities(const std::string& option, const std::string& text) {
  uint8_t mask = 0;
  size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const std::string n =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    mask |= static_cast<uint8_t>(1u << options::parse_uint(option, n, 7));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return mask;
}

namespace {

// ---- TOML: [switch] (droce-sim's keys), [[ports]], [[routes]] ---------------

// droce-sim's [switch] keys through droce-sim's own reader, plus the
// default port `rate`, `seed` and `node_id`.
void load_switch_table(const sim::Reader& r, const toml::table& t, Settings& s) {
  const std::string path = "switch";
  sim::SwitchSpec spec;
  spec.ecn = s.ecn;
  spec.ecn_auto = s.ecn_auto;
  spec.scheduler = s.scheduler;
  spec.port_buffer_bytes = s.port_buffer_bytes;
  spec.cfg = s.cfg;
  sim::read_switch_table(r, t, path, spec, {"rate", "seed", "node_id"});
  s.ecn = spec.ecn;
  s.ecn_auto = spec.ecn_auto;
  s.scheduler = spec.scheduler;
  s.port_buffer_bytes = spec.port_buffer_bytes;
  s.cfg = spec.cfg;
  r.rate(t, "rate", path, s.default_rate_bps);
  r.integer(t, "seed", path, s.cfg.seed, 0, INT64_MAX);
  uint64_t node = 0;
  if (r.integer(t, "node_id", path, node, 0, UINT32_MAX)) s.cfg.node_id = static_cast<uint32_t>(node);
}

// Runs a flag parser on a config value; its ConfigError becomes a message
// at the value's file position.
template <class F>
void at_node(const sim::Reader& r, const toml::node* n, const std::string& key, F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    std::string m = e.what();
    r.fail(n->source(), key, m.substr(std::min(m.size(), e.option().size() + 2)));
  }
}

void load_tables(const sim::Reader& r, const toml::table& root, const std::string& file,
                 Settings& s) {
  r.check_keys(root, "", {"switch", "ports", "routes"});
  if (const toml::table* t = r.table(root, "switch", "")) load_switch_table(r, *t, s);
  if (const toml::node* n = root.get("ports")) {
    const toml::array* a = n->as_array();
    if (!a) r.fail(n->source(), "ports", "expected [[ports]] tables");
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      const std::string p = fmt::format("ports[{}]", i);
      if (!e.is_table()) r.fail(e.source(), p, "expected a table");
      const toml::table& t = *e.as_table();
      r.check_keys(t, p, {"name", "rate", "buffer"});
      PortSpec ps;
      ps.origin = p;
      const toml::node* name = t.get("name");
      if (!name) r.fail(e.source(), p + ".name", "missing (a DPDK port name or id, or an array of them)");
      if (name->is_string()) {
        ps.members.push_back(name->as_string()->get());
      } else if (const toml::array* na = name->as_array(); na && !na->empty()) {
        for (auto& m : *na) {
          if (!m.is_string()) r.fail(m.source(), p + ".name", "expected port names (strings)");
          ps.members.push_back(m.as_string()->get());
        }
      } else {
        r.fail(name->source(), p + ".name", "expected a port name or a non-empty array of names");
      }
      uint64_t v = 0;
      if (r.rate(t, "rate", p, v)) ps.rate_bps = v;
      if (r.bytes(t, "buffer", p, v, 4096)) ps.buffer_bytes = v;
      s.ports.push_back(std::move(ps));
    }
  }
  if (const toml::node* n = root.get("routes")) {
    const toml::array* a = n->as_array();
    if (!a) r.fail(n->source(), "routes", "expected [[routes]] tables");
    for (size_t i = 0; i < a->size(); ++i) {
      const toml::node& e = *a->get(i);
      const std::string p = fmt::format("routes[{}]", i);
      if (!e.is_table()) r.fail(e.source(), p, "expected a table");
      const toml::table& t = *e.as_table();
      r.check_keys(t, p, {"prefix", "ports"});
      RouteSpec rs;
      std::string prefix;
      if (!r.str(t, "prefix", p, prefix))
        r.fail(e.source(), p + ".prefix", "missing (\"10.0.0.0/24\", \"fd00::1\", \"default\")");
      at_node(r, t.get("prefix"), p + ".prefix", [&] { parse_prefix(p + ".prefix", prefix, rs); });
      const toml::node* ports = t.get("ports");
      if (!ports) r.fail(e.source(), p + ".ports", "missing (a port index or an array: ECMP)");
      auto add = [&](const toml::node& x) {
        if (!x.is_integer() || x.as_integer()->get() < 0 || x.as_integer()->get() > 0xFFFF)
          r.fail(x.source(), p + ".ports", "expected port indexes (0-based, order of [[ports]])");
        rs.ports.push_back(static_cast<uint16_t>(x.as_integer()->get()));
      };
      if (const toml::array* pa = ports->as_array()) {
        if (pa->empty()) r.fail(ports->source(), p + ".ports", "empty");
        for (auto& x : *pa) add(x);
      } else {
        add(*ports);
      }
      rs.origin = fmt::format("{}:{}:{}: {}.ports", file, e.source().begin.line,
                              e.source().begin.column, p);
      s.routes.push_back(std::move(rs));
    }
  }
}

toml::table parse_toml(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw ConfigError(fmt::format("{}:{}:{}", source, b.line, b.column),
                      std::string(e.description()));
  }
}

}  // namespace

void load_config_text(std::string_view text, const std::string& source, Settings& s) {
  const toml::table root = parse_toml(text, source);
  // The reader throws sim::ScenarioError ("FILE:LINE:COL: key: what"): a
  // ConfigError of the same text, exit code 2.
  try {
    load_tables(sim::Reader(source), root, source, s);
  } catch (const sim::ScenarioError& e) {
    throw ConfigError("", e.what());
  }
}

void load_config(const std::string& file, Settings& s) {
  std::ifstream in(file);
  if (!in) throw ConfigError("--config", fmt::format("cannot read '{}'", file));
  std::stringstream text;
  text << in.rdbuf();
  load_config_text(text.str(), file, s);
}

void apply_flags(const Flags& f, Settings& s) {
  if (f.rate) s.default_rate_bps = parse_rate("--rate", *f.rate);
  for (const auto& p : f.ports) s.ports.push_back(parse_port_spec("--port", p));
  for (const auto& r : f.routes) s.routes.push_back(parse_route_spec("--route", r));
  if (f.buffer) s.cfg.shared_buffer_bytes = parse_size("--buffer", *f.buffer, 4096);
  if (f.port_buffer) s.port_buffer_bytes = parse_size("--port-buffer", *f.port_buffer, 4096);
  if (f.buffer_mode) {
    if (*f.buffer_mode == "shared") s.cfg.buffer_mode = fabric::BufferMode::kShared;
    else if (*f.buffer_mode == "per_port") s.cfg.buffer_mode = fabric::BufferMode::kPerPort;
    else bad("--buffer-mode", fmt::format("'{}' is not one of: shared, per_port", *f.buffer_mode));
  }
  if (f.classifier) {
    if (*f.classifier == "dscp") s.cfg.classifier = fabric::Classifier::kDscp;
    else if (*f.classifier == "pcp") s.cfg.classifier = fabric::Classifier::kPcp;
    else bad("--classifier", fmt::format("'{}' is not one of: dscp, pcp", *f.classifier));
  }
  if (f.ecn_mode) {
    if (*f.ecn_mode == "red") s.ecn.mode = fabric::MarkMode::kRed;
    else if (*f.ecn_mode == "step") s.ecn.mode = fabric::MarkMode::kStep;
    else if (*f.ecn_mode == "off") s.ecn.mode = fabric::MarkMode::kOff;
    else bad("--ecn", fmt::format("'{}' is not one of: red, step, off", *f.ecn_mode));
  }
  if (f.ecn_point) {
    if (*f.ecn_point == "dequeue") s.ecn.point = fabric::MarkPoint::kDequeue;
    else if (*f.ecn_point == "enqueue") s.ecn.point = fabric::MarkPoint::kEnqueue;
    else bad("--ecn-point", fmt::format("'{}' is not one of: dequeue, enqueue", *f.ecn_point));
  }
  if (f.kmin || f.kmax || f.ecn_k) {
    if (s.ecn_auto) {
      // Fixed thresholds: start from the defaults of the default rate.
      const auto d = fabric::ecn_defaults_for_rate(s.default_rate_bps, s.ecn.mode);
      s.ecn.kmin_bytes = d.kmin_bytes;
      s.ecn.kmax_bytes = d.kmax_bytes;
      s.ecn.step_bytes = d.step_bytes;
    }
    s.ecn_auto = false;
    if (f.kmin) s.ecn.kmin_bytes = parse_size("--kmin", *f.kmin);
    if (f.kmax) s.ecn.kmax_bytes = parse_size("--kmax", *f.kmax);
    if (f.ecn_k) s.ecn.step_bytes = parse_size("--ecn-k", *f.ecn_k);
  }
  if (f.pmax) {
    if (!(*f.pmax >= 0 && *f.pmax <= 1)) bad("--pmax", fmt::format("{} is out of range 0..1", *f.pmax));
    s.ecn.pmax = *f.pmax;
  }
  if (f.pfc_priorities && !f.pfc && !s.cfg.pfc.enabled_priorities)
    bad("--pfc-priorities", "given without --pfc");
  if (f.pfc || f.pfc_priorities)
    s.cfg.pfc.enabled_priorities =
        f.pfc_priorities ? parse_priorities("--pfc-priorities", *f.pfc_priorities)
        : s.cfg.pfc.enabled_priorities ? s.cfg.pfc.enabled_priorities
                                       : static_cast<uint8_t>(1u << 3);
  if (f.xoff) s.cfg.pfc.xoff_bytes = parse_size("--xoff", *f.xoff, 1);
  if (f.xon) s.cfg.pfc.xon_bytes = parse_size("--xon", *f.xon);
  if (f.pfc_quanta) {
    if (*f.pfc_quanta < 1 || *f.pfc_quanta > 0xFFFF)
      bad("--pfc-quanta", fmt::format("{} is out of range 1..65535", *f.pfc_quanta));
    s.cfg.pfc.pause_quanta = static_cast<uint16_t>(*f.pfc_quanta);
  }
  if (f.pfc_watchdog) s.cfg.pfc.watchdog_ns = parse_time("--pfc-watchdog", *f.pfc_watchdog);
  if (f.int_on) s.cfg.int_cfg.enabled = true;
  if (f.seed) s.cfg.seed = *f.seed;
  if (f.load_balance) {
    if (*f.load_balance == "ecmp") s.cfg.load_balance = fabric::LoadBalance::kEcmp;
    else if (*f.load_balance == "adaptive") s.cfg.load_balance = fabric::LoadBalance::kAdaptivePacket;
    else if (*f.load_balance == "adaptive_flowlet")
      s.cfg.load_balance = fabric::LoadBalance::kAdaptiveFlowlet;
    else
      bad("--load-balance",
          fmt::format("'{}' is not one of: ecmp, adaptive, adaptive_flowlet", *f.load_balance));
  }
  if (f.flowlet_gap) s.cfg.flowlet_gap_ns = parse_time("--flowlet-gap", *f.flowlet_gap);
}

// Everything that can be checked before EAL starts.
void validate(Settings& s) {
  if (s.ports.empty())
    bad("--port", "no ports: give --port NAME[+NAME...][@RATE] or [[ports]] in --config");
  for (auto& r : s.routes)
    for (uint16_t p : r.ports)
      if (p >= s.ports.size())
        bad(r.origin, fmt::format("port {} does not exist (ports are 0..{}, in the order "
                                  "given)",
                                  p, s.ports.size() - 1));
  if (s.routes.empty())
    bad("--route", "no routes: give --route PREFIX[/LEN]=PORT[,PORT...] or [[routes]] in "
                   "--config (the switch forwards on destination IP)");
  if (s.ecn.mode == fabric::MarkMode::kRed && !s.ecn_auto &&
      s.ecn.kmin_bytes >= s.ecn.kmax_bytes)
    bad("--kmin", fmt::format("Kmin ({} B) must be below Kmax ({} B)", s.ecn.kmin_bytes,
                              s.ecn.kmax_bytes));
  if (s.cfg.pfc.xon_bytes > s.cfg.pfc.xoff_bytes)
    bad("--xon", fmt::format("XON ({} B) must not exceed XOFF ({} B)", s.cfg.pfc.xon_bytes,
                             s.cfg.pfc.xoff_bytes));
  if (s.burst == 0 || s.burst > 512) bad("--burst", fmt::format("{} is out of range 1..512", s.burst));
  if (s.stats_interval < 0) bad("--stats-interval", "must not be negative");
  if (s.duration < 0) bad("--duration", "must not be negative");
}

fabric::SwitchConfig build_switch_config(const Settings& s) {
  fabric::SwitchConfig c = s.cfg;
  c.ports.clear();
  for (const PortSpec& p : s.ports) {
    fabric::PortConfig pc;
    pc.rate_bps = p.rate_bps.value_or(s.default_rate_bps);
    pc.buffer_bytes = p.buffer_bytes.value_or(s.port_buffer_bytes);
    pc.scheduler = s.scheduler;
    if (s.ecn_auto) {
      pc.ecn = fabric::ecn_defaults_for_rate(pc.rate_bps, s.ecn.mode);
      pc.ecn.point = s.ecn.point;
      pc.ecn.pmax = s.ecn.pmax;
    } else {
      pc.ecn = s.ecn;
    }
    c.ports.push_back(pc);
  }
  c.routes = fabric::RouteTable{};
  for (const RouteSpec& r : s.routes) c.routes.add(r.prefix, r.len, r.ports);
  return c;
}

}  // namespace droce::switch_runtime
