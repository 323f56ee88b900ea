// droce-endpoint: a RoCEv2 target on DPDK ports. QPs and MRs come from a
// TOML config file and/or flags; it answers WRITE/SEND/READ/atomics from a
// peer droce or from replayed packets (net_pcap), keeps each QP's receive
// queue full, and reports counters on exit and on DPDK telemetry. Regions
// can be loaded from and dumped to files, completions written as JSON
// lines. See docs/ENGINE.md.
//
//   droce-endpoint [EAL options] -- [--config FILE] [options]
//
// Exit codes: 0 ok, 1 runtime failure (mbuf leak), 2 bad configuration.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <unordered_map>

#include "app_options.h"
#include "cli_error.h"
#include "droce/cc/registry.h"
#include "droce/endpoint_config/completion_log.h"
#include "droce/endpoint_config/config.h"
#include "droce/engine/app_main.h"
#include "droce/engine/engine.h"
#include "droce/options/values.h"
#include "droce/transport/requester.h"

namespace {

using namespace droce;
using endpoint_config::CompletionLog;
using endpoint_config::Definitions;
using endpoint_config::MrDef;
using endpoint_config::QpDef;

std::atomic<bool> g_quit{false};
void on_signal(int) { g_quit.store(true); }

struct Options {
  std::string config;
  std::vector<std::string> ports;
  std::vector<std::string> addresses;
  std::vector<std::string> pings;
  double duration_s = 0;
  uint64_t exit_when_idle_ms = 0;
  double stats_interval_s = 0;
  std::string capture;
  std::string json_out;
  std::string completions;
  uint32_t idle_sleep_us = 0;
  double port_rate_gbps = 0;
  uint32_t mbufs = 0;
  uint16_t burst = 32;
  uint16_t rx_desc = 1024;
  uint16_t tx_desc = 1024;
  uint32_t shards = 1;
  std::string shard_tx = "auto";
  std::string shard_rx = "auto";
  endpoint_config::FlagDefs one;  // one QP / MR from flags
};

void add_options(CLI::App& cli, Options& o) {
  cli.add_option("--config", o.config, "TOML file with [[mr]] and [[qp]] tables")
      ->check(CLI::ExistingFile);
  cli.add_option("--port", o.ports, "port name or id (repeatable; default: port 0)");
  cli.add_option("--duration", o.duration_s, "stop after this many seconds (0 = never)")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--exit-when-idle", o.exit_when_idle_ms,
                 "stop when no frame was received or sent for this many ms");
  cli.add_option("--stats-interval", o.stats_interval_s, "live stats every N seconds")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--capture", o.capture, "pcap of what the port sends and receives");
  cli.add_option("--json", o.json_out, "write the final counters as JSON to this file");
  cli.add_option("--completions", o.completions,
                 "write every completion as a line of JSON to this file");
  cli.add_option("--idle-sleep-us", o.idle_sleep_us,
                 "sleep this long when idle (0 = busy poll)");
  cli.add_option("--port-rate", o.port_rate_gbps, "emulated link rate in Gb/s (0 = unlimited)")
      ->check(CLI::NonNegativeNumber);
  cli.add_option("--mbufs", o.mbufs, "mbufs per port pool (0 = sized from the rings)");
  cli.add_option("--burst", o.burst, "RX/TX burst size")->check(CLI::Range(1, 512));
  cli.add_option("--rx-desc", o.rx_desc, "RX descriptors")->check(CLI::Range(1, 32768));
  cli.add_option("--tx-desc", o.tx_desc, "TX descriptors")->check(CLI::Range(1, 32768));
  cli.add_option("--shards", o.shards,
                 "shard each port's QPs over N worker lcores (the first shard's lcore and the "
                 "next ones; default 1)");
  cli.add_option("--shard-tx", o.shard_tx,
                 "how shards transmit: auto, queues (a TX queue each) or ring (through "
                 "the first shard's lcore)");
  cli.add_option("--shard-rx", o.shard_rx,
                 "how shards receive: auto (an RX queue each where the NIC has RSS on "
                 "UDP), queues (an RX queue each) or one (one queue, handed over)");
  cli.add_option("--qpn", o.one.qpn, "QPN of a QP defined by flags");
  cli.add_option("--peer-qpn", o.one.peer_qpn, "its peer's QPN");
  cli.add_option("--qp-type", o.one.qp_type, "rc, uc or ud");
  cli.add_option("--rq-psn", o.one.rq_psn, "first PSN expected from the peer");
  cli.add_option("--sq-psn", o.one.sq_psn, "first PSN sent");
  cli.add_option("--local-mac", o.one.local_mac, "source MAC (default: the port's)");
  cli.add_option("--peer-mac", o.one.peer_mac,
                 "destination MAC (default: resolved from --peer-ip by ARP / neighbour "
                 "discovery)");
  cli.add_option("--ping", o.pings,
                 "send an ICMP echo request to this address every second from port 0, and "
                 "print the replies (repeatable)");
  cli.add_option("--address", o.addresses,
                 "an IPv4/IPv6 address the ports answer ARP, neighbour solicitations and ping "
                 "for, besides their QPs' local IPs (repeatable)");
  cli.add_option("--local-ip", o.one.local_ip, "source IPv4/IPv6 address");
  cli.add_option("--peer-ip", o.one.peer_ip, "destination IPv4/IPv6 address");
  cli.add_option("--mtu", o.one.mtu, "path MTU: 256..4096");
  apps::add_mark_options(cli, o.one.marks);
  cli.add_option("--cc", o.one.cc, "congestion control algorithm (" + cc::algorithm_names() + ")");
  cli.add_option("--cc-param", o.one.cc_params, "CC parameter name=value (repeatable)");
  apps::add_multipath_options(cli, o.one.multipath, " of the flag QP");
  cli.add_option("--mr-size", o.one.mr_size, "bytes of an MR defined by flags");
  cli.add_option("--mr-key", o.one.mr_key, "its lkey/rkey (default: allocated)");
  cli.add_option("--mr-iova", o.one.mr_iova, "the VA of its first byte (default 0)");
  cli.add_option("--mr-fill", o.one.mr_fill,
                 "zero, counter (byte at VA i = i mod 256), byte:<value> or file:<path>");
  cli.add_option("--mr-dump", o.one.mr_dump, "write its bytes to this file at exit");
  cli.add_option("--recv-wqes", o.one.recv_wqes, "receive WQEs posted on the flag QP");
  cli.add_option("--recv-size", o.one.recv_size, "bytes per receive WQE");
}

