// Parsing a received frame into a ParsedPacket: every layer checked, every
// failure named (docs/DESIGN.md "Wire conventions"). parse() never reads past
// `len` and never writes anything but `out`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "droce/wire/headers.h"
#include "droce/wire/icrc.h"
#include "droce/wire/opcode.h"

namespace droce::wire {

enum class ParseError : uint8_t {
  kOk = 0,
  // Not RoCEv2 at all: reported as such, not as a malformed RoCE packet.
  kNotIp,            // EtherType is neither IPv4 nor IPv6 (after any VLAN tag)
  kNotUdp,           // IP protocol / next header is not UDP
  kNotRoceV2Port,    // UDP destination port is not 4791
  // Malformed RoCEv2 (or IP/UDP carrying it).
  kTruncatedEth,
  kTruncatedIp,
  kTruncatedUdp,
  kTruncatedBth,
  kTruncatedExtHeader,
  kTruncatedPayload,  // fewer bytes than the IP/UDP length says
  kBadIpVersion,      // version nibble disagrees with the EtherType
  kBadIpHeaderLength,
  kIpFragment,
  kBadIpChecksum,
  kBadUdpLength,      // UDP length disagrees with the IP length
  kBadBthVersion,     // BTH TVer != 0 (IBA 9.2.6)
  kUnsupportedOpcode, // reserved, RD, or otherwise not implemented
  kLengthMismatch,    // bytes after the headers do not fit the opcode
  kBadPad,            // pad count inconsistent with opcode or payload
  kBadIcrc,
  kCount,
};
std::string_view to_string(ParseError e);
// True for errors that mean "some other protocol", not a malformed packet.
constexpr bool is_not_roce(ParseError e) {
  return e == ParseError::kNotIp || e == ParseError::kNotUdp ||
         e == ParseError::kNotRoceV2Port;
}

struct IpAddress {
  bool v6 = false;
  uint8_t bytes[16] = {};  // IPv4 in bytes[0..3]
  static IpAddress v4(uint32_t host_order);
  uint32_t v4_host_order() const { return load_be32(bytes); }
  bool operator==(const IpAddress&) const = default;
};

// Extension-header fields (ExtHeaderFields) are valid when info->ext has
// the header's bit.
struct ParsedPacket : ExtHeaderFields {
  // Layer 2.
  MacAddress dst_mac{};
  MacAddress src_mac{};
  bool has_vlan = false;
  uint16_t vlan_id = 0;
  uint8_t pcp = 0;
  // Layer 3.
  IpAddress src_ip;
  IpAddress dst_ip;
  uint8_t dscp = 0;
  Ecn ecn = Ecn::kNotEct;
  uint8_t ttl = 0;  // hop limit for IPv6
  uint32_t flow_label = 0;
  // Layer 4.
  uint16_t udp_src_port = 0;
  uint16_t udp_dst_port = 0;
  // BTH.
  uint8_t opcode = 0;
  const OpcodeInfo* info = nullptr;
  bool solicited = false;
  bool mig_req = false;
  uint8_t pad_count = 0;
  uint16_t pkey = 0;
  bool fecn = false;
  bool becn = false;
  uint32_t dest_qp = 0;
  bool ack_req = false;
  uint32_t psn = 0;
  // Payload (without pad) and trailer.
  const uint8_t* payload = nullptr;
  uint32_t payload_length = 0;
  uint32_t icrc = 0;        // as carried (CRC value, decoded from LE bytes)
  bool icrc_checked = false;
  // Offsets into the frame.
  uint16_t l3_offset = 0;
  uint16_t l4_offset = 0;
  uint16_t bth_offset = 0;
  uint16_t payload_offset = 0;
  uint32_t frame_length = 0;  // bytes up to the end of the ICRC (no Ethernet padding)

  bool has(ExtHeader h) const { return info && (info->ext & h); }
  bool ipv6() const { return src_ip.v6; }
};

struct ParseOptions {
  bool verify_ip_checksum = true;
  bool verify_icrc = true;
  // The frame's unheld payload, if the simulator gave it one (icrc.h).
  UnheldPayload unheld{};
};

// Parses an Ethernet frame (no FCS). On success returns kOk and fills `out`;
// on failure returns the first error found, with `out` holding whatever layers
// were decoded before it (useful for reports).
ParseError parse(std::span<const uint8_t> frame, ParsedPacket& out,
                 const ParseOptions& options = {});

// The ICRC check parse() ends with, for a frame parse() accepted with
// verify_icrc = false: a receive burst parses every frame first and then
// checks their ICRCs back to back, so the CPU overlaps the CRCs' latency
// chains. Sets pkt.icrc_checked; kOk or kBadIcrc.
ParseError verify_icrc(std::span<const uint8_t> frame, ParsedPacket& pkt,
                       UnheldPayload unheld = {});
// The same check as an IcrcCheck, for icrc_check_many over a burst (the
// caller sets pkt.icrc_checked if it wants it). Inline: a call returning
// the struct through memory cost a store-forwarding stall per frame.
inline IcrcCheck icrc_check(std::span<const uint8_t> frame, const ParsedPacket& pkt) {
  return {frame.data() + pkt.l3_offset,
          static_cast<uint32_t>(pkt.frame_length - kIcrcSize - pkt.l3_offset), pkt.ipv6(),
          pkt.icrc};
}

}  // namespace droce::wire
