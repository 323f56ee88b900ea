// In-band Network Telemetry for HPCC (Li et al., "HPCC: High Precision
// Congestion Control", SIGCOMM 2019): each switch appends a hop record at
// dequeue; the receiver echoes the stack to the sender on ACKs.
//
// Encoding (docs/INT.md has the byte layout): INT-MD over UDP in the style of
// the P4.org INT specification v2.1 (section 5.6): a 4-byte shim and a
// 12-byte INT-MD header are inserted between the UDP header and the BTH, the
// hop stack follows them (newest record first), and the UDP destination port
// changes from 4791 to kIntUdpPort with the original port kept in the shim.
// Consequences:
//  - a receiver that knows nothing of INT sees a non-RoCE UDP port and drops
//    the packet as "not RoCEv2" instead of misreading the shim as a BTH;
//  - the ICRC at the end of the frame is left untouched: it was computed over
//    the original IP/UDP lengths and port, so int_strip(), which restores
//    them, gives back a frame whose ICRC verifies with wire::parse().
// Every function here works in place on a caller's buffer and never
// allocates; inserting needs `buf.size() - frame_len` bytes of room.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "droce/wire/icrc.h"

namespace droce::wire {

// Not an IANA assignment: the INT specification leaves the port to the
// operator. Fixed here so switches, endpoints and Wireshark filters agree.
constexpr uint16_t kIntUdpPort = 4792;
constexpr size_t kIntShimSize = 4;
constexpr size_t kIntMdHeaderSize = 12;
constexpr size_t kIntHeaderSize = kIntShimSize + kIntMdHeaderSize;
constexpr size_t kIntHopSize = 32;  // 8 words
constexpr uint8_t kIntHopWords = kIntHopSize / 4;
constexpr uint8_t kIntShimTypeMd = 1;    // INT spec 2.1: 1 = INT-MD
constexpr uint8_t kIntNptUdpPort = 1;    // next protocol: UDP payload, port in shim
constexpr uint8_t kIntVersion = 2;       // INT-MD header version
constexpr uint16_t kIntDomainId = 0xD0CE;  // domain-specific ID for droce records
constexpr uint16_t kIntDsInstructionHpcc = 0x0001;
constexpr uint16_t kIntDsFlagEcho = 0x0001;  // stack reflected by a receiver
// HPCC paths are a few hops; 8 records keep the header at 272 bytes.
constexpr uint8_t kIntDefaultMaxHops = 8;
// The shim length field counts 4-byte words in 8 bits.
constexpr size_t kIntMaxHops = (255 * 4 - kIntHeaderSize) / kIntHopSize;

// One hop's record, as HPCC's sender consumes it.
struct IntHop {
  uint32_t node_id = 0;
  uint16_t ingress_port = 0;
  uint16_t egress_port = 0;
  uint64_t timestamp_ns = 0;  // egress (dequeue) time at this hop
  uint64_t tx_bytes = 0;      // bytes the egress port sent before this packet
  uint32_t qlen_bytes = 0;    // egress port queue occupancy at dequeue
  uint32_t rate_mbps = 0;     // egress link rate, Mb/s (800 G = 800000)
  bool operator==(const IntHop&) const = default;
};

enum class IntError : uint8_t {
  kOk = 0,
  kNotIp,
  kNotUdp,
  kNotRoce,       // UDP destination port is neither 4791 nor kIntUdpPort
  kNoInt,         // plain RoCEv2 frame where INT was expected
  kAlreadyInt,    // INT frame where a plain one was expected
  kTruncated,
  kBadHeader,     // shim/MD header fields inconsistent (type, version, length)
  kStackFull,     // remaining hop count is zero: E bit set, record not added
  kEcho,          // the stack is an echo; switches must not push onto it
  kNoRoom,        // the buffer has no room for the inserted bytes
  kTooManyHops,
};
std::string_view to_string(IntError e);

// Where things are in a frame, as int_locate() finds them.
struct IntLocation {
  uint16_t l3_offset = 0;
  uint16_t l4_offset = 0;
  bool ipv6 = false;
  uint32_t l3_end = 0;        // end of the IP datagram (Ethernet padding after)
  bool has_int = false;
  // Valid when has_int:
  uint32_t int_length = 0;    // shim + MD header + records, bytes
  uint8_t hop_count = 0;
  uint8_t remaining_hops = 0;
  bool echo = false;
  bool exceeded = false;      // E bit: some hop could not add its record
  uint16_t original_dst_port = 0;
  // Offset of the BTH (after any INT bytes).
  uint32_t bth_offset() const {
    return l4_offset + 8 + (has_int ? int_length : 0);
  }
};

// Finds the IP/UDP headers and any INT header of `frame` (Ethernet, optional
// 802.1Q tag, IPv4 without fragments or IPv6). Does not verify checksums.
// `elided`: bytes of the frame's unheld payload that `frame` leaves out
// (fabric::Packet::elided), which the IP length counts.
IntError int_locate(std::span<const uint8_t> frame, IntLocation& out, size_t elided = 0);

// Adds `hop` on top of the stack. A plain RoCEv2 frame first gets the INT
// header with `max_hops` as its hop budget. On kStackFull the E bit is set
// and the frame keeps its length. `frame_len` is updated. The frame's
// unheld payload (icrc.h), if it has one, is not moved: its bytes are
// unspecified wherever they are. `elided` as for int_locate: `frame_len`
// is then what the buffer holds.
IntError int_push_hop(std::span<uint8_t> buf, size_t& frame_len, const IntHop& hop,
                      uint8_t max_hops = kIntDefaultMaxHops, UnheldPayload unheld = {},
                      size_t elided = 0);

// Copies the records into `out` in path order (out[0] = first switch) and
// sets `count`; fails with kTooManyHops if `out` is too small.
IntError int_read_hops(std::span<const uint8_t> frame, std::span<IntHop> out,
                       size_t& count);

// Removes the INT bytes, restores the UDP destination port, UDP length and IP
// length (and the IPv4 header checksum): the original frame, ICRC valid.
// The unheld payload, if any, is not moved (as in int_push_hop).
IntError int_strip(std::span<uint8_t> buf, size_t& frame_len, UnheldPayload unheld = {});

// Adds an INT header flagged as an echo and carrying `hops` (path order) to
// a plain RoCEv2 frame, typically an ACK going back to the sender.
IntError int_insert_echo(std::span<uint8_t> buf, size_t& frame_len,
                         std::span<const IntHop> hops);

}  // namespace droce::wire