// A region's bytes written to a file at exit. The file is created when the
// region is, so a path that cannot be written is a configuration error
// (exit 2) before any traffic, not data lost at the end.
struct MrDump {
  engine::MrInfo mr;
  std::string path;
  std::FILE* f = nullptr;
};

// Each QP's receive queue as a ring of `count` buffers: WQE i (wr_id i)
// is the buffer at offset + i * length, and goes back on the queue as soon
// as its completion is taken, so the queue stays full and a peer is RNR
// NAKed (IBA 9.7.5.2.8) only while every buffer waits to be taken, not
// forever after `count` SENDs.
struct RecvRing {
  engine::QpHandle qp;
  uint64_t first_va = 0;  // a local VA is in the MR's iova space (mr.h)
  uint32_t length = 0, lkey = 0, count = 0;
  std::vector<uint32_t> pending;  // refused by a full receive queue

  void post(engine::Engine& eng, uint32_t i) {
    transport::Sge sge{first_va + uint64_t{i} * length, length, lkey};
    transport::RecvWr wr;
    wr.wr_id = i;
    wr.sg_list = std::span(&sge, 1);
    const int rc = eng.post_recv(qp, std::span(&wr, 1));
    if (rc == ENOMEM) pending.push_back(i);
    else if (rc != 0)
      throw std::runtime_error(fmt::format("post_recv on QP {:#x} refused: {}", qp.qpn,
                                           std::strerror(rc)));
  }
};

class RecvRings {
 public:
  RecvRing& add(engine::QpHandle qp, const engine::MrInfo& mr, uint64_t offset,
                uint32_t length, uint32_t count) {
    RecvRing& r = rings_[key(qp.port, qp.qpn)];
    r.qp = qp;
    r.first_va = mr.iova + offset;
    r.length = length;
    r.lkey = mr.lkey;
    r.count = count;
    return r;
  }

  // A receive completion gives its WQE back. Not a flushed one: its QP is
  // in the error state (IBA 10.3.1, 11.4.2.1), where a new WQE would only
  // be flushed in turn; an error completion that moved the QP to the error
  // state (IBA 9.9.3) is reposted once and comes back flushed.
  void consumed(engine::PortIndex port, const transport::WorkCompletion& wc) {
    if (!(wc.opcode & IBV_WC_RECV) || wc.status == IBV_WC_WR_FLUSH_ERR) return;
    auto it = rings_.find(key(port, wc.qp_num));
    if (it == rings_.end() || wc.wr_id >= it->second.count) return;
    to_post_.emplace_back(&it->second, static_cast<uint32_t>(wc.wr_id));
  }

