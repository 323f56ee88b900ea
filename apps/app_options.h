// Option parsing shared by the DPDK apps (droce-perf, droce-switch,
// droce-endpoint): CLI11 first, then the app's own checks, all before EAL
// starts; and the sharding flags' values and errors.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli_error.h"
#include "droce/engine/app_main.h"
#include "droce/engine/engine.h"
#include "droce/options/multipath.h"
#include "droce/options/values.h"
#include "droce/wire/build.h"

namespace droce::apps {

// Parses `argv` with `cli`, then runs `then` (the app's checks; may throw
// ConfigError). Returns -1 to go on, or the exit status to return: 0 after
// --help, kExitConfig after a bad option, whose message starts with the
// app's name (cli_error.h): "<app>: <option>: <problem>".
template <class Then>
int parse_options_named(CLI::App& cli, std::vector<char*>& argv, std::string_view app,
                        Then&& then) {
  try {
    cli.parse(static_cast<int>(argv.size()), argv.data());
    then();
  } catch (const CLI::ParseError& e) {
    return cli_exit(cli, e, app, "-- --help");
  } catch (const droce::ConfigError& e) {
    fmt::print(stderr, "{}: {}\n", app, e.what());
    return droce::kExitConfig;
  }
  return -1;
}

// Runs `body` (which returns the exit status) in the same voice: a
// ConfigError prints "<app>: <option>: <message>" and gives kExitConfig, any
// other exception "<app>: <what>" and kExitFailure; EAL is cleaned up either
// way.
template <class Body>
int run_app_named(std::string_view app, Body&& body) {
  int status = droce::kExitFailure;
  try {
    status = body();
  } catch (const droce::ConfigError& e) {
    fmt::print(stderr, "{}: {}\n", app, e.what());
    status = droce::kExitConfig;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", app, e.what());
    status = droce::kExitFailure;
  }
  engine::cleanup_eal();
  return status;
}

// --shard-tx: auto, queues or ring (engine::PortConfig::ShardTx).
inline engine::PortConfig::ShardTx shard_tx_option(std::string_view v) {
  using T = engine::PortConfig::ShardTx;
  if (v == "auto") return T::kAuto;
  if (v == "queues") return T::kQueues;
  if (v == "ring") return T::kRing;
  throw droce::ConfigError("--shard-tx", fmt::format("'{}' is not auto, queues or ring", v));
}

// --shard-rx: auto, queues or one (engine::PortConfig::ShardRx).
inline engine::PortConfig::ShardRx shard_rx_option(std::string_view v) {
  using R = engine::PortConfig::ShardRx;
  if (v == "auto") return R::kAuto;
  if (v == "queues") return R::kQueues;
  if (v == "one") return R::kOne;
  throw droce::ConfigError("--shard-rx", fmt::format("'{}' is not auto, queues or one", v));
}

// add_port's ConfigError("shards") renamed after the flag the user gave:
// --shard-tx or --shard-rx when the PMD lacks TX or RX queues, else
// --shards. Other errors pass unchanged.
[[noreturn]] inline void rethrow_as_shard_flag(const droce::ConfigError& e) {
  if (e.option() != "shards") throw e;
  const std::string msg = std::string(e.what()).substr(e.option().size() + 2);
  const bool tx = msg.find("TX queue") != std::string::npos;
  const bool rx = msg.find("RX queue") != std::string::npos;
  throw droce::ConfigError(tx ? "--shard-tx" : rx ? "--shard-rx" : "--shards", msg);
}

// --dscp, --ecn, --vlan and --pcp into `m`.
inline void add_mark_options(CLI::App& cli, options::PacketMarks& m) {
  cli.add_option("--dscp", m.dscp,
                 fmt::format("DSCP (IPv6: traffic class >> 2) of sent packets (default {})",
                             m.dscp))
      ->check(CLI::Range(0, 63));
  cli.add_option("--ecn", m.ecn, "ECN of sent packets: not-ect, ect0, ect1, ce (default ect0)");
  cli.add_option("--vlan", m.vlan, "802.1Q VLAN id (adds a tag)")->check(CLI::Range(0, 4095));
  cli.add_option("--pcp", m.pcp, "802.1Q PCP (adds a tag, VLAN 0 without --vlan)")
      ->check(CLI::Range(0, 7));
}

// --recovery, --entropy, --entropy-paths, --flowlet-gap,
// --reorder-tolerance, --reorder-window, --rto-low and --reth-every-packet into `m`
// (options::parse_multipath checks them); `recovery_note` says who else
// must agree on the recovery.
inline void add_multipath_options(CLI::App& cli, options::MultipathText& m,
                                  std::string_view recovery_note) {
  cli.add_option("--recovery", m.recovery,
                 fmt::format("loss recovery: gbn (go-back-N, default) or sr (selective "
                             "repeat){}",
                             recovery_note));
  cli.add_option("--entropy", m.entropy,
                 "UDP source ports of the requests: fixed (default), spray (one per packet, "
                 "round robin), flowlet (a new one after an idle gap) or path_aware (spray, "
                 "passing over ports whose round trips or losses say congested); all but "
                 "fixed need --recovery sr");
  cli.add_option("--entropy-paths", m.entropy_paths,
                 "ports spray, flowlet and path_aware use (1..16384, default 64)");
  cli.add_option("--flowlet-gap", m.flowlet_gap,
                 "flowlet: idle time that starts a new flowlet (default 8us)");
  cli.add_option("--reorder-tolerance", m.reorder_tolerance,
                 "sr: resend a hole only once a PSN this many packets beyond it was SACKed "
                 "(default 0)");
  cli.add_option("--reorder-window", m.reorder_window,
                 "sr: also resend a hole out for a later packet's round trip plus this "
                 "time (RACK; e.g. 20us; default off)");
  cli.add_option("--reorder-window-min", m.reorder_window_min,
                 "sr with --reorder-window: let the window adapt from this floor up to "
                 "--reorder-window, doubled at most once per round trip when a resend "
                 "proves spurious (RFC 8985 6.2.4; default off: a fixed window)");
  cli.add_flag("--tail-probe", m.tail_probe,
               "sr with --reorder-window: resend the newest packet, asking for its ACK, when "
               "its answer is two smoothed round trips late (RACK-TLP), before a timeout");
  cli.add_option("--rto-low", m.rto_low,
                 "sr: the retransmission timeout when at most 3 packets are in flight "
                 "(IRN's RTO_low; e.g. 25us; default 100us)");
  cli.add_flag("--reth-every-packet", m.reth_every_packet,
               "send each packet of a long RDMA WRITE as a WRITE ONLY with its own RETH, "
               "so a selective-repeat responder places it whatever arrives first");
}

}  // namespace droce::apps
