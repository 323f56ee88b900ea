// ICMP for IPv4 (RFC 792): echo request and reply, what `ping` sends and
// expects back. Other ICMP messages are recognised and not used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "droce/wire/ethernet.h"

namespace droce::wire {

constexpr uint8_t kIpProtoIcmp = 1;
constexpr uint8_t kIcmpEchoReply = 0;
constexpr uint8_t kIcmpEchoRequest = 8;
constexpr size_t kIcmpEchoHeaderSize = 8;  // type, code, checksum, identifier, sequence

struct IcmpEcho {
  L2Header l2;
  uint32_t src_ip = 0;  // host order
  uint32_t dst_ip = 0;
  uint8_t ttl = 0;
  uint8_t type = 0;  // kIcmpEchoRequest or kIcmpEchoReply
  uint16_t identifier = 0;
  uint16_t sequence = 0;
  std::span<const uint8_t> data;  // after the echo header, into the frame
};

enum class IcmpError : uint8_t {
  kOk = 0,
  kNotIcmp,       // not IPv4, or IPv4 carrying another protocol
  kTruncated,     // shorter than its headers or than its IP length says
  kBadIpHeader,   // version, header length, checksum, or a multicast or broadcast source
  kFragment,      // a fragment: not reassembled
  kBadChecksum,   // the ICMP checksum
  kOtherType,     // a valid ICMP message that is not an echo
  kCount,
};
std::string_view to_string(IcmpError e);

// Parses an IPv4 ICMP echo request or reply frame into `out`.
IcmpError parse_icmp_echo(std::span<const uint8_t> frame, IcmpEcho& out);
// The reply to `request` from `our_mac` (RFC 792 "Echo or Echo Reply
// Message": addresses swapped, type 0, the identifier, sequence and data
// returned unchanged), in the request's VLAN. Returns its length, or 0 if
// `out` is too small.
size_t build_icmp_echo_reply(const IcmpEcho& request, const MacAddress& our_mac,
                             std::span<uint8_t> out);
// An echo request (the tests' `ping`), with `data` as its payload.
size_t build_icmp_echo_request(const L2Header& l2, uint32_t src_ip, uint32_t dst_ip,
                               uint16_t identifier, uint16_t sequence,
                               std::span<const uint8_t> data, std::span<uint8_t> out);

}  // namespace droce::wire
