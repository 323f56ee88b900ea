// droce-perf: perftest-style bandwidth and latency tests between two droce
// processes (ib_write_bw, ib_read_bw, ib_send_bw, ib_write_lat, ib_read_lat,
// ib_send_lat), with perftest's flags where they apply and its output
// columns. Set-up is out of band over TCP, as perftest does: the client
// connects to the server, both exchange QPN, PSN, MAC, IP, rkey, VA and
// buffer size, then meet at a barrier before and after every measurement.
//
//   droce-perf [EAL options] -- --test write_bw --server [options]
//   droce-perf [EAL options] -- --test write_bw --connect 127.0.0.1 [options]
//
// The client is the requester of every test; in the latency tests of WRITE
// and SEND both sides take turns (ping-pong) and report half the round trip,
// as perftest does. See docs/DROCE-PERF.md.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <rte_ethdev.h>
#include <sys/prctl.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "app_options.h"
#include "droce/engine/app_main.h"
#include "droce/engine/engine.h"
#include "droce/options/values.h"
#include "droce/telemetry/latency_histogram.h"
#include "droce/transport/requester.h"
#include "perf/perf_test.h"

namespace droce::perf {

using transport::Sge;
using transport::WorkCompletion;

// ---- data check ----------------------------------------------------------------

// Which side holds data to verify after a size:
//  WRITE / SEND: the target (server) checks its destination area; in the
//                WRITE/SEND latency tests the client checks too (the server
//                answers with the same pattern).
//  READ:         the reader (client) checks its destination area.
// The result line for the data of one peer's QPs ("CHECK ok" or "CHECK bad ...").
std::string PerfTest::check_peer(const Peer& p, uint64_t size) const {
  const Verb v = o_.t->verb;
  for (size_t q = 0; q < p.qps.size(); ++q) {
    const uint8_t* dst = p.qps[q].mr.addr + max_size_;
    // WRITE latency: the last byte is the ping-pong tag, not pattern.
    const uint64_t len = (v == Verb::kWrite && is_lat(o_)) ? size - 1 : size;
    if (auto bad = verify_pattern(dst, p.seed, static_cast<uint32_t>(q), size, len))
      return fmt::format("CHECK bad qp={:#x} size={} offset={} got={:#04x} want={:#04x}",
                         p.qps[q].h.qpn, size, *bad, dst[*bad],
                         pattern_byte(p.seed, static_cast<uint32_t>(q), size, *bad));
  }
  return "CHECK ok";
}

bool PerfTest::verify_after(uint64_t size) {
  const Verb v = o_.t->verb;
  const bool i_check = v == Verb::kRead ? client()
                                        : (!client() || (is_lat(o_) && v != Verb::kRead));
  // Every peer hears this side's verdict on its data before this side
  // waits for any peer's.
  std::vector<std::string> results;
  for (Peer& p : peers_) {
    results.push_back(i_check ? check_peer(p, size) : "CHECK ok");
    p.oob.send_line(results.back());
  }
  bool ok = true;
  for (size_t i = 0; i < peers_.size(); ++i) {
    const std::string peer = peers_[i].oob.recv_line(o_.timeout, "data check result");
    if (results[i] != "CHECK ok") {
      fmt::print(stderr, "error: data check failed on this side: {}{}\n", who(i),
                 results[i].substr(6));
      ok = false;
    }
    if (peer != "CHECK ok") {
      fmt::print(stderr, "error: data check failed on the peer: {}{}\n", who(i),
                 peer.substr(6));
      ok = false;
    }
  }
  return ok;
}

bool PerfTest::run_size(uint64_t size) {
  if (o_.check) {
    // The side that sends data lays the pattern out in its source area;
    // every side clears its destination area so stale bytes cannot pass.
    for (const Peer& p : peers_)
      for (size_t q = 0; q < p.qps.size(); ++q) {
        fill_pattern(p.qps[q].mr.addr, p.seed, static_cast<uint32_t>(q), size, size);
        std::memset(p.qps[q].mr.addr + max_size_, 0, size);
      }
  }
  if (o_.no_peer) {
    bw_client(size);
    return true;
  }
  if (is_lat(o_))
    lat_run(size);
  else if (client())
    bw_client(size);
  else
    bw_server(size);
  return o_.check ? verify_after(size) : true;
}

int PerfTest::run() {
  setup();
  exchange();
  connect_qps();
  // The server starts its port first, the client only once the server says
  // so. A memif server that has not started its port yet answers a client
  // connect with "ID not found" and the DPDK memif client never tries
  // again: both links would stay down for good. With this order the client
  // always connects to a started server (the client's SYNC is sent before
  // its start; the server's only after its own).
  if (!o_.no_peer && client()) barrier_all("server port started");
  eng_.start();
  // Run to completion: whatever this thread waits for, the peer's frames
  // are answered meanwhile.
  if (o_.run_to_completion)
    for (Peer& p : peers_) p.oob.set_while_waiting([this] { eng_.poll(); });
  if (!o_.no_peer && o_.server) barrier_all("server port started");
  // Wait for the link (memif needs its peer to connect).
  if (!engine::wait_for_link_up(eng_.port_id(port_), o_.timeout))
    throw Failure(fmt::format("link of port '{}' did not come up within {} s", o_.dev, o_.timeout));
  if (!o_.no_peer) barrier_all("ready");
  print_header();
  print_addresses();
  // SEND: the receive queue is filled before the first barrier.
  if (o_.t->verb == Verb::kSend && (o_.server || is_lat(o_)) && !o_.no_peer)
    for (const Peer& p : peers_)
      for (const LocalQp& q : p.qps)
        for (uint32_t i = 0; i < o_.rx_depth; ++i) post_recv_or_fail(q, i);

  // A server with several clients prints their bandwidth rows too.
  const bool print_rows =
      client() || (is_lat(o_) && o_.t->verb != Verb::kRead) || (!is_lat(o_) && multi());
  if (print_rows) {
    if (is_lat(o_))
      fmt::print(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
                 "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% "
                 "percentile[usec]\n");
    else
      fmt::print("{}", bw_header(o_.report_gbits, client() ? "" : "     client"));
  }
  bool ok = true;
  if (o_.all) {
    for (uint64_t s = 2; s <= kMaxSize; s <<= 1) ok &= run_size(s);
  } else {
    ok = run_size(size());
  }
  // Quiesce the data path before the peer may close its port. Closing a
  // memif port disconnects the peer, and the peer's PMD then unmaps the
  // shared rings from its interrupt thread while its worker may be inside
  // rx/tx burst on them (the PMD does not synchronise the two): a SIGSEGV
  // in the slower process. Every WR of this run has completed and been
  // checked by now, so nothing is lost by stopping the worker here.
  eng_.stop();
  if (!o_.no_peer) barrier_all("done");
  fmt::print("---------------------------------------------------------------------------------------\n");
  if (o_.check) fmt::print(" Data check: {}\n", ok ? "PASS" : "FAIL");
  const engine::Snapshot stats = eng_.stats_now();
  if (o_.counters) fmt::print("{}", engine::format_counters(stats));
  // A CC that steers by INT (HPCC) with no INT-stamping switch on the path
  // runs on its initial window: say so once (the counter is in --counters
  // and telemetry as cc_acks_without_int).
  uint64_t acks_without_int = 0;
  for (const engine::PortSnapshot& p : stats.ports)
    acks_without_int += p.endpoint.cc_acks_without_int;
  if (acks_without_int > 0)
    fmt::print(stderr,
               "droce-perf: warning: --cc {} steers by INT, but {} ACK(s) carried no INT records "
               "(no INT-stamping switch on the path, e.g. droce-switch with INT on); it ran on "
               "its initial window\n",
               o_.cc, acks_without_int);
  std::fflush(stdout);
  return ok ? kExitOk : kExitFailure;
}

namespace {

// ---- command line -------------------------------------------------------------

// A path MTU whose packets the port cannot carry is lowered to the largest
// that fits, and said so, as perftest does with a port's active MTU: frames
// the port refuses would only be lost and resent.
void fit_mtu_to_port(Options& o, const engine::Engine& eng, engine::PortIndex port) {
  const uint32_t carries = eng.port_mtu(port);
  if (const uint32_t fits = transport::active_mtu(o.mtu, carries); fits < o.mtu) {
    fmt::print(stderr, "droce-perf: -m {}: port {} carries IP packets of {} bytes; using -m {}\n",
               o.mtu, o.dev, carries, fits);
    o.mtu = fits;
  }
}

// Option errors before EAL starts: the message names the option.
void validate(Options& o) {
  if (o.shards < 1 || o.shards > 128)
    throw ConfigError("--shards", fmt::format("{} is out of range 1..128", o.shards));
  apps::shard_rx_option(o.shard_rx);  // throws naming --shard-rx
  if (!(o.rate_gbps >= 0 && o.rate_gbps <= 1600))
    throw ConfigError("--rate-gbps", fmt::format("{} is out of range 0..1600", o.rate_gbps));
  for (const TestName& t : kTests)
    if (o.test == t.name) o.t = &t;
  if (!o.t)
    throw ConfigError("--test", fmt::format("unknown test '{}'; accepted: write_bw, read_bw, "
                                            "send_bw, write_lat, read_lat, send_lat",
                                            o.test));
  if (o.no_peer) {
    if (o.server || !o.connect.empty())
      throw ConfigError("--no-peer", "is a client without a peer: drop --server/--connect");
    if (o.connection != "UC" || o.t->kind != Kind::kBw || o.t->verb == Verb::kRead)
      throw ConfigError("--no-peer", "needs -c UC and write_bw or send_bw (nothing "
                                     "acknowledges or answers)");
  } else if (o.server == !o.connect.empty()) {
    throw ConfigError("--server/--connect",
                      o.server ? "give one of --server or --connect HOST, not both"
                               : "missing peer: give --server on one side and --connect "
                                 "HOST on the other");
  }
  if (o.clients) {
    if (!o.server)
      throw ConfigError("--clients", "is a server option (how many clients the server "
                                     "serves at once): drop it on the client");
    if (*o.clients < 1 || *o.clients > kMaxClients)
      throw ConfigError("--clients",
                        fmt::format("{} is out of range 1..{}", *o.clients, kMaxClients));
    if (*o.clients > 1 && o.t->kind == Kind::kLat)
      throw ConfigError("--clients", "latency tests serve one client (the server plays "
                                     "ping-pong); use a bandwidth test for several");
  }
  if (o.size && (*o.size < 1 || *o.size > kMaxSize))
    throw ConfigError("-s/--size", fmt::format("{} is out of range 1..{}", *o.size, kMaxSize));
  if (o.size && o.all) throw ConfigError("-a/--all", "cannot be combined with -s");
  if (o.size && o.t->verb == Verb::kWrite && o.t->kind == Kind::kLat && *o.size < 1)
    throw ConfigError("-s/--size", "write_lat needs at least 1 byte");
  if (o.iters && *o.iters < 1) throw ConfigError("-n/--iters", "must be at least 1");
  if (o.duration < 0 || o.duration > 86400)
    throw ConfigError("-D/--duration", fmt::format("{} is out of range 0..86400 s", o.duration));
  if (o.duration > 0 && o.iters) throw ConfigError("-D/--duration", "cannot be combined with -n");
  // perftest refuses this too ("Duration mode ... doesn't support running
  // on all sizes"): each of the 23 sizes would run for the whole duration.
  if (o.duration > 0 && o.all) throw ConfigError("-D/--duration", "cannot be combined with -a");
  if (o.qps < 1 || o.qps > 256)
    throw ConfigError("-q/--qp", fmt::format("{} is out of range 1..256", o.qps));
  if (o.threads < 1 || o.threads > o.qps)
    throw ConfigError("--threads", fmt::format("{} is out of range 1..{} (-q)", o.threads, o.qps));
  if (o.t->kind == Kind::kLat && o.qps != 1)
    throw ConfigError("-q/--qp", "latency tests use one QP");
  if (o.mtu != 256 && o.mtu != 512 && o.mtu != 1024 && o.mtu != 2048 && o.mtu != 4096)
    throw ConfigError("-m/--mtu",
                      fmt::format("{} is not one of 256, 512, 1024, 2048, 4096", o.mtu));
  if (o.connection != "RC" && o.connection != "UC")
    throw ConfigError("-c/--connection",
                      fmt::format("'{}' is not one of RC, UC", o.connection));
  if (o.connection == "UC" && o.t->verb == Verb::kRead)
    throw ConfigError("-c/--connection", "READ needs RC");
  if (o.tx_depth < 1 || o.tx_depth > 16384)
    throw ConfigError("-t/--tx-depth", fmt::format("{} is out of range 1..16384", o.tx_depth));
  if (o.rx_depth < 1 || o.rx_depth > 16384)
    throw ConfigError("-r/--rx-depth", fmt::format("{} is out of range 1..16384", o.rx_depth));
  if (o.cq_mod < 1) throw ConfigError("-Q/--cq-mod", "must be at least 1");
  options::parse_ecn("--ecn", o.marks.ecn);  // refused here, before EAL starts
  o.multipath = options::parse_multipath(o.multipath_text, options::MultipathNames::flags());
  if (o.multipath.selective_repeat() && o.connection != "RC")
    throw ConfigError("--recovery", "sr is RC's (a UC responder neither ACKs nor SACKs): "
                                    "use -c RC");
  if (o.timeout <= 0) throw ConfigError("--timeout", "must be positive");
  if (o.t->verb == Verb::kSend && o.connection == "UC" && !o.no_peer)
    throw ConfigError("-c/--connection",
                      "send over UC can lose messages without notice; use RC");
}

int perf_main(int argc, char** argv) {
  // Split "[EAL] -- [app]" ourselves so that app options are checked (exit
  // code 2, message naming the option) before EAL starts.
  engine::SplitArgs args = engine::split_eal_args(argc, argv);
  std::vector<char*>& app_argv = args.app;

  Options o;
  CLI::App cli{"droce-perf: perftest-style RDMA bandwidth and latency tests between two "
               "droce processes.\nusage: droce-perf [EAL options] -- --test NAME "
               "(--server | --connect HOST) [options]"};
  cli.add_option("--test", o.test,
                 "write_bw | read_bw | send_bw | write_lat | read_lat | send_lat")
      ->required();
  cli.add_flag("--server", o.server, "wait for the peer (the target of the test)");
  cli.add_option("--clients", o.clients,
                 "server: serve this many clients at once on the one port (bandwidth "
                 "tests; default 1)");
  cli.add_option("--connect", o.connect, "connect to the server's OOB socket at HOST (IPv4)");
  cli.add_option("--bind", o.bind, "server: address of the OOB socket (default 127.0.0.1)");
  cli.add_option("-p,--port", o.oob_port, "TCP port of the OOB socket (default 18515)");
  cli.add_option("-s,--size", o.size, "message size in bytes (default 65536; lat: 2)");
  cli.add_option("-n,--iters", o.iters, "iterations per QP (default 5000; lat: 1000)");
  cli.add_option("-D,--duration", o.duration, "run for this many seconds instead of -n");
  cli.add_option("-q,--qp", o.qps, "number of QPs (bandwidth tests)");
  cli.add_option("--threads", o.threads,
                 "bandwidth client: threads posting and polling, the QPs dealt out among "
                 "them, each with its own CQ (default 1; at most -q)");
  cli.add_flag("-a,--all", o.all, "run sizes 2..2^23");
  cli.add_flag("--report_gbits", o.report_gbits, "report bandwidth in Gb/s");
  cli.add_option("-m,--mtu", o.mtu, "path MTU: 256, 512, 1024, 2048, 4096 (default 1024)");
  cli.add_option("--cc", o.cc, "congestion control algorithm (default none)");
  cli.add_flag("--check", o.check, "verify the data byte for byte after each size");
  cli.add_option("-t,--tx-depth", o.tx_depth, "send WRs in flight per QP (default 128)");
  cli.add_option("-r,--rx-depth", o.rx_depth, "receive WRs posted per QP (default 512)");
  cli.add_option("-Q,--cq-mod", o.cq_mod, "signal a completion every N sends (default 64)");
  cli.add_option("-c,--connection", o.connection, "RC or UC (default RC)");
  cli.add_option("-d,--dev", o.dev, "DPDK port name or id (default 0)");
  cli.add_option("--ip", o.ip, "source IP in the RoCEv2 headers (IPv4 or IPv6); the port "
                             "answers ARP / neighbour solicitations and ping for it");
  cli.add_flag("--resolve", o.resolve,
               "find the peer's MAC by ARP / neighbour discovery instead of the out-of-band "
               "exchange");
  cli.add_option("--rate-gbps", o.rate_gbps, "port rate cap in Gb/s, e.g. 0.2 (default 0: none)");
  cli.add_option("-u,--qp-timeout", o.qp_timeout,
                 "local ACK timeout: 4.096 us * 2^N before a retransmission (default 14, "
                 "67 ms; 0 = none; at most 31)")
      ->check(CLI::Range(0, 31));
  cli.add_flag("--honour-credits", o.honour_credits,
               "SENDs wait for the end-to-end credits the peer advertises (IBA 9.7.7.2) "
               "instead of meeting RNR NAKs (RC)");
  cli.add_option("--timeout", o.timeout, "give up after this many seconds of no progress "
                                         "(default 120)");
  cli.add_option("--idle-sleep-us", o.idle_sleep_us,
                 "worker sleeps when idle (shares a CPU; default 0: busy poll)");
  cli.add_option("--poll-sleep-us", o.poll_sleep_us,
                 "control thread sleeps this long when no completion is ready (default 100 "
                 "for bandwidth, 2 for latency tests)");
  cli.add_flag("--no-peer", o.no_peer, "TX benchmark: send into the port with no peer "
                                       "(-c UC, write_bw/send_bw)");
  cli.add_option("--run-to-completion", o.run_to_completion,
                 "with one lcore, the test's own thread runs the data path (default true); "
                 "false: a worker thread beside it, on the same CPU");
  cli.add_flag("--counters", o.counters, "print engine counters at the end");
  apps::add_mark_options(cli, o.marks);
  apps::add_multipath_options(cli, o.multipath_text, "; the server takes the client's");
  cli.add_option("--capture", o.capture, "pcap of every frame the port sends and receives");
  cli.add_option("--shards", o.shards, "shard the QPs over N worker lcores (default 1; "
                                       "docs/ENGINE.md)");
  cli.add_option("--shard-rx", o.shard_rx,
                 "how shards receive: auto (an RX queue each where the NIC has RSS on UDP), "
                 "queues (an RX queue each) or one (one queue, handed over)");
  if (const int rc = apps::parse_options_named(cli, app_argv, "droce-perf", [&] { validate(o); });
      rc >= 0)
    return rc;

  // Short sleeps really are short (the default slack is 50 us).
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  return apps::run_app_named("droce-perf", [&] {
    int status = kExitOk;
    engine::init_eal(static_cast<int>(args.eal.size()), args.eal.data());
    engine::EngineConfig ec;
    ec.idle_sleep_us = o.idle_sleep_us;
    ec.telemetry = false;
    ec.run_to_completion = o.run_to_completion;
    engine::Engine eng(ec);
    engine::PortConfig pc;
    pc.name = o.dev;
    pc.endpoint.port_rate_bytes_per_sec = static_cast<uint64_t>(o.rate_gbps * 1e9 / 8);
    pc.shards = o.shards;
    pc.shard_rx = apps::shard_rx_option(o.shard_rx);
    pc.capture = o.capture;
    pc.endpoint.interface.addresses = {options::parse_ip("ip", local_ip(o))};
    const engine::PortIndex port = [&]() -> engine::PortIndex {
      try {
        return eng.add_port(pc);
      } catch (const ConfigError& e) {
        apps::rethrow_as_shard_flag(e);
      }
    }();
    fit_mtu_to_port(o, eng, port);
    PerfTest test(o, eng, port);
    try {
      status = test.run();
    } catch (const std::runtime_error&) {  // Failure or oob::Error
      // Stop the worker first: the peer may be closing its port too (see
      // run()). What the engine saw helps to tell a lost frame from a stuck
      // peer.
      const bool was_running = eng.running();
      eng.stop();
      if (was_running)
        fmt::print(stderr, "engine counters at the failure:\n{}",
                   engine::format_counters(eng.stats_now()));
      throw;
    }
    eng.close_ports();
    return status;
  });
}

}  // namespace

}  // namespace droce::perf

int main(int argc, char** argv) { return droce::perf::perf_main(argc, argv); }
