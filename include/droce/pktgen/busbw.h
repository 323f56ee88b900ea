// Bandwidth arithmetic as nccl-tests defines it (doc/PERFORMANCE.md there):
// algbw = S / t, and busbw = algbw x a factor that makes the number
// comparable to the link speed whatever the collective and rank count.
// GB/s means 1e9 bytes per second, as in nccl-tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "droce/pktgen/schedule.h"

namespace droce::pktgen {

enum class Collective : uint8_t {
  kAllReduce,      // 2(n-1)/n
  kAllGather,      // (n-1)/n
  kReduceScatter,  // (n-1)/n
  kAllToAll,       // (n-1)/n
  kBroadcast,      // 1
  kReduce,         // 1
  kIncast,         // n-1: S is what each sender sends; the root link carries (n-1) S
  kSendRecv,       // 1: permutation, every rank sends S once
};

Collective collective_of(Pattern p);
std::string_view to_string(Collective c);
double bus_factor(Collective c, uint32_t ranks);

// S in bytes, t in seconds; GB/s (1e9).
double algbw_gbps(uint64_t bytes, double seconds);
double busbw_gbps(Collective c, uint32_t ranks, uint64_t bytes, double seconds);

// The size sweep of nccl-tests' -b/-e/-f/-i: start at min_bytes, multiply by
// factor (when factor > 1) or else add step_bytes, while <= max_bytes.
struct SweepSpec {
  uint64_t min_bytes = 32 * 1024 * 1024;
  uint64_t max_bytes = 32 * 1024 * 1024;
  uint64_t factor = 1;      // -f
  uint64_t step_bytes = 0;  // -i, used when factor <= 1
};
// Empty if min > max or the sweep would not advance (factor <= 1 and
// step_bytes == 0 with min < max: then only min is returned).
std::vector<uint64_t> size_sweep(const SweepSpec& spec);

}  // namespace droce::pktgen
