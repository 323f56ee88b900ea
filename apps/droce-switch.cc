// droce-switch: the fabric switch model (src/fabric, docs/FABRIC.md) on DPDK
// ports in real time, so droce endpoints in separate processes meet a
// congestion point: output queues serialized at a configured port rate,
// shared buffer, ECN marking, PFC, INT, static and ECMP routes. The run loop
// and the settings are src/switch_runtime; this is the command line.
// docs/SWITCH.md has the usage and the limits.
#include <fmt/format.h>
#include <sys/prctl.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <optional>
#include <string>

#include "app_options.h"
#include "droce/engine/app_main.h"
#include "droce/engine/engine.h"
#include "droce/switch_runtime/dpdk_port.h"
#include "droce/switch_runtime/runtime.h"

namespace droce::switchapp {
namespace {

using switch_runtime::Flags;
using switch_runtime::Settings;

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

// An option whose value is kept only when given (the file's value stays
// otherwise).
template <class T>
void optional_option(CLI::App& cli, const std::string& name, std::optional<T>& into,
                     const std::string& help) {
  cli.add_option_function<T>(name, [&into](const T& v) { into = v; }, help);
}

void add_model_options(CLI::App& cli, Flags& f) {
  cli.add_option("--port", f.ports,
                 "switch port: NAME[+NAME...][@RATE] (DPDK port names or ids; repeat, in "
                 "port order)");
  cli.add_option("--route", f.routes,
                 "PREFIX[/LEN]=PORT[,PORT...]: destination route (several ports: ECMP); "
                 "PREFIX may be 'default' or 'default6'");
  optional_option(cli, "--rate", f.rate, "default port rate (default 10G)");
  optional_option(cli, "--buffer", f.buffer, "shared buffer (default 12MiB)");
  optional_option(cli, "--buffer-mode", f.buffer_mode, "shared or per_port");
  optional_option(cli, "--port-buffer", f.port_buffer, "per-port buffer for per_port (default 1MiB)");
  optional_option(cli, "--classifier", f.classifier, "dscp or pcp");
  optional_option(cli, "--ecn", f.ecn_mode, "red, step or off (default red)");
  optional_option(cli, "--ecn-point", f.ecn_point, "dequeue or enqueue");
  optional_option(cli, "--kmin", f.kmin, "RED Kmin (default scaled with the port rate)");
  optional_option(cli, "--kmax", f.kmax, "RED Kmax");
  optional_option(cli, "--pmax", f.pmax, "RED Pmax, 0..1 (default 0.2)");
  optional_option(cli, "--ecn-k", f.ecn_k, "step marking threshold K");
  cli.add_flag("--pfc", f.pfc, "PFC on (priorities --pfc-priorities)");
  optional_option(cli, "--pfc-priorities", f.pfc_priorities,
                  "lossless priorities, e.g. 3 or 3,4 (default 3)");
  optional_option(cli, "--xoff", f.xoff, "PFC XOFF threshold per ingress port and priority");
  optional_option(cli, "--xon", f.xon, "PFC XON threshold");
  optional_option(cli, "--pfc-quanta", f.pfc_quanta, "pause quanta in XOFF frames (1..65535)");
  optional_option(cli, "--pfc-watchdog", f.pfc_watchdog, "PFC storm watchdog time (0 = off)");
  cli.add_flag("--int", f.int_on, "INT hop records on RoCE data (docs/INT.md)");
  optional_option(cli, "--seed", f.seed, "seed of RED draws and the ECMP hash");
  optional_option(cli, "--load-balance", f.load_balance,
                  "ECMP member choice: ecmp (hash, default), adaptive (least queued, per "
                  "packet) or adaptive_flowlet (per flowlet)");
  optional_option(cli, "--flowlet-gap", f.flowlet_gap,
                  "adaptive_flowlet: an idle gap that starts a new flowlet (default 8us)");
}

void add_run_options(CLI::App& cli, Settings& s) {
  cli.add_option("--capture", s.capture, "pcap (ns timestamps) of every frame the switch sends");
  cli.add_option("--json", s.json, "write the final counters as JSON");
  cli.add_option("--stats-interval", s.stats_interval,
                 "seconds between live stats lines (default 1, 0 = none)");
  cli.add_option("--duration", s.duration, "stop after this many seconds (default: until "
                                           "SIGINT/SIGTERM)");
  cli.add_option("--idle-sleep-us", s.idle_sleep_us,
                 "sleep up to this long when nothing arrived (shared CPUs; default 0: busy "
                 "poll)");
  cli.add_option("--burst", s.burst, "RX burst size (default 32)");
  cli.add_option("--mbufs", s.mbufs, "mbufs per DPDK port (default: from descriptors)");
}

int switch_main(int argc, char** argv) {
  engine::SplitArgs args = engine::split_eal_args(argc, argv);
  CLI::App cli{"droce-switch: the droce fabric switch model on DPDK ports, in real time\n"
               "usage: droce-switch [EAL options] -- [options]  (docs/SWITCH.md)"};
  std::string config;
  Flags flags;
  Settings s;
  cli.add_option("--config", config, "TOML file: [switch], [[ports]], [[routes]]");
  add_model_options(cli, flags);
  add_run_options(cli, s);
  const int rc = apps::parse_options_named(cli, args.app, "droce-switch", [&] {
    if (!config.empty()) switch_runtime::load_config(config, s);
    switch_runtime::apply_flags(flags, s);  // flags override the file
    switch_runtime::validate(s);
  });
  if (rc >= 0) return rc;

  // Idle sleeps are short: the default timer slack (50 us) would blur them.
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  return apps::run_app_named("droce-switch", [&] {
    engine::init_eal(static_cast<int>(args.eal.size()), args.eal.data());
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    switch_runtime::Runtime runtime(s, switch_runtime::open_dpdk_ports(s));
    runtime.run(g_stop, engine::now_ns);
    return kExitOk;
  });
}

}  // namespace
}  // namespace droce::switchapp

int main(int argc, char** argv) { return droce::switchapp::switch_main(argc, argv); }
