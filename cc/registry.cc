#include "droce/cc/registry.h"

#include <fmt/format.h>

#include <array>

namespace droce::cc {

// The registry: one X(name) line per algorithm; cc/<name>.cc defines
// `const AlgorithmInfo& <name>_algorithm()`. An explicit list (rather than
// self-registering statics) keeps the order fixed and survives static
// linking, where unreferenced objects would be dropped.
#define DROCE_CC_ALGORITHMS(X) \
  X(none)                      \
  X(dcqcn)                     \
  X(timely)                    \
  X(hpcc)                      \
  X(swift)

#define DROCE_CC_DECLARE(name) const AlgorithmInfo& name##_algorithm();
DROCE_CC_ALGORITHMS(DROCE_CC_DECLARE)
#undef DROCE_CC_DECLARE

std::span<const AlgorithmInfo* const> algorithms() {
#define DROCE_CC_ENTRY(name) &name##_algorithm(),
  static const std::array kAll{DROCE_CC_ALGORITHMS(DROCE_CC_ENTRY)};
#undef DROCE_CC_ENTRY
  return kAll;
}

const AlgorithmInfo* find_algorithm(std::string_view name) {
  for (const AlgorithmInfo* info : algorithms()) {
    if (info->name == name) return info;
  }
  return nullptr;
}

std::string algorithm_names() {
  std::string out;
  for (const AlgorithmInfo* info : algorithms()) {
    if (!out.empty()) out += ", ";
    out += info->name;
  }
  return out;
}

std::unique_ptr<Algorithm> make_algorithm(std::string_view name,
                                          const ParamMap& params,
                                          uint64_t line_rate_bytes_per_sec) {
  const AlgorithmInfo* info = find_algorithm(name);
  if (info == nullptr) {
    throw ConfigError(fmt::format("unknown cc algorithm '{}'; accepted: {}",
                                  name, algorithm_names()));
  }
  if (line_rate_bytes_per_sec == 0) {
    throw ConfigError("cc line rate must be greater than 0");
  }
  return info->create(resolve_params(info->name, info->params, params),
                      line_rate_bytes_per_sec);
}

}  // namespace droce::cc
