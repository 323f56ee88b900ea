#include "droce/wire/icrc.h"

#include <cstring>

#include "crc32_internal.h"
#include "droce/wire/crc32.h"
#include "droce/wire/headers.h"

namespace droce::wire {

namespace {
// 8 bytes of ones stand in for the LRH (RoCEv2 annex A17.4.1).
constexpr size_t kPseudoLrhSize = 8;
// Largest masked prefix: pseudo-LRH + IPv4 with 40 bytes of options (60) +
// UDP + BTH.
constexpr size_t kMaxMasked = kPseudoLrhSize + 60 + kUdpSize + kBthSize;
// Frames the in-place path does not take (IPv4 with options) are copied
// whole up to this size (with the pseudo-LRH) and CRCed in one call: each
// call ends in its own 128-to-32-bit reduction and tail, which on small
// frames costs as much as the bytes.
constexpr size_t kWholeCopyMax = 256;

using crc32_detail::icrc_first_mask;
using crc32_detail::icrc_in_place;

// The pseudo-LRH and the datagram's first `len` bytes into `buf`, with the
// fields routers may change set to ones; 0 when the IP, UDP and BTH headers
// do not fit in `len` or in kMaxMasked. Only the fixed headers hold variant
// fields, so `len` may stop anywhere after the BTH.
size_t masked_prefix(const uint8_t* l3, size_t len, bool ipv6, uint8_t* buf) {
  const size_t ip_len = ipv6 ? kIpv6Size : static_cast<size_t>(l3[0] & 0x0F) * 4;
  const size_t headers_len = ip_len + kUdpSize + kBthSize;
  if (kPseudoLrhSize + headers_len > kMaxMasked || headers_len > len) return 0;
  std::memset(buf, 0xFF, kPseudoLrhSize);
  uint8_t* masked = buf + kPseudoLrhSize;
  std::memcpy(masked, l3, len);
  if (ipv6) {
    // Version stays; traffic class (8 bits) and flow label (20 bits) -> ones.
    masked[0] |= 0x0F;
    masked[1] = 0xFF;
    masked[2] = 0xFF;
    masked[3] = 0xFF;
    masked[7] = 0xFF;  // hop limit
  } else {
    masked[1] = 0xFF;   // TOS (DSCP + ECN)
    masked[8] = 0xFF;   // TTL
    masked[10] = 0xFF;  // header checksum
    masked[11] = 0xFF;
  }
  uint8_t* udp = masked + ip_len;
  udp[6] = 0xFF;  // UDP checksum
  udp[7] = 0xFF;
  uint8_t* bth = udp + kUdpSize;
  bth[4] = 0xFF;  // FECN, BECN, reserved
  return kPseudoLrhSize + len;
}

size_t headers_length(const uint8_t* l3, bool ipv6) {
  return (ipv6 ? kIpv6Size : static_cast<size_t>(l3[0] & 0x0F) * 4) + kUdpSize + kBthSize;
}

// icrc_compute for the layouts icrc_in_place() refuses (IPv4 with options,
// or headers longer than the datagram): a masked copy of the headers, then
// the rest of the packet in place. Not inlined: its aligned stack buffer
// would cost the in-place path a frame setup too.
[[gnu::noinline]] uint32_t icrc_by_copy(const uint8_t* l3, size_t len_before_icrc, bool ipv6) {
  const size_t headers_len = headers_length(l3, ipv6);
  if (headers_len > len_before_icrc) return 0;
  // One buffer for the pseudo-LRH and the masked headers, so the CRC runs
  // in two calls: this prefix, then the rest of the packet in place.
  const bool whole = kPseudoLrhSize + len_before_icrc <= kWholeCopyMax;
  alignas(64) uint8_t buf[kWholeCopyMax];
  static_assert(kMaxMasked <= kWholeCopyMax);
  const size_t n = masked_prefix(l3, whole ? len_before_icrc : headers_len, ipv6, buf);
  if (n == 0) return 0;
  if (whole) return crc32_finish(crc32_update(kCrc32Init, buf, n));
  const uint32_t state = crc32_update(kCrc32Init, buf, n);
  return crc32_finish(crc32_update(state, l3 + headers_len, len_before_icrc - headers_len));
}

// The ICRC of a datagram whose bytes [zeros_at, zeros_at + zeros) count as
// zeros: the masked headers, the bytes up to the zeros, the zeros by one
// shift of the state (crc32_zeros), the bytes after them. Nothing in the
// zeros is read.
[[gnu::noinline]] uint32_t icrc_with_zeros(const IcrcCheck& c) {
  const size_t headers_len = headers_length(c.l3, c.ipv6);
  alignas(64) uint8_t buf[kMaxMasked];
  const size_t n = masked_prefix(c.l3, headers_len, c.ipv6, buf);
  if (n == 0) return 0;
  uint32_t state = crc32_update(kCrc32Init, buf, n);
  state = crc32_update(state, c.l3 + headers_len, c.zeros_at - headers_len);
  state = crc32_zeros(state, c.zeros);
  const size_t after = size_t{c.zeros_at} + c.zeros;
  return crc32_finish(crc32_update(state, c.l3 + after, c.len_before_icrc - after));
}

// Whether a check's zeros are to be used: some, all of them after the
// fixed headers and before the ICRC.
bool has_zeros(const IcrcCheck& c) {
  return c.zeros != 0 && size_t{c.zeros_at} + c.zeros <= c.len_before_icrc &&
         c.zeros_at >= headers_length(c.l3, c.ipv6);
}

bool any_zeros(const IcrcCheck* checks, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (checks[i].zeros != 0) return true;
  return false;
}

}  // namespace

uint32_t icrc_of(const IcrcCheck& check) {
  return has_zeros(check) ? icrc_with_zeros(check)
                          : icrc_compute(check.l3, check.len_before_icrc, check.ipv6);
}

void icrc_check_many(const IcrcCheck* checks, bool* ok, size_t n) {
  // Simulated frames with unheld payload: one at a time (they come alone).
  if (any_zeros(checks, n)) {
    for (size_t i = 0; i < n; ++i) ok[i] = icrc_of(checks[i]) == checks[i].carried;
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  if (crc32_best_impl() == Crc32Impl::kVpclmulAvx512) {
    crc32_detail::icrc_check_many_vpclmul_avx512(checks, ok, n);
    return;
  }
#endif
  // Elsewhere no implementation overlaps messages: one at a time.
  for (size_t i = 0; i < n; ++i) {
    const IcrcCheck& c = checks[i];
    ok[i] = icrc_compute(c.l3, c.len_before_icrc, c.ipv6) == c.carried;
  }
}

void icrc_compute_many(const IcrcCheck* checks, uint32_t* icrc, size_t n) {
  if (any_zeros(checks, n)) {
    for (size_t i = 0; i < n; ++i) icrc[i] = icrc_of(checks[i]);
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  if (crc32_best_impl() == Crc32Impl::kVpclmulAvx512) {
    crc32_detail::icrc_compute_many_vpclmul_avx512(checks, icrc, n);
    return;
  }
#endif
  for (size_t i = 0; i < n; ++i)
    icrc[i] = icrc_compute(checks[i].l3, checks[i].len_before_icrc, checks[i].ipv6);
}

uint32_t icrc_compute(const uint8_t* l3, size_t len_before_icrc, bool ipv6) {
  if (icrc_in_place(l3, len_before_icrc, ipv6)) {
    return crc32_finish(
        crc32_update_ones_or_first64(l3, len_before_icrc, icrc_first_mask(ipv6)));
  }
  return icrc_by_copy(l3, len_before_icrc, ipv6);
}

}  // namespace droce::wire