  // Posts what completions gave back and what a full receive queue
  // refused before.
  void retry(engine::Engine& eng) {
    for (auto& [k, r] : rings_) {
      std::vector<uint32_t> again;
      again.swap(r.pending);
      for (uint32_t i : again) r.post(eng, i);
    }
    for (auto [r, i] : to_post_) r->post(eng, i);
    to_post_.clear();
  }

 private:
  static uint64_t key(engine::PortIndex port, uint32_t qpn) {
    return (uint64_t{port} << 32) | qpn;
  }
  std::unordered_map<uint64_t, RecvRing> rings_;
  std::vector<std::pair<RecvRing*, uint32_t>> to_post_;
};

// The ports, each with the IP interface its QPs and --address give it.
// Returns the addresses port 0 pings (--ping).
std::vector<wire::IpAddress> add_ports(engine::Engine& eng, Options& o, const Definitions& defs) {
  const engine::PortConfig::ShardTx shard_tx = apps::shard_tx_option(o.shard_tx);
  const engine::PortConfig::ShardRx shard_rx = apps::shard_rx_option(o.shard_rx);
  if (o.ports.empty()) o.ports.push_back("0");
  if (!o.capture.empty() && o.ports.size() > 1)
    throw ConfigError("--capture", "one file captures one port; give one --port");
  std::vector<wire::IpAddress> ping_to, addresses;
  for (const std::string& a : o.pings) ping_to.push_back(options::parse_ip("--ping", a));
  for (const std::string& a : o.addresses) addresses.push_back(options::parse_ip("--address", a));
  for (uint32_t index = 0; index < o.ports.size(); ++index) {
    engine::PortConfig pc;
    pc.name = o.ports[index];
    pc.capture = o.capture;
    pc.mbufs = o.mbufs;
    pc.burst = o.burst;
    pc.rx_desc = o.rx_desc;
    pc.tx_desc = o.tx_desc;
    pc.endpoint.port_rate_bytes_per_sec = static_cast<uint64_t>(o.port_rate_gbps * 1e9 / 8);
    pc.shards = o.shards;
    pc.shard_tx = shard_tx;
    pc.shard_rx = shard_rx;
    pc.endpoint.interface = endpoint_config::port_interface(index, addresses, defs.qps);
    const auto& itf = pc.endpoint.interface;
    // Pings leave port 0 from one of its addresses of the same family
    // (IPv6: at least its link-local one, which any address brings).
    for (const wire::IpAddress& dst : index == 0 ? ping_to : std::vector<wire::IpAddress>{}) {
      const bool can = dst.v6 ? !itf.addresses.empty()
                              : std::any_of(itf.addresses.begin(), itf.addresses.end(),
                                            [](const wire::IpAddress& a) { return !a.v6; });
      if (!can)
        throw ConfigError("--ping", fmt::format("{}: port 0 has no {}address to ping from (give "
                                                "--address or a QP's local_ip)",
                                                options::format_ip(dst), dst.v6 ? "" : "IPv4 "));
    }
    try {
      eng.add_port(pc);
    } catch (const ConfigError& e) {
      apps::rethrow_as_shard_flag(e);  // the engine names its field; the user gave a flag
    }
  }
  return ping_to;
}

// The registered regions, filled, and the files they are dumped to at exit.
struct Regions {
  std::vector<engine::MrInfo> mrs;
  std::vector<MrDump> dumps;
  Regions() = default;
  Regions(const Regions&) = delete;
  Regions& operator=(const Regions&) = delete;
  ~Regions() {  // on a configuration error after some were opened
    for (MrDump& m : dumps)
      if (m.f) std::fclose(m.f);
  }
};

void register_regions(engine::Engine& eng, const Definitions& defs, Regions& r) {
  for (const MrDef& d : defs.mrs) {
    if (d.port >= eng.port_count())
      throw ConfigError(d.where + ".port", fmt::format("no port {} (ports given: {})", d.port,
                                                       eng.port_count()));
    engine::MrSpec spec;
    spec.length = d.length;
    spec.key = d.key;
    spec.iova = d.iova;
    spec.access = d.access;
    try {
      r.mrs.push_back(eng.reg_mr(d.port, spec));
    } catch (const ConfigError& e) {
      throw ConfigError(d.where, e.what());
    }
    const engine::MrInfo& mr = r.mrs.back();
    endpoint_config::fill_region(mr.addr, mr.length, mr.iova, d);
    if (!d.dump.empty()) {
      std::FILE* f = std::fopen(d.dump.c_str(), "wb");
      if (!f)
        throw ConfigError(d.dump_option, fmt::format("cannot write {}: {}", d.dump,
                                                     std::strerror(errno)));
      r.dumps.push_back({mr, d.dump, f});
    }
  }
}

