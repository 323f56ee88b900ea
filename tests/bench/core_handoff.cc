// How long one cache line takes to go from one CPU to another: two threads,
// pinned, hand a counter back and forth; each increment waits for the line
// the other thread just wrote. The figure is half a round trip.
//
//   droce-bench-core-handoff [CPU_A, default 0] [CPU_B, default 1] [ROUNDS]
//
// Every two-thread pipeline in droce (a poster beside a worker lcore, two
// shards) pays this per line that crosses, and on a virtual machine it
// depends on where the host put the two vCPUs: on the machine of
// docs/PERFORMANCE.md it was 55 ns at one hour and 240 ns at another, and
// droce-perf's 64 B send rate moved with it. engine_bench.py prints it
// beside the send figures so that they can be read.
#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Waits for `counter` to reach each value of its parity and answers with
// the next one: `first` is 0 for one thread and 1 for the other.
void play(std::atomic<uint64_t>& counter, uint64_t first, uint64_t rounds) {
  for (uint64_t v = first; v < 2 * rounds; v += 2) {
    while (counter.load(std::memory_order_acquire) != v) {
    }
    counter.store(v + 1, std::memory_order_release);
  }
}

int parse_int(const char* text, const char* what) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (!end || *end != '\0' || v < 0 || v > 1'000'000'000) {
    fmt::print(stderr, "droce-bench-core-handoff: {} must be a non-negative integer, not '{}'\n",
               what, text);
    std::exit(2);
  }
  return static_cast<int>(v);
}

}  // namespace

int main(int argc, char** argv) {
  const int cpu_a = argc > 1 ? parse_int(argv[1], "CPU_A") : 0;
  const int cpu_b = argc > 2 ? parse_int(argv[2], "CPU_B") : 1;
  const uint64_t rounds = argc > 3 ? static_cast<uint64_t>(parse_int(argv[3], "ROUNDS")) : 1'000'000;
  if (rounds == 0) {
    fmt::print(stderr, "droce-bench-core-handoff: ROUNDS must be at least 1\n");
    return 2;
  }
  if (cpu_a == cpu_b) {
    fmt::print(stderr, "droce-bench-core-handoff: CPU_A and CPU_B must differ\n");
    return 2;
  }
  alignas(64) std::atomic<uint64_t> counter{0};
  bool pinned_b = true;
  std::thread other([&] {
    pinned_b = pin(cpu_b);
    play(counter, 1, rounds);
  });
  if (!pin(cpu_a)) {
    fmt::print(stderr, "droce-bench-core-handoff: cannot run on CPU {}\n", cpu_a);
    std::exit(1);
  }
  const auto t0 = std::chrono::steady_clock::now();
  play(counter, 0, rounds);
  other.join();
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  if (!pinned_b) {
    fmt::print(stderr, "droce-bench-core-handoff: cannot run on CPU {}\n", cpu_b);
    return 1;
  }
  fmt::print("cache line handoff CPU {} -> CPU {}: {:.1f} ns (half of {} round trips)\n", cpu_a,
             cpu_b, ns / static_cast<double>(2 * rounds), rounds);
  return 0;
}
