// Seeded, platform-independent randomness for pktgen: splitmix64 (Steele,
// Lea, Flood, "Fast splittable pseudorandom number generators", 2014) as a
// sequential generator and as a counter-based hash, so that "the random
// value of packet n" needs no state and streams can be filled out of order.
#pragma once

#include <cstdint>
#include <vector>

namespace droce::pktgen {

constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The n-th value of the stream `seed`.
constexpr uint64_t hash64(uint64_t seed, uint64_t n) {
  return mix64(seed + (n + 1) * 0x9E3779B97F4A7C15ull);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_ += 0x9E3779B97F4A7C15ull); }
  // Uniform in [0, bound) (Lemire's multiply-shift; the tiny bias for huge
  // bounds does not matter for traffic patterns).
  uint64_t below(uint64_t bound) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * bound) >> 64);
  }

 private:
  uint64_t state_;
};

// A uniformly random permutation of 0..n-1 without fixed points (n >= 2):
// Fisher-Yates shuffles, rejected until no rank maps to itself (about e
// tries on average).
std::vector<uint32_t> random_derangement(uint32_t n, uint64_t seed);

}  // namespace droce::pktgen
