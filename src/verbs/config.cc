// libdroce-verbs' TOML configuration (include/droce/verbs/config.h).
#include "droce/verbs/config.h"

#include <toml++/toml.h>

#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "droce/options/values.h"

namespace droce::verbs {

namespace {

void check_keys(const toml::table& t, const std::string& prefix,
                std::initializer_list<std::string_view> allowed) {
  for (auto&& [k, v] : t) {
    bool ok = false;
    for (auto a : allowed) ok |= k.str() == a;
    if (ok) continue;
    std::string list;
    for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    throw ConfigError(prefix + std::string(k.str()), "unknown key (accepted: " + list + ")");
  }
}

std::string get_string(const toml::table& t, std::string_view key, std::string def) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  if (!n->is_string()) throw ConfigError(std::string(key), "expected a string");
  return n->as_string()->get();
}

uint64_t get_uint(const toml::table& t, std::string_view key, uint64_t def, uint64_t lo,
                  uint64_t hi) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  if (!n->is_integer()) throw ConfigError(std::string(key), "expected an integer");
  const int64_t v = n->as_integer()->get();
  if (v < 0 || static_cast<uint64_t>(v) < lo || static_cast<uint64_t>(v) > hi)
    throw ConfigError(std::string(key), "out of range " + std::to_string(lo) + ".." +
                                            std::to_string(hi));
  return static_cast<uint64_t>(v);
}

double get_number(const toml::table& t, std::string_view key, double def, double lo,
                  double hi) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  double v = 0;
  if (n->is_integer()) v = static_cast<double>(n->as_integer()->get());
  else if (n->is_floating_point()) v = n->as_floating_point()->get();
  else throw ConfigError(std::string(key), "expected a number");
  if (!(v >= lo && v <= hi)) {
    std::ostringstream m;
    m << "out of range " << lo << ".." << hi;
    throw ConfigError(std::string(key), m.str());
  }
  return v;
}

std::vector<std::string> get_strings(const toml::table& t, std::string_view key) {
  std::vector<std::string> out;
  const toml::node* n = t.get(key);
  if (!n) return out;
  const toml::array* a = n->as_array();
  if (!a) throw ConfigError(std::string(key), "expected an array of strings");
  for (size_t i = 0; i < a->size(); ++i) {
    const toml::node& e = *a->get(i);
    if (!e.is_string())
      throw ConfigError(std::string(key) + "[" + std::to_string(i) + "]", "expected a string");
    out.push_back(e.as_string()->get());
  }
  return out;
}

}  // namespace

Config parse_config(std::string_view text, const std::string& source) {
  toml::table t;
  try {
    t = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream m;
    m << e.description() << " (line " << e.source().begin.line << ", column "
      << e.source().begin.column << ")";
    throw ConfigError(source, m.str());
  }
  check_keys(t, "", {"device", "eal", "port", "addresses", "mtu", "cc", "cc_params",
                     "port_rate_gbps", "idle_sleep_us", "dscp", "neighbours", "telemetry",
                     "report_link", "counters_at_exit", "callers_step", "start_timeout_ms", "wait_for"});
  Config c;
  c.source = source;
  c.device = get_string(t, "device", c.device);
  if (c.device.empty() || c.device.size() >= 64)
    throw ConfigError("device", "a name of 1..63 characters");
  c.eal = get_strings(t, "eal");
  c.port = get_string(t, "port", c.port);
  c.wait_for = get_string(t, "wait_for", c.wait_for);
  const std::vector<std::string> addrs = get_strings(t, "addresses");
  for (size_t i = 0; i < addrs.size(); ++i) {
    wire::IpAddress ip;
    if (!options::try_parse_ip(addrs[i], ip))
      throw ConfigError("addresses[" + std::to_string(i) + "]",
                        "'" + addrs[i] + "' is not an IPv4 or IPv6 address");
    c.addresses.push_back(ip);
  }
  c.mtu = static_cast<uint32_t>(get_uint(t, "mtu", c.mtu, 256, 4096));
  if (c.mtu != 256 && c.mtu != 512 && c.mtu != 1024 && c.mtu != 2048 && c.mtu != 4096)
    throw ConfigError("mtu", "one of 256, 512, 1024, 2048, 4096");
  c.cc = get_string(t, "cc", c.cc);
  if (const toml::node* n = t.get("cc_params")) {
    const toml::table* p = n->as_table();
    if (!p) throw ConfigError("cc_params", "expected a table");
    for (auto&& [k, v] : *p) {
      const std::string key = "cc_params." + std::string(k.str());
      if (v.is_integer()) c.cc_params[std::string(k.str())] = std::to_string(v.as_integer()->get());
      else if (v.is_floating_point()) {
        std::ostringstream s;
        s << v.as_floating_point()->get();
        c.cc_params[std::string(k.str())] = s.str();
      } else if (v.is_string()) {
        c.cc_params[std::string(k.str())] = v.as_string()->get();
      } else {
        throw ConfigError(key, "expected a number or a string");
      }
    }
  }
  c.port_rate_gbps = get_number(t, "port_rate_gbps", c.port_rate_gbps, 0, 1600);
  c.idle_sleep_us = static_cast<uint32_t>(get_uint(t, "idle_sleep_us", c.idle_sleep_us, 0,
                                                   1'000'000));
  c.start_timeout_ms = static_cast<uint32_t>(
      get_uint(t, "start_timeout_ms", c.start_timeout_ms, 0, 600'000));
  c.dscp = static_cast<uint8_t>(get_uint(t, "dscp", c.dscp, 0, 63));
  if (const toml::node* n = t.get("neighbours")) {
    const toml::table* nt = n->as_table();
    if (!nt) throw ConfigError("neighbours", "expected a table of \"IP\" = \"MAC\"");
    for (auto&& [k, v] : *nt) {
      const std::string key = "neighbours.\"" + std::string(k.str()) + "\"";
      Neighbour nb;
      if (!options::try_parse_ip(k.str(), nb.ip))
        throw ConfigError(key, "the key must be an IPv4 or IPv6 address");
      if (!v.is_string() || !options::try_parse_mac(v.as_string()->get(), nb.mac))
        throw ConfigError(key, "expected a MAC address such as \"02:00:00:00:00:01\"");
      c.neighbours.push_back(nb);
    }
  }
  for (auto [key, out] : {std::pair{"telemetry", &c.telemetry},
                          std::pair{"report_link", &c.report_link},
                          std::pair{"counters_at_exit", &c.counters_at_exit},
                          std::pair{"callers_step", &c.callers_step}})
    if (const toml::node* n = t.get(key)) {
      if (!n->is_boolean()) throw ConfigError(key, "expected true or false");
      *out = n->as_boolean()->get();
    }
  return c;
}

Config load_config_from_env() {
  const char* path = std::getenv("DROCE_VERBS_CONFIG");
  if (!path || !*path)
    throw ConfigError("DROCE_VERBS_CONFIG",
                      "not set: name the TOML file that configures the droce device");
  std::ifstream in(path);
  if (!in) throw ConfigError("DROCE_VERBS_CONFIG", std::string("cannot read '") + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

}  // namespace droce::verbs
