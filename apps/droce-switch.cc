// droce-switch: the fabric switch model (src/fabric, docs/FABRIC.md) on DPDK
// ports in real time, so droce endpoints in separate processes meet a
// congestion point: output queues serialized at a configured port rate,
// shared buffer, ECN marking, PFC, INT, static and ECMP routes.
//
// One run-to-completion loop on the main lcore: read the TSC clock (ns), RX
// burst on every port and hand each frame to Switch::receive(port, pkt, now),
// Switch::advance(now) collects the departures the model starts, and each
// departure is transmitted for real once its last bit would have left the
// modelled port (Departure::time). The model's serialization at the
// configured rate is what paces the real TX. PFC frames the model generates
// go out as real frames; received ones are handed to the model like any
// frame (it honours them). docs/SWITCH.md has the usage and the limits.
#include <fmt/format.h>
#include <pcap/pcap.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <sys/prctl.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <toml++/toml.h>
#include <unordered_map>
#include <vector>

#include "app_options.h"
#include "droce/engine/app_main.h"
#include "droce/engine/engine.h"
#include "droce/options/values.h"
#include "droce/fabric/switch.h"
#include "droce/sim/scenario.h"
#include "droce/sim/toml_reader.h"

namespace droce::switchapp {
namespace {

using droce::ConfigError;
using fabric::kGbps;
using fabric::kKiB;

constexpr int kExitOk = droce::kExitOk;
constexpr int kExitUsage = droce::kExitConfig;
constexpr uint64_t kMinRate = 1'000'000ull;           // 1 Mb/s
constexpr uint64_t kMaxRate = 1'600'000'000'000ull;   // 1.6 Tb/s
constexpr uint32_t kTxRetries = 8;

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

// ---- configuration ---------------------------------------------------------

struct PortSpec {
  // DPDK ports (names or ids) behind this switch port. Several members form
  // one modelled link whose far end is an L2 segment: egress frames go to
  // the member that learned the destination MAC (unknown/multicast: all).
  std::vector<std::string> members;
  std::optional<uint64_t> rate_bps;
  std::optional<uint64_t> buffer_bytes;  // per_port buffer mode
  std::string origin;                    // for messages
};

struct RouteSpec {
  wire::IpAddress prefix;
  uint8_t len = 0;
  std::vector<uint16_t> ports;
  std::string origin;
};

struct Settings {
  std::vector<PortSpec> ports;
  std::vector<RouteSpec> routes;
  uint64_t default_rate_bps = 10 * kGbps;
  fabric::SwitchConfig cfg;  // buffer, classifier, pfc, int, seed, node_id
  fabric::EcnConfig ecn{};
  bool ecn_auto = true;      // thresholds scaled with each port's rate
  fabric::SchedulerConfig scheduler = fabric::SchedulerConfig::strict_priority();
  uint64_t port_buffer_bytes = 1 << 20;
  // Run.
  std::string capture;
  std::string json;
  double stats_interval = 1.0;
  double duration = 0;
  uint32_t idle_sleep_us = 0;
  uint32_t burst = 32;
  uint32_t mbufs = 0;
  uint16_t rx_desc = 1024, tx_desc = 1024;
};

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

void load_config(const std::string& file, Settings& s) {
  toml::table root;
  try {
    root = toml::parse_file(file);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw ConfigError(fmt::format("{}:{}:{}", file, b.line, b.column),
                      std::string(e.description()));
  }
  // The reader throws sim::ScenarioError ("FILE:LINE:COL: key: what"): a
  // ConfigError of the same text, exit code 2.
  try {
    load_tables(sim::Reader(file), root, file, s);
  } catch (const sim::ScenarioError& e) {
    throw ConfigError("", e.what());
  }
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

// ---- DPDK side -------------------------------------------------------------

struct Member {
  std::string name;
  uint16_t port_id = 0;
  rte_mempool* pool = nullptr;
  wire::MacAddress mac{};
  std::vector<rte_mbuf*> tx;  // batch of this iteration
  // DPDK-side counters.
  uint64_t rx_frames = 0, rx_bytes = 0, tx_frames = 0, tx_bytes = 0;
  uint64_t tx_dropped = 0;      // the PMD did not take them
  uint64_t tx_alloc_failed = 0;
  uint64_t tx_too_big = 0;
};

struct SwitchPort {
  std::vector<size_t> members;  // indexes into App::members_
  std::unordered_map<uint64_t, size_t> mac_table;  // learned src MAC -> member
  std::deque<fabric::Departure> held;              // started, not yet due
  uint64_t rate_bps = 0;
  // Live-stats interval state.
  uint64_t interval_qmax = 0;
  fabric::PortCounters last{};
  uint64_t flooded = 0;
  // Link state (App::poll_links): up while any member's link is. The model
  // port follows only once the link has been seen up: a memif port reads
  // down until its peer connects, and was never a failure.
  bool link_seen_up = false;
  bool link_up = true;
  uint64_t link_downs = 0;
};

uint64_t mac_key(const uint8_t* p) {
  uint64_t k = 0;
  for (int i = 0; i < 6; ++i) k = (k << 8) | p[i];
  return k;
}

std::string human_bytes(uint64_t b) {
  if (b >= (1u << 20)) return fmt::format("{:.1f}MiB", b / 1048576.0);
  if (b >= 1024) return fmt::format("{:.1f}KiB", b / 1024.0);
  return fmt::format("{}B", b);
}

std::string human_rate(uint64_t bps) {
  if (bps >= kGbps && bps % 100'000'000 == 0) return fmt::format("{}G", bps / 1e9);
  if (bps >= 1'000'000) return fmt::format("{}M", bps / 1e6);
  return fmt::format("{}K", bps / 1e3);
}

class App {
 public:
  explicit App(Settings s) : s_(std::move(s)) {}
  ~App() { close(); }

  void open_ports();
  int run();
  void close();

 private:
  void rx_all(uint64_t now);
  void tx_due(uint64_t now);
  void flush_tx();
  void send_to(size_t member, const fabric::Packet& pkt, uint64_t now);
  void capture(const fabric::Packet& pkt, uint64_t now);
  void live_stats(uint64_t now, double elapsed);
  void poll_links(uint64_t now);
  void report(uint64_t now);
  fabric::FrameBytes take_buffer();
  void recycle(fabric::FrameBytes&& b);

  Settings s_;
  std::vector<Member> members_;
  std::vector<SwitchPort> ports_;
  std::vector<uint16_t> member_port_;  // member -> switch port
  std::unique_ptr<fabric::Switch> sw_;
  std::vector<rte_mbuf*> rx_;
  std::vector<fabric::FrameBytes> spare_;
  pcap_t* pcap_dead_ = nullptr;
  pcap_dumper_t* dumper_ = nullptr;
  uint64_t captured_ = 0;
  // Real TX lateness behind the model's departure time (scheduling jitter).
  uint64_t lag_max_ns_ = 0;
  uint64_t lag_sum_ns_ = 0;
  uint64_t lag_count_ = 0;
  uint64_t start_ns_ = 0;
  uint64_t next_link_poll_ = 0;
  int64_t wall_offset_ns_ = 0;  // realtime - now_ns, for capture timestamps
  bool closed_ = false;
  bool opened_ = false;
};

uint16_t resolve_port(const std::string& option, const std::string& name) {
  uint16_t id = 0;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &id) == 0) return id;
  char* end = nullptr;
  const unsigned long v = std::strtoul(name.c_str(), &end, 10);
  if (!name.empty() && !*end && v < RTE_MAX_ETHPORTS && rte_eth_dev_is_valid_port(v))
    return static_cast<uint16_t>(v);
  std::string known;
  uint16_t pid = 0;
  RTE_ETH_FOREACH_DEV(pid) {
    char n[RTE_ETH_NAME_MAX_LEN] = {};
    rte_eth_dev_get_name_by_port(pid, n);
    known += fmt::format("{}{} ({})", known.empty() ? "" : ", ", n, pid);
  }
  bad(option, fmt::format("no DPDK port '{}' (ports: {}; add one with --vdev)", name,
                          known.empty() ? "none" : known));
}

void App::open_ports() {
  opened_ = true;
  std::map<uint16_t, std::string> seen;
  for (size_t pi = 0; pi < s_.ports.size(); ++pi) {
    SwitchPort sp;
    sp.rate_bps = s_.ports[pi].rate_bps.value_or(s_.default_rate_bps);
    for (const std::string& name : s_.ports[pi].members) {
      const uint16_t id = resolve_port(s_.ports[pi].origin, name);
      if (seen.count(id))
        bad(s_.ports[pi].origin, fmt::format("DPDK port '{}' is already used (as '{}')", name,
                                             seen[id]));
      seen[id] = name;
      Member m;
      m.name = name;
      m.port_id = id;
      rte_eth_dev_info info{};
      if (int rc = rte_eth_dev_info_get(id, &info); rc != 0)
        bad(s_.ports[pi].origin, fmt::format("'{}': cannot read device info: {}", name,
                                             rte_strerror(-rc)));
      constexpr uint32_t kDataRoom = 9216 + 128;  // jumbo frames and INT stacks
      rte_eth_conf conf{};
      uint32_t mtu = kDataRoom - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN - 128;
      if (info.max_mtu) mtu = std::min<uint32_t>(mtu, info.max_mtu);
      if (info.max_rx_pktlen > RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN)
        mtu = std::min<uint32_t>(mtu, info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN);
      mtu = std::max<uint32_t>(mtu, info.min_mtu);
      conf.rxmode.mtu = mtu;
      if (int rc = rte_eth_dev_configure(id, 1, 1, &conf); rc != 0)
        bad(s_.ports[pi].origin, fmt::format("'{}': rte_eth_dev_configure: {}", name,
                                             rte_strerror(-rc)));
      uint16_t rxd = s_.rx_desc, txd = s_.tx_desc;
      rte_eth_dev_adjust_nb_rx_tx_desc(id, &rxd, &txd);
      int socket = rte_eth_dev_socket_id(id);
      if (socket < 0) socket = SOCKET_ID_ANY;
      const uint32_t n = s_.mbufs ? s_.mbufs : rxd + txd + 2 * s_.burst + 512;
      m.pool = rte_pktmbuf_pool_create(fmt::format("dsw_p{}", members_.size()).c_str(), n,
                                       0, 0, kDataRoom + RTE_PKTMBUF_HEADROOM, socket);
      if (!m.pool)
        bad("--mbufs", fmt::format("cannot create a pool of {} mbufs of {} bytes for '{}': {} "
                                   "(more EAL memory: -m, or fewer --mbufs)",
                                   n, kDataRoom, name, rte_strerror(rte_errno)));
      if (int rc = rte_eth_rx_queue_setup(id, 0, rxd, socket, nullptr, m.pool); rc != 0)
        bad(s_.ports[pi].origin, fmt::format("'{}': RX queue setup: {}", name, rte_strerror(-rc)));
      if (int rc = rte_eth_tx_queue_setup(id, 0, txd, socket, nullptr); rc != 0)
        bad(s_.ports[pi].origin, fmt::format("'{}': TX queue setup: {}", name, rte_strerror(-rc)));
      if (int rc = rte_eth_dev_start(id); rc != 0)
        bad(s_.ports[pi].origin, fmt::format("'{}': rte_eth_dev_start: {}", name,
                                             rte_strerror(-rc)));
      rte_eth_promiscuous_enable(id);  // a switch port sees every frame; ENOTSUP is fine
      rte_ether_addr a{};
      rte_eth_macaddr_get(id, &a);
      std::copy(a.addr_bytes, a.addr_bytes + 6, m.mac.begin());
      sp.members.push_back(members_.size());
      member_port_.push_back(static_cast<uint16_t>(pi));
      members_.push_back(std::move(m));
    }
    ports_.push_back(std::move(sp));
  }
  fabric::SwitchConfig cfg = build_switch_config(s_);
  for (size_t pi = 0; pi < ports_.size(); ++pi)
    cfg.ports[pi].mac = members_[ports_[pi].members.front()].mac;
  try {
    sw_ = std::make_unique<fabric::Switch>(std::move(cfg));
  } catch (const std::invalid_argument& e) {
    bad("switch", e.what());
  }
  rx_.assign(s_.burst, nullptr);
  if (!s_.capture.empty()) {
    pcap_dead_ = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, 65535,
                                                       PCAP_TSTAMP_PRECISION_NANO);
    dumper_ = pcap_dump_open(pcap_dead_, s_.capture.c_str());
    if (!dumper_) bad("--capture", fmt::format("cannot write '{}': {}", s_.capture,
                                               pcap_geterr(pcap_dead_)));
  }
}

