// Option parsing shared by the DPDK apps (droce-perf, droce-switch,
// droce-endpoint): CLI11 first, then the app's own checks, all before EAL
// starts; and the sharding flags' values and errors.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "droce/engine/engine.h"

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

}  // namespace droce::apps
