#include "droce/wire/icrc.h"

#include <cstring>

#include "droce/wire/crc32.h"
#include "droce/wire/headers.h"

namespace droce::wire {

namespace {
// 8 bytes of ones stand in for the LRH (RoCEv2 annex A17.4.1).
constexpr size_t kPseudoLrhSize = 8;
// Largest masked prefix: pseudo-LRH + IPv4 with 40 bytes of options (60) +
// UDP + BTH.
constexpr size_t kMaxMasked = kPseudoLrhSize + 60 + kUdpSize + kBthSize;
// Frames the in-place path below does not take (IP datagrams under 64
// bytes, IPv4 with options) are copied whole up to this size (with the
// pseudo-LRH) and CRCed in one call: each call ends in its own 128-to-32-bit
// reduction and tail, which on small frames costs as much as the bytes.
constexpr size_t kWholeCopyMax = 256;

// OR masks over the first 64 bytes of the IP header for the common layouts
// (IPv4 without options, IPv6): the variant fields of annex A17.4.1 set to
// ones. Every masked byte lies in those 64 bytes.
struct FirstMasks {
  uint8_t v4[64] = {};
  uint8_t v6[64] = {};
  constexpr FirstMasks() {
    v4[1] = 0xFF;   // TOS (DSCP + ECN)
    v4[8] = 0xFF;   // TTL
    v4[10] = 0xFF;  // header checksum
    v4[11] = 0xFF;
    v4[kIpv4Size + 6] = v4[kIpv4Size + 7] = 0xFF;  // UDP checksum
    v4[kIpv4Size + kUdpSize + 4] = 0xFF;           // BTH FECN, BECN, reserved
    v6[0] = 0x0F;   // traffic class, high nibble; version stays
    v6[1] = v6[2] = v6[3] = 0xFF;  // traffic class, low nibble + flow label
    v6[7] = 0xFF;   // hop limit
    v6[kIpv6Size + 6] = v6[kIpv6Size + 7] = 0xFF;
    v6[kIpv6Size + kUdpSize + 4] = 0xFF;
  }
};
alignas(64) constexpr FirstMasks kFirstMasks;

// The layouts whose masked fields all lie in the first 64 bytes, long
// enough to be CRCed in place with the masks OR-ed in.
bool in_place(const uint8_t* l3, size_t len_before_icrc, bool ipv6) {
  return len_before_icrc >= 64 && (ipv6 || (l3[0] & 0x0F) * 4 == kIpv4Size);
}

}  // namespace

void icrc_check_many(const IcrcCheck* checks, bool* ok, size_t n) {
  constexpr size_t kChunk = 32;
  const uint8_t* data[kChunk];
  size_t len[kChunk];
  const uint8_t* masks[kChunk];
  uint32_t state[kChunk];
  size_t which[kChunk];
  while (n > 0) {
    const size_t m = n < kChunk ? n : kChunk;
    size_t k = 0;
    for (size_t i = 0; i < m; ++i) {
      const IcrcCheck& c = checks[i];
      if (in_place(c.l3, c.len_before_icrc, c.ipv6)) {
        data[k] = c.l3;
        len[k] = c.len_before_icrc;
        masks[k] = c.ipv6 ? kFirstMasks.v6 : kFirstMasks.v4;
        which[k++] = i;
      } else {
        ok[i] = icrc_compute(c.l3, c.len_before_icrc, c.ipv6) == c.carried;
      }
    }
    crc32_update_ones_or_first64_many(data, len, masks, state, k);
    for (size_t j = 0; j < k; ++j) ok[which[j]] = crc32_finish(state[j]) == checks[which[j]].carried;
    checks += m;
    ok += m;
    n -= m;
  }
}

uint32_t icrc_compute(const uint8_t* l3, size_t len_before_icrc, bool ipv6) {
  // Only the fixed headers hold variant fields, so mask a small copy of them
  // and run the CRC over the rest of the packet in place.
  const size_t ip_len = ipv6 ? kIpv6Size : static_cast<size_t>(l3[0] & 0x0F) * 4;
  const size_t headers_len = ip_len + kUdpSize + kBthSize;
  if (kPseudoLrhSize + headers_len > kMaxMasked || headers_len > len_before_icrc)
    return 0;
  if (in_place(l3, len_before_icrc, ipv6)) {
    return crc32_finish(crc32_update_ones_or_first64(l3, len_before_icrc,
                                                     ipv6 ? kFirstMasks.v6 : kFirstMasks.v4));
  }
  // One buffer for the pseudo-LRH and the masked headers, so the CRC runs
  // in two calls: this prefix, then the rest of the packet in place.
  const bool whole = kPseudoLrhSize + len_before_icrc <= kWholeCopyMax;
  alignas(64) uint8_t buf[kWholeCopyMax];
  static_assert(kMaxMasked <= kWholeCopyMax);
  std::memset(buf, 0xFF, kPseudoLrhSize);
  uint8_t* masked = buf + kPseudoLrhSize;
  std::memcpy(masked, l3, whole ? len_before_icrc : headers_len);
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

  if (whole)
    return crc32_finish(crc32_update(kCrc32Init, buf, kPseudoLrhSize + len_before_icrc));
  uint32_t state = crc32_update(kCrc32Init, buf, kPseudoLrhSize + headers_len);
  state = crc32_update(state, l3 + headers_len, len_before_icrc - headers_len);
  return crc32_finish(state);
}

}  // namespace droce::wire
