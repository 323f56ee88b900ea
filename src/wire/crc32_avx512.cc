// CRC-32 by folding with VPCLMULQDQ on 512-bit registers: the PCLMULQDQ
// method (crc32_pclmul.cc) with each 128-bit lane of a zmm register an
// independent accumulator. Four zmm accumulators (16 lanes) take 256 bytes
// per step, enough independent multiplies to keep the unit busy through its
// latency; then they merge into one zmm, fold 64 bytes at a time, collapse
// to one 128-bit lane and finish as the 128-bit code does. Messages under
// 128 bytes skip the chain: each lane is moved straight to the remainder
// (below). The ICRC checks of a receive burst run here too
// (icrc_check_many_vpclmul_avx512), read straight from the IcrcChecks.
// gcc 12's AVX-512 intrinsics pass _mm512_undefined_*() as the merge source
// and then warn about it (GCC bug 105593, fixed in gcc 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <array>

#include "crc32_clmul.h"
#include "droce/wire/icrc.h"

#if defined(__x86_64__) || defined(__i386__)

#define DROCE_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx2,vpclmulqdq,pclmul,sse4.1")))

namespace droce::wire::crc32_detail {

namespace {

DROCE_TARGET_AVX512 inline __m512i load512(const uint8_t* p) {
  return _mm512_loadu_si512(p);
}

// A running state as a zmm to XOR into a message's first 64 bytes: it
// enters the CRC as an XOR into the first 32 message bits.
DROCE_TARGET_AVX512 inline __m512i state_block512(uint32_t state) {
  return _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(state)));
}

// The same (lo, hi) constant pair in each 128-bit lane (also used for the
// reduction's constants, which pair up the same way).
DROCE_TARGET_AVX512 inline __m512i fold_pair512(FoldConstants k) {
  const auto lo = static_cast<int64_t>(k.lo);
  const auto hi = static_cast<int64_t>(k.hi);
  return _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
}

DROCE_TARGET_AVX512 inline __m512i fold_mul512(__m512i acc, __m512i k) {
  return _mm512_xor_si512(_mm512_clmulepi64_epi128(acc, k, 0x00),
                          _mm512_clmulepi64_epi128(acc, k, 0x11));
}

// acc moved ahead and combined with data: one three-way XOR.
DROCE_TARGET_AVX512 inline __m512i fold512(__m512i acc, __m512i k, __m512i data) {
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00),
                                   _mm512_clmulepi64_epi128(acc, k, 0x11), data, 0x96);
}

// One zmm accumulator (whose last byte is the last byte folded so far) to
// one xmm: lanes 0, 1, 2 move 384, 256, 128 bits ahead onto lane 3.
DROCE_TARGET_AVX512 inline __m128i collapse(__m512i z) {
  constexpr FoldConstants k384 = fold_constants(384);
  constexpr FoldConstants k256 = fold_constants(256);
  constexpr FoldConstants k128 = fold_constants(128);
  const __m512i k = _mm512_set_epi64(0, 0,  // lane 3 stays: its products are 0
                                     static_cast<int64_t>(k128.hi), static_cast<int64_t>(k128.lo),
                                     static_cast<int64_t>(k256.hi), static_cast<int64_t>(k256.lo),
                                     static_cast<int64_t>(k384.hi), static_cast<int64_t>(k384.lo));
  const __m512i moved = _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(z, k, 0x00),
                                                  _mm512_clmulepi64_epi128(z, k, 0x11),
                                                  _mm512_maskz_mov_epi64(0xC0, z), 0x96);
  // XOR the four lanes together: swap 256-bit halves, then adjacent lanes.
  const __m512i y = _mm512_xor_si512(moved, _mm512_shuffle_i64x2(moved, moved, 0x4E));
  const __m512i x = _mm512_xor_si512(y, _mm512_shuffle_i64x2(y, y, 0xB1));
  return _mm512_castsi512_si128(x);
}