fabric::FrameBytes App::take_buffer() {
  if (spare_.empty()) {
    fabric::FrameBytes b;
    b.reserve(2048);
    return b;
  }
  fabric::FrameBytes b = std::move(spare_.back());
  spare_.pop_back();
  return b;
}

void App::recycle(fabric::FrameBytes&& b) {
  if (spare_.size() < 4096) {
    b.clear();
    spare_.push_back(std::move(b));
  }
}

void App::rx_all(uint64_t now) {
  for (size_t mi = 0; mi < members_.size(); ++mi) {
    Member& m = members_[mi];
    const uint16_t n = rte_eth_rx_burst(m.port_id, 0, rx_.data(), static_cast<uint16_t>(s_.burst));
    if (n == 0) continue;
    const uint16_t sp = member_port_[mi];
    SwitchPort& port = ports_[sp];
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* mb = rx_[i];
      fabric::Packet pkt;
      pkt.bytes = take_buffer();
      pkt.bytes.resize(mb->pkt_len);
      const void* d = rte_pktmbuf_read(mb, 0, mb->pkt_len, pkt.bytes.data());
      if (d != pkt.bytes.data()) std::memcpy(pkt.bytes.data(), d, mb->pkt_len);
      ++m.rx_frames;
      m.rx_bytes += mb->pkt_len;
      rte_pktmbuf_free(mb);
      // A port fronting several DPDK ports learns where each source lives.
      if (port.members.size() > 1 && pkt.bytes.size() >= 12 && !(pkt.bytes[6] & 1))
        port.mac_table[mac_key(pkt.bytes.data() + 6)] = mi;
      sw_->receive(sp, std::move(pkt), now);
    }
  }
}

