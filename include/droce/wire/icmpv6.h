// ICMPv6 (RFC 4443) echo, and IPv6 neighbour discovery's solicitation and
// advertisement (RFC 4861 sections 4.3, 4.4, 4.6.1, 7.1): what `ping -6`,
// `ndisc6` and the kernel's neighbour table exchange with a port.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "droce/wire/ethernet.h"
#include "droce/wire/packet.h"

namespace droce::wire {

constexpr uint8_t kIpProtoIcmpv6 = 58;
constexpr uint8_t kIcmpv6EchoRequest = 128;
constexpr uint8_t kIcmpv6EchoReply = 129;
constexpr uint8_t kIcmpv6NeighbourSolicitation = 135;
constexpr uint8_t kIcmpv6NeighbourAdvertisement = 136;
// RFC 4861 section 4.6.1: link-layer address options.
constexpr uint8_t kNdOptSourceLinkLayer = 1;
constexpr uint8_t kNdOptTargetLinkLayer = 2;
// Neighbour discovery is only valid from the link itself (RFC 4861 7.1):
// sent with, and accepted only with, hop limit 255.
constexpr uint8_t kNdHopLimit = 255;

struct Icmpv6Message {
  L2Header l2;
  IpAddress src_ip;  // v6
  IpAddress dst_ip;
  uint8_t hop_limit = 0;
  uint8_t type = 0;
  uint8_t code = 0;
  // Echo request and reply.
  uint16_t identifier = 0;
  uint16_t sequence = 0;
  std::span<const uint8_t> data;  // into the frame
  // Neighbour solicitation and advertisement.
  IpAddress target;
  bool has_link_layer = false;  // source (NS) or target (NA) link-layer option
  MacAddress link_layer{};
  bool router = false, solicited = false, override_flag = false;  // NA flags
};

enum class Icmpv6Error : uint8_t {
  kOk = 0,
  kNotIcmpv6,     // not IPv6, or a next header other than ICMPv6 (no extension headers)
  kTruncated,
  kBadIpHeader,   // version, a payload length beyond the frame, or a multicast source
  kBadChecksum,
  kBadNd,         // a solicitation or advertisement RFC 4861 7.1 says to discard
  kOtherType,     // valid ICMPv6 of another type
  kCount,
};
std::string_view to_string(Icmpv6Error e);

Icmpv6Error parse_icmpv6(std::span<const uint8_t> frame, Icmpv6Message& out);

// Address helpers.
bool is_ipv6_multicast(const IpAddress& a);       // ff00::/8
bool is_ipv6_unspecified(const IpAddress& a);     // ::
bool is_ipv6_link_local(const IpAddress& a);      // fe80::/10
// ff02::1:ffXX:XXXX, XX its low 24 bits (RFC 4291 2.7.1).
IpAddress solicited_node_address(const IpAddress& a);
// 33:33 and the low 32 bits of a multicast address (RFC 2464 section 7).
MacAddress ipv6_multicast_mac(const IpAddress& group);
// fe80:: with the modified EUI-64 interface identifier of `mac` (RFC 4291
// appendix A, RFC 2464 section 4): what Linux gives an Ethernet interface.
IpAddress link_local_address(const MacAddress& mac);
// ff02::1, all nodes (RFC 4291 2.7.1).
IpAddress all_nodes_address();

// Each returns the frame's length, or 0 if `out` is too small.
// A solicitation for `target` from `src` (its link-layer option `our_mac`):
// to the target's solicited-node group, or to `unicast_dst` at l2.dst
// when probing a known neighbour (RFC 4861 7.2.2, 7.3.3).
size_t build_neighbour_solicitation(const L2Header& l2, const IpAddress& src,
                                    const IpAddress& dst, const IpAddress& target,
                                    std::span<uint8_t> out);
// An advertisement for `target` (ours) with our link-layer address l2.src.
size_t build_neighbour_advertisement(const L2Header& l2, const IpAddress& src,
                                     const IpAddress& dst, const IpAddress& target,
                                     bool solicited, bool override_flag, std::span<uint8_t> out);
// The reply to an echo request (RFC 4443 4.2): from `our_ip`, the data returned.
size_t build_icmpv6_echo_reply(const Icmpv6Message& request, const MacAddress& our_mac,
                               const IpAddress& our_ip, std::span<uint8_t> out);
size_t build_icmpv6_echo_request(const L2Header& l2, const IpAddress& src, const IpAddress& dst,
                                 uint16_t identifier, uint16_t sequence,
                                 std::span<const uint8_t> data, std::span<uint8_t> out);

}  // namespace droce::wire
