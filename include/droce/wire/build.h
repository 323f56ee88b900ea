// Writing RoCEv2 packets into a caller's buffer: Ethernet (optionally
// 802.1Q-tagged), IPv4 or IPv6, UDP to port 4791, BTH, the extension headers
// the opcode calls for, payload, pad and ICRC. Lengths, the IPv4 header
// checksum and the ICRC are computed here; nothing is allocated.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "droce/wire/headers.h"
#include "droce/wire/packet.h"

namespace droce::wire {

// Everything below the BTH that stays the same for a flow (per QP).
struct PathSpec {
  MacAddress dst_mac{};
  MacAddress src_mac{};
  bool vlan = false;
  uint16_t vlan_id = 0;
  uint8_t pcp = 0;
  IpAddress src_ip;
  IpAddress dst_ip;     // must be the same family as src_ip
  uint8_t dscp = 0;
  Ecn ecn = Ecn::kEct0;  // RoCEv2 data is ECN-capable by default
  uint8_t ttl = 64;      // hop limit for IPv6
  uint32_t flow_label = 0;
  uint16_t udp_src_port = 0xC000;
};

// The BTH and extension-header fields; only those the opcode uses are written.
struct TransportSpec : ExtHeaderFields {
  uint8_t opcode = 0;
  bool solicited = false;
  bool mig_req = true;  // RoCE NICs send M=1 (no APM state to migrate)
  uint16_t pkey = 0xFFFF;
  bool fecn = false;
  bool becn = false;
  uint32_t dest_qp = 0;
  bool ack_req = false;
  uint32_t psn = 0;
};

// Size of the frame build_packet would write (without Ethernet padding).
size_t packet_size(const PathSpec& path, uint8_t opcode, size_t payload_len);

// Where build_packet puts the payload in the frame. A sender may gather the
// payload there first and pass build_packet that span: one copy, not two.
size_t payload_offset(const PathSpec& path, uint8_t opcode);

// Writes the frame into `out` and returns its length, or 0 if `out` is too
// small, the opcode is unsupported, the opcode takes no payload and one was
// given, or a first/middle packet's payload is not a multiple of 4 (only the
// last packet may be padded). The pad count is derived from the payload
// length (IBA 9.2.5).
size_t build_packet(const PathSpec& path, const TransportSpec& transport,
                    std::span<const uint8_t> payload, std::span<uint8_t> out);

// An ACKNOWLEDGE frame (BTH and AETH, IBA 9.2, 9.3) of one path, peer QP
// and P_Key, built once by build_packet. The ACKs and NAKs a responder
// sends on a path differ only in the PSN, the AETH and the ICRC (the IPv4
// header, its checksum included, stays the same), so build_ack copies it
// and writes those: a responder sends one per receive burst.
struct AckTemplate {
  static constexpr size_t kMaxBytes =
      kEthSize + kVlanTagSize + kIpv6Size + kUdpSize + kBthSize + kAethSize + kIcrcSize;
  std::array<uint8_t, kMaxBytes> bytes{};
  uint8_t size = 0;  // 0: none (build_ack builds nothing)
  uint8_t l3_offset = 0;
  bool ipv6 = false;
};
AckTemplate make_ack_template(const PathSpec& path, uint32_t dest_qp, uint16_t pkey);
// What build_packet writes for an RC ACKNOWLEDGE to the template's peer
// with `psn` and AETH (`syndrome`, `msn`); 0 if `out` is too small or the
// template is empty.
size_t build_ack(const AckTemplate& t, uint32_t psn, uint8_t syndrome, uint32_t msn,
                 std::span<uint8_t> out);

// Recomputes the ICRC (and IPv4 checksum) of a frame that build_packet wrote
// and someone then changed in place (the fabric stamping ECN, tests
// corrupting it on purpose).
void refresh_checksums(std::span<uint8_t> frame, const ParsedPacket& parsed);

// RoCEv2 NICs put flow entropy in the UDP source port (annex A17.4.3 allows
// any value; 0xC000 | 14-bit hash keeps it in the dynamic range).
uint16_t udp_src_port_entropy(uint32_t src_qp, uint32_t dest_qp);

// IPv4 header checksum (RFC 1071) over `len` bytes, the checksum field
// included as it stands; 0 means a header with a correct checksum. Inline:
// parse() checks one per received frame.
inline uint16_t ipv4_checksum(const uint8_t* header, size_t len) {
  // RFC 1071 section 2(B): the ones'-complement sum of 16-bit words comes
  // out byte-swapped when the words are read in the other byte order, so
  // sum native 32-bit words (five for a plain IPv4 header, not ten
  // big-endian loads) into 64 bits and swap once at the end.
  uint64_t sum = 0;
  size_t i = 0;
  // Unrolled: GCC 12 left the five-word loop of a plain header a loop,
  // a quarter of the predicted receive path's header check.
#pragma GCC unroll 15
  for (; i + 4 <= len; i += 4) {
    uint32_t w;
    std::memcpy(&w, header + i, 4);
    sum += w;
  }
  if (i + 2 <= len) {
    uint16_t w;
    std::memcpy(&w, header + i, 2);
    sum += w;
    i += 2;
  }
  // A last odd byte is the first (high-order, in network order) byte of a
  // word padded with zero.
  if (i < len) sum += std::endian::native == std::endian::little ? uint64_t{header[i]}
                                                                  : uint64_t{header[i]} << 8;
  sum = (sum & 0xFFFFFFFF) + (sum >> 32);
  sum = (sum & 0xFFFFFFFF) + (sum >> 32);
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  const auto folded = static_cast<uint16_t>(~sum);
  return std::endian::native == std::endian::little ? __builtin_bswap16(folded) : folded;
}

}  // namespace droce::wire
