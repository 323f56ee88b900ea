// What droce's DPDK apps share around main(): splitting "[EAL options] --
// [app options]" so app options are checked (exit 2, the option named)
// before EAL starts. The apps report errors with apps/app_options.h's
// run_app_named.
#pragma once

#include <vector>

#include "droce/engine/engine.h"

namespace droce::engine {

struct SplitArgs {
  std::vector<char*> eal;  // argv[0], then everything before "--"
  std::vector<char*> app;  // argv[0], then everything after "--"
};
SplitArgs split_eal_args(int argc, char** argv);

}  // namespace droce::engine