void App::capture(const fabric::Packet& pkt, uint64_t now) {
  if (!dumper_) return;
  const int64_t wall = static_cast<int64_t>(now) + wall_offset_ns_;
  pcap_pkthdr h{};
  h.ts.tv_sec = wall / 1'000'000'000;
  h.ts.tv_usec = wall % 1'000'000'000;  // nanoseconds (nano-precision file)
  h.caplen = h.len = static_cast<bpf_u_int32>(pkt.size());
  pcap_dump(reinterpret_cast<u_char*>(dumper_), &h, pkt.bytes.data());
  ++captured_;
}

void App::send_to(size_t mi, const fabric::Packet& pkt, uint64_t) {
  Member& m = members_[mi];
  if (pkt.size() > static_cast<size_t>(rte_pktmbuf_data_room_size(m.pool) - RTE_PKTMBUF_HEADROOM)) {
    ++m.tx_too_big;
    return;
  }
  rte_mbuf* mb = rte_pktmbuf_alloc(m.pool);
  if (!mb) {
    ++m.tx_alloc_failed;
    return;
  }
  char* d = rte_pktmbuf_append(mb, static_cast<uint16_t>(pkt.size()));
  std::memcpy(d, pkt.bytes.data(), pkt.size());
  m.tx.push_back(mb);
}