// The folding proper, len >= 64; `first_or` is OR-ed into the first 64
// bytes (zero for a plain CRC).
DROCE_TARGET_AVX512 inline uint32_t fold_all(uint32_t state, const uint8_t* p, size_t len,
                                             __m512i first_or) {
  const __m512i init = state_block512(state);
  const __m512i k512 = fold_pair512(fold_constants(512));
  __m512i acc;
  if (len >= 256) {
    const __m512i k2048 = fold_pair512(fold_constants(2048));
    __m512i z0 = _mm512_xor_si512(_mm512_or_si512(load512(p), first_or), init);
    __m512i z1 = load512(p + 64);
    __m512i z2 = load512(p + 128);
    __m512i z3 = load512(p + 192);
    p += 256;
    len -= 256;
    while (len >= 256) {
      z0 = fold512(z0, k2048, load512(p));
      z1 = fold512(z1, k2048, load512(p + 64));
      z2 = fold512(z2, k2048, load512(p + 128));
      z3 = fold512(z3, k2048, load512(p + 192));
      p += 256;
      len -= 256;
    }
    const __m512i k1536 = fold_pair512(fold_constants(1536));
    const __m512i k1024 = fold_pair512(fold_constants(1024));
    acc = _mm512_ternarylogic_epi64(fold_mul512(z0, k1536), fold_mul512(z1, k1024),
                                    fold512(z2, k512, z3), 0x96);
  } else {
    acc = _mm512_xor_si512(_mm512_or_si512(load512(p), first_or), init);
    p += 64;
    len -= 64;
  }
  while (len >= 64) {
    acc = fold512(acc, k512, load512(p));
    p += 64;
    len -= 64;
  }
  return finish128(collapse(acc), p, len);
}

// Short messages: under 128 bytes, one zmm of data and the rest of one more.
// The folding is Gopal et al.'s ("Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ Instruction", Intel, 2009), with every lane
// folded straight to the remainder. Step 1 of reduce128 (crc32_internal.h)
// is itself a fold: the last block's low qword times rev32(x^95 mod P), its
// high qword times rev32(x^31 mod P) = 1, which is fold_constants(64), a
// move 64 bits past the message's end into a 95-bit remainder W. Every
// other 128-bit lane, d bits before the last one, gets there by one
// multiply pair with fold_constants(d + 64); the products are 95 bits and
// XOR into W. So a short message is four independent zmm multiplies away
// from W (no fold-then-collapse chain), and four messages' W, summed across
// a 4x4 transpose of 128-bit lanes, sit one per lane, where steps 2 and 3
// (three dependent multiplies) run lane-wise for all four.
//
// A message under 64 bytes is loaded as it lies, into the first `len`
// bytes of a zmm with zeros after it. Its lanes then end after the message
// does: moved a negative distance, which is as good as any since x is
// invertible mod P (a lane wholly past the end is zero and moves nowhere).
// So no load is shifted or reaches outside the message.
constexpr bool is_short(size_t len) { return len < 128; }
constexpr bool is_short_from_64(size_t len) { return len - 64 < 64; }  // 64..127

// The lead zmm holds a message's first 64 bytes (all of it, under 64); the
// message ends `len` bytes after the lead's start, so the lead's lane j ends
// 8 * len - 128 * (j + 1) bits before the message's end (negative: after
// it). A (lo, hi) constant pair per lane for each length, moving lane j to
// W: fold_constants(8 * len - 128 * (j + 1) + 64), in one aligned zmm.
struct alignas(64) LaneMoves {
  uint64_t k[8];  // lane j: k[2j] multiplies the low qword, k[2j + 1] the high
};

