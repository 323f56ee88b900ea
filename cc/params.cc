#include "droce/cc/params.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <system_error>

namespace droce::cc {

double Params::get(std::string_view name) const {
  for (const auto& [key, value] : values_) {
    if (key == name) return value;
  }
  throw std::logic_error(fmt::format("cc: parameter '{}' not declared", name));
}

namespace {

std::string accepted_names(std::span<const ParamSpec> specs) {
  if (specs.empty()) return "(none: this algorithm takes no parameters)";
  std::string out;
  for (const ParamSpec& spec : specs) {
    if (!out.empty()) out += ", ";
    out += spec.name;
    if (!spec.alias.empty()) out += fmt::format(" (alias {})", spec.alias);
  }
  return out;
}

const ParamSpec* find_spec(std::span<const ParamSpec> specs,
                           std::string_view key) {
  for (const ParamSpec& spec : specs) {
    if (spec.name == key || (!spec.alias.empty() && spec.alias == key)) {
      return &spec;
    }
  }
  return nullptr;
}

// Whole-string decimal parse; from_chars is locale-independent, so "1,5"
// and "1.5" do not depend on the user's environment.
std::optional<double> parse_number(std::string_view text) {
  double value = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last || first == last ||
      !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

Params resolve_params(std::string_view algorithm,
                      std::span<const ParamSpec> specs, const ParamMap& given) {
  std::vector<std::pair<std::string_view, double>> values;
  values.reserve(specs.size());
  for (const ParamSpec& spec : specs) {
    values.emplace_back(spec.name, spec.default_value);
  }
  for (const auto& [key, text] : given) {
    const ParamSpec* spec = find_spec(specs, key);
    if (spec == nullptr) {
      throw ConfigError(
          fmt::format("unknown parameter '{}' for cc algorithm '{}'; "
                      "accepted: {}",
                      key, algorithm, accepted_names(specs)));
    }
    auto value = parse_number(text);
    if (!value) {
      throw ConfigError(fmt::format(
          "cc '{}' parameter '{}': '{}' is not a number (expected {} in "
          "[{}, {}]{}{})",
          algorithm, spec->name, text, spec->integer ? "an integer" : "a value",
          spec->min_value, spec->max_value, spec->unit.empty() ? "" : " ",
          spec->unit));
    }
    if (spec->integer && std::floor(*value) != *value) {
      throw ConfigError(fmt::format(
          "cc '{}' parameter '{}': '{}' must be an integer in [{}, {}]",
          algorithm, spec->name, text, spec->min_value, spec->max_value));
    }
    if (*value < spec->min_value || *value > spec->max_value) {
      throw ConfigError(fmt::format(
          "cc '{}' parameter '{}': {} is out of range; accepted range "
          "[{}, {}]{}{}",
          algorithm, spec->name, text, spec->min_value, spec->max_value,
          spec->unit.empty() ? "" : " ", spec->unit));
    }
    for (auto& entry : values) {
      if (entry.first == spec->name) entry.second = *value;
    }
  }
  return Params(std::move(values));
}

std::pair<std::string, std::string> parse_assignment(std::string_view text) {
  auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw ConfigError(
        fmt::format("cc parameter '{}' is not of the form name=value", text));
  }
  return {std::string(text.substr(0, eq)), std::string(text.substr(eq + 1))};
}

std::string describe_params(std::span<const ParamSpec> specs) {
  std::string out;
  for (const ParamSpec& spec : specs) {
    out +=
        fmt::format("  {} ({}{}default {}, range [{}, {}]){}: {}\n", spec.name,
                    spec.unit, spec.unit.empty() ? "" : ", ",
                    spec.default_value, spec.min_value, spec.max_value,
                    spec.alias.empty() ? std::string()
                                       : fmt::format(" alias {}", spec.alias),
                    spec.help);
  }
  if (specs.empty()) out = "  (no parameters)\n";
  return out;
}

}  // namespace droce::cc
