// CRC-32 front end: picks the fastest implementation the CPU supports, once.
// The implementations live in crc32_table.cc (portable), crc32_pclmul.cc and
// crc32_avx512.cc (x86 carry-less multiply, compiled with per-function
// target attributes so no global -march is needed).
#include "droce/wire/crc32.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "crc32_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define DROCE_CRC32_X86 1
#endif

namespace droce::wire {

namespace {

using crc32_detail::UpdateFn;

#ifdef DROCE_CRC32_X86
struct CpuFlags {
  bool pclmul = false;
  bool avx512_vpclmul = false;
};

// Read CPUID directly: clang 14's __builtin_cpu_supports does not know
// "vpclmulqdq", and the AVX-512 register state must also be enabled by the
// OS (XCR0), which CPUID alone does not say.
CpuFlags read_cpu_flags() {
  CpuFlags f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool sse41 = ecx & (1u << 19);
  const bool pclmul = ecx & (1u << 1);
  const bool osxsave = ecx & (1u << 27);
  f.pclmul = sse41 && pclmul;
  if (!f.pclmul || !osxsave || __get_cpuid_max(0, nullptr) < 7) return f;
  uint32_t xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  // SSE, AVX, opmask, upper halves of zmm0-15, zmm16-31.
  constexpr uint32_t kZmmState = (1u << 1) | (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7);
  const bool os_zmm = (xcr0_lo & kZmmState) == kZmmState;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool avx512f = ebx & (1u << 16);
  const bool avx512bw = ebx & (1u << 30);
  const bool avx512vl = ebx & (1u << 31);
  const bool vpclmul = ecx & (1u << 10);
  f.avx512_vpclmul = os_zmm && avx512f && avx512bw && avx512vl && vpclmul;
  return f;
}

const CpuFlags& cpu_flags() {
  static const CpuFlags flags = read_cpu_flags();
  return flags;
}
#endif

UpdateFn function_for(Crc32Impl impl) {
  switch (impl) {
    case Crc32Impl::kBitwise: return crc32_detail::update_bitwise;
    case Crc32Impl::kSliceBy8: return crc32_detail::update_slice8;
#ifdef DROCE_CRC32_X86
    case Crc32Impl::kPclmul: return crc32_detail::update_pclmul;
    case Crc32Impl::kVpclmulAvx512: return crc32_detail::update_vpclmul_avx512;
#else
    case Crc32Impl::kPclmul:
    case Crc32Impl::kVpclmulAvx512: break;
#endif
  }
  return crc32_detail::update_slice8;
}

using OrFirst64Fn = uint32_t (*)(uint32_t state, const uint8_t* data, size_t len,
                                 const uint8_t* or_mask);

// crc32_update_or_first64 where the implementation has no masked load: a
// masked copy of the first 64 bytes, then the rest in place.
template <UpdateFn update>
uint32_t or_first64_by_copy(uint32_t state, const uint8_t* data, size_t len,
                            const uint8_t* or_mask) {
  // Fixed counts, which the compiler turns into a few vector ORs.
  if (len < 64) {
    uint8_t first[64] = {};
    std::memcpy(first, data, len);
    for (size_t i = 0; i < 64; ++i) first[i] |= or_mask[i];
    return update(state, first, len);
  }
  uint8_t first[64];
  for (size_t i = 0; i < 64; ++i) first[i] = data[i] | or_mask[i];
  return update(update(state, first, 64), data + 64, len - 64);
}

OrFirst64Fn or_first64_function_for(Crc32Impl impl) {
  switch (impl) {
    case Crc32Impl::kBitwise: return or_first64_by_copy<crc32_detail::update_bitwise>;
    case Crc32Impl::kSliceBy8: break;
#ifdef DROCE_CRC32_X86
    case Crc32Impl::kPclmul: return or_first64_by_copy<crc32_detail::update_pclmul>;
    case Crc32Impl::kVpclmulAvx512: return crc32_detail::update_vpclmul_avx512_or64;
#else
    case Crc32Impl::kPclmul:
    case Crc32Impl::kVpclmulAvx512: break;
#endif
  }
  return or_first64_by_copy<crc32_detail::update_slice8>;
}

}  // namespace

std::string_view to_string(Crc32Impl impl) {
  switch (impl) {
    case Crc32Impl::kBitwise: return "bitwise";
    case Crc32Impl::kSliceBy8: return "slice-by-8";
    case Crc32Impl::kPclmul: return "pclmul";
    case Crc32Impl::kVpclmulAvx512: return "vpclmul-avx512";
  }
  return "?";
}

bool crc32_impl_supported(Crc32Impl impl) {
  switch (impl) {
    case Crc32Impl::kBitwise:
    case Crc32Impl::kSliceBy8: return true;
#ifdef DROCE_CRC32_X86
    case Crc32Impl::kPclmul: return cpu_flags().pclmul;
    case Crc32Impl::kVpclmulAvx512: return cpu_flags().avx512_vpclmul;
#else
    case Crc32Impl::kPclmul:
    case Crc32Impl::kVpclmulAvx512: return false;
#endif
  }
  return false;
}

Crc32Impl crc32_best_impl() {
  static const Crc32Impl best = [] {
    for (Crc32Impl impl : {Crc32Impl::kVpclmulAvx512, Crc32Impl::kPclmul}) {
      if (crc32_impl_supported(impl)) return impl;
    }
    return Crc32Impl::kSliceBy8;
  }();
  return best;
}

uint32_t crc32_update(uint32_t state, const uint8_t* data, size_t len) {
  static const UpdateFn best = function_for(crc32_best_impl());
  return best(state, data, len);
}

uint32_t crc32_update_with(Crc32Impl impl, uint32_t state, const uint8_t* data, size_t len) {
  return function_for(impl)(state, data, len);
}

namespace {
// The best implementation's crc32_update_or_first64, chosen at the first
// call: that call goes to resolve_or_first64, which stores the choice here.
// An ICRC (an ACK's, say) is short enough that a function-local static's
// guard, with the registers saved around its slow path, would show.
uint32_t resolve_or_first64(uint32_t state, const uint8_t* data, size_t len,
                            const uint8_t* or_mask);
std::atomic<OrFirst64Fn> best_or_first64{resolve_or_first64};

uint32_t resolve_or_first64(uint32_t state, const uint8_t* data, size_t len,
                            const uint8_t* or_mask) {
  const OrFirst64Fn best = or_first64_function_for(crc32_best_impl());
  best_or_first64.store(best, std::memory_order_relaxed);
  return best(state, data, len, or_mask);
}
}  // namespace

uint32_t crc32_update_or_first64_with(Crc32Impl impl, uint32_t state, const uint8_t* data,
                                      size_t len, const uint8_t* or_mask) {
  return or_first64_function_for(impl)(state, data, len, or_mask);
}

uint32_t crc32_update_or_first64(uint32_t state, const uint8_t* data, size_t len,
                                 const uint8_t* or_mask) {
  return best_or_first64.load(std::memory_order_relaxed)(state, data, len, or_mask);
}

uint32_t crc32_update_ones_or_first64(const uint8_t* data, size_t len, const uint8_t* or_mask) {
  return best_or_first64.load(std::memory_order_relaxed)(crc32_detail::kStateAfterOnes, data,
                                                         len, or_mask);
}

uint32_t crc32_update_ones_or_first64_with(Crc32Impl impl, const uint8_t* data, size_t len,
                                           const uint8_t* or_mask) {
  return crc32_update_or_first64_with(impl, crc32_detail::kStateAfterOnes, data, len, or_mask);
}

uint32_t crc32_zeros(uint32_t state, size_t n) {
  static constexpr uint8_t kZeros[64] = {};
  // Zeros commute with zeros: the part under 64 bytes first, then blocks.
  state = crc32_update(state, kZeros, n % 64);
  n -= n % 64;
#ifdef DROCE_CRC32_X86
  if (cpu_flags().pclmul) {
    for (; n > 0;) {
      const size_t step = std::min(n, crc32_detail::kZeroShiftMax);
      state = crc32_detail::zeros_pclmul(state, step);
      n -= step;
    }
    return state;
  }
#endif
  for (; n > 0; n -= 64) state = crc32_update(state, kZeros, 64);
  return state;
}

}  // namespace droce::wire