void App::tx_due(uint64_t now) {
  for (SwitchPort& port : ports_) {
    while (!port.held.empty() && port.held.front().time <= now) {
      fabric::Departure& d = port.held.front();
      const uint64_t lag = now - d.time;
      lag_max_ns_ = std::max(lag_max_ns_, lag);
      lag_sum_ns_ += lag;
      ++lag_count_;
      capture(d.packet, now);
      if (port.members.size() == 1) {
        send_to(port.members.front(), d.packet, now);
      } else {
        const auto& b = d.packet.bytes;
        auto it = b.size() >= 6 && !(b[0] & 1) ? port.mac_table.find(mac_key(b.data()))
                                               : port.mac_table.end();
        if (it != port.mac_table.end()) {
          send_to(it->second, d.packet, now);
        } else {
          ++port.flooded;
          for (size_t mi : port.members) send_to(mi, d.packet, now);
        }
      }
      recycle(std::move(d.packet.bytes));
      port.held.pop_front();
    }
  }
}

void App::flush_tx() {
  for (Member& m : members_) {
    if (m.tx.empty()) continue;
    uint16_t done = 0;
    const uint16_t n = static_cast<uint16_t>(m.tx.size());
    for (uint32_t tries = 0; done < n && tries < kTxRetries; ++tries)
      done += rte_eth_tx_burst(m.port_id, 0, m.tx.data() + done, n - done);
    for (uint16_t i = 0; i < done; ++i) {
      ++m.tx_frames;
      m.tx_bytes += m.tx[i]->pkt_len;
    }
    for (uint16_t i = done; i < n; ++i) {
      ++m.tx_dropped;
      rte_pktmbuf_free(m.tx[i]);
    }
    m.tx.clear();
  }
}

void App::live_stats(uint64_t now, double interval) {
  const double secs = (now - start_ns_) / 1e9;
  for (size_t p = 0; p < ports_.size(); ++p) {
    SwitchPort& port = ports_[p];
    const fabric::PortCounters& c = sw_->counters(static_cast<uint16_t>(p));
    uint64_t marks = 0, drops = 0, last_marks = 0, last_drops = 0, hwm = 0;
    for (size_t q = 0; q < fabric::kNumClasses; ++q) {
      marks += c.queues[q].ecn_marked;
      drops += c.queues[q].drops + c.queues[q].watchdog_drops;
      last_marks += port.last.queues[q].ecn_marked;
      last_drops += port.last.queues[q].drops + port.last.queues[q].watchdog_drops;
      hwm = std::max(hwm, c.queues[q].max_bytes);
    }
    const double rx_gbps = (c.rx_bytes - port.last.rx_bytes) * 8 / interval / 1e9;
    const double tx_gbps = (c.tx_bytes - port.last.tx_bytes) * 8 / interval / 1e9;
    fmt::print("{:8.3f} s port {} {:>5}: rx {:8} pkt {:7.3f} Gb/s | tx {:8} pkt {:7.3f} Gb/s | "
               "q {:>9} max {:>9} (all-time {:>9}) | marks {:7} drops {:6} | xoff {} xon {} "
               "pfc-rx {} | no-route {}\n",
               secs, p, human_rate(port.rate_bps), c.rx_packets - port.last.rx_packets, rx_gbps,
               c.tx_packets - port.last.tx_packets, tx_gbps,
               human_bytes(sw_->port_queue_bytes(static_cast<uint16_t>(p))),
               human_bytes(port.interval_qmax), human_bytes(hwm), marks - last_marks,
               drops - last_drops, c.tx_xoff - port.last.tx_xoff, c.tx_xon - port.last.tx_xon,
               c.rx_pfc - port.last.rx_pfc, c.no_route - port.last.no_route);
    port.last = c;
    port.interval_qmax = 0;
  }
  std::fflush(stdout);
}

