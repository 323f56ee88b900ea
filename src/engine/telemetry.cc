// DPDK telemetry: /droce/stats, /droce/port, /droce/neighbours and
// /droce/qp read the latest snapshot under its lock, on DPDK's telemetry
// thread; they never touch a worker.
#include <rte_telemetry.h>

#include <string>

#include "droce/options/values.h"
#include "engine_impl.h"

namespace droce::engine {

Engine::Impl* g_engine = nullptr;
std::mutex g_engine_mu;

namespace {

void add_endpoint_counters(rte_tel_data* d, const endpoint::EndpointCounters& c) {
  c.for_each([d](std::string_view name, uint64_t v) {
    // Parse errors only when they happened, to keep the dictionary short.
    if (v == 0 && name.starts_with("rx_error_")) return;
    rte_tel_data_add_dict_u64(d, std::string(name).c_str(), v);
  });
}

// A telemetry callback reading the engine's latest snapshot under its
// locks; -EINVAL while no engine is up.
template <int (*Read)(const Snapshot&, const char* params, rte_tel_data*)>
int on_latest(const char*, const char* params, rte_tel_data* d) {
  std::lock_guard lock(g_engine_mu);
  if (!g_engine) return -EINVAL;
  std::lock_guard lock2(g_engine->latest_mu);
  return Read(g_engine->latest, params, d);
}

// /droce/stats: totals over every port and QP.
int tel_stats(const Snapshot& s, const char*, rte_tel_data* d) {
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "taken_ns", s.taken_ns);
  rte_tel_data_add_dict_u64(d, "ports", s.ports.size());
  rte_tel_data_add_dict_u64(d, "qps", s.qps.size());
  endpoint::EndpointCounters ep;
  PortCounters pc;
  // Per worker lcore: the QPs it runs and what its shards received and
  // sent, summed over the ports (shows sharding at work).
  std::map<unsigned, std::array<uint64_t, 3>> per_lcore;
  for (const PortSnapshot& p : s.ports) {
    ep += p.endpoint;
    pc += p.port;
    for (const ShardSnapshot& sh : p.shards) {
      auto& v = per_lcore[sh.lcore];
      v[0] += sh.qps;
      v[1] += sh.endpoint.rx_delivered;
      v[2] += sh.endpoint.tx_frames;
    }
  }
  rte_tel_data_add_dict_u64(d, "lcores", per_lcore.size());
  for (const auto& [lcore, v] : per_lcore) {
    rte_tel_data_add_dict_u64(d, fmt::format("lcore{}_qps", lcore).c_str(), v[0]);
    rte_tel_data_add_dict_u64(d, fmt::format("lcore{}_rx_delivered", lcore).c_str(), v[1]);
    rte_tel_data_add_dict_u64(d, fmt::format("lcore{}_tx_frames", lcore).c_str(), v[2]);
  }
  add_endpoint_counters(d, ep);
  pc.for_each([&](std::string_view name, uint64_t v) {
    const std::string key = fmt::format("port_{}", name);
    rte_tel_data_add_dict_u64(d, key.c_str(), v);
  });
  transport::QpCounters qc;
  for (const QpSnapshot& q : s.qps) qc += q.counters;
  qc.for_each([&](std::string_view name, uint64_t v) {
    if (v == 0) return;  // the dict holds 256 entries at most
    const std::string key = fmt::format("qp_{}", name);
    rte_tel_data_add_dict_u64(d, key.c_str(), v);
  });
  return 0;
}

// The port a telemetry parameter names by index, or null.
const PortSnapshot* port_named(const Snapshot& s, const char* params) {
  char* end = nullptr;
  const unsigned long idx = std::strtoul(params, &end, 0);
  if (end == params || *end != '\0') return nullptr;
  for (const PortSnapshot& p : s.ports)
    if (p.index == idx) return &p;
  return nullptr;
}

// /droce/port[,<index>]: without a parameter, the list of port indexes.
int tel_port(const Snapshot& s, const char* params, rte_tel_data* d) {
  if (!params || !*params) {
    rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
    for (const PortSnapshot& p : s.ports) rte_tel_data_add_array_int(d, static_cast<int>(p.index));
    return 0;
  }
  const PortSnapshot* found = port_named(s, params);
  if (!found) return -EINVAL;
  const PortSnapshot& p = *found;
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_string(d, "name", p.name.c_str());
  rte_tel_data_add_dict_u64(d, "port_id", p.port_id);
  rte_tel_data_add_dict_u64(d, "lcore", p.lcore);
  rte_tel_data_add_dict_u64(d, "shards", p.shards.size());
  for (const ShardSnapshot& sh : p.shards) {
    const auto key = [&](std::string_view what) {
      return fmt::format("shard{}_{}", sh.index, what);
    };
    rte_tel_data_add_dict_u64(d, key("lcore").c_str(), sh.lcore);
    rte_tel_data_add_dict_u64(d, key("qps").c_str(), sh.qps);
    rte_tel_data_add_dict_int(d, key("tx_queue").c_str(), sh.tx_queue);
    rte_tel_data_add_dict_int(d, key("rx_queue").c_str(), sh.rx_queue);
    rte_tel_data_add_dict_u64(d, key("rx_delivered").c_str(), sh.endpoint.rx_delivered);
    rte_tel_data_add_dict_u64(d, key("tx_frames").c_str(), sh.endpoint.tx_frames);
  }
  add_endpoint_counters(d, p.endpoint);
  p.port.for_each([&](std::string_view name, uint64_t v) {
    const std::string key = fmt::format("port_{}", name);
    rte_tel_data_add_dict_u64(d, key.c_str(), v);
  });
  rte_tel_data_add_dict_u64(d, "eth_ipackets", p.eth_ipackets);
  rte_tel_data_add_dict_u64(d, "eth_opackets", p.eth_opackets);
  rte_tel_data_add_dict_u64(d, "eth_ibytes", p.eth_ibytes);
  rte_tel_data_add_dict_u64(d, "eth_obytes", p.eth_obytes);
  rte_tel_data_add_dict_u64(d, "eth_imissed", p.eth_imissed);
  rte_tel_data_add_dict_u64(d, "eth_ierrors", p.eth_ierrors);
  rte_tel_data_add_dict_u64(d, "eth_oerrors", p.eth_oerrors);
  rte_tel_data_add_dict_u64(d, "eth_rx_nombuf", p.eth_rx_nombuf);
  rte_tel_data_add_dict_u64(d, "mempool_size", p.mempool_size);
  rte_tel_data_add_dict_u64(d, "mempool_avail", p.mempool_avail);
  rte_tel_data_add_dict_u64(d, "link_up", p.link_up ? 1 : 0);
  rte_tel_data_add_dict_u64(d, "neighbours", p.neighbours.size());
  return 0;
}

// /droce/neighbours,<port>: the port's neighbour cache, address -> "MAC state".
int tel_neighbours(const Snapshot& s, const char* params, rte_tel_data* d) {
  if (!params || !*params) return -EINVAL;
  const PortSnapshot* p = port_named(s, params);
  if (!p) return -EINVAL;
  rte_tel_data_start_dict(d);
  for (const NeighbourSnapshot& n : p->neighbours) {
    const std::string v = n.mac + " " + n.state;
    rte_tel_data_add_dict_string(d, n.ip.c_str(), v.c_str());
  }
  return 0;
}

// /droce/qp[,<qpn> | ,<port>:<qpn>]: without a parameter, the list of QPNs.
int tel_qp(const Snapshot& s, const char* params, rte_tel_data* d) {
  if (!params || !*params) {
    rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
    for (const QpSnapshot& q : s.qps) rte_tel_data_add_array_int(d, static_cast<int>(q.qpn));
    return 0;
  }
  std::optional<unsigned long> port;
  const char* p = params;
  char* end = nullptr;
  unsigned long v = std::strtoul(p, &end, 0);
  if (end == p) return -EINVAL;
  if (*end == ':') {
    port = v;
    p = end + 1;
    v = std::strtoul(p, &end, 0);
    if (end == p) return -EINVAL;
  }
  if (*end != '\0') return -EINVAL;
  for (const QpSnapshot& q : s.qps) {
    if (q.qpn != v || (port && q.port != *port)) continue;
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "port", q.port);
    rte_tel_data_add_dict_u64(d, "qpn", q.qpn);
    rte_tel_data_add_dict_u64(d, "lcore", q.lcore);
    rte_tel_data_add_dict_string(d, "type", std::string(transport::to_string(q.type)).c_str());
    rte_tel_data_add_dict_string(d, "state", std::string(transport::to_string(q.state)).c_str());
    rte_tel_data_add_dict_u64(d, "dest_qpn", q.dest_qpn);
    rte_tel_data_add_dict_u64(d, "next_send_psn", q.next_send_psn);
    rte_tel_data_add_dict_u64(d, "expected_psn", q.expected_psn);
    rte_tel_data_add_dict_u64(d, "send_queue_depth", q.send_queue_depth);
    rte_tel_data_add_dict_u64(d, "recv_queue_depth", q.recv_queue_depth);
    rte_tel_data_add_dict_string(d, "cc", q.cc.c_str());
    rte_tel_data_add_dict_u64(d, "cc_rate_bytes_per_sec", q.cc_rate_bytes_per_sec);
    q.counters.for_each([&](std::string_view name, uint64_t val) {
      const std::string key(name);
      rte_tel_data_add_dict_u64(d, key.c_str(), val);
    });
    return 0;
  }
  return -EINVAL;
}

}  // namespace

void register_telemetry() {
  static bool done = false;  // commands cannot be unregistered: once per process
  if (done) return;
  done = true;
  rte_telemetry_register_cmd("/droce/stats", on_latest<tel_stats>,
                             "droce totals: endpoint, port and QP counters. No parameters");
  rte_telemetry_register_cmd("/droce/port", on_latest<tel_port>,
                             "droce port counters. Parameter: port index (none: list)");
  rte_telemetry_register_cmd("/droce/neighbours", on_latest<tel_neighbours>,
                             "The port's neighbour cache (address: MAC state). Parameter: port index");
  rte_telemetry_register_cmd("/droce/qp", on_latest<tel_qp>,
                             "droce QP state and counters. Parameter: QPN or port:QPN "
                             "(none: list)");
}

}  // namespace droce::engine
