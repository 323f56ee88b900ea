// droce-sim: runs a scenario (docs/SIM.md) in deterministic virtual time and
// writes CSV time series and a JSON summary.
//
//   droce-sim scenario.toml [--out DIR] [--seed N] [--duration 10ms]
//             [--csv-interval 10us] [--json]
//             [--cc NAME] [--cc-profile NAME|FILE] [--cc-param KEY=VALUE]...
//   droce-sim --list
//
// --cc runs every flow with that algorithm (a flow whose file names another
// algorithm drops that algorithm's cc_params); --cc-profile runs every flow
// with a named profile's algorithm and parameters (cc/profiles/, --list
// shows them); --cc-param sets a parameter of every flow's algorithm, after
// the profile. Unknown names and out-of-range values are refused with the
// accepted names or range (docs/CC.md "Experiments", "Profiles").
//
// A scenario with [collective] runs that collective over its hosts
// (sim/collective.h), alongside its flows, prints one line for it and
// writes collective.json into --out.
//
// Exit codes: 0 done, 1 a flow or the collective failed or did not finish
// or a flow's data did not verify, 2 bad command line or scenario.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>
#include <fmt/core.h>

#include "droce/cc/profile.h"
#include "droce/cc/registry.h"
#include "droce/sim/collective.h"
#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"
#include "droce/sim_mpi/mpi_comm.h"
#include "cli_error.h"

