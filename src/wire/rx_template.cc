#include "droce/wire/rx_template.h"

#include <cstring>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace droce::wire {

RxTemplate make_write_template(const PathSpec& path, uint32_t qpn, uint8_t opcode_base,
                               uint16_t pkey) {
  return detail::write_template_bytes(path, qpn, opcode_base, pkey).tmpl;
}

namespace detail {

WriteShape write_shape(uint8_t opcode) {
  const OpcodeInfo& info = opcode_info(opcode);
  return {(info.ext & kExtReth) != 0, info.position};
}

}  // namespace detail

namespace {

// Whether frame `f` repeats `prev` (a frame the template matched) in every
// byte the match checks before the BTH's AckReq: Ethernet, IP and UDP
// headers, and the BTH through the destination QP. Then, being as long,
// it passes every check `prev` passed (the template's bytes, CE, the IPv4
// checksum, the lengths, the opcode and pad count), and only the PSN,
// AckReq and RETH are its own. A sender's packets in a row usually repeat
// so (constant IP ID, lengths, UDP port): one masked compare stands in for
// the checksum and the length checks.
template <class L>
[[gnu::always_inline]] inline bool repeats_headers(const uint8_t* f, const uint8_t* prev) {
  static constexpr size_t kRepeated = L::kThroughDestQp;
  struct Mask {
    alignas(16) uint8_t bytes[L::kCompared] = {};
    constexpr Mask() {
      for (size_t i = 0; i < kRepeated; ++i) bytes[i] = 0xFF;
    }
  };
  static constexpr Mask kMask;
#if defined(__SSE2__)
  __m128i diff = _mm_setzero_si128();
  for (size_t at = 0; at < L::kCompared; at += 16) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(f + at));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(prev + at));
    const __m128i m = _mm_load_si128(reinterpret_cast<const __m128i*>(kMask.bytes + at));
    diff = _mm_or_si128(diff, _mm_and_si128(_mm_xor_si128(a, b), m));
  }
  return _mm_movemask_epi8(_mm_cmpeq_epi8(diff, _mm_setzero_si128())) == 0xFFFF;
#else
  return std::memcmp(f, prev, kRepeated) == 0;
#endif
}

// `out` for frame `f`, which repeats the headers of the frame `prev` was
// filled from (repeats_headers): the same opcode and lengths, its own PSN,
// AckReq and RETH.
template <class L>
[[gnu::always_inline]] inline void fill_repeated(const uint8_t* f, const PredictedWrite& prev,
                                                 const uint8_t* prev_frame, PredictedWrite& out) {
  out.position = prev.position;
  detail::read_own_fields(f + L::kBth,
                          prev.position == Position::kOnly || prev.position == Position::kFirst,
                          out);
  out.payload = f + (prev.payload - prev_frame);
  out.payload_length = prev.payload_length;
  out.frame_length = prev.frame_length;
}

// rx_template_match_run's loop for layout L; `repeats` is repeats_headers
// or its AVX-512 form.
template <class L, class Repeats>
[[gnu::always_inline]] inline size_t match_run(const RxTemplate& t,
                                               std::span<const std::span<const uint8_t>> frames,
                                               PredictedWrite* out, IcrcCheck* checks,
                                               Repeats repeats) {
  size_t n = 0;
  for (; n < frames.size(); ++n) {
    const std::span<const uint8_t> f = frames[n];
    if (n > 0 && f.size() == frames[n - 1].size() && repeats(f.data(), frames[n - 1].data()))
      fill_repeated<L>(f.data(), out[n - 1], frames[n - 1].data(), out[n]);
    else if (!detail::match<L>(t, f, out[n]))
      break;
    checks[n] = detail::icrc_check<L>(f, out[n]);
  }
  return n;
}

#if defined(__x86_64__)
#define DROCE_TARGET_AVX512BW __attribute__((target("avx512f,avx512bw")))

// repeats_headers in two compares of a zmm each way (64 bytes, and for
// IPv6 the rest under a mask) instead of ~25 SSE2 instructions: most
// frames of a run take this check.
template <class L>
DROCE_TARGET_AVX512BW bool repeats_headers_avx512(const uint8_t* f, const uint8_t* prev) {
  constexpr size_t kRepeated = L::kThroughDestQp;
  constexpr __mmask64 kFirst = kRepeated >= 64 ? ~__mmask64{0} : (__mmask64{1} << kRepeated) - 1;
  __mmask64 differ =
      _mm512_mask_cmpneq_epu8_mask(kFirst, _mm512_loadu_si512(f), _mm512_loadu_si512(prev));
  if constexpr (kRepeated > 64) {
    constexpr __mmask64 kRest = (__mmask64{1} << (kRepeated - 64)) - 1;
    differ |= _mm512_mask_cmpneq_epu8_mask(kRest, _mm512_maskz_loadu_epi8(kRest, f + 64),
                                           _mm512_maskz_loadu_epi8(kRest, prev + 64));
  }
  return differ == 0;
}

DROCE_TARGET_AVX512BW size_t match_run_avx512(const RxTemplate& t,
                                              std::span<const std::span<const uint8_t>> frames,
                                              PredictedWrite* out, IcrcCheck* checks) {
  return detail::with_layout(t, [&](auto layout) DROCE_TARGET_AVX512BW {
    using L = decltype(layout);
    return match_run<L>(t, frames, out, checks, [](const uint8_t* f, const uint8_t* prev)
                                                    DROCE_TARGET_AVX512BW {
      return repeats_headers_avx512<L>(f, prev);
    });
  });
}
#endif

}  // namespace

size_t rx_template_match_run(const RxTemplate& shared,
                             std::span<const std::span<const uint8_t>> frames,
                             PredictedWrite* out, IcrcCheck* checks) {
  if (shared.words == 0) return 0;
  const RxTemplate t = shared;
#if defined(__x86_64__)
  static const bool avx512bw = __builtin_cpu_supports("avx512bw");
  if (avx512bw) return match_run_avx512(t, frames, out, checks);
#endif
  return detail::match_run_portable(t, frames, out, checks);
}

size_t detail::match_run_portable(const RxTemplate& t,
                                  std::span<const std::span<const uint8_t>> frames,
                                  PredictedWrite* out, IcrcCheck* checks) {
  if (t.words == 0) return 0;
  return with_layout(t, [&](auto layout) {
    using L = decltype(layout);
    return match_run<L>(t, frames, out, checks, repeats_headers<L>);
  });
}

}  // namespace droce::wire