// Built by stepping each x^e mod P on by x^8 per byte of length: a few
// thousand steps at compile time, where 1024 xpow_mod calls would loop some
// 500,000 times.
constexpr std::array<LaneMoves, 128> lane_moves_by_length() {
  std::array<LaneMoves, 128> table{};
  uint32_t lo[4], hi[4];  // x^e mod P for the current length, normal form
  for (int j = 0; j < 4; ++j) {
    const int distance = -128 * (j + 1) + 64;  // at length 0
    lo[j] = xpow_mod(distance + 31);           // fold_constants' exponents
    hi[j] = xpow_mod(distance - 33);
  }
  for (LaneMoves& moves : table) {
    for (unsigned j = 0; j < 4; ++j) {
      moves.k[2 * j] = reverse_bits(lo[j], 32);
      moves.k[2 * j + 1] = reverse_bits(hi[j], 32);
      for (int bit = 0; bit < 8; ++bit) {
        lo[j] = times_x_mod(lo[j]);
        hi[j] = times_x_mod(hi[j]);
      }
    }
  }
  return table;
}
constexpr std::array<LaneMoves, 128> kLaneMoves = lane_moves_by_length();
// The stepping agrees with fold_constants at both ends, in the middle, and
// for a lane past the end of a message under 64 bytes.
static_assert(kLaneMoves[64].k[6] == fold_constants(64).lo &&
              kLaneMoves[64].k[7] == fold_constants(64).hi);
static_assert(kLaneMoves[127].k[0] == fold_constants(384 + 8 * 63 + 64).lo &&
              kLaneMoves[127].k[1] == fold_constants(384 + 8 * 63 + 64).hi);
static_assert(kLaneMoves[116].k[3] == fold_constants(256 + 8 * 52 + 64).hi);
static_assert(kLaneMoves[44].k[4] == fold_constants(8 * 44 - 384 + 64).lo &&
              kLaneMoves[44].k[5] == fold_constants(8 * 44 - 384 + 64).hi);
static_assert(kLaneMoves[0].k[7] == fold_constants(-512 + 64).hi);

DROCE_TARGET_AVX512 inline __m512i lane_moves(size_t len) {
  return _mm512_load_si512(kLaneMoves[len].k);
}

DROCE_TARGET_AVX512 inline __m512i lane_pairs512(FoldConstants k0, FoldConstants k1,
                                                 FoldConstants k2, FoldConstants k3) {
  const auto q = [](uint64_t v) { return static_cast<int64_t>(v); };
  return _mm512_set_epi64(q(k3.hi), q(k3.lo), q(k2.hi), q(k2.lo), q(k1.hi), q(k1.lo),
                          q(k0.hi), q(k0.lo));
}

// For each length 64..127, bytes [128 - len, 64) of a zmm: the last
// len - 64 bytes, the rest zmm's load mask below. One load, where computing
// it would take four instructions; indexed by the length itself, so the
// address needs no subtraction (0 under 64: no rest).
constexpr std::array<uint64_t, 128> rest_bytes_by_length() {
  std::array<uint64_t, 128> masks{};
  for (unsigned tail = 1; tail < 64; ++tail) masks[64 + tail] = ~(~uint64_t{0} >> tail);
  return masks;
}
constexpr std::array<uint64_t, 128> kRestBytes = rest_bytes_by_length();

// A message's lead zmm: its first 64 bytes OR-ed with the mask, the state
// XOR-ed in. (With the mask as the operand taken from memory, one
// instruction fewer, icrc_check_many ran 2 % slower.)
DROCE_TARGET_AVX512 inline __m512i masked_lead(__m512i data, __m512i or_mask, __m512i init) {
  return _mm512_ternarylogic_epi64(data, or_mask, init, 0x56);  // (a | b) ^ c
}

