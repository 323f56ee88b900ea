// CRC-32 by folding with PCLMULQDQ: four independent 128-bit accumulators
// (so the multiplier's latency overlaps), each moved 512 bits ahead per
// 64-byte step, then merged into one, folded 128 bits at a time, reduced to
// 32 bits (Barrett), and the < 16-byte tail finished by table. The method is
// the one in Gopal et al., "Fast CRC Computation for Generic Polynomials
// Using PCLMULQDQ Instruction" (Intel, 2009); the constants are derived in
// crc32_internal.h.
#include <array>

#include "crc32_clmul.h"

#if defined(__x86_64__) || defined(__i386__)

namespace droce::wire::crc32_detail {

DROCE_TARGET_PCLMUL uint32_t update_pclmul(uint32_t state, const uint8_t* p, size_t len) {
  if (len < 16) return update_slice8(state, p, len);
  // The state enters as an XOR into the first 32 message bits.
  const __m128i init = _mm_cvtsi32_si128(static_cast<int>(state));
  if (len < 64) return finish128(_mm_xor_si128(load128(p), init), p + 16, len - 16);

  const __m128i k512 = fold_pair(fold_constants(512));
  __m128i x0 = _mm_xor_si128(load128(p), init);
  __m128i x1 = load128(p + 16);
  __m128i x2 = load128(p + 32);
  __m128i x3 = load128(p + 48);
  p += 64;
  len -= 64;
  while (len >= 64) {
    x0 = _mm_xor_si128(fold_mul(x0, k512), load128(p));
    x1 = _mm_xor_si128(fold_mul(x1, k512), load128(p + 16));
    x2 = _mm_xor_si128(fold_mul(x2, k512), load128(p + 32));
    x3 = _mm_xor_si128(fold_mul(x3, k512), load128(p + 48));
    p += 64;
    len -= 64;
  }
  // Merge: each accumulator moves to where x3 sits.
  const __m128i k384 = fold_pair(fold_constants(384));
  const __m128i k256 = fold_pair(fold_constants(256));
  const __m128i k128 = fold_pair(fold_constants(128));
  __m128i acc = _mm_xor_si128(_mm_xor_si128(fold_mul(x0, k384), fold_mul(x1, k256)),
                              _mm_xor_si128(fold_mul(x2, k128), x3));
  return finish128(acc, p, len);
}

// n zero bytes after the state: the state XOR-ed into the first four of 16
// zero bytes (the block the folding would hold), that block moved n - 16
// bytes later by one multiply, reduced. The multiplier for a distance of D
// bits is rev32(x^(D + 31) mod P) (crc32_internal.h), one per multiple of
// 64 bytes, computed once.
DROCE_TARGET_PCLMUL uint32_t zeros_pclmul(uint32_t state, size_t n) {
  static const auto table = [] {
    std::array<uint64_t, kZeroShiftMax / 64 + 1> t{};
    // x^e mod P for e = 8 * (64k - 16) + 31, stepping 512 bits per k.
    uint32_t r = xpow_mod(8 * (64 - 16) + 31);
    for (size_t k = 1; k < t.size(); ++k) {
      t[k] = reverse_bits(r, 32);
      for (int i = 0; i < 512; ++i) r = times_x_mod(r);
    }
    return t;
  }();
  const __m128i block = _mm_cvtsi32_si128(static_cast<int>(state));
  const __m128i k = _mm_cvtsi64_si128(static_cast<int64_t>(table[n / 64]));
  return reduce128(_mm_clmulepi64_si128(block, k, 0x00));
}

}  // namespace droce::wire::crc32_detail

#endif  // x86
