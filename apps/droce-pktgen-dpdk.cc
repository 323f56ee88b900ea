// droce-pktgen-dpdk: droce-pktgen's real-time modes on DPDK ports
// (docs/PKTGEN.md "DPDK modes").
//   --mode stream : raw RoCEv2 streams from one lcore (rte_eth_tx_burst),
//                   latency probes received on a port of this process.
//   --mode dpdk   : collective replay, one process per rank, RC QPs through
//                   the engine over a ring of links, OOB set-up over TCP.
// droce-pktgen --mode dpdk|stream execs this with the same arguments, so
// --mode may appear before or after the EAL options.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <rte_ethdev.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "app_options.h"
#include "cli_error.h"
#include "droce/engine/app_main.h"
#include "droce/engine/engine.h"
#include "droce/pktgen/config.h"
#include "droce/pktgen/dpdk_collective.h"
#include "droce/pktgen/dpdk_stream.h"

namespace droce::pktgen {
namespace {

using droce::ConfigError;

// "key=value,key=value" -> one stream.
DpdkStream parse_stream(const std::string& text, uint32_t default_id) {
  StreamConfig sc;
  sc.psn_mode = "inc";
  uint32_t id = default_id;
  uint64_t count = 0;
  Impairment imp;
  bool unlimited = false;
  uint32_t qpn = 0x11;
  size_t pos = 0;
  auto num = [&](const std::string& k, const std::string& v) -> uint64_t {
    try {
      size_t used = 0;
      const uint64_t x = std::stoull(v, &used, 0);
      if (used != v.size()) throw std::invalid_argument("");
      return x;
    } catch (const std::exception&) {
      throw ConfigError("--stream", fmt::format("{}={}: not a number", k, v));
    }
  };
  while (pos <= text.size() && !text.empty()) {
    const size_t comma = text.find(',', pos);
    const std::string tok = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    pos = comma == std::string::npos ? text.size() + 1 : comma + 1;
    if (tok.empty()) continue;
    const size_t eq = tok.find('=');
    const std::string k = tok.substr(0, eq);
    const std::string v = eq == std::string::npos ? "1" : tok.substr(eq + 1);
    if (k == "id") id = static_cast<uint32_t>(num(k, v));
    else if (k == "opcode") sc.opcode = v;
    else if (k == "payload") sc.payload_bytes = static_cast<uint32_t>(num(k, v));
    else if (k == "rate") sc.rate = v;
    else if (k == "line-rate") sc.line_rate_gbps = std::stod(v);
    else if (k == "count") count = num(k, v);
    else if (k == "ipv6") sc.ipv6 = num(k, v) != 0;
    else if (k == "vlan") sc.vlan = static_cast<int32_t>(num(k, v));
    else if (k == "pcp") sc.pcp = static_cast<uint32_t>(num(k, v));
    else if (k == "dscp") sc.dscp = static_cast<uint32_t>(num(k, v));
    else if (k == "ecn") sc.ecn = static_cast<uint32_t>(num(k, v));
    else if (k == "probe") sc.probe = num(k, v) != 0;
    else if (k == "qpn") qpn = static_cast<uint32_t>(num(k, v));
    else if (k == "qpn-mode") sc.qpn_mode = v;
    else if (k == "qpn-count") sc.qpn_count = static_cast<uint32_t>(num(k, v));
    else if (k == "psn-mode") sc.psn_mode = v;
    else if (k == "sport-mode") sc.udp_sport_mode = v;
    else if (k == "sport-count") sc.udp_sport_count = static_cast<uint32_t>(num(k, v));
    else if (k == "ip-mode") sc.ip_mode = v;
    else if (k == "ip-count") sc.ip_count = static_cast<uint32_t>(num(k, v));
    else if (k == "drop-every") imp.drop_every = num(k, v);
    else if (k == "dup-every") imp.dup_every = num(k, v);
    else if (k == "reorder-every") imp.reorder_every = num(k, v);
    else if (k == "unlimited") unlimited = num(k, v) != 0;
    else
      throw ConfigError("--stream", fmt::format(
          "unknown key '{}' (accepted: id opcode payload rate line-rate count ipv6 vlan pcp dscp ecn "
          "probe qpn qpn-mode qpn-count psn-mode sport-mode sport-count ip-mode ip-count drop-every "
          "dup-every reorder-every unlimited)", k));
  }
  PktgenConfig pc;
  pc.mode = Mode::kStream;
  pc.stream = sc;
  if (auto errs = validate(pc); !errs.empty())
    throw ConfigError("--stream", errs.front().to_string());

  DpdkStream d;
  StreamSpec& s = d.spec;
  s.stream_id = id;
  s.probe = sc.probe;
  s.payload_bytes = sc.payload_bytes;
  s.transport.opcode = *opcode_from_string(sc.opcode);
  s.transport.dest_qp = qpn;
  s.path.src_mac = {0x02, 0, 0, 0, 0, 0x01};
  s.path.dst_mac = {0x02, 0, 0, 0, 0, 0x02};
  s.path.vlan = sc.vlan >= 0 || sc.pcp != 0;
  s.path.vlan_id = static_cast<uint16_t>(std::max(sc.vlan, 0));
  s.path.pcp = static_cast<uint8_t>(sc.pcp);
  s.path.dscp = static_cast<uint8_t>(sc.dscp);
  s.path.ecn = static_cast<wire::Ecn>(sc.ecn);
  if (sc.ipv6) {
    s.path.src_ip.v6 = s.path.dst_ip.v6 = true;
    const uint8_t pre[4] = {0xfd, 0, 0, 0};
    std::memcpy(s.path.src_ip.bytes, pre, 4);
    std::memcpy(s.path.dst_ip.bytes, pre, 4);
    s.path.src_ip.bytes[15] = 1;
    s.path.dst_ip.bytes[15] = 2;
  } else {
    s.path.src_ip = wire::IpAddress::v4(0x0A000001);
    s.path.dst_ip = wire::IpAddress::v4(0x0A000002);
  }
  FieldRange::Mode m{};
  parse_field_mode(sc.qpn_mode, &m);
  if (m == FieldRange::Mode::kIncrement) s.dest_qp = FieldRange::increment(qpn, sc.qpn_count);
  if (m == FieldRange::Mode::kRandom) s.dest_qp = FieldRange::random(qpn, sc.qpn_count, id + 1);
  parse_field_mode(sc.psn_mode, &m);
  if (m == FieldRange::Mode::kIncrement) s.psn = FieldRange::increment(0, 1 << 24);
  if (m == FieldRange::Mode::kRandom) s.psn = FieldRange::random(0, 1 << 24, id + 7);
  parse_field_mode(sc.udp_sport_mode, &m);
  if (m == FieldRange::Mode::kIncrement) s.udp_src_port = FieldRange::increment(0xC000, sc.udp_sport_count);
  if (m == FieldRange::Mode::kRandom) s.udp_src_port = FieldRange::random(0xC000, sc.udp_sport_count, id + 3);
  s.path.udp_src_port = 0xC000;
  parse_field_mode(sc.ip_mode, &m);
  const uint32_t src4 = s.path.src_ip.v6 ? 1 : 0x0A000001, dst4 = s.path.src_ip.v6 ? 2 : 0x0A000002;
  if (m == FieldRange::Mode::kIncrement) {
    s.src_ip = FieldRange::increment(src4, sc.ip_count);
    s.dst_ip = FieldRange::increment(dst4, sc.ip_count);
  }
  if (m == FieldRange::Mode::kRandom) {
    s.src_ip = FieldRange::random(src4, sc.ip_count, id + 5);
    s.dst_ip = FieldRange::random(dst4, sc.ip_count, id + 6);
  }
  if (auto err = check_stream(s); !err.empty()) throw ConfigError("--stream", err);
  d.rate = *parse_rate(sc.rate);
  d.line_rate_bps = sc.line_rate_gbps * 1e9;
  d.unlimited = unlimited;
  d.count = count;
  d.impair = imp;
  return d;
}

int port_id(const std::string& name, const char* option) {
  if (name.empty()) return -1;
  uint16_t id = 0;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &id) == 0) return id;
  if (!name.empty() && std::all_of(name.begin(), name.end(), ::isdigit)) {
    const int v = std::stoi(name);
    if (v < RTE_MAX_ETHPORTS && rte_eth_dev_is_valid_port(static_cast<uint16_t>(v))) return v;
  }
  std::string known;
  uint16_t p;
  RTE_ETH_FOREACH_DEV(p) {
    char n[RTE_ETH_NAME_MAX_LEN];
    rte_eth_dev_get_name_by_port(p, n);
    known += fmt::format(" {} ({})", n, p);
  }
  throw ConfigError(option, fmt::format("no port '{}'; ports:{}", name, known.empty() ? " none" : known));
}