// The message is `len` (64..127) bytes whose first 64 are OR-ed with
// `or_mask`, CRCed from the state in `init` (state_block512). It splits
// into the lead zmm, the first 64 bytes, and the rest zmm, the last 64
// bytes with their first 64 - tail (the lead's) zeroed: leading zeros do
// not change a polynomial, so the rest zmm is the last `tail` bytes alone.
// The result's four lanes XOR to the message's W. Every load stays inside
// the message and the mask.
DROCE_TARGET_AVX512 inline __m512i w_lanes_from_64(const uint8_t* p, size_t len,
                                                   const uint8_t* or_mask, __m512i init) {
  const size_t tail = len - 64;
  const __mmask64 rest_k = kRestBytes[len];
  const __m512i lead = masked_lead(load512(p), load512(or_mask), init);
  const __m512i rest = _mm512_maskz_loadu_epi8(rest_k, p + tail);
  const __m512i lead_moves = lane_moves(len);
  const __m512i rest_moves = lane_pairs512(fold_constants(448), fold_constants(320),
                                           fold_constants(192), fold_constants(64));
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(lead, lead_moves, 0x00),
                                   _mm512_clmulepi64_epi128(lead, lead_moves, 0x11),
                                   fold_mul512(rest, rest_moves), 0x96);
}

// Bytes [0, len) of a zmm, len < 64.
constexpr __mmask64 first_bytes(size_t len) { return (uint64_t{1} << len) - 1; }

// W lanes of a message under 64 bytes whose lead zmm (the message, zeros
// after it, the state XOR-ed in) is `lead`.
DROCE_TARGET_AVX512 inline __m512i w_lanes_under_64(__m512i lead, size_t len) {
  return fold_mul512(lead, lane_moves(len));
}

// W lanes of a short message (is_short), first 64 bytes OR-ed with
// `or_mask` (only its first `len` bytes, under 64), from the state in `init`.
DROCE_TARGET_AVX512 inline __m512i short_w_lanes(const uint8_t* p, size_t len,
                                                 const uint8_t* or_mask, __m512i init) {
  if (len >= 64) return w_lanes_from_64(p, len, or_mask, init);
  const __mmask64 k = first_bytes(len);
  return w_lanes_under_64(
      masked_lead(_mm512_maskz_loadu_epi8(k, p), _mm512_maskz_loadu_epi8(k, or_mask), init), len);
}

// Lanes 0 and 1 of a and of b XOR-ed with lanes 2 and 3: (a0 ^ a2, a1 ^ a3,
// b0 ^ b2, b1 ^ b3).
DROCE_TARGET_AVX512 inline __m512i sum_halves_x2(__m512i a, __m512i b) {
  return _mm512_xor_si512(_mm512_shuffle_i64x2(a, b, 0x44), _mm512_shuffle_i64x2(a, b, 0xEE));
}

// Lane i of the result: the XOR of a_i's four lanes (a 4x4 transpose of
// 128-bit lanes folded into its additions).
DROCE_TARGET_AVX512 inline __m512i sum_lanes_x4(__m512i a0, __m512i a1, __m512i a2,
                                                __m512i a3) {
  const __m512i s01 = sum_halves_x2(a0, a1);
  const __m512i s23 = sum_halves_x2(a2, a3);
  // Even lanes beside odd ones: lane i is a_i's whole sum.
  return _mm512_xor_si512(_mm512_shuffle_i64x2(s01, s23, 0x88),
                          _mm512_shuffle_i64x2(s01, s23, 0xDD));
}

// Steps 2 and 3 of reduce128 in each 128-bit lane: W (bits 0..94) to the
// state, which is left in dword 1 of the lane.
DROCE_TARGET_AVX512 inline __m512i reduce_w_in_lanes(__m512i w) {
  // As (lo, hi) pairs in every lane, the layout reduce128 uses.
  const __m512i low32 = fold_pair512({0xFFFFFFFFu, 0});
  const __m512i k = fold_pair512({kReduce96, kReduce64});
  const __m512i b = fold_pair512({kBarrettMu, kBarrettPoly});
  // 95 -> 63 bits: z, and its low 32 bits for Barrett in the same step.
  const __m512i moved = _mm512_clmulepi64_epi128(_mm512_and_si512(w, low32), k, 0x10);
  const __m512i rest = _mm512_bsrli_epi128(w, 4);
  const __m512i z = _mm512_xor_si512(moved, rest);
  const __m512i z_low = _mm512_ternarylogic_epi64(moved, rest, low32, 0x28);  // (a ^ b) & c
  // Barrett: the state is bits 32..63 of z ^ (q * P).
  const __m512i q = _mm512_and_si512(_mm512_clmulepi64_epi128(z_low, b, 0x00), low32);
  return _mm512_xor_si512(z, _mm512_clmulepi64_epi128(q, b, 0x10));
}

