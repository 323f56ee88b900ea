// CRC-32 by folding with VPCLMULQDQ on 512-bit registers: the PCLMULQDQ
// method (crc32_pclmul.cc) with each 128-bit lane of a zmm register an
// independent accumulator. Four zmm accumulators (16 lanes) take 256 bytes
// per step, enough independent multiplies to keep the unit busy through its
// latency; then they merge into one zmm, fold 64 bytes at a time, collapse
// to one 128-bit lane and finish as the 128-bit code does.
// gcc 12's AVX-512 intrinsics pass _mm512_undefined_*() as the merge source
// and then warn about it (GCC bug 105593, fixed in gcc 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "crc32_clmul.h"

#if defined(__x86_64__) || defined(__i386__)

#define DROCE_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx2,vpclmulqdq,pclmul,sse4.1")))

namespace droce::wire::crc32_detail {

namespace {

DROCE_TARGET_AVX512 inline __m512i load512(const uint8_t* p) {
  return _mm512_loadu_si512(p);
}

// The same (lo, hi) constant pair in each 128-bit lane.
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
  const __m512i init = _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(state)));
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

// The message is four 0xFF bytes then `len` (64..124) bytes of data whose
// first 64 are OR-ed with `or_mask`, CRCed from a zero register (65..124). Leading
// zero bytes leave a zero register unchanged, so the message is loaded
// right-aligned into two zmm registers: the first holds zeros, the four
// ones and data[0, len - 64), the second the last 64 data bytes. One fold,
// the collapse and the reduction: about half the dependent multiplies of
// the general path, which for these lengths folds 16 bytes at a time.
DROCE_TARGET_AVX512 inline uint32_t short_ones_or64(const uint8_t* p, size_t len,
                                                    const uint8_t* or_mask) {
  const unsigned head = static_cast<unsigned>(len - 64);  // data bytes in the first zmm
  const unsigned shift = 64 - head;                       // where they start there (>= 4)
  const __mmask64 head_k = ~uint64_t{0} << shift;
  const __mmask64 tail_k = ~uint64_t{0} >> head;  // the mask bytes [head, 64)
  // Masked loads read nothing outside the mask, so the addresses before
  // `p` and `or_mask` are never dereferenced (integer arithmetic: no
  // out-of-object pointer is formed).
  const auto before = [](const uint8_t* q, unsigned n) {
    return reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(q) - n);
  };
  const __m512i ones = _mm512_maskz_mov_epi8(__mmask64{0xF} << (shift - 4), _mm512_set1_epi8(-1));
  const __m512i first = _mm512_ternarylogic_epi64(
      _mm512_maskz_loadu_epi8(head_k, before(p, shift)),
      _mm512_maskz_loadu_epi8(head_k, before(or_mask, shift)), ones, 0xFE);  // a | b | c
  const __m512i second = _mm512_or_si512(load512(p + head),
                                         _mm512_maskz_loadu_epi8(tail_k, or_mask + head));
  const __m512i acc = fold512(first, fold_pair512(fold_constants(512)), second);
  return reduce128(collapse(acc));
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

}  // namespace

DROCE_TARGET_AVX512 uint32_t update_vpclmul_avx512_ones_or64(const uint8_t* p, size_t len,
                                                             const uint8_t* or_mask,
                                                             uint32_t state_after_ones) {
  if (len > 64 && len <= 124) return short_ones_or64(p, len, or_mask);
  return fold_all_but_zeros(state_after_ones, p, len, load512(or_mask));
}

DROCE_TARGET_AVX512 void update_vpclmul_avx512_ones_or64_many(const uint8_t* const* p,
                                                              const size_t* len,
                                                              const uint8_t* const* or_mask,
                                                              uint32_t state_after_ones,
                                                              uint32_t* out, size_t n) {
  // The short path inlined in a loop: no call, return or vzeroupper between
  // one message's reduction and the next one's loads.
  for (size_t i = 0; i < n; ++i) {
    out[i] = len[i] > 64 && len[i] <= 124
                 ? short_ones_or64(p[i], len[i], or_mask[i])
                 : fold_all_but_zeros(state_after_ones, p[i], len[i], load512(or_mask[i]));
  }
}

DROCE_TARGET_AVX512 uint32_t update_vpclmul_avx512(uint32_t state, const uint8_t* p,
                                                   size_t len) {
  // Below one zmm of data the 128-bit code is as good.
  if (len < 64) return update_pclmul(state, p, len);
  return fold_all_but_zeros(state, p, len, _mm512_setzero_si512());
}

DROCE_TARGET_AVX512 uint32_t update_vpclmul_avx512_or64(uint32_t state, const uint8_t* p,
                                                        size_t len, const uint8_t* or_mask) {
  return fold_all_but_zeros(state, p, len, load512(or_mask));
}

}  // namespace droce::wire::crc32_detail

#endif  // x86
