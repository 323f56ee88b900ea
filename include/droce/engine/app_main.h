// What droce's DPDK apps share around main(): splitting "[EAL options] --
// [app options]" so app options are checked (exit 2, the option named)
// before EAL starts, and the exit-status convention of docs/ENGINE.md.
#pragma once

#include <fmt/format.h>

#include <exception>
#include <vector>

#include "droce/engine/engine.h"

namespace droce::engine {

struct SplitArgs {
  std::vector<char*> eal;  // argv[0], then everything before "--"
  std::vector<char*> app;  // argv[0], then everything after "--"
};
SplitArgs split_eal_args(int argc, char** argv);

// Runs `body` (which returns the exit status). A ConfigError (something the
// user gave) prints "error: <option>: <message>" and gives kExitConfig; any
// other exception prints "error: <what>" and gives kExitFailure. EAL is
// cleaned up either way.
template <class Body>
int run_app(Body&& body) {
  int status = kExitFailure;
  try {
    status = body();
  } catch (const ConfigError& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    status = kExitConfig;
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    status = kExitFailure;
  }
  cleanup_eal();
  return status;
}

}  // namespace droce::engine
