// Private to the CRC-32 implementation files and the ICRC: the
// per-implementation entry points, the constants the carry-less-multiply
// folding derives from the polynomial, and the ICRC's masks. Not installed;
// tests reach the implementations through crc32_update_with() and
// icrc_check_many().
#pragma once

#include <cstddef>
#include <cstdint>

#include "droce/wire/crc32.h"
#include "droce/wire/headers.h"

namespace droce::wire {
struct IcrcCheck;
}  // namespace droce::wire

namespace droce::wire::crc32_detail {

// Every implementation has this shape: running state in, running state out.
using UpdateFn = uint32_t (*)(uint32_t state, const uint8_t* data, size_t len);

uint32_t update_bitwise(uint32_t state, const uint8_t* data, size_t len);
uint32_t update_slice8(uint32_t state, const uint8_t* data, size_t len);
// Only defined on x86; callers check the CPU flags first.
uint32_t update_pclmul(uint32_t state, const uint8_t* data, size_t len);
uint32_t update_vpclmul_avx512(uint32_t state, const uint8_t* data, size_t len);
// update_vpclmul_avx512 with the first 64 bytes (all of them, under 64)
// OR-ed with `or_mask` (crc32_update_or_first64).
uint32_t update_vpclmul_avx512_or64(uint32_t state, const uint8_t* data, size_t len,
                                    const uint8_t* or_mask);
// icrc_check_many (icrc.h): reads the checks and writes the flags itself,
// with no arrays in between; a layout icrc_in_place() refuses goes through
// icrc_compute().
void icrc_check_many_vpclmul_avx512(const IcrcCheck* checks, bool* ok, size_t n);
// icrc_compute_many (icrc.h) the same way: fours of short datagrams share
// their lanes and reduction; the rest one at a time.
void icrc_compute_many_vpclmul_avx512(const IcrcCheck* checks, uint32_t* icrc, size_t n);
// crc32_zeros (crc32.h) for n a multiple of 64, 64 <= n <= kZeroShiftMax.
uint32_t zeros_pclmul(uint32_t state, size_t n);
constexpr size_t kZeroShiftMax = 160 * 64;  // a 9000-byte jumbo frame's payload fits

// ---------------------------------------------------------------------------
// Polynomial arithmetic for the folding constants, all constexpr so nothing is
// pasted from elsewhere and a changed derivation fails to compile rather than
// silently producing wrong CRCs.
//
// P(x) = x^32 + 0x04C11DB7 (the Ethernet polynomial). "Normal" form below
// means bit i holds the coefficient of x^i.
constexpr uint32_t kPolyLow = 0x04C11DB7u;      // P without the x^32 term
constexpr uint32_t kPolyReflected = 0xEDB88320u; // the same, bit-reversed

// r * x mod P, normal form.
constexpr uint32_t times_x_mod(uint32_t r) {
  return (r << 1) ^ ((r & 0x80000000u) ? kPolyLow : 0u);
}

// r / x mod P, normal form. P's constant term is 1, so x has an inverse:
// an odd r first becomes r + P, which x divides.
constexpr uint32_t over_x_mod(uint32_t r) {
  return (r & 1u) ? ((r ^ kPolyLow) >> 1) | 0x80000000u : r >> 1;
}
static_assert(over_x_mod(times_x_mod(0x80000001u)) == 0x80000001u);

// x^n mod P, normal form; a negative n is a power of x's inverse.
constexpr uint32_t xpow_mod(int n) {
  uint32_t r = 1;
  for (int i = 0; i < n; ++i) r = times_x_mod(r);
  for (int i = 0; i > n; --i) r = over_x_mod(r);
  return r;
}

constexpr uint64_t reverse_bits(uint64_t v, unsigned width) {
  uint64_t r = 0;
  for (unsigned i = 0; i < width; ++i) r |= ((v >> i) & 1u) << (width - 1 - i);
  return r;
}

// floor(x^64 / P), normal form (33 bits: degree 32), for Barrett reduction.
constexpr uint64_t barrett_mu() {
  // The first quotient bit is x^32; what remains of x^64 after subtracting
  // x^32 * P is kPolyLow * x^32, which fits in 64 bits.
  uint64_t q = uint64_t{1} << 32;
  uint64_t rem = uint64_t{kPolyLow} << 32;
  for (int deg = 63; deg >= 32; --deg) {
    if ((rem >> deg) & 1u) {
      q |= uint64_t{1} << (deg - 32);
      rem ^= ((uint64_t{1} << 32) | kPolyLow) << (deg - 32);
    }
  }
  return q;
}

// Bit-reflected world (how the data sits in a register after a little-endian
// load): bit k of a value with "top" t stands for x^(t-k). A carry-less
// multiply adds tops; so multiplying by a constant c whose bits 0..31 are
// rev32(x^e mod P) moves a value down by a chosen distance while keeping it
// congruent mod P. Working the tops through:
//  - low qword of a 128-bit block (the earlier, higher-degree bytes), moved
//    D bits later: e = D + 31;
//  - high qword, moved D bits later: e = D - 33.
struct FoldConstants {
  uint64_t lo;  // multiplies the low qword
  uint64_t hi;  // multiplies the high qword
};
// A negative distance moves a block earlier: everything here is congruence
// mod P, where x is invertible. consteval: at a call in a function body,
// clang otherwise ran the hundreds of xpow_mod steps on every call (GCC
// folds them); a fold constant is always known at compile time.
consteval FoldConstants fold_constants(int distance_bits) {
  return {reverse_bits(xpow_mod(distance_bits + 31), 32),
          reverse_bits(xpow_mod(distance_bits - 33), 32)};
}

// Reduction of the last 128-bit block R (the message ends with it) to the
// CRC state R * x^32 mod P:
//  1. low qword times rev32(x^95 mod P), XOR the high qword: 95 bits left;
//  2. the low 32 of those times rev32(x^63 mod P), XOR the rest shifted
//     down 32: 63 bits left;
//  3. Barrett: q = floor(hi32 * mu / x^32), state = lo32 ^ (q * P mod x^32),
//     with mu and P as 33-bit reflected constants.
constexpr uint64_t kReduce96 = reverse_bits(xpow_mod(95), 32);
constexpr uint64_t kReduce64 = reverse_bits(xpow_mod(63), 32);
constexpr uint64_t kBarrettMu = reverse_bits(barrett_mu(), 33);
constexpr uint64_t kBarrettPoly = reverse_bits((uint64_t{1} << 32) | kPolyLow, 33);

// Sanity checks on the derivation itself (not on known constants): x^32 mod P
// is P's low part, the reflected polynomial is the bit-reversed one, and
// mu * P has no terms of degree 32..64 other than x^64 (definition of
// floor(x^64 / P) for a degree-32 divisor).
static_assert(xpow_mod(32) == kPolyLow);
static_assert(reverse_bits(kPolyLow, 32) == kPolyReflected);
constexpr bool barrett_mu_is_quotient() {
  // Carry-less product of mu (33 bits) and P (33 bits): 65 bits, keep the
  // part above x^31 in a 128-bit-free way: compute bits 32..64 directly.
  const uint64_t mu = barrett_mu();
  const uint64_t p = (uint64_t{1} << 32) | kPolyLow;
  for (unsigned deg = 32; deg <= 64; ++deg) {
    unsigned bit = 0;
    for (unsigned i = 0; i <= deg && i <= 32; ++i) {
      if (deg - i <= 32) bit ^= ((mu >> i) & 1u) & ((p >> (deg - i)) & 1u);
    }
    if (bit != (deg == 64 ? 1u : 0u)) return false;
  }
  return true;
}
static_assert(barrett_mu_is_quotient());

// ---------------------------------------------------------------------------
// The ICRC (icrc.h, RoCEv2 annex A17.4.1): CRC-32 from kCrc32Init over eight
// 0xFF bytes (the pseudo-LRH), then the datagram with its variant fields set
// to ones.

// The running state after kCrc32Init and the eight 0xFF bytes, which every
// ICRC starts from: a constant, so no call computes it.
constexpr uint32_t state_after_ones() {
  uint32_t state = kCrc32Init;
  for (int byte = 0; byte < 8; ++byte) {
    state ^= 0xFFu;
    for (int bit = 0; bit < 8; ++bit) state = (state >> 1) ^ (kPolyReflected & (0u - (state & 1u)));
  }
  return state;
}
constexpr uint32_t kStateAfterOnes = state_after_ones();

// OR masks over the first 64 bytes of the IP header for the layouts whose
// variant fields all lie there (IPv4 without options, IPv6): those fields
// set to ones. masks[0] is IPv4's, masks[1] IPv6's, so a bool picks one.
struct IcrcFirstMasks {
  alignas(64) uint8_t masks[2][64] = {};
  constexpr IcrcFirstMasks() {
    uint8_t* v4 = masks[0];
    v4[1] = 0xFF;   // TOS (DSCP + ECN)
    v4[8] = 0xFF;   // TTL
    v4[10] = 0xFF;  // header checksum
    v4[11] = 0xFF;
    v4[kIpv4Size + 6] = v4[kIpv4Size + 7] = 0xFF;  // UDP checksum
    v4[kIpv4Size + kUdpSize + 4] = 0xFF;           // BTH FECN, BECN, reserved
    uint8_t* v6 = masks[1];
    v6[0] = 0x0F;   // traffic class, high nibble; version stays
    v6[1] = v6[2] = v6[3] = 0xFF;  // traffic class, low nibble + flow label
    v6[7] = 0xFF;   // hop limit
    v6[kIpv6Size + 6] = v6[kIpv6Size + 7] = 0xFF;
    v6[kIpv6Size + kUdpSize + 4] = 0xFF;
  }
};
// Hidden: one copy, reached without a GOT load (this is a static library
// built position-independent).
[[gnu::visibility("hidden")]] inline constexpr IcrcFirstMasks kIcrcFirstMasks;

inline const uint8_t* icrc_first_mask(bool ipv6) { return kIcrcFirstMasks.masks[ipv6]; }

// Whether a datagram can be CRCed where it lies with icrc_first_mask OR-ed
// in: IPv4 without options or IPv6, with the IP, UDP and BTH headers (every
// masked byte) inside `len_before_icrc`. Anything else icrc_compute copies.
inline bool icrc_in_place(const uint8_t* l3, size_t len_before_icrc, bool ipv6) {
  if (ipv6) return len_before_icrc >= kIpv6Size + kUdpSize + kBthSize;
  return (l3[0] & 0x0F) * 4 == kIpv4Size && len_before_icrc >= kIpv4Size + kUdpSize + kBthSize;
}

}  // namespace droce::wire::crc32_detail