// Every engine::kLinkPollNs: each switch port's link (any member up; one
// whose PMD cannot tell counts as down). A port whose link goes down is
// down in the model too (Switch::set_port_up: its queues flushed, ECMP
// around it, PFC on the link ended), as a switch does when a cable is
// pulled or a peer process leaves; it comes back with its link.
void App::poll_links(uint64_t now) {
  next_link_poll_ = now + engine::kLinkPollNs;
  for (size_t p = 0; p < ports_.size(); ++p) {
    SwitchPort& port = ports_[p];
    bool up = false;
    for (size_t mi : port.members)
      up |= engine::port_link_up(members_[mi].port_id).value_or(false);
    if (up) port.link_seen_up = true;
    if (!port.link_seen_up || up == port.link_up) continue;
    port.link_up = up;
    if (!up) ++port.link_downs;
    sw_->set_port_up(static_cast<uint16_t>(p), up, now);
    fmt::print("port {}: link {}\n", p, up ? "up" : "down");
    std::fflush(stdout);
  }
}

void App::report(uint64_t now) {
  nlohmann::json j;
  j["duration_s"] = (now - start_ns_) / 1e9;
  j["tx_lag_ns"] = {{"max", lag_max_ns_},
                    {"mean", lag_count_ ? lag_sum_ns_ / lag_count_ : 0},
                    {"count", lag_count_}};
  j["captured"] = captured_;
  fmt::print("droce-switch counters after {:.3f} s\n", (now - start_ns_) / 1e9);
  for (size_t p = 0; p < ports_.size(); ++p) {
    const fabric::PortCounters& c = sw_->counters(static_cast<uint16_t>(p));
    std::string names;
    for (size_t mi : ports_[p].members) names += (names.empty() ? "" : "+") + members_[mi].name;
    fmt::print("port {} [{}] rate {}:\n", p, names, human_rate(ports_[p].rate_bps));
    nlohmann::json jp;
    jp["members"] = nlohmann::json::array();
    jp["rate_bps"] = ports_[p].rate_bps;
    auto put = [&](std::string_view k, uint64_t v) {
      jp[std::string(k)] = v;
      if (v) fmt::print("  {:<22} {}\n", k, v);
    };
    put("rx_packets", c.rx_packets);
    put("rx_bytes", c.rx_bytes);
    put("tx_packets", c.tx_packets);
    put("tx_bytes", c.tx_bytes);
    put("rx_pfc", c.rx_pfc);
    put("rx_pause_8023x", c.rx_pause_8023x);
    put("rx_bad", c.rx_bad);
    put("no_route", c.no_route);
    put("down_drops", c.down_drops);
    put("tx_xoff", c.tx_xoff);
    put("tx_xon", c.tx_xon);
    put("int_stamped", c.int_stamped);
    put("int_full", c.int_full);
    put("flooded", ports_[p].flooded);
    put("link_downs", ports_[p].link_downs);
    jp["link_up"] = ports_[p].link_up;
    if (!ports_[p].link_up) fmt::print("  link down\n");
    uint64_t marks = 0, drops = 0, qmax = 0;
    nlohmann::json jq = nlohmann::json::object();
    for (size_t q = 0; q < fabric::kNumClasses; ++q) {
      const fabric::QueueCounters& k = c.queues[q];
      marks += k.ecn_marked;
      drops += k.drops + k.watchdog_drops;
      qmax = std::max(qmax, k.max_bytes);
      if (!k.enq_packets && !k.drops) continue;
      fmt::print("  tc{}: enq {} pkt / {} B, tx {} pkt, drops {} ({} B), watchdog drops {}, "
                 "ecn marked {}, not-ect {}, max {}\n",
                 q, k.enq_packets, k.enq_bytes, k.tx_packets, k.drops, k.drop_bytes,
                 k.watchdog_drops, k.ecn_marked, k.ecn_not_ect, human_bytes(k.max_bytes));
      jq[std::to_string(q)] = {{"enq_packets", k.enq_packets}, {"enq_bytes", k.enq_bytes},
                               {"tx_packets", k.tx_packets},   {"tx_bytes", k.tx_bytes},
                               {"drops", k.drops},             {"drop_bytes", k.drop_bytes},
                               {"watchdog_drops", k.watchdog_drops},
                               {"ecn_marked", k.ecn_marked},   {"ecn_not_ect", k.ecn_not_ect},
                               {"max_bytes", k.max_bytes}};
    }
    for (size_t q = 0; q < fabric::kNumClasses; ++q)
      if (c.watchdog_triggers[q]) fmt::print("  tc{} watchdog triggers {}\n", q, c.watchdog_triggers[q]);
    jp["ecn_marked"] = marks;
    jp["drops"] = drops;
    jp["queue_max_bytes"] = qmax;
    jp["queues"] = jq;
    for (size_t mi : ports_[p].members) {
      const Member& m = members_[mi];
      fmt::print("  dpdk {}: rx {} frames / {} B, tx {} frames / {} B, tx dropped {}, "
                 "alloc failed {}, too big {}\n",
                 m.name, m.rx_frames, m.rx_bytes, m.tx_frames, m.tx_bytes, m.tx_dropped,
                 m.tx_alloc_failed, m.tx_too_big);
      jp["members"].push_back({{"name", m.name},           {"rx_frames", m.rx_frames},
                               {"rx_bytes", m.rx_bytes},   {"tx_frames", m.tx_frames},
                               {"tx_bytes", m.tx_bytes},   {"tx_dropped", m.tx_dropped},
                               {"tx_alloc_failed", m.tx_alloc_failed},
                               {"tx_too_big", m.tx_too_big}});
    }
    j["ports"].push_back(jp);
  }
  fmt::print("tx lag behind the model: mean {} ns, max {} ns over {} departures; captured {}\n",
             lag_count_ ? lag_sum_ns_ / lag_count_ : 0, lag_max_ns_, lag_count_, captured_);
  std::fflush(stdout);
  if (!s_.json.empty()) {
    std::ofstream f(s_.json);
    f << j.dump(2) << "\n";
    if (!f) fmt::print(stderr, "droce-switch: warning: cannot write '{}'\n", s_.json);
  }
}

