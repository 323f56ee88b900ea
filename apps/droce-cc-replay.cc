// droce-cc-replay: feed a CSV trace of congestion-control events into any
// registered algorithm and print its rate and window over time as CSV.
//
// Input (one event per line; '#' comments and blank lines ignored; an
// optional header line starting with "time_ns"):
//   time_ns,event,bytes,rtt_ns,int
//   event: ack | cnp | send | timer
//   bytes: acked bytes (ack) or sent bytes (send); empty = 0
//   rtt_ns: RTT sample for ack, empty = none
//   int: INT hops for ack, "ts_ns:tx_bytes:qlen_bytes:rate_bytes_per_sec"
//        joined by ';', empty = none
// Output:
//   time_ns,event,rate_bytes_per_sec,window_bytes
//   one row per input event plus one per algorithm timer that fired (event
//   "timer"), window empty for rate-only algorithms.
// Invalid options or trace lines: message naming the problem, exit code 2.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "droce/cc/profile.h"
#include "droce/cc/registry.h"
#include "cli_error.h"

namespace {

using droce::cc::AckEvent;
using droce::cc::Algorithm;
using droce::ConfigError;
using droce::cc::IntHop;

constexpr int kExitUsage = 2;

// Bad trace content; reported with the line number.
struct TraceError {
  std::string message;
};

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t pos = text.find(sep, start);
    parts.push_back(text.substr(start, pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

uint64_t parse_u64(std::string_view text, std::string_view what) {
  text = trim(text);
  uint64_t value = 0;
  auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    throw TraceError{
        fmt::format("{} '{}' is not an unsigned integer", what, text)};
  }
  return value;
}

droce::cc::IntRecord parse_int(std::string_view field) {
  droce::cc::IntRecord record;
  field = trim(field);
  if (field.empty()) return record;
  for (std::string_view hop_text : split(field, ';')) {
    const auto parts = split(hop_text, ':');
    if (parts.size() != 4) {
      throw TraceError{fmt::format(
          "INT hop '{}' must be ts_ns:tx_bytes:qlen_bytes:rate_bytes_per_sec",
          hop_text)};
    }
    IntHop hop{parse_u64(parts[0], "INT ts_ns"),
               parse_u64(parts[1], "INT tx_bytes"),
               parse_u64(parts[2], "INT qlen_bytes"),
               parse_u64(parts[3], "INT rate_bytes_per_sec")};
    if (!record.push(hop)) {
      throw TraceError{
          fmt::format("more than {} INT hops", droce::cc::kMaxIntHops)};
    }
  }
  return record;
}

void print_row(uint64_t now, std::string_view event, const Algorithm& cc) {
  const auto window = cc.window_bytes();
  fmt::print("{},{},{},{}\n", now, event, cc.rate_bytes_per_sec(),
             window ? fmt::format("{}", *window) : std::string());
}

// Fires the algorithm's timers due at or before `until`, one row each.
void run_timers(Algorithm& cc, uint64_t until) {
  while (auto deadline = cc.next_timer()) {
    if (*deadline > until) break;
    cc.on_timer(*deadline);
    print_row(*deadline, "timer", cc);
  }
}

void replay(std::istream& in, Algorithm& cc, std::optional<uint64_t> until) {
  std::string line;
  uint64_t line_no = 0;
  uint64_t last_time = 0;
  fmt::print("time_ns,event,rate_bytes_per_sec,window_bytes\n");
  print_row(0, "start", cc);
  while (std::getline(in, line)) {
    ++line_no;
    const std::string_view text = trim(line);
    if (text.empty() || text.front() == '#' || text.starts_with("time_ns")) {
      continue;
    }
    try {
      const auto fields = split(text, ',');
      if (fields.size() < 2 || fields.size() > 5) {
        throw TraceError{fmt::format(
            "expected time_ns,event,bytes,rtt_ns,int (2 to 5 fields), got {}",
            fields.size())};
      }
      auto field = [&](std::size_t i) {
        return i < fields.size() ? trim(fields[i]) : std::string_view();
      };
      const uint64_t now = parse_u64(field(0), "time_ns");
      if (now < last_time) {
        throw TraceError{
            fmt::format("time_ns {} goes backwards (previous event at {})", now,
                        last_time)};
      }
      last_time = now;
      const std::string_view event = field(1);
      const uint64_t bytes =
          field(2).empty() ? 0 : parse_u64(field(2), "bytes");
      run_timers(cc, now);
      if (event == "ack") {
        AckEvent ack;
        ack.acked_bytes = bytes;
        if (!field(3).empty()) ack.rtt_ns = parse_u64(field(3), "rtt_ns");
        ack.int_hops = parse_int(field(4));
        cc.on_ack(now, ack);
      } else if (event == "cnp") {
        cc.on_cnp(now);
      } else if (event == "send") {
        cc.on_send(now, bytes);
      } else if (event == "timer") {
        cc.on_timer(now);
      } else {
        throw TraceError{fmt::format(
            "unknown event '{}'; accepted: ack, cnp, send, timer", event)};
      }
      print_row(now, event, cc);
    } catch (const TraceError& e) {
      throw TraceError{fmt::format("line {}: {}", line_no, e.message)};
    }
  }
  if (until) {
    if (*until < last_time) {
      throw TraceError{fmt::format("--until {} is before the last event at {}",
                                   *until, last_time)};
    }
    run_timers(cc, *until);
    print_row(*until, "end", cc);
  }
}

std::string list_algorithms() {
  std::string out;
  for (const droce::cc::AlgorithmInfo* info : droce::cc::algorithms()) {
    out += fmt::format("{}: {}\n{}", info->name, info->summary,
                       droce::cc::describe_params(info->params));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Replay a CSV trace of CC events (ack, cnp, send, timer) into a "
      "droce congestion-control algorithm and print rate/window as CSV."};
  std::string trace_path;
  std::string cc_name, profile_name;
  std::vector<std::string> param_args;
  double line_rate_gbps = 100;
  std::optional<uint64_t> until;
  bool list = false;

  app.add_option("trace", trace_path,
                 "event CSV: time_ns,event,bytes,rtt_ns,int ('-' = stdin)");
  app.add_option("--cc", cc_name, "algorithm: " + droce::cc::algorithm_names());
  app.add_option("--profile", profile_name,
                 "a named CC profile (see --list) or a profile file: its algorithm "
                 "and parameters, before --param");
  app.add_option("--param", param_args,
                 "algorithm parameter name=value (repeatable); see --list")
      ->allow_extra_args(false);
  app.add_option("--line-rate-gbps", line_rate_gbps,
                 "line rate in Gbit/s (default 100)")
      ->check(CLI::Range(0.001, 1e6));
  app.add_option("--until", until,
                 "after the trace, fire timers up to this time (ns)");
  app.add_flag("--list", list, "list algorithms, their parameters and the named profiles");
  app.footer(
      "Output: time_ns,event,rate_bytes_per_sec,window_bytes. Rates are "
      "bytes/s.\nParameters use microseconds, Mbit/s and bytes; --list "
      "shows every one with default and range.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return droce::apps::cli_exit(app, e, "droce-cc-replay");
  }
  if (list) {
    fmt::print("{}", list_algorithms());
    try {
      fmt::print("\nprofiles (--profile NAME):\n{}",
                 droce::cc::describe_profiles(droce::cc::list_profiles()));
    } catch (const ConfigError& e) {
      fmt::print(stderr, "droce-cc-replay: --list: {}\n", e.what());
      return kExitUsage;
    }
    return 0;
  }
  droce::cc::ParamMap params;
  if (!profile_name.empty()) {
    try {
      const droce::cc::Profile p = droce::cc::load_profile(profile_name);
      if (!cc_name.empty() && cc_name != p.algorithm) {
        fmt::print(stderr, "droce-cc-replay: --profile: profile '{}' is for {}, not --cc {}\n",
                   p.name, p.algorithm, cc_name);
        return kExitUsage;
      }
      cc_name = p.algorithm;
      params = p.params;
    } catch (const ConfigError& e) {
      fmt::print(stderr, "droce-cc-replay: --profile: {}\n", e.what());
      return kExitUsage;
    }
  }
  if (cc_name.empty()) {
    fmt::print(stderr,
               "droce-cc-replay: option --cc is required; accepted: {}\n",
               droce::cc::algorithm_names());
    return kExitUsage;
  }
  if (trace_path.empty()) {
    fmt::print(stderr, "droce-cc-replay: a trace file argument is required\n");
    return kExitUsage;
  }

  std::unique_ptr<Algorithm> cc;
  try {
    droce::cc::ParamMap given;
    for (const std::string& arg : param_args) {
      auto [key, value] = droce::cc::parse_assignment(arg);
      if (!given.emplace(key, value).second) {
        throw ConfigError(fmt::format("--param {} given twice", key));
      }
      params[key] = value;  // over the profile's
    }
    const double line = line_rate_gbps * 1e9 / 8;
    cc =
        droce::cc::make_algorithm(cc_name, params, static_cast<uint64_t>(line));
  } catch (const ConfigError& e) {
    fmt::print(stderr, "droce-cc-replay: --cc/--param: {}\n", e.what());
    return kExitUsage;
  }

  std::ifstream file;
  std::istream* in = &std::cin;
  if (trace_path != "-") {
    file.open(trace_path);
    if (!file) {
      fmt::print(stderr, "droce-cc-replay: cannot open trace '{}'\n",
                 trace_path);
      return kExitUsage;
    }
    in = &file;
  }
  try {
    replay(*in, *cc, until);
  } catch (const TraceError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "droce-cc-replay: {}: {}\n", trace_path, e.message);
    return kExitUsage;
  }
  return 0;
}
