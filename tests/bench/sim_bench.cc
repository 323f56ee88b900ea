// Simulator speed: a 16-to-1 incast at 100 Gb/s (PFC on, no CC) run in
// virtual time. Prints packet events per second of wall time (one core) and
// the ratio of virtual to wall time, for both payload modes of docs/SIM.md:
// "real" (the default: every frame carries the source memory's bytes, which
// are placed in the destination memory) and "virtual" (the same frames and
// ICRCs, no payload copies to or from memory). docs/PERFORMANCE.md
// "Simulator".
//
//   build/tests/bench/droce-bench-sim [MiB per sender, default 32] [mtu, default 4096]
//                                     [real|virtual: one mode only, default both]
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"

namespace {

constexpr double kTargetMeps = 5.0;

bool run(unsigned mib, unsigned mtu, const char* payload) {
  const std::string text =
      "[run]\nduration = \"1s\"\ncsv_interval = \"10us\"\n"
      "[topology]\nkind = \"incast\"\nsenders = 16\nrate = \"100G\"\ndelay = \"1us\"\n"
      "flow_bytes = \"" + std::to_string(mib) + "MiB\"\n"
      "[switch]\nbuffer = \"4MiB\"\n"
      "pfc = { enabled = true, priorities = [3], xoff = \"64KiB\", xon = \"32KiB\" }\n"
      "[flow]\ncc = \"none\"\nmessage = \"1MiB\"\nverify = false\nmtu = " +
      std::to_string(mtu) + "\npayload = \"" + payload + "\"\n";
  droce::sim::Simulator sim(droce::sim::parse_scenario(text, "sim_bench"));
  // Wall time is what the target is about; CPU time of this thread is shown
  // too because the machine may be shared. Only sim.run() is timed.
  auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
  };
  const double c0 = cpu_now();
  const auto t0 = std::chrono::steady_clock::now();
  sim.run();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_now() - c0;
  const auto s = sim.summary();
  std::printf("payload = \"%s\"\n", payload);
  std::printf("  flows done %llu/16, drops %llu, XOFF %llu\n",
              static_cast<unsigned long long>(s.flows_completed),
              static_cast<unsigned long long>(s.switch_drops),
              static_cast<unsigned long long>(s.xoff_sent));
  std::printf("  virtual time  %.3f ms\n", s.end_ns / 1e6);
  std::printf("  wall time     %.3f s (thread CPU %.3f s)\n", wall, cpu);
  std::printf("  packet events %llu\n", static_cast<unsigned long long>(s.packet_events));
  std::printf("  events/s      %.2f M per wall second, %.2f M per CPU second (one core)\n",
              s.packet_events / wall / 1e6, s.packet_events / cpu / 1e6);
  std::printf("  virtual/wall  %.4f\n", s.end_ns / 1e9 / wall);
  const double rate = s.packet_events / wall / 1e6;
  std::printf("  target        >= %.0f M events/s per core (issue 5): %s\n", kTargetMeps,
              rate >= kTargetMeps ? "PASS" : "MISS");
  return s.all_done;
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned mib = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 32;
  const unsigned mtu = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 4096;
  std::printf("16-to-1 incast, 100 Gb/s, %u MiB per sender, MTU %u, PFC on, cc none\n", mib,
              mtu);
  // A third argument runs one mode only (for a profiler); default both.
  const std::string only = argc > 3 ? argv[3] : "";
  if (!only.empty() && only != "real" && only != "virtual") {
    std::fprintf(stderr, "droce-bench-sim: payload mode must be real or virtual, not '%s'\n",
                 only.c_str());
    return 2;
  }
  const bool real = only == "virtual" || run(mib, mtu, "real");
  const bool virt = only == "real" || run(mib, mtu, "virtual");
  return real && virt ? 0 : 1;
}
