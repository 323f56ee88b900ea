// Quantities with units, as scenario files and command lines give them:
// rates ("100G", "25Gbps"), times ("1.5us"), sizes ("4KiB", "1MB").
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>

#include "droce/sim/scenario.h"

namespace droce::sim {

namespace {

// "<number><suffix>" with a decimal number; suffix looked up in `units`.
bool parse_scaled(std::string_view s, const std::map<std::string_view, double>& units,
                  double default_scale, double& out) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  size_t i = 0;
  while (i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == 'e' ||
                          s[i] == 'E' || (i > 0 && (s[i] == '+' || s[i] == '-') &&
                                          (s[i - 1] == 'e' || s[i - 1] == 'E'))))
    ++i;
  // 'e' may start a unit only if nothing numeric follows; no unit here does.
  if (i == 0) return false;
  double v = 0;
  const std::string num(s.substr(0, i));
  char* end = nullptr;
  v = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !std::isfinite(v) || v < 0) return false;
  std::string_view unit = s.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  double scale = default_scale;
  if (!unit.empty()) {
    auto it = units.find(unit);
    if (it == units.end()) return false;
    scale = it->second;
  }
  out = v * scale;
  return true;
}

bool to_u64(double v, uint64_t& out) {
  if (!(v >= 0) || v > 1.8e19) return false;
  out = static_cast<uint64_t>(std::llround(v));
  return true;
}

}  // namespace

bool parse_rate_bps(std::string_view s, uint64_t& out) {
  static const std::map<std::string_view, double> kUnits = {
      {"bps", 1},     {"b/s", 1},      {"K", 1e3},     {"Kbps", 1e3},  {"Kb/s", 1e3},
      {"M", 1e6},     {"Mbps", 1e6},   {"Mb/s", 1e6},  {"G", 1e9},     {"Gbps", 1e9},
      {"Gb/s", 1e9},  {"T", 1e12},     {"Tbps", 1e12}, {"Tb/s", 1e12},
  };
  double v;
  return parse_scaled(s, kUnits, 1, v) && to_u64(v, out);
}

bool parse_time_ns(std::string_view s, uint64_t& out) {
  static const std::map<std::string_view, double> kUnits = {
      {"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9},
  };
  double v;
  return parse_scaled(s, kUnits, 1, v) && to_u64(v, out);
}

bool parse_bytes(std::string_view s, uint64_t& out) {
  static const std::map<std::string_view, double> kUnits = {
      {"B", 1},          {"KB", 1e3},       {"MB", 1e6},       {"GB", 1e9},
      {"KiB", 1024.0},   {"MiB", 1048576.0}, {"GiB", 1073741824.0},
  };
  double v;
  return parse_scaled(s, kUnits, 1, v) && to_u64(v, out);
}

}  // namespace droce::sim