// --mode stream: the streams checked, EAL started, the run and its report.
int run_stream_mode(StreamRunConfig& sr, std::vector<std::string> stream_specs,
                    const std::string& tx_port, const std::string& rx_port,
                    const std::string& json, double bucket_us, uint32_t idle_sleep_us,
                    const std::function<void()>& start_eal) {
  if (tx_port.empty() && rx_port.empty())
    throw ConfigError("--tx-port", "give --tx-port, --rx-port or both");
  if (sr.duration_s <= 0) throw ConfigError("--duration", "must be > 0");
  sr.bucket_ns = static_cast<uint64_t>(bucket_us * 1000);
  sr.idle_sleep_us = idle_sleep_us == 50 ? 0 : idle_sleep_us;
  if (!tx_port.empty()) {
    if (stream_specs.empty()) stream_specs.push_back("");
    for (size_t i = 0; i < stream_specs.size(); ++i)
      sr.streams.push_back(parse_stream(stream_specs[i], static_cast<uint32_t>(i + 1)));
    for (size_t i = 0; i < sr.streams.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (sr.streams[i].spec.stream_id == sr.streams[j].spec.stream_id)
          throw ConfigError("--stream", fmt::format("two streams with id {}", sr.streams[i].spec.stream_id));
  }
  start_eal();
  sr.tx_port = port_id(tx_port, "--tx-port");
  sr.rx_port = port_id(rx_port, "--rx-port");
  const StreamRunResult r = run_streams(sr);
  fmt::print("{}", stream_report(sr, r));
  if (!json.empty() &&
      !apps::write_whole_file("droce-pktgen-dpdk", "--json", json, stream_report_json(sr, r) + "\n"))
    return 1;
  return 0;
}

// --mode may come anywhere: its value, and the other arguments into
// `args`, so that EAL never sees it.
std::string take_mode(int argc, char** argv, std::vector<char*>& args) {
  std::string mode;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mode") == 0 && i + 1 < argc) {
      mode = argv[++i];
      continue;
    }
    if (std::strncmp(argv[i], "--mode=", 7) == 0) {
      mode = argv[i] + 7;
      continue;
    }
    args.push_back(argv[i]);
  }
  return mode;
}