namespace {

std::string human_ns(uint64_t ns) {
  if (ns >= 1'000'000'000) return fmt::format("{:.3f} s", ns / 1e9);
  if (ns >= 1'000'000) return fmt::format("{:.3f} ms", ns / 1e6);
  if (ns >= 1'000) return fmt::format("{:.3f} us", ns / 1e3);
  return fmt::format("{} ns", ns);
}

// The table's "verified" column (docs/SIM.md, "Outputs").
const char* verification_name(droce::sim::Simulator::Verification v) {
  using V = droce::sim::Simulator::Verification;
  switch (v) {
    case V::kMatched: return "yes";
    case V::kCorrupt: return "CORRUPT";
    case V::kOff: return "off";
    case V::kOffVirtual: return "virtual";
    case V::kTooLarge: return "too large";
    case V::kNotDone: return "-";
  }
  return "?";
}

// The command line, as given.
struct Options {
  std::string file, out, duration, interval, cc_name, cc_profile;
  uint64_t seed = 0;
  bool seed_given = false, json = false, list = false;
  std::vector<std::string> cc_params, skip_csv;
  droce::sim::OutputFiles files;
  droce::cc::ParamMap profile_params;  // from --cc-profile
};

// Parses argv into `o`; returns an exit code when the run should not go
// on (a bad option: 2, --list: 0), -1 otherwise.
int parse_command_line(int argc, char** argv, Options& o) {
  using namespace droce;
  CLI::App app{"droce-sim: deterministic virtual-time RoCEv2 fabric simulation"};
  app.add_option("scenario", o.file, "scenario file (TOML, docs/SIM.md)");
  app.add_flag("--list", o.list, "list the named CC profiles (--cc-profile) and exit");
  app.add_option("--out", o.out, "directory for flows.csv, queues.csv, links.csv, fct.csv, summary.json");
  auto* seed_opt = app.add_option("--seed", o.seed, "overrides run.seed");
  app.add_option("--duration", o.duration, "overrides run.duration (e.g. 10ms)");
  app.add_option("--csv-interval", o.interval, "overrides run.csv_interval (e.g. 10us; 0 = off)");
  app.add_option("--skip-csv", o.skip_csv,
                 "with --out, leave out these time series: flows, links (comma-separated)")
      ->delimiter(',');
  app.add_flag("--json", o.json, "print the JSON summary instead of the table");
  app.add_option("--cc", o.cc_name,
                 "congestion control for every flow, overriding the scenario (" +
                     cc::algorithm_names() + ")");
  app.add_option("--cc-profile", o.cc_profile,
                 "a named CC profile (--list shows them) or a profile file: its algorithm "
                 "and parameters for every flow");
  app.add_option("--cc-param", o.cc_params,
                 "KEY=VALUE, repeatable: a parameter of every flow's algorithm "
                 "(droce-cc-replay --list shows them)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return droce::apps::cli_exit(app, e, "droce-sim");
  }
  o.seed_given = seed_opt->count() > 0;
  if (o.list) {
    try {
      fmt::print("{}", cc::describe_profiles(cc::list_profiles()));
    } catch (const droce::ConfigError& e) {
      fmt::print(stderr, "droce-sim: --list: {}\n", e.what());
      return 2;
    }
    return 0;
  }
  for (const std::string& k : o.skip_csv) {
    if (k == "flows") {
      o.files.flows = false;
    } else if (k == "links") {
      o.files.links = false;
    } else {
      fmt::print(stderr, "droce-sim: --skip-csv: \"{}\"; accepted: flows, links\n", k);
      return 2;
    }
  }
  if (o.file.empty()) {
    fmt::print(stderr, "droce-sim: a scenario file is required (or --list)\n");
    return 2;
  }
  if (!o.cc_profile.empty()) {
    try {
      const cc::Profile p = cc::load_profile(o.cc_profile);
      if (!o.cc_name.empty() && o.cc_name != p.algorithm) {
        fmt::print(stderr, "droce-sim: --cc-profile: profile \"{}\" is for {}, not --cc {}\n",
                   p.name, p.algorithm, o.cc_name);
        return 2;
      }
      o.cc_name = p.algorithm;
      o.profile_params = p.params;
    } catch (const droce::ConfigError& e) {
      fmt::print(stderr, "droce-sim: --cc-profile: {}\n", e.what());
      return 2;
    }
  }
  return -1;
}

// --seed, --duration, --csv-interval, --cc (with a profile's parameters)
// and --cc-param applied to the scenario; false after printing why not.
bool apply_overrides(const Options& o, droce::sim::Scenario& sc) {
  using namespace droce;
  if (o.seed_given) sc.run.seed = o.seed;
  if (!o.duration.empty() && !sim::parse_time_ns(o.duration, sc.run.duration_ns)) {
    fmt::print(stderr, "droce-sim: --duration: \"{}\" is not a time like 10ms or 500us\n",
               o.duration);
    return false;
  }
  if (!o.interval.empty() && !sim::parse_time_ns(o.interval, sc.run.csv_interval_ns)) {
    fmt::print(stderr, "droce-sim: --csv-interval: \"{}\" is not a time like 10us\n", o.interval);
    return false;
  }
  if (!o.cc_name.empty()) {
    if (!cc::find_algorithm(o.cc_name)) {
      fmt::print(stderr, "droce-sim: --cc: unknown algorithm \"{}\"; accepted: {}\n", o.cc_name,
                 cc::algorithm_names());
      return false;
    }
    for (auto& f : sc.flows) {
      if (f.cc != o.cc_name) f.cc_params.clear();  // they belong to the file's algorithm
      f.cc = o.cc_name;
      if (!o.cc_profile.empty()) f.cc_params = o.profile_params;
    }
  }
  for (const std::string& kv : o.cc_params) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size()) {
      fmt::print(stderr, "droce-sim: --cc-param: \"{}\" is not KEY=VALUE\n", kv);
      return false;
    }
    for (auto& f : sc.flows) f.cc_params[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!o.cc_name.empty() || !o.cc_params.empty()) {  // (a profile sets cc_name)
    for (const auto& f : sc.flows) {
      try {
        (void)cc::make_algorithm(f.cc, f.cc_params,
                                 sc.hosts[sc.host_index(f.src)].rate_bps / 8);
      } catch (const droce::ConfigError& e) {
        fmt::print(stderr, "droce-sim: {}: flow {}: {}\n",
                   o.cc_params.empty() ? "--cc" : "--cc-param", f.name, e.what());
        return false;
      }
    }
  }
  return true;
}

// The table of flows and the summary lines (docs/SIM.md "Outputs").
void print_table(const droce::sim::Simulator& s, const droce::sim::Summary& sum, double wall,
                 uint32_t processes) {
  fmt::print("{:<10} {:<8} {:<8} {:>12} {:>14} {:>8} {:>9}\n", "flow", "src", "dst", "bytes",
             "fct", "retx", "verified");
  for (size_t f = 0; f < s.num_flows(); ++f) {
    const auto& fs = s.flow_spec(f);
    const auto& st = s.flow(f);
    fmt::print("{:<10} {:<8} {:<8} {:>12} {:>14} {:>8} {:>9}\n", fs.name, fs.src, fs.dst,
               fs.bytes, st.failed ? "failed" : st.done() ? human_ns(st.fct_ns()) : "running",
               s.flow_retransmits(f),
               verification_name(s.verification(f)));
  }
  fmt::print("\nvirtual time {}  flows done {}/{}  FCT p50 {}  p99 {}  max {}\n",
             human_ns(sum.end_ns), sum.flows_completed, s.num_flows(), human_ns(sum.fct_p50_ns),
             human_ns(sum.fct_p99_ns), human_ns(sum.fct_max_ns));
  fmt::print("drops: switch {} link {}  ECN marks {}  PFC XOFF {} XON {}  paused: "
             "switches {} hosts {}\n",
             sum.switch_drops, sum.link_losses, sum.ecn_marks, sum.xoff_sent, sum.xon_sent,
             human_ns(sum.switch_paused_ns), human_ns(sum.host_paused_ns));
  fmt::print("retransmits {}  timeouts {}  CNPs {}  queue max {} B  p99 {} B\n", sum.retransmits,
             sum.timeouts, sum.cnps, sum.max_queue_bytes, sum.p99_queue_bytes);
  fmt::print("{} packet events in {:.3f} s wall{}: {:.2f} M events/s, virtual/wall {:.4f}\n",
             sum.packet_events, wall,
             processes > 1 ? fmt::format(" ({} processes)", processes) : std::string(),
             sum.packet_events / wall / 1e6, sum.end_ns / 1e9 / wall);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace droce;
  // Started by mpirun with several processes: each runs one partition of
  // the scenario, and the first reports the whole run (docs/SIM.md
  // "Across processes").
  const uint32_t processes = sim_mpi::launched_size();
#ifdef DROCE_HAVE_MPI
  std::unique_ptr<sim_mpi::MpiComm> mpi;
  if (processes > 1) mpi = std::make_unique<sim_mpi::MpiComm>(&argc, &argv);
#else
  if (processes > 1) {
    fmt::print(stderr, "droce-sim: started by an MPI launcher ({} processes) but built without "
                       "MPI (libopenmpi-dev); run it without mpirun\n", processes);
    return 2;
  }
#endif
  Options o;
  if (const int rc = parse_command_line(argc, argv, o); rc >= 0) return rc;
  sim::Scenario sc;
  try {
    sc = sim::load_scenario(o.file);
  } catch (const sim::ScenarioError& e) {
    fmt::print(stderr, "droce-sim: {}\n", e.what());
    return 2;
  }
  if (!apply_overrides(o, sc)) return 2;
  if (sc.collective && !o.cc_name.empty()) sc.collective->qp.cc = o.cc_name;
  std::unique_ptr<sim::Simulator> s;
  try {
    s = std::make_unique<sim::Simulator>(sc);
  } catch (const sim::ScenarioError& e) {
    fmt::print(stderr, "droce-sim: {}\n", e.what());
    return 2;
  }
  // Wall clock only here, for the speed line; results never depend on it.
  const auto t0 = std::chrono::steady_clock::now();
  sim::CollectiveResult coll;
#ifdef DROCE_HAVE_MPI
  if (mpi) {
    try {
      s->enter_partition(*mpi);
      if (sc.collective) coll = sim::run_collective(*s, sc, *sc.collective, mpi.get());
      s->run_partitioned_until(sc.run.duration_ns);  // what run() does below
      s->merge_partitions();
    } catch (const sim::ScenarioError& e) {
      if (mpi->index() == 0) fmt::print(stderr, "droce-sim: mpirun: {}\n", e.what());
      return 2;
    }
    if (mpi->index() != 0) return 0;
  }
#endif
  if (sc.collective && processes == 1) {
    try {
      coll = sim::run_collective(*s, sc, *sc.collective);
    } catch (const sim::ScenarioError& e) {
      fmt::print(stderr, "droce-sim: {}\n", e.what());
      return 2;
    }
  }
  if (processes == 1) s->run();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const sim::Summary sum = s->summary();
  if (!o.out.empty()) {
    try {
      s->write_outputs(o.out, o.files);
    } catch (const std::exception& e) {
      fmt::print(stderr, "droce-sim: --out: {}\n", e.what());
      return 2;
    }
    if (sc.collective &&
        !apps::write_whole_file("droce-sim", "--out", o.out + "/collective.json",
                                sim::collective_json(*s, sc, *sc.collective, coll)))
      return 2;
  }
  if (o.json) {
    fmt::print("{}", s->summary_json());
  } else {
    print_table(*s, sum, wall, processes);
  }
  if (sc.collective)
    fmt::print(o.json ? stderr : stdout, "{}\n", sim::collective_line(*sc.collective, coll));
  if (const std::string w = sim::missing_int_warning(sum); !w.empty())
    fmt::print(stderr, "droce-sim: {}\n", w);
  const bool ok = sum.all_done && sum.flows_failed == 0 && sum.flows_corrupt == 0 &&
                  !coll.stalled && coll.failed_wrs == 0;
  return ok ? 0 : 1;
}
