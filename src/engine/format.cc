// Console and JSON renderings of engine snapshots (shared by the apps).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "droce/engine/engine.h"
#include "droce/wire/packet.h"

namespace droce::engine {

namespace {

double rate(uint64_t a, uint64_t b, double secs) {
  return secs > 0 && b >= a ? static_cast<double>(b - a) / secs : 0.0;
}

// A counter block (anything with for_each(name, value)) as a JSON object.
template <class Counters>
nlohmann::ordered_json counters_json(const Counters& c) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  c.for_each([&](std::string_view n, uint64_t v) { j[std::string(n)] = v; });
  return j;
}

}  // namespace

std::string format_live_stats(const Snapshot& prev, const Snapshot& cur) {
  const double secs = cur.taken_ns > prev.taken_ns
                          ? static_cast<double>(cur.taken_ns - prev.taken_ns) / 1e9
                          : 0.0;
  std::string out;
  for (const PortSnapshot& p : cur.ports) {
    const PortSnapshot* q = nullptr;
    for (const PortSnapshot& x : prev.ports)
      if (x.index == p.index) q = &x;
    const PortSnapshot zero{};
    if (!q) q = &zero;
    out += fmt::format(
        "port {} {:<12} rx {:>10.0f} pps {:>9.3f} Gb/s  tx {:>10.0f} pps {:>9.3f} Gb/s  "
        "malformed {} unknown_qpn {} tx_dropped {} mbufs {}/{}\n",
        p.index, p.name, rate(q->endpoint.rx_frames, p.endpoint.rx_frames, secs),
        rate(q->endpoint.rx_bytes, p.endpoint.rx_bytes, secs) * 8 / 1e9,
        rate(q->port.tx_frames, p.port.tx_frames, secs),
        rate(q->port.tx_bytes, p.port.tx_bytes, secs) * 8 / 1e9, p.endpoint.rx_malformed,
        p.endpoint.rx_unknown_qpn, p.port.tx_dropped, p.mempool_avail, p.mempool_size);
  }
  return out;
}

std::string format_counters(const Snapshot& s, bool skip_zero) {
  std::string out;
  auto line = [&](std::string_view indent, std::string_view name, uint64_t v) {
    if (skip_zero && v == 0) return;
    out += fmt::format("{}{:<34} {}\n", indent, name, v);
  };
  for (const PortSnapshot& p : s.ports) {
    out += fmt::format("port {} ({}, port id {}, lcore {})\n", p.index, p.name, p.port_id,
                       p.lcore);
    p.endpoint.for_each([&](std::string_view n, uint64_t v) { line("  ", n, v); });
    p.port.for_each([&](std::string_view n, uint64_t v) {
      line("  ", fmt::format("port_{}", n), v);
    });
    line("  ", "eth_ipackets", p.eth_ipackets);
    line("  ", "eth_opackets", p.eth_opackets);
    line("  ", "eth_imissed", p.eth_imissed);
    line("  ", "eth_ierrors", p.eth_ierrors);
    line("  ", "eth_oerrors", p.eth_oerrors);
    line("  ", "eth_rx_nombuf", p.eth_rx_nombuf);
    out += fmt::format("  {:<34} {}/{}\n", "mbufs_available", p.mempool_avail,
                       p.mempool_size);
    if (!p.link_up) out += fmt::format("  {:<34} down\n", "link");
    if (!p.neighbours.empty()) line("  ", "neighbours", p.neighbours.size());
    // A sharded port: what each lcore did (the counters above are sums).
    if (p.shards.size() > 1)
      for (const ShardSnapshot& sh : p.shards)
        out += fmt::format("  shard {} lcore {}: qps {} tx_queue {} rx_delivered {} "
                           "tx_frames {} rx_from_ring {} tx_to_ring {} rx_queue {} "
                           "rx_dispatched {}\n",
                           sh.index, sh.lcore, sh.qps,
                           sh.tx_queue >= 0 ? std::to_string(sh.tx_queue) : "ring",
                           sh.endpoint.rx_delivered, sh.endpoint.tx_frames,
                           sh.port.rx_from_ring, sh.port.tx_to_ring,
                           sh.rx_queue >= 0 ? std::to_string(sh.rx_queue) : "ring",
                           sh.port.rx_dispatched);
  }
  for (const QpSnapshot& q : s.qps) {
    out += fmt::format("qp {:#x} (port {}, lcore {}, {}, {}, dest {:#x}, sq_psn {:#x}, "
                       "epsn {:#x}, cc {})\n",
                       q.qpn, q.port, q.lcore, transport::to_string(q.type),
                       transport::to_string(q.state), q.dest_qpn, q.next_send_psn,
                       q.expected_psn, q.cc);
    q.counters.for_each([&](std::string_view n, uint64_t v) { line("  ", n, v); });
  }
  return out;
}

std::string to_json(const Snapshot& s) {
  nlohmann::ordered_json j;
  j["taken_ns"] = s.taken_ns;
  j["ports"] = nlohmann::ordered_json::array();
  for (const PortSnapshot& p : s.ports) {
    nlohmann::ordered_json jp;
    jp["index"] = p.index;
    jp["port_id"] = p.port_id;
    jp["name"] = p.name;
    jp["lcore"] = p.lcore;
    jp["endpoint"] = counters_json(p.endpoint);
    jp["port"] = counters_json(p.port);
    jp["eth"] = {{"ipackets", p.eth_ipackets}, {"opackets", p.eth_opackets},
                 {"ibytes", p.eth_ibytes},     {"obytes", p.eth_obytes},
                 {"imissed", p.eth_imissed},   {"ierrors", p.eth_ierrors},
                 {"oerrors", p.eth_oerrors},   {"rx_nombuf", p.eth_rx_nombuf}};
    jp["mempool_size"] = p.mempool_size;
    jp["mempool_avail"] = p.mempool_avail;
    jp["link_up"] = p.link_up;
    jp["neighbours"] = nlohmann::ordered_json::array();
    for (const NeighbourSnapshot& n : p.neighbours)
      jp["neighbours"].push_back({{"ip", n.ip}, {"mac", n.mac}, {"state", n.state}});
    jp["shards"] = nlohmann::ordered_json::array();
    for (const ShardSnapshot& sh : p.shards) {
      nlohmann::ordered_json js;
      js["index"] = sh.index;
      js["lcore"] = sh.lcore;
      js["qps"] = sh.qps;
      js["tx_queue"] = sh.tx_queue;
      js["rx_queue"] = sh.rx_queue;
      js["rate_bytes_per_sec"] = sh.rate_bytes_per_sec;
      js["endpoint"] = counters_json(sh.endpoint);
      js["port"] = counters_json(sh.port);
      jp["shards"].push_back(std::move(js));
    }
    j["ports"].push_back(std::move(jp));
  }
  j["qps"] = nlohmann::ordered_json::array();
  for (const QpSnapshot& q : s.qps) {
    nlohmann::ordered_json jq;
    jq["port"] = q.port;
    jq["qpn"] = q.qpn;
    jq["lcore"] = q.lcore;
    jq["type"] = std::string(transport::to_string(q.type));
    jq["state"] = std::string(transport::to_string(q.state));
    jq["dest_qpn"] = q.dest_qpn;
    jq["next_send_psn"] = q.next_send_psn;
    jq["expected_psn"] = q.expected_psn;
    jq["cc"] = q.cc;
    jq["cc_rate_bytes_per_sec"] = q.cc_rate_bytes_per_sec;
    jq["counters"] = counters_json(q.counters);
    j["qps"].push_back(std::move(jq));
  }
  return j.dump(2);
}

}  // namespace droce::engine