int App::run() {
  start_ns_ = engine::now_ns();
  {
    const auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
    wall_offset_ns_ = static_cast<int64_t>(wall) - static_cast<int64_t>(start_ns_);
  }
  fmt::print("droce-switch: {} port(s), {} route(s); Ctrl-C stops\n", ports_.size(),
             s_.routes.size());
  for (size_t p = 0; p < ports_.size(); ++p) {
    std::string names;
    for (size_t mi : ports_[p].members) names += (names.empty() ? "" : "+") + members_[mi].name;
    const auto& e = sw_->config().ports[p].ecn;
    fmt::print("  port {}: {} at {}, ecn {} kmin {} kmax {} pmax {} k {}\n", p, names,
               human_rate(ports_[p].rate_bps),
               e.mode == fabric::MarkMode::kOff ? "off"
               : e.mode == fabric::MarkMode::kRed ? "red" : "step",
               human_bytes(e.kmin_bytes), human_bytes(e.kmax_bytes), e.pmax,
               human_bytes(e.step_bytes));
  }
  std::fflush(stdout);
  const uint64_t interval_ns = static_cast<uint64_t>(s_.stats_interval * 1e9);
  const uint64_t end_ns =
      s_.duration > 0 ? start_ns_ + static_cast<uint64_t>(s_.duration * 1e9) : fabric::kNever;
  uint64_t next_stats = interval_ns ? start_ns_ + interval_ns : fabric::kNever;
  uint64_t last_stats = start_ns_;
  auto emit = [this](fabric::Departure&& d) { ports_[d.port].held.push_back(std::move(d)); };
  while (!g_stop) {
    const uint64_t now = engine::now_ns();  // the one clock read of this iteration
    uint64_t rx_before = 0;
    for (const Member& m : members_) rx_before += m.rx_frames;
    if (now >= next_link_poll_) poll_links(now);
    rx_all(now);
    sw_->advance(now, emit);
    tx_due(now);
    flush_tx();
    uint64_t rx_after = 0;
    for (const Member& m : members_) rx_after += m.rx_frames;
    for (size_t p = 0; p < ports_.size(); ++p)
      ports_[p].interval_qmax = std::max(ports_[p].interval_qmax,
                                         sw_->port_queue_bytes(static_cast<uint16_t>(p)));
    if (now >= next_stats) {
      live_stats(now, (now - last_stats) / 1e9);
      last_stats = now;
      next_stats = now + interval_ns;
    }
    if (now >= end_ns) break;
    if (s_.idle_sleep_us && rx_after == rx_before) {
      // Nothing arrived: sleep until the next modelled event, at most
      // idle_sleep_us (a frame arriving meanwhile waits that long).
      uint64_t next = sw_->next_event_time();
      for (const SwitchPort& p : ports_)
        if (!p.held.empty()) next = std::min(next, p.held.front().time);
      const uint64_t t = engine::now_ns();
      const uint64_t cap = t + s_.idle_sleep_us * 1000ull;
      const uint64_t until = std::min(next, cap);
      if (until > t + 2000)
        std::this_thread::sleep_for(std::chrono::nanoseconds(until - t));
    }
  }
  const uint64_t now = engine::now_ns();
  if (interval_ns && now > last_stats + interval_ns / 10) live_stats(now, (now - last_stats) / 1e9);
  report(now);
  return kExitOk;
}