// The four lanes' states, in order (reduce_w_in_lanes).
DROCE_TARGET_AVX512 inline __m128i reduce_w_lanes(__m512i w) {
  const __m512i dword1_of_lanes = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                   13, 9, 5, 1);
  return _mm512_castsi512_si128(_mm512_permutexvar_epi32(dword1_of_lanes, reduce_w_in_lanes(w)));
}

// One short message's state from its W lanes: the lanes summed, then steps
// 2 and 3. Seven multiplies in all, at most three of them dependent. The
// three lane extracts are independent, one move's latency before the sum
// (two shuffles in a row would be two).
DROCE_TARGET_AVX512 inline uint32_t state_of_w_lanes(__m512i lanes) {
  const __m128i w = _mm_xor_si128(
      _mm_ternarylogic_epi64(_mm512_castsi512_si128(lanes), _mm512_extracti32x4_epi32(lanes, 1),
                             _mm512_extracti32x4_epi32(lanes, 2), 0x96),
      _mm512_extracti32x4_epi32(lanes, 3));
  return static_cast<uint32_t>(
      _mm_extract_epi32(_mm512_castsi512_si128(reduce_w_in_lanes(_mm512_zextsi128_si512(w))), 1));
}

// Zero bytes at the end of a message need no folding: n of them multiply
// the state by x^(8n) mod P, one carry-less multiply (zeros_pclmul). Zeroed
// buffers and the simulator's virtual payload end in kilobytes of them. The
// zero blocks counted here are whole 64-byte ones from the end, leaving at
// least 64 bytes to fold (`first_or` covers those); on data that does not
// end in zeros the test costs one load.
constexpr size_t kZeroTailMin = 512;

DROCE_TARGET_AVX512 inline size_t zero_tail(const uint8_t* p, size_t len) {
  if (len < kZeroTailMin) return 0;
  const uint8_t* end = p + len;
  const __m512i last = load512(end - 64);
  if (_mm512_test_epi64_mask(last, last)) return 0;  // the common case: one load
  size_t z = 0;
  while (len - z >= 64 + 256 && z + 256 <= kZeroShiftMax) {
    const uint8_t* q = end - z - 256;
    const __m512i any = _mm512_ternarylogic_epi64(
        _mm512_or_si512(load512(q), load512(q + 64)), load512(q + 128), load512(q + 192), 0xFE);
    if (_mm512_test_epi64_mask(any, any)) break;
    z += 256;
  }
  while (len - z >= 64 + 64 && z + 64 <= kZeroShiftMax) {
    const __m512i v = load512(end - z - 64);
    if (_mm512_test_epi64_mask(v, v)) break;
    z += 64;
  }
  return z;
}

DROCE_TARGET_AVX512 inline uint32_t fold_all_but_zeros(uint32_t state, const uint8_t* p,
                                                       size_t len, __m512i first_or) {
  const size_t zeros = zero_tail(p, len);
  const uint32_t folded = fold_all(state, p, len - zeros, first_or);
  return zeros ? zeros_pclmul(folded, zeros) : folded;
}

// crc32_update_or_first64 for any length.
DROCE_TARGET_AVX512 inline uint32_t or64(uint32_t state, const uint8_t* p, size_t len,
                                         const uint8_t* or_mask) {
  if (!is_short(len)) return fold_all_but_zeros(state, p, len, load512(or_mask));
  return state_of_w_lanes(short_w_lanes(p, len, or_mask, state_block512(state)));
}

