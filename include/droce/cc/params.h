// Named, range-checked algorithm parameters. Each algorithm publishes a table
// of ParamSpec (name, default, range, unit, source); resolve_params() turns a
// user's string->string map into validated numbers or throws ConfigError with
// a message that names the offending key and lists what is accepted.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "droce/config_error.h"

namespace droce::cc {

using ParamMap = std::map<std::string, std::string, std::less<>>;

struct ParamSpec {
  std::string_view name;
  double default_value;
  double min_value;
  double max_value;
  bool integer;            // reject fractional values (mlx5 registers)
  std::string_view unit;   // "us", "Mbit/s", "bytes", "" ...
  std::string_view help;   // one line, with the source of the default
  std::string_view alias;  // optional second accepted name ("" = none)
};

// Validated values for one algorithm, every spec'd parameter present.
class Params {
 public:
  Params() = default;
  explicit Params(std::vector<std::pair<std::string_view, double>> values)
      : values_(std::move(values)) {}
  // Value of a parameter by its canonical name. Asking for a name the
  // algorithm did not declare is a programming error (std::logic_error).
  double get(std::string_view name) const;
  uint64_t get_u64(std::string_view name) const {
    return static_cast<uint64_t>(get(name));
  }

 private:
  std::vector<std::pair<std::string_view, double>> values_;
};

// Throws ConfigError naming `algorithm` and the parameter on any problem.
Params resolve_params(std::string_view algorithm,
                      std::span<const ParamSpec> specs, const ParamMap& given);

// Parses "k=v" (as given to --param); throws ConfigError otherwise.
std::pair<std::string, std::string> parse_assignment(std::string_view text);

// "name (unit, default D, range [lo, hi]): help" lines, one per parameter.
std::string describe_params(std::span<const ParamSpec> specs);

}  // namespace droce::cc
