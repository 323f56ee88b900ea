#include "droce/wire/icrc.h"

#include <cstring>

#include "droce/wire/crc32.h"
#include "droce/wire/headers.h"

namespace droce::wire {

namespace {
// 8 bytes of ones in place of the LRH (RoCEv2 annex A17.4.1).
constexpr uint8_t kPseudoLrh[8] = {0xFF, 0xFF, 0xFF, 0xFF,
                                   0xFF, 0xFF, 0xFF, 0xFF};
// Largest masked prefix: IPv6 + UDP + BTH.
constexpr size_t kMaxMasked = kIpv6Size + kUdpSize + kBthSize;
}  // namespace

uint32_t icrc_compute(const uint8_t* l3, size_t len_before_icrc, bool ipv6) {
  // Only the fixed headers hold variant fields, so mask a small copy of them
  // and run the CRC over the rest of the packet in place.
  const size_t ip_len = ipv6 ? kIpv6Size : static_cast<size_t>(l3[0] & 0x0F) * 4;
  const size_t masked_len = ip_len + kUdpSize + kBthSize;
  uint8_t masked[kMaxMasked + 40];  // IPv4 options make the header up to 60 B
  if (masked_len > sizeof(masked) || masked_len > len_before_icrc) return 0;
  std::memcpy(masked, l3, masked_len);
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

  uint32_t state = crc32_update(kCrc32Init, kPseudoLrh, sizeof(kPseudoLrh));
  state = crc32_update(state, masked, masked_len);
  state = crc32_update(state, l3 + masked_len, len_before_icrc - masked_len);
  return crc32_finish(state);
}

}  // namespace droce::wire