void App::close() {
  if (closed_) return;
  closed_ = true;
  if (dumper_) {
    pcap_dump_close(dumper_);
    dumper_ = nullptr;
  }
  if (pcap_dead_) {
    pcap_close(pcap_dead_);
    pcap_dead_ = nullptr;
  }
  for (Member& m : members_) {
    for (rte_mbuf* mb : m.tx) rte_pktmbuf_free(mb);
    m.tx.clear();
    rte_eth_dev_stop(m.port_id);
    rte_eth_dev_close(m.port_id);
  }
}

// ---- command line ----------------------------------------------------------

int switch_main(int argc, char** argv) {
  engine::SplitArgs args = engine::split_eal_args(argc, argv);
  std::vector<char*>& app_argv = args.app;

  CLI::App cli{"droce-switch: the droce fabric switch model on DPDK ports, in real time\n"
               "usage: droce-switch [EAL options] -- [options]  (docs/SWITCH.md)"};
  std::string config;
  std::vector<std::string> port_specs, route_specs;
  std::string rate, buffer, buffer_mode, port_buffer, classifier;
  std::string ecn_mode, ecn_point, kmin, kmax, ecn_k;
  double pmax = -1;
  bool pfc = false, int_on = false;
  std::string pfc_prios, xoff, xon, pfc_watchdog;
  uint32_t pfc_quanta = 0;
  uint64_t seed = 0;
  Settings s;
  cli.add_option("--config", config, "TOML file: [switch], [[ports]], [[routes]]");
  cli.add_option("--port", port_specs,
                 "switch port: NAME[+NAME...][@RATE] (DPDK port names or ids; repeat, in "
                 "port order)");
  cli.add_option("--route", route_specs,
                 "PREFIX[/LEN]=PORT[,PORT...]: destination route (several ports: ECMP); "
                 "PREFIX may be 'default' or 'default6'");
  cli.add_option("--rate", rate, "default port rate (default 10G)");
  cli.add_option("--buffer", buffer, "shared buffer (default 12MiB)");
  cli.add_option("--buffer-mode", buffer_mode, "shared or per_port");
  cli.add_option("--port-buffer", port_buffer, "per-port buffer for per_port (default 1MiB)");
  cli.add_option("--classifier", classifier, "dscp or pcp");
  cli.add_option("--ecn", ecn_mode, "red, step or off (default red)");
  cli.add_option("--ecn-point", ecn_point, "dequeue or enqueue");
  cli.add_option("--kmin", kmin, "RED Kmin (default scaled with the port rate)");
  cli.add_option("--kmax", kmax, "RED Kmax");
  cli.add_option("--pmax", pmax, "RED Pmax, 0..1 (default 0.2)");
  cli.add_option("--ecn-k", ecn_k, "step marking threshold K");
  cli.add_flag("--pfc", pfc, "PFC on (priorities --pfc-priorities)");
  cli.add_option("--pfc-priorities", pfc_prios, "lossless priorities, e.g. 3 or 3,4 (default 3)");
  cli.add_option("--xoff", xoff, "PFC XOFF threshold per ingress port and priority");
  cli.add_option("--xon", xon, "PFC XON threshold");
  cli.add_option("--pfc-quanta", pfc_quanta, "pause quanta in XOFF frames (1..65535)");
  cli.add_option("--pfc-watchdog", pfc_watchdog, "PFC storm watchdog time (0 = off)");
  cli.add_flag("--int", int_on, "INT hop records on RoCE data (docs/INT.md)");
  cli.add_option("--seed", seed, "seed of RED draws and the ECMP hash");
  cli.add_option("--capture", s.capture, "pcap (ns timestamps) of every frame the switch sends");
  cli.add_option("--json", s.json, "write the final counters as JSON");
  cli.add_option("--stats-interval", s.stats_interval,
                 "seconds between live stats lines (default 1, 0 = none)");
  cli.add_option("--duration", s.duration, "stop after this many seconds (default: until "
                                           "SIGINT/SIGTERM)");
  cli.add_option("--idle-sleep-us", s.idle_sleep_us,
                 "sleep up to this long when nothing arrived (shared CPUs; default 0: busy "
                 "poll)");
  cli.add_option("--burst", s.burst, "RX burst size (default 32)");
  cli.add_option("--mbufs", s.mbufs, "mbufs per DPDK port (default: from descriptors)");
  const int rc = apps::parse_options_named(cli, app_argv, "droce-switch", [&] {
    if (!config.empty()) load_config(config, s);
    // Flags override the file.
    if (cli.count("--rate")) s.default_rate_bps = parse_rate("--rate", rate);
    for (const auto& p : port_specs) s.ports.push_back(parse_port_spec("--port", p));
    for (const auto& r : route_specs) s.routes.push_back(parse_route_spec("--route", r));
    if (cli.count("--buffer")) s.cfg.shared_buffer_bytes = parse_size("--buffer", buffer, 4096);
    if (cli.count("--port-buffer"))
      s.port_buffer_bytes = parse_size("--port-buffer", port_buffer, 4096);
    if (cli.count("--buffer-mode")) {
      if (buffer_mode == "shared") s.cfg.buffer_mode = fabric::BufferMode::kShared;
      else if (buffer_mode == "per_port") s.cfg.buffer_mode = fabric::BufferMode::kPerPort;
      else bad("--buffer-mode", fmt::format("'{}' is not one of: shared, per_port", buffer_mode));
    }
    if (cli.count("--classifier")) {
      if (classifier == "dscp") s.cfg.classifier = fabric::Classifier::kDscp;
      else if (classifier == "pcp") s.cfg.classifier = fabric::Classifier::kPcp;
      else bad("--classifier", fmt::format("'{}' is not one of: dscp, pcp", classifier));
    }
    if (cli.count("--ecn")) {
      if (ecn_mode == "red") s.ecn.mode = fabric::MarkMode::kRed;
      else if (ecn_mode == "step") s.ecn.mode = fabric::MarkMode::kStep;
      else if (ecn_mode == "off") s.ecn.mode = fabric::MarkMode::kOff;
      else bad("--ecn", fmt::format("'{}' is not one of: red, step, off", ecn_mode));
    }
    if (cli.count("--ecn-point")) {
      if (ecn_point == "dequeue") s.ecn.point = fabric::MarkPoint::kDequeue;
      else if (ecn_point == "enqueue") s.ecn.point = fabric::MarkPoint::kEnqueue;
      else bad("--ecn-point", fmt::format("'{}' is not one of: dequeue, enqueue", ecn_point));
    }
    if (cli.count("--kmin") || cli.count("--kmax") || cli.count("--ecn-k")) {
      if (s.ecn_auto) {
        // Fixed thresholds: start from the defaults of the default rate.
        const auto d = fabric::ecn_defaults_for_rate(s.default_rate_bps, s.ecn.mode);
        s.ecn.kmin_bytes = d.kmin_bytes;
        s.ecn.kmax_bytes = d.kmax_bytes;
        s.ecn.step_bytes = d.step_bytes;
      }
      s.ecn_auto = false;
      if (cli.count("--kmin")) s.ecn.kmin_bytes = parse_size("--kmin", kmin);
      if (cli.count("--kmax")) s.ecn.kmax_bytes = parse_size("--kmax", kmax);
      if (cli.count("--ecn-k")) s.ecn.step_bytes = parse_size("--ecn-k", ecn_k);
    }
    if (cli.count("--pmax")) {
      if (!(pmax >= 0 && pmax <= 1)) bad("--pmax", fmt::format("{} is out of range 0..1", pmax));
      s.ecn.pmax = pmax;
    }
    if (cli.count("--pfc-priorities") && !pfc && !s.cfg.pfc.enabled_priorities)
      bad("--pfc-priorities", "given without --pfc");
    if (pfc || cli.count("--pfc-priorities"))
      s.cfg.pfc.enabled_priorities =
          cli.count("--pfc-priorities") ? parse_priorities("--pfc-priorities", pfc_prios)
          : s.cfg.pfc.enabled_priorities ? s.cfg.pfc.enabled_priorities
                                         : static_cast<uint8_t>(1u << 3);
    if (cli.count("--xoff")) s.cfg.pfc.xoff_bytes = parse_size("--xoff", xoff, 1);
    if (cli.count("--xon")) s.cfg.pfc.xon_bytes = parse_size("--xon", xon);
    if (cli.count("--pfc-quanta")) {
      if (pfc_quanta < 1 || pfc_quanta > 0xFFFF)
        bad("--pfc-quanta", fmt::format("{} is out of range 1..65535", pfc_quanta));
      s.cfg.pfc.pause_quanta = static_cast<uint16_t>(pfc_quanta);
    }
    if (cli.count("--pfc-watchdog")) s.cfg.pfc.watchdog_ns = parse_time("--pfc-watchdog", pfc_watchdog);
    if (int_on) s.cfg.int_cfg.enabled = true;
    if (cli.count("--seed")) s.cfg.seed = seed;
    validate(s);
  });
  if (rc >= 0) return rc;

  // Idle sleeps are short: the default timer slack (50 us) would blur them.
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  return apps::run_app_named("droce-switch", [&] {
    engine::init_eal(static_cast<int>(args.eal.size()), args.eal.data());
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    App app(std::move(s));
    app.open_ports();
    const int status = app.run();
    app.close();
    return status;
  });
}

}  // namespace
}  // namespace droce::switchapp

int main(int argc, char** argv) { return droce::switchapp::switch_main(argc, argv); }
