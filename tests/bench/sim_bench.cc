// Simulator speed: a 16-to-1 incast at 100 Gb/s (PFC on, no CC) run in
// virtual time. Prints packet events per second of wall time (one core) and
// the ratio of virtual to wall time. The flows are not verified, so by
// default they move no payload bytes (docs/SIM.md, "Virtual payload": the
// same frames and ICRCs, the same outputs); the target is judged on that
// run. A second run forces payload = "real" (every frame carries the source
// memory's bytes, placed in the destination memory) and is printed beside
// it for reference. docs/PERFORMANCE.md "Simulator".
//
//   build/tests/bench/droce-bench-sim [MiB per sender, default 32] [mtu, default 4096]
//                                     [default|real|virtual: one run only, default both]
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"

namespace {

constexpr double kTargetMeps = 5.0;

// `payload` "default": no payload key in the scenario.
bool run(unsigned mib, unsigned mtu, const std::string& payload) {
  const std::string text =
      "[run]\nduration = \"1s\"\ncsv_interval = \"10us\"\n"
      "[topology]\nkind = \"incast\"\nsenders = 16\nrate = \"100G\"\ndelay = \"1us\"\n"
      "flow_bytes = \"" + std::to_string(mib) + "MiB\"\n"
      "[switch]\nbuffer = \"4MiB\"\n"
      "pfc = { enabled = true, priorities = [3], xoff = \"64KiB\", xon = \"32KiB\" }\n"
      "[flow]\ncc = \"none\"\nmessage = \"1MiB\"\nverify = false\nmtu = " +
      std::to_string(mtu) + "\n" +
      (payload == "default" ? std::string() : "payload = \"" + payload + "\"\n");
  droce::sim::Simulator sim(droce::sim::parse_scenario(text, "sim_bench"));
  const bool moves_payload = !sim.flow_spec(0).virtual_payload();
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
  if (payload == "default")
    std::printf("payload not set (unverified flows: %s)\n", moves_payload ? "real" : "virtual");
  else
    std::printf("payload = \"%s\"\n", payload.c_str());
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
  if (payload == "default")
    std::printf("  target        >= %.0f M events/s per core: %s\n", kTargetMeps,
                rate >= kTargetMeps ? "PASS" : "MISS");
  else
    std::printf("  (reference run, not the target's)\n");
  return s.all_done;
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned mib = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 32;
  const unsigned mtu = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 4096;
  // A third argument runs one configuration only (for a profiler).
  const std::string only = argc > 3 ? argv[3] : "";
  if (!only.empty() && only != "default" && only != "real" && only != "virtual") {
    std::fprintf(stderr,
                 "droce-bench-sim: the payload argument must be default, real or virtual, not "
                 "'%s'\n",
                 only.c_str());
    return 2;
  }
  std::printf("16-to-1 incast, 100 Gb/s, %u MiB per sender, MTU %u, PFC on, cc none\n", mib,
              mtu);
  if (!only.empty()) return run(mib, mtu, only) ? 0 : 1;
  const bool by_default = run(mib, mtu, "default");
  const bool real = run(mib, mtu, "real");
  return by_default && real ? 0 : 1;
}