// A QP's receive ring in the region its recv.mr names.
void start_recv_ring(engine::Engine& eng, const QpDef& q, engine::QpHandle h,
                     const Regions& regions, RecvRings& rings) {
  const engine::MrInfo* mr = nullptr;
  for (const auto& m : regions.mrs)
    if (m.port == q.port && (!q.recv_mr || m.lkey == *q.recv_mr)) mr = &m;
  if (!mr) throw ConfigError(q.where + ".recv.mr", "no MR with that key on the QP's port");
  if (q.recv_offset + uint64_t{q.recv_count} * q.recv_length > mr->length)
    throw ConfigError(q.where + ".recv", fmt::format("{} x {} bytes from offset {} do not "
                                                     "fit in the MR ({} bytes)",
                                                     q.recv_count, q.recv_length, q.recv_offset,
                                                     mr->length));
  RecvRing& ring = rings.add(h, *mr, q.recv_offset, q.recv_length, q.recv_count);
  for (uint32_t i = 0; i < q.recv_count; ++i) ring.post(eng, i);
}

void create_qps(engine::Engine& eng, Definitions& defs, const Regions& regions,
                RecvRings& rings) {
  for (QpDef& q : defs.qps) {
    if (q.port >= eng.port_count())
      throw ConfigError(q.where + ".port", fmt::format("no port {} (ports given: {})", q.port,
                                                       eng.port_count()));
    endpoint_config::finish_path(q, eng.port_mac(q.port));
    engine::QpHandle h;
    try {
      h = eng.create_qp(q.port, q.spec);
    } catch (const ConfigError& e) {
      throw ConfigError(q.where, e.what());
    }
    if (int rc = eng.connect_qp(h, q.attr); rc != 0)
      throw ConfigError(q.where, fmt::format("the QP refused its attributes ({})",
                                             std::strerror(rc)));
    if (q.recv_count) start_recv_ring(eng, q, h, regions, rings);
    const auto& path = q.attr.path;
    fmt::print("qp {:#x} on port {}: {} -> {} peer qp {:#x}, rq_psn {:#x}, sq_psn {:#x}, "
               "mtu {}, cc {}\n",
               h.qpn, q.port, options::format_ip(path.src_ip), options::format_ip(path.dst_ip),
               q.attr.dest_qpn, q.attr.rq_psn, q.attr.sq_psn,
               transport::mtu_bytes(q.attr.path_mtu), q.spec.cc);
  }
  for (const auto& m : regions.mrs)
    fmt::print("mr key {:#x} on port {}: {} bytes at iova {:#x}\n", m.rkey, m.port, m.length,
               m.iova);
  std::fflush(stdout);
}

// Completions taken from the engine: logged, counted, and (while serving)
// each consumed receive WQE handed back to its ring.
struct Completions {
  CompletionLog log;
  uint64_t total = 0, errors = 0;
  std::vector<transport::WorkCompletion> wcs = std::vector<transport::WorkCompletion>(256);
  std::vector<engine::PortIndex> ports = std::vector<engine::PortIndex>(256);

  explicit Completions(const std::string& path) : log(path) {}
  void drain(engine::Engine& eng, RecvRings* rings) {
    for (size_t n; (n = eng.poll_completions(wcs, ports)) > 0;) {
      total += n;
      for (size_t i = 0; i < n; ++i) {
        errors += wcs[i].status != IBV_WC_SUCCESS;
        log.write(ports[i], wcs[i]);
        if (rings) rings->consumed(ports[i], wcs[i]);
      }
    }
    log.flush();
  }
};

