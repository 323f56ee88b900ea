#include "droce/engine/app_main.h"

#include <cstring>

namespace droce::engine {

SplitArgs split_eal_args(int argc, char** argv) {
  SplitArgs out;
  out.eal.push_back(argv[0]);
  out.app.push_back(argv[0]);
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) out.eal.push_back(argv[i]);
  for (++i; i < argc; ++i) out.app.push_back(argv[i]);
  return out;
}

}  // namespace droce::engine
