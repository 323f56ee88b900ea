// Carry-less-multiply building blocks shared by the PCLMULQDQ and the
// VPCLMULQDQ implementations. Included only by those two files; every
// function carries its own target attribute so the rest of the build needs
// no -march flag (the AVX-512 functions may inline these: their targets are
// a superset).
#pragma once

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstdint>

#include "crc32_internal.h"

#define DROCE_TARGET_PCLMUL __attribute__((target("pclmul,sse4.1")))

namespace droce::wire::crc32_detail {

DROCE_TARGET_PCLMUL inline __m128i fold_pair(FoldConstants k) {
  return _mm_set_epi64x(static_cast<int64_t>(k.hi), static_cast<int64_t>(k.lo));
}

// acc moved `distance` bits later (the constants say how far), not yet
// combined with the data there.
DROCE_TARGET_PCLMUL inline __m128i fold_mul(__m128i acc, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x00),
                       _mm_clmulepi64_si128(acc, k, 0x11));
}

DROCE_TARGET_PCLMUL inline __m128i load128(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

// The running CRC state for a message whose last 16 bytes are `r` (the
// derivation is in crc32_internal.h).
DROCE_TARGET_PCLMUL inline uint32_t reduce128(__m128i r) {
  const __m128i low32 = _mm_set_epi32(0, 0, 0, -1);
  const __m128i k = _mm_set_epi64x(static_cast<int64_t>(kReduce64),
                                   static_cast<int64_t>(kReduce96));
  // 128 -> 95 bits.
  __m128i w = _mm_xor_si128(_mm_clmulepi64_si128(r, k, 0x00), _mm_srli_si128(r, 8));
  // 95 -> 63 bits.
  __m128i z = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(w, low32), k, 0x10),
                            _mm_srli_si128(w, 4));
  // Barrett: the state is bits 32..63 of z ^ (q * P).
  const __m128i b = _mm_set_epi64x(static_cast<int64_t>(kBarrettPoly),
                                   static_cast<int64_t>(kBarrettMu));
  __m128i q = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(z, low32), b, 0x00), low32);
  __m128i qp = _mm_clmulepi64_si128(q, b, 0x10);
  return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(z, qp), 1));
}

// pshufb controls for the tail: bytes 16..31 are 0..15, the rest 0x80
// (which pshufb turns into zero). A 16-byte window at offset r shifts a
// register up by 16 - r bytes; at 16 + r it shifts it down by r bytes.
alignas(16) inline constexpr uint8_t kTailShuffle[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0,    1,    2,    3,    4,    5,    6,    7,
    8,    9,    10,   11,   12,   13,   14,   15,   0x80, 0x80, 0x80, 0x80,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};

// Folds the rest of the message (at least 16 bytes of it already sit in
// acc, so reading 16 bytes back from the end stays inside the buffer) and
// reduces. A tail of r < 16 bytes is handled without a byte loop: "acc, then
// r bytes" is the same polynomial as "zeros and the first r bytes of acc"
// followed by "the other 16 - r bytes of acc and the tail", and the first of
// those folds onto the second like any block.
DROCE_TARGET_PCLMUL inline uint32_t finish128(__m128i acc, const uint8_t* p, size_t len) {
  const __m128i k128 = fold_pair(fold_constants(128));
  while (len >= 16) {
    acc = _mm_xor_si128(fold_mul(acc, k128), load128(p));
    p += 16;
    len -= 16;
  }
  if (len > 0) {
    const __m128i head_mask = load128(kTailShuffle + len);     // acc[0, r) -> top
    const __m128i rest_mask = load128(kTailShuffle + 16 + len); // acc[r, 16) -> bottom
    const __m128i last16 = load128(p + len - 16);  // ends with the r tail bytes
    const __m128i second = _mm_blendv_epi8(_mm_shuffle_epi8(acc, rest_mask), last16, rest_mask);
    acc = _mm_xor_si128(fold_mul(_mm_shuffle_epi8(acc, head_mask), k128), second);
  }
  return reduce128(acc);
}

}  // namespace droce::wire::crc32_detail

#endif  // x86
