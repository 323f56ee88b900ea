// ARP for IPv4 over Ethernet (RFC 826): the only hardware and protocol
// types droce speaks (hardware type 1, Ethernet, 6-byte addresses;
// protocol type 0x0800, IPv4, 4-byte addresses; IANA's ARP parameters).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "droce/wire/ethernet.h"

namespace droce::wire {

constexpr uint16_t kEtherTypeArp = 0x0806;
constexpr size_t kArpSize = 28;

enum class ArpOp : uint16_t { kRequest = 1, kReply = 2 };

struct ArpPacket {
  ArpOp op = ArpOp::kRequest;
  MacAddress sender_mac{};
  uint32_t sender_ip = 0;  // host order
  MacAddress target_mac{};
  uint32_t target_ip = 0;  // host order
};

enum class ArpError : uint8_t {
  kOk = 0,
  kNotArp,        // another EtherType
  kTruncated,     // fewer bytes than an Ethernet/IPv4 ARP packet
  kUnsupported,   // other hardware or protocol type, or address lengths
  kBadOp,         // neither request nor reply
  kCount,
};
std::string_view to_string(ArpError e);

// Parses an ARP frame (its Ethernet header and any 802.1Q tag into `l2`).
ArpError parse_arp(std::span<const uint8_t> frame, L2Header& l2, ArpPacket& out);
// Writes an ARP frame padded to the Ethernet minimum; returns its length,
// or 0 if `out` is too small.
size_t build_arp(const L2Header& l2, const ArpPacket& arp, std::span<uint8_t> out);

}  // namespace droce::wire
