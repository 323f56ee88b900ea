// Deterministic pseudo-random numbers for the fabric model: xoshiro256**
// (Blackman and Vigna, "Scrambled linear pseudorandom number generators",
// 2018) seeded through splitmix64. Implemented here rather than taken from
// <random> because the standard distributions are not specified bit-exactly,
// and a simulation must give the same drops for the same seed everywhere.
#pragma once

#include <cstdint>

namespace droce::fabric {

class Rng {
 public:
  explicit Rng(uint64_t seed = 1) { reseed(seed); }

  void reseed(uint64_t seed) {
    for (auto& w : s_) {
      seed += 0x9E3779B97F4A7C15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      w = z ^ (z >> 31);
    }
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 bits of precision.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // True with probability p (p <= 0 never draws, so disabled impairments do
  // not perturb the stream of enabled ones).
  bool chance(double p) { return p > 0 && (p >= 1 || uniform() < p); }
  // Uniform in [0, n); n > 0. Multiply-shift, bias below 2^-32 for n < 2^32.
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace droce::fabric
