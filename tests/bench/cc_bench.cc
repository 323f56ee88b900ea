// droce-bench-cc: the 16-to-1 incast at 100 G (examples/cc/incast-16to1.toml)
// with each CC algorithm, in virtual time, in one table: bottleneck queue
// p50/p99/max, link utilisation while the incast lasts, Jain's index over
// the flows' mean rates, and flow completion time p50/p99.
//
//   build/tests/bench/droce-bench-cc [--duration-ms 20]   (ninja -C build bench-cc)
//
// Deterministic: the same build prints the same table. docs/PERFORMANCE.md
// "Congestion control" records it next to the papers' claims.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"
#include "profiles.h"

namespace {

using namespace droce;

uint64_t pct(std::vector<uint64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = std::clamp<size_t>(
      static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))), 1, v.size());
  return v[rank - 1];
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t duration_ms = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--duration-ms") == 0 && i + 1 < argc) {
      duration_ms = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: droce-bench-cc [--duration-ms N]\n");
      return 2;
    }
  }
  const std::string file = std::string(DROCE_CC_EXAMPLES_DIR) + "/incast-16to1.toml";
  std::printf("16-to-1 incast, 16 x 1 MiB WRITE, 100 G, base RTT 4.7 us, virtual time limit %llu ms\n"
              "queue: s0 -> h0 (the bottleneck), sampled every 5 us while flows run; "
              "util: payload bytes / (100 G x time until the last flow ends)\n\n",
              static_cast<unsigned long long>(duration_ms));
  std::printf("%-7s %10s %10s %10s %7s %6s %10s %10s %6s %6s %8s\n", "cc", "q_p50_KB",
              "q_p99_KB", "q_max_KB", "util", "jain", "fct_p50_us", "fct_p99_us", "done",
              "CNPs", "pfc_xoff");
  for (const char* cc : {"none", "dcqcn", "timely", "hpcc", "swift"}) {
    sim::Scenario sc = sim::load_scenario(file);
    cc_experiments::use_cc(sc, cc);
    sc.run.duration_ns = duration_ms * 1'000'000;
    sc.run.csv_interval_ns = 5'000;
    sim::Simulator s(sc);
    s.run();
    const sim::Summary sum = s.summary();
    const uint64_t end = s.now();
    std::vector<uint64_t> q;
    for (const auto& x : s.queue_samples())
      if (x.sw == 0 && x.tc == 3 && s.port_peer(0, static_cast<uint16_t>(x.port)) == "h0")
        q.push_back(x.bytes);
    // Jain's index over each flow's mean rate (bytes over its own FCT, or
    // over the run for flows that did not finish).
    std::vector<double> rates;
    uint64_t bytes = 0;
    for (size_t f = 0; f < s.num_flows(); ++f) {
      const auto& st = s.flow(f);
      const uint64_t t = st.done() ? st.fct_ns() : end - st.start_ns;
      rates.push_back(t ? static_cast<double>(st.completed_bytes) / static_cast<double>(t) : 0);
      bytes += st.completed_bytes;
    }
    double sum_r = 0, sq = 0;
    for (double r : rates) {
      sum_r += r;
      sq += r * r;
    }
    const double jain = sq > 0 ? sum_r * sum_r / (static_cast<double>(rates.size()) * sq) : 0;
    const double util = end ? static_cast<double>(bytes) * 8 / (100e9 * static_cast<double>(end) / 1e9) : 0;
    std::printf("%-7s %10.1f %10.1f %10.1f %7.3f %6.3f %10.1f %10.1f %3llu/%-2zu %6llu %8llu\n", cc,
                pct(q, 0.5) / 1e3, pct(q, 0.99) / 1e3, sum.max_queue_bytes / 1e3, util, jain,
                sum.fct_p50_ns / 1e3, sum.fct_p99_ns / 1e3,
                static_cast<unsigned long long>(sum.flows_completed), s.num_flows(),
                static_cast<unsigned long long>(sum.cnps),
                static_cast<unsigned long long>(sum.xoff_sent));
  }
  return 0;
}
