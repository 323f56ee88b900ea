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
#include "droce/engine/options.h"
#include "droce/wire/build.h"

namespace droce::apps {

// Parses `argv` with `cli`, then runs `then` (the app's checks; may throw
// engine::ConfigError). Returns -1 to go on, or the exit status to return:
// 0 after --help, kExitConfig after a bad option (its message, and for a
// CLI11 error a hint naming --help).
template <class Then>
int parse_options(CLI::App& cli, std::vector<char*>& argv, std::string_view app, Then&& then) {
  try {
    cli.parse(static_cast<int>(argv.size()), argv.data());
    then();
  } catch (const CLI::CallForHelp& e) {
    return cli.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    fmt::print(stderr, "run '{} -- --help' for the options\n", app);
    return engine::kExitConfig;
  } catch (const engine::ConfigError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return engine::kExitConfig;
  }
  return -1;
}

// parse_options in the apps' one voice (cli_error.h): every message starts
// with the app's name, "<app>: <option>: <problem>".
template <class Then>
int parse_options_named(CLI::App& cli, std::vector<char*>& argv, std::string_view app,
                        Then&& then) {
  try {
    cli.parse(static_cast<int>(argv.size()), argv.data());
    then();
  } catch (const CLI::ParseError& e) {
    return cli_exit(cli, e, app, "-- --help");
  } catch (const engine::ConfigError& e) {
    fmt::print(stderr, "{}: {}\n", app, e.what());
    return engine::kExitConfig;
  }
  return -1;
}

// engine::run_app in the same voice: a ConfigError prints "<app>: <option>:
// <message>" and gives kExitConfig, any other exception "<app>: <what>" and
// kExitFailure; EAL is cleaned up either way.
template <class Body>
int run_app_named(std::string_view app, Body&& body) {
  int status = engine::kExitFailure;
  try {
    status = body();
  } catch (const engine::ConfigError& e) {
    fmt::print(stderr, "{}: {}\n", app, e.what());
    status = engine::kExitConfig;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", app, e.what());
    status = engine::kExitFailure;
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
  throw engine::ConfigError("--shard-tx", fmt::format("'{}' is not auto, queues or ring", v));
}

// --shard-rx: auto, queues or one (engine::PortConfig::ShardRx).
inline engine::PortConfig::ShardRx shard_rx_option(std::string_view v) {
  using R = engine::PortConfig::ShardRx;
  if (v == "auto") return R::kAuto;
  if (v == "queues") return R::kQueues;
  if (v == "one") return R::kOne;
  throw engine::ConfigError("--shard-rx", fmt::format("'{}' is not auto, queues or one", v));
}

// add_port's ConfigError("shards") renamed after the flag the user gave:
// --shard-tx or --shard-rx when the PMD lacks TX or RX queues, else
// --shards. Other errors pass unchanged.
[[noreturn]] inline void rethrow_as_shard_flag(const engine::ConfigError& e) {
  if (e.option() != "shards") throw e;
  const std::string msg = std::string(e.what()).substr(e.option().size() + 2);
  const bool tx = msg.find("TX queue") != std::string::npos;
  const bool rx = msg.find("RX queue") != std::string::npos;
  throw engine::ConfigError(tx ? "--shard-tx" : rx ? "--shard-rx" : "--shards", msg);
}

// What a QP's packets carry, from --dscp, --ecn, --vlan and --pcp
// (droce-endpoint's flag QP, droce-perf's QPs): the IP DSCP (IPv6: the
// traffic class's upper six bits), the ECN codepoint, an 802.1Q tag.
struct PacketMarks {
  explicit PacketMarks(uint32_t default_dscp = 0) : dscp(default_dscp) {}
  uint32_t dscp;
  std::string ecn = "ect0";
  std::optional<uint32_t> vlan;
  uint32_t pcp = 0;
};

inline void add_mark_options(CLI::App& cli, PacketMarks& m) {
  cli.add_option("--dscp", m.dscp,
                 fmt::format("DSCP (IPv6: traffic class >> 2) of sent packets (default {})",
                             m.dscp))
      ->check(CLI::Range(0, 63));
  cli.add_option("--ecn", m.ecn, "ECN of sent packets: not-ect, ect0, ect1, ce (default ect0)");
  cli.add_option("--vlan", m.vlan, "802.1Q VLAN id (adds a tag)")->check(CLI::Range(0, 4095));
  cli.add_option("--pcp", m.pcp, "802.1Q PCP (adds a tag, VLAN 0 without --vlan)")
      ->check(CLI::Range(0, 7));
}

// Sets the marks on `path`: a PCP alone travels in a priority tag (VLAN
// 0). Throws engine::ConfigError(ecn_option) for an unknown codepoint
// (droce-endpoint's config file names its key there).
inline void apply_marks(const PacketMarks& m, wire::PathSpec& path,
                        const std::string& ecn_option = "--ecn") {
  path.dscp = static_cast<uint8_t>(m.dscp);
  path.ecn = engine::parse_ecn(ecn_option, m.ecn);
  path.pcp = static_cast<uint8_t>(m.pcp);
  if (m.vlan || m.pcp != 0) {
    path.vlan = true;
    path.vlan_id = static_cast<uint16_t>(m.vlan.value_or(0));
  }
}

}  // namespace droce::apps
