// Option parsing shared by the DPDK apps (droce-perf, droce-switch): CLI11
// first, then the app's own checks, all before EAL starts.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
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

}  // namespace droce::apps
