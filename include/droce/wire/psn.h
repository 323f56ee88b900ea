// 24-bit packet sequence numbers (IBA 9.7.1: PSNs are modulo 2^24 and a
// receiver treats the half-space ahead of the expected PSN as "future" and the
// half-space behind as "duplicate").
#pragma once

#include <cstdint>

namespace droce::wire {

constexpr uint32_t kPsnMask = 0xFFFFFF;
constexpr uint32_t kPsnHalfSpace = 0x800000;

constexpr uint32_t psn_add(uint32_t psn, uint32_t n) {
  return (psn + n) & kPsnMask;
}

// Signed distance from `b` to `a` (a - b) in the 24-bit space: shifting both
// left by 8 puts the PSN in the top bits, so ordinary two's-complement
// subtraction wraps exactly at 2^24.
constexpr int32_t psn_diff(uint32_t a, uint32_t b) {
  return static_cast<int32_t>((a << 8) - (b << 8)) >> 8;
}

constexpr bool psn_lt(uint32_t a, uint32_t b) { return psn_diff(a, b) < 0; }
constexpr bool psn_le(uint32_t a, uint32_t b) { return psn_diff(a, b) <= 0; }
constexpr bool psn_gt(uint32_t a, uint32_t b) { return psn_diff(a, b) > 0; }
constexpr bool psn_ge(uint32_t a, uint32_t b) { return psn_diff(a, b) >= 0; }

// Number of PSNs from `from` up to (not including) `to`, going forward.
constexpr uint32_t psn_distance(uint32_t from, uint32_t to) {
  return (to - from) & kPsnMask;
}

}  // namespace droce::wire
