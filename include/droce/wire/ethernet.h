// The Ethernet II header and its optional IEEE 802.1Q tag, read and
// written on their own: ARP, neighbour discovery and ICMP frames share
// them with RoCEv2 but need none of its parsing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "droce/wire/headers.h"

namespace droce::wire {

constexpr MacAddress kBroadcastMac{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
// The shortest Ethernet frame without its FCS (IEEE 802.3 clause 3.2.8):
// shorter frames are padded with zeros to it.
constexpr size_t kMinFrameSize = 60;

struct L2Header {
  MacAddress dst{};
  MacAddress src{};
  bool vlan = false;
  uint16_t vlan_id = 0;
  uint8_t pcp = 0;
  bool operator==(const L2Header&) const = default;
};

// A group (multicast or broadcast) address has the I/G bit, the least
// significant bit of its first octet, set (IEEE 802 clause 8.2).
constexpr bool is_group_mac(const MacAddress& m) { return (m[0] & 1) != 0; }
constexpr bool is_zero_mac(const MacAddress& m) {
  return (m[0] | m[1] | m[2] | m[3] | m[4] | m[5]) == 0;
}

// Reads the Ethernet header and one 802.1Q tag if present. Fills `l2`,
// the EtherType after any tag and the offset of the payload; false if the
// frame is too short for them.
bool read_l2(std::span<const uint8_t> frame, L2Header& l2, uint16_t& ether_type,
             size_t& offset);
// Writes the header (with a tag when l2.vlan) and returns its size, or 0
// if `out` is too small.
size_t write_l2(const L2Header& l2, uint16_t ether_type, std::span<uint8_t> out);
// Zero-pads a frame of `len` bytes in `out` to kMinFrameSize; returns the
// padded length, or 0 if `out` is too small for it.
size_t pad_frame(std::span<uint8_t> out, size_t len);

}  // namespace droce::wire