int run(int argc, char** argv) {
  std::vector<char*> args;
  const std::string mode = take_mode(argc, argv, args);
  if (mode != "stream" && mode != "dpdk") {
    fmt::print(stderr, "droce-pktgen-dpdk: --mode: '{}' is not one of stream, dpdk (droce-pktgen runs sim)\n", mode);
    return droce::kExitConfig;
  }
  // Without "--" every argument is the app's.
  if (std::none_of(args.begin() + 1, args.end(), [](char* a) { return std::strcmp(a, "--") == 0; }))
    args.insert(args.begin() + 1, const_cast<char*>("--"));
  // The app's options are checked before EAL starts (docs/DESIGN.md "Error
  // handling"); only port names need it.
  engine::SplitArgs split = engine::split_eal_args(static_cast<int>(args.size()), args.data());
  const auto start_eal = [&] {
    engine::init_eal(static_cast<int>(split.eal.size()), split.eal.data());
  };

  CLI::App cli{"droce-pktgen-dpdk: raw RoCEv2 streams and collective replay on DPDK ports"};
  // stream
  std::vector<std::string> stream_specs;
  std::string tx_port, rx_port, json;
  StreamRunConfig sr;
  double bucket_us = 100;
  // dpdk
  CollectiveRunConfig cc;
  std::string pattern = "ring";
  CollectiveConfig col;
  col.iters = 5;
  col.warmup_iters = 1;
  bool no_verify = false;
  cli.add_option("--stream", stream_specs, "stream: key=value,... (repeatable)");
  cli.add_option("--tx-port", tx_port, "stream: port to send on (name or id)");
  cli.add_option("--rx-port", rx_port, "stream: port to receive probes on (may be the tx port)");
  cli.add_option("--duration", sr.duration_s, "stream: seconds to send (default 1)");
  cli.add_option("--drain", sr.drain_s, "stream: seconds of RX silence before stopping");
  cli.add_option("--burst", sr.burst, "stream: packets per tx_burst (1..64)")->check(CLI::Range(1, 64));
  cli.add_option("--bucket-us", bucket_us, "stream: token bucket depth in microseconds");
  cli.add_option("--mbufs", sr.mbufs, "stream: mbufs per pool");
  cli.add_option("--json", json, "results as JSON to FILE");
  cli.add_option("--pattern", pattern, "dpdk: ring, all_gather or reduce_scatter");
  cli.add_option("--ranks", col.ranks, "dpdk: number of ranks");
  cli.add_option("--rank", cc.rank, "dpdk: this process's rank");
  // Sizes as droce-pktgen takes them: bytes or K/M/G (pktgen::parse_size).
  std::string minb = "1M", maxb = "1M", stepb = "0", chunkb = "0";
  cli.add_option("-b,--minbytes", minb, "dpdk: smallest size (B, or K/M/G)");
  cli.add_option("-e,--maxbytes", maxb, "dpdk: largest size");
  cli.add_option("-f,--stepfactor", col.step_factor, "dpdk: size factor");
  cli.add_option("-i,--stepbytes", stepb, "dpdk: size increment");
  cli.add_option("-n,--iters", col.iters, "dpdk: timed iterations");
  cli.add_option("-w,--warmup_iters", col.warmup_iters, "dpdk: warm-up iterations");
  cli.add_option("--channels", col.channels, "dpdk: QPs per neighbour link");
  cli.add_option("--chunk", chunkb, "dpdk: pipelining chunk (0: one per step)");
  cli.add_flag("--no-verify", no_verify, "dpdk: do not check the result");
  bool verify_flag = true;
  cli.add_flag("--verify", verify_flag, "dpdk: check the result (default)");
  cli.add_option("--next-port", cc.next_port, "dpdk: port of the link to rank+1");
  cli.add_option("--prev-port", cc.prev_port,
                 "dpdk: port of the link from rank-1 (the --next-port: one port behind a switch)");
  cli.add_option("--oob-host", cc.oob_host, "dpdk: rank 0's OOB address (IPv4)");
  cli.add_option("--oob-port", cc.oob_port, "dpdk: rank 0's OOB TCP port");
  cli.add_option("--timeout", cc.timeout_s, "dpdk: seconds before giving up on a peer or an iteration");
  cli.add_option("--mtu", cc.mtu, "dpdk: path MTU");
  cli.add_option("--rate-gbps", cc.rate_gbps,
                 "dpdk: port rate cap in Gb/s, e.g. 0.05 (default 0: none)");
  cli.add_option("--idle-sleep-us", cc.idle_sleep_us, "sleep when idle (shared CPUs)");
  cli.add_option("--poll-sleep-us", cc.poll_sleep_us, "dpdk: control thread sleep when no completion");
  options::MultipathText mp;
  apps::add_multipath_options(cli, mp, "; dpdk: the same on every rank");
  try {
    cli.parse(static_cast<int>(split.app.size()), split.app.data());
  } catch (const CLI::ParseError& e) {
    return apps::cli_exit(cli, e, "droce-pktgen-dpdk", "-- --help");
  }
  if (mode == "stream")
    return run_stream_mode(sr, stream_specs, tx_port, rx_port, json, bucket_us,
                           cc.idle_sleep_us, start_eal);
  col.pattern = pattern;
  cc.multipath = options::parse_multipath(mp, options::MultipathNames::flags());
  for (auto [text, field, option] :
       {std::tuple{&minb, &col.min_bytes, "-b/--minbytes"},
        std::tuple{&maxb, &col.max_bytes, "-e/--maxbytes"},
        std::tuple{&stepb, &col.step_bytes, "-i/--stepbytes"},
        std::tuple{&chunkb, &col.chunk_bytes, "--chunk"}})
    if (!parse_size(*text, *field))
      throw ConfigError(option, fmt::format("'{}' is not a size (bytes, or K/M/G)", *text));
  PktgenConfig pc;
  pc.mode = Mode::kCollective;
  pc.collective = col;
  if (auto errs = validate(pc); !errs.empty()) {
    for (const auto& e : errs) fmt::print(stderr, "droce-pktgen-dpdk: {}\n", e.to_string());
    return droce::kExitConfig;
  }
  cc.params.pattern = *pattern_from_string(pattern);
  cc.params.ranks = col.ranks;
  cc.params.channels = col.channels;
  cc.params.chunk_bytes = col.chunk_bytes;
  cc.sizes = sweep_sizes(col);
  cc.iters = col.iters;
  cc.warmup = col.warmup_iters;
  cc.verify = !no_verify;
  cc.json_path = json;
  if (!(cc.rate_gbps >= 0 && cc.rate_gbps <= 1600))
    throw ConfigError("--rate-gbps", fmt::format("{} is out of range 0..1600", cc.rate_gbps));
  {
    ScheduleParams p = cc.params;
    p.bytes = cc.sizes.front();
    if (auto err = check_ring_topology(make_schedule(p)); !err.empty())
      throw ConfigError("--pattern", err);
  }
  start_eal();
  return run_collective(cc);
}

}  // namespace
}  // namespace droce::pktgen

int main(int argc, char** argv) {
  int rc = 0;
  try {
    rc = droce::pktgen::run(argc, argv);
  } catch (const droce::ConfigError& e) {
    fmt::print(stderr, "droce-pktgen-dpdk: {}\n", e.what());
    rc = droce::kExitConfig;
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "droce-pktgen-dpdk: {}\n", e.what());
    rc = droce::kExitConfig;
  } catch (const std::exception& e) {
    fmt::print(stderr, "droce-pktgen-dpdk: {}\n", e.what());
    rc = droce::kExitFailure;
  }
  droce::engine::cleanup_eal();
  return rc;
}
