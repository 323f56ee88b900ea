// The Internet checksum (RFC 1071) in pieces, for checksums over more than
// one buffer: ICMPv6's covers a pseudo-header and the message (RFC 8200
// section 8.1). Big-endian 16-bit words summed into 64 bits; a last odd
// byte is the high byte of a word padded with zero.
#pragma once

#include <cstddef>
#include <cstdint>

namespace droce::wire {

constexpr uint64_t checksum_add(uint64_t sum, const uint8_t* p, size_t len) {
  size_t i = 0;
  for (; i + 1 < len; i += 2) sum += uint64_t{p[i]} << 8 | p[i + 1];
  if (i < len) sum += uint64_t{p[i]} << 8;
  return sum;
}

// The checksum field's value for a sum taken with that field zero; 0 when
// the sum was taken over a message with a correct checksum in place.
constexpr uint16_t checksum_fold(uint64_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

}  // namespace droce::wire