// The ICRC of one datagram, any layout.
DROCE_TARGET_AVX512 inline uint32_t icrc_alone(const IcrcCheck& c) {
  if (!icrc_in_place(c.l3, c.len_before_icrc, c.ipv6))
    return icrc_compute(c.l3, c.len_before_icrc, c.ipv6);
  return crc32_finish(or64(kStateAfterOnes, c.l3, c.len_before_icrc, icrc_first_mask(c.ipv6)));
}
DROCE_TARGET_AVX512 inline bool icrc_ok_alone(const IcrcCheck& c) {
  return icrc_alone(c) == c.carried;
}

// Whether a check goes in a four (icrc_match_x4): CRCed in place, 64..127
// bytes (a 64-byte WRITE ONLY's datagram is 116). Routing only: a check
// refused here goes alone, to the same result, so an IPv4 header is taken
// by its whole first byte (version 4, 20 bytes).
DROCE_TARGET_AVX512 inline unsigned layout_fits_a_four(const IcrcCheck& c) {
  return unsigned{c.ipv6} | unsigned{c.l3[0] == 0x45};
}
DROCE_TARGET_AVX512 inline unsigned fits_a_four(const IcrcCheck& c) {
  return unsigned{is_short_from_64(c.len_before_icrc)} & layout_fits_a_four(c);
}

// fits_a_four for all of c[0, 4), in fewer instructions: the lengths less
// 64, OR-ed, stay under 64 only if each does.
DROCE_TARGET_AVX512 inline bool four_fit(const IcrcCheck* c) {
  const uint32_t over_64 = (c[0].len_before_icrc - 64) | (c[1].len_before_icrc - 64) |
                           (c[2].len_before_icrc - 64) | (c[3].len_before_icrc - 64);
  const unsigned layouts = layout_fits_a_four(c[0]) & layout_fits_a_four(c[1]) &
                           layout_fits_a_four(c[2]) & layout_fits_a_four(c[3]);
  return (unsigned{over_64 < 64} & layouts) != 0;
}

// W lanes of a check that fits a four.
DROCE_TARGET_AVX512 inline __m512i icrc_w_lanes(const IcrcCheck& c, __m512i init) {
  return w_lanes_from_64(c.l3, c.len_before_icrc, icrc_first_mask(c.ipv6), init);
}

// The running states of four checks that fit a four, in order.
[[gnu::always_inline]] DROCE_TARGET_AVX512 inline __m128i icrc_states_x4(
    const IcrcCheck& c0, const IcrcCheck& c1, const IcrcCheck& c2, const IcrcCheck& c3,
    __m512i init) {
  return reduce_w_lanes(sum_lanes_x4(icrc_w_lanes(c0, init), icrc_w_lanes(c1, init),
                                     icrc_w_lanes(c2, init), icrc_w_lanes(c3, init)));
}

// Four checks that fit a four at once: bit i of the result is whether c_i's
// ICRC is right. Each lane's state is compared with its carried ICRC, all
// four at once (the state is the complement of the ICRC, so a match XORs to
// all ones). Always inline: a call per four shows (3.35 against 2.95 ns a
// frame at 116 bytes).
[[gnu::always_inline]] DROCE_TARGET_AVX512 inline __mmask8 icrc_match_x4(
    const IcrcCheck& c0, const IcrcCheck& c1, const IcrcCheck& c2, const IcrcCheck& c3,
    __m512i init) {
  const __m128i states = icrc_states_x4(c0, c1, c2, c3, init);
  const auto carried = [](const IcrcCheck& c) { return static_cast<int>(c.carried); };
  return _mm_cmpeq_epi32_mask(
      _mm_xor_si128(states, _mm_setr_epi32(carried(c0), carried(c1), carried(c2), carried(c3))),
      _mm_set1_epi32(-1));
}

