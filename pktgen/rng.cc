#include "droce/pktgen/rng.h"

#include <numeric>
#include <utility>

namespace droce::pktgen {

std::vector<uint32_t> random_derangement(uint32_t n, uint64_t seed) {
  std::vector<uint32_t> p(n);
  if (n < 2) {
    std::iota(p.begin(), p.end(), 0u);
    return p;
  }
  SplitMix64 rng(seed);
  for (;;) {
    std::iota(p.begin(), p.end(), 0u);
    for (uint32_t i = n - 1; i > 0; --i) std::swap(p[i], p[rng.below(i + 1)]);
    bool fixed = false;
    for (uint32_t i = 0; i < n && !fixed; ++i) fixed = p[i] == i;
    if (!fixed) return p;
  }
}

}  // namespace droce::pktgen