// Serves until SIGINT/SIGTERM, --duration or --exit-when-idle: pings,
// completions, receive rings kept full, live stats.
void serve(engine::Engine& eng, const Options& o, const std::vector<wire::IpAddress>& ping_to,
           Completions& done, RecvRings& rings) {
  const uint64_t t0 = engine::now_ns();
  engine::Snapshot prev = eng.stats_now(), cur = prev;
  uint64_t last_live = t0, last_activity = t0, last_frames = 0;
  uint64_t next_ping = t0;
  uint16_t ping_seq = 0;
  while (!g_quit.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!ping_to.empty()) {
      if (engine::now_ns() >= next_ping) {
        ++ping_seq;
        for (const wire::IpAddress& a : ping_to) eng.ping(0, a, ping_seq);
        next_ping += 1'000'000'000;
      }
      for (const auto& r : eng.ping_replies(0))
        fmt::print("ping: reply from {} seq={} time={:.1f} us\n", options::format_ip(r.from),
                   r.sequence, static_cast<double>(r.rtt_ns) / 1e3);
      std::fflush(stdout);
    }
    done.drain(eng, &rings);
    rings.retry(eng);
    cur = eng.stats();
    const uint64_t now = engine::now_ns();
    uint64_t frames = 0;
    for (const auto& p : cur.ports) frames += p.endpoint.rx_frames + p.endpoint.tx_frames;
    if (frames != last_frames) {
      last_frames = frames;
      last_activity = now;
    }
    if (o.stats_interval_s > 0 && now - last_live >= o.stats_interval_s * 1e9) {
      fmt::print("{}", engine::format_live_stats(prev, cur));
      std::fflush(stdout);
      prev = cur;
      last_live = now;
    }
    if (o.duration_s > 0 && now - t0 >= o.duration_s * 1e9) break;
    if (o.exit_when_idle_ms && now - last_activity >= o.exit_when_idle_ms * 1'000'000) break;
  }
}

// After the workers stopped: the regions' final bytes, the counters, and
// the mbufs that must all be back. Returns the exit status.
int finish(engine::Engine& eng, const Options& o, Regions& regions, const Completions& done) {
  int rc = droce::kExitOk;
  for (MrDump& m : regions.dumps) {
    const bool ok = std::fwrite(m.mr.addr, 1, m.mr.length, m.f) == m.mr.length;
    if (std::fclose(m.f) != 0 || !ok) {
      fmt::print(stderr, "droce-endpoint: mr key {:#x}: writing {} failed\n", m.mr.rkey, m.path);
      rc = droce::kExitFailure;
    }
    m.f = nullptr;
  }
  eng.close_ports();
  const engine::Snapshot fin = eng.stats();
  fmt::print("--- droce-endpoint counters\n{}", engine::format_counters(fin));
  fmt::print("completions {} (errors {})\n", done.total, done.errors);
  bool json_written = true;
  if (!o.json_out.empty())
    json_written = apps::write_whole_file("droce-endpoint", "--json", o.json_out,
                                          engine::to_json(fin) + "\n");
  const auto missing = eng.mbufs_missing();
  for (size_t i = 0; i < missing.size(); ++i) {
    if (missing[i] != 0) {
      fmt::print(stderr, "droce-endpoint: mbuf leak: port {} pool is missing {} mbufs at "
                         "shutdown\n",
                 i, missing[i]);
      rc = droce::kExitFailure;
    }
  }
  if (rc == droce::kExitOk) fmt::print("mbufs: all pools full at shutdown\n");
  if (!json_written) rc = droce::kExitFailure;
  return rc;
}

int run(int argc, char** argv) {
  const int eal_args = engine::init_eal(argc, argv);
  argc -= eal_args;
  argv += eal_args;

  Options o;
  CLI::App cli{"droce-endpoint: a RoCEv2 target on DPDK ports (options after --)"};
  add_options(cli, o);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return cli.exit(e);
  } catch (const CLI::ParseError& e) {
    throw ConfigError("", e.what());
  }
  if (o.shards < 1 || o.shards > 128)
    throw ConfigError("--shards",
                      fmt::format("{} is out of range 1..128 (1 = no sharding)", o.shards));

  Completions done(o.completions);
  Definitions defs;
  if (!o.config.empty()) endpoint_config::load_config(o.config, defs);
  endpoint_config::flags_to_defs(o.one, defs);

  engine::EngineConfig ec;
  ec.idle_sleep_us = o.idle_sleep_us;
  if (o.exit_when_idle_ms)
    ec.stats_period_ns = std::min<uint64_t>(ec.stats_period_ns, o.exit_when_idle_ms * 250'000);
  engine::Engine eng(ec);
  const std::vector<wire::IpAddress> ping_to = add_ports(eng, o, defs);
  Regions regions;
  RecvRings rings;
  register_regions(eng, defs, regions);
  create_qps(eng, defs, regions, rings);

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  eng.start();
  serve(eng, o, ping_to, done, rings);
  eng.stop();
  // What the workers completed after the last poll (stopped, the engine
  // drains the CQs inline); nothing is reposted any more.
  done.drain(eng, nullptr);
  return finish(eng, o, regions, done);
}

}  // namespace

int main(int argc, char** argv) {
  return droce::apps::run_app_named("droce-endpoint", [&] { return run(argc, argv); });
}