// icrc_check_many for a burst that is not all fours from its start: checks
// that fit a four wait, by index, until four do; the rest go alone, as does
// one that fits but could not complete a four even if all the rest fit.
// Out of line: the fours' loop then has no call in it to save registers
// across.
[[gnu::noinline]] DROCE_TARGET_AVX512 void icrc_check_mixed(const IcrcCheck* c, bool* ok,
                                                            size_t n) {
  const __m512i init = state_block512(kStateAfterOnes);
  size_t waiting[4];
  size_t n_waiting = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!fits_a_four(c[i]) || n - i < 4 - n_waiting) {
      ok[i] = icrc_ok_alone(c[i]);
      continue;
    }
    waiting[n_waiting++] = i;
    if (n_waiting == 4) {
      const unsigned match = icrc_match_x4(c[waiting[0]], c[waiting[1]], c[waiting[2]],
                                           c[waiting[3]], init);
      for (size_t j = 0; j < 4; ++j) ok[waiting[j]] = (match >> j) & 1;
      n_waiting = 0;
    }
  }
  for (size_t j = 0; j < n_waiting; ++j) ok[waiting[j]] = icrc_ok_alone(c[waiting[j]]);
}

}  // namespace

DROCE_TARGET_AVX512 void icrc_check_many_vpclmul_avx512(const IcrcCheck* c, bool* ok, size_t n) {
  // Four checks that fit a four (the whole burst, on a stream of short
  // WRITEs) go through the lanes together, read from and written to their
  // own places, no index in between. From the first four that do not, the
  // general loop.
  const IcrcCheck* const end = c + n;
  const __m512i init = state_block512(kStateAfterOnes);
  for (; end - c >= 4 && four_fit(c); c += 4, ok += 4) {
    // Bit i of the match is byte i: a byte of 0 or 1, a bool's representation.
    const __mmask8 match = icrc_match_x4(c[0], c[1], c[2], c[3], init);
    _mm_storeu_si32(ok, _mm_maskz_mov_epi8(match, _mm_set1_epi8(1)));
  }
  if (c != end) icrc_check_mixed(c, ok, static_cast<size_t>(end - c));
}

DROCE_TARGET_AVX512 void icrc_compute_many_vpclmul_avx512(const IcrcCheck* c, uint32_t* icrc,
                                                          size_t n) {
  // A send burst of one QP's short frames is all fours; anything else goes
  // one at a time from the first four that does not fit.
  const IcrcCheck* const end = c + n;
  const __m512i init = state_block512(kStateAfterOnes);
  for (; end - c >= 4 && four_fit(c); c += 4, icrc += 4) {
    const __m128i states = icrc_states_x4(c[0], c[1], c[2], c[3], init);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(icrc),
                     _mm_xor_si128(states, _mm_set1_epi32(-1)));  // crc32_finish
  }
  for (; c != end; ++c, ++icrc) *icrc = icrc_alone(*c);
}

DROCE_TARGET_AVX512 uint32_t update_vpclmul_avx512(uint32_t state, const uint8_t* p,
                                                   size_t len) {
  // Under 16 bytes the table code is faster than any multiply (as in
  // update_pclmul).
  if (len < 16) return update_slice8(state, p, len);
  if (len < 64) {
    // The short lanes: one load and one reduction, where the 128-bit code
    // folds 16 bytes at a time and shuffles a tail. Level with it at 16
    // bytes, ahead from 24 (at 44: 6.1 against 8.6 ns a call in a loop of
    // independent calls, 14.3 against 18.4 chained).
    const __m512i lead =
        _mm512_xor_si512(_mm512_maskz_loadu_epi8(first_bytes(len), p), state_block512(state));
    return state_of_w_lanes(w_lanes_under_64(lead, len));
  }
  return fold_all_but_zeros(state, p, len, _mm512_setzero_si512());
}

DROCE_TARGET_AVX512 uint32_t update_vpclmul_avx512_or64(uint32_t state, const uint8_t* p,
                                                        size_t len, const uint8_t* or_mask) {
  return or64(state, p, len, or_mask);
}

}  // namespace droce::wire::crc32_detail

#endif  // x86
