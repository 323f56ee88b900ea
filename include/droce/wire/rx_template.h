// Header prediction for received requests: what a QP's peer sends in the
// common case, as fixed bytes under a mask, so one compare of a few words
// stands in for parse() (the idea TCP receivers call header prediction,
// V. Jacobson, "4BSD header prediction", CCR 1990).
//
// A template is built from the QP's own path (the peer's frames come back
// with the addresses swapped) and matches RDMA WRITE requests without
// immediate, ONLY, FIRST, MIDDLE and LAST: the bulk of what a RoCE
// responder receives, one-packet writes at small sizes and the packets of
// large messages at large ones. Everything that varies per packet and
// that parse() checks is checked here too (IPv4 header checksum, IP and UDP
// lengths, pad count); ECN CE, VLAN PCP, IP options, FECN/BECN and every
// other opcode are left to parse(): a frame that does not match takes the
// general path, so a template may be stricter than parse(), never looser.
// The ICRC is not checked here: a burst checks all its ICRCs in one pass
// (icrc_check below, icrc_check_many).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "droce/wire/build.h"
#include "droce/wire/icrc.h"
#include "droce/wire/opcode.h"

namespace droce::wire {

struct RxTemplate {
  // Bytes from the frame's start through the BTH's destination QP, and the
  // mask of those that must equal `expect` (per packet fields masked out).
  static constexpr size_t kMaxBytes = 80;  // VLAN + IPv6 + UDP + BTH = 78
  alignas(16) uint8_t expect[kMaxBytes] = {};
  alignas(16) uint8_t mask[kMaxBytes] = {};
  uint8_t words = 0;         // 8-byte words compared; 0: matches nothing
  uint8_t l3_offset = 0;     // IP header
  uint8_t bth_offset = 0;
  bool ipv6 = false;
  uint8_t write_only = 0;  // the RDMA WRITE ONLY opcode of the transport
};

// The template for RDMA WRITE requests without immediate (ONLY, FIRST,
// MIDDLE, LAST) to QP `qpn` of transport `opcode_base` (IBV_OPCODE_RC or
// IBV_OPCODE_UC) from the peer of `path` (our side of the path: src = us,
// dst = the peer), carrying `pkey`.
RxTemplate make_write_template(const PathSpec& path, uint32_t qpn, uint8_t opcode_base,
                               uint16_t pkey);

// The fields of a matched frame that vary per packet.
struct PredictedWrite {
  // The opcode's position: one of the four RDMA WRITEs without immediate
  // of the template's transport (ONLY, FIRST, MIDDLE, LAST).
  Position position = Position::kNone;
  uint32_t psn = 0;
  bool ack_req = false;
  uint64_t va = 0;     // the RETH (FIRST and ONLY; 0 otherwise)
  uint32_t rkey = 0;
  uint32_t dma_length = 0;
  const uint8_t* payload = nullptr;
  uint32_t payload_length = 0;
  uint32_t frame_length = 0;  // through the ICRC, without Ethernet padding
};

// Where the BTH destination QP of a plain frame would be, for finding the
// template to match against: the four layouts a template can have (IPv4
// without options or IPv6, with or without one VLAN tag). 0: none of them,
// or the frame is shorter than the shortest predicted WRITE (a LAST of one
// word) in that layout; otherwise the BTH lies inside the frame.
inline size_t predicted_bth_offset(std::span<const uint8_t> frame) {
  if (frame.size() < kEthSize + kVlanTagSize) return 0;
  size_t l3 = kEthSize;
  uint16_t type = load_be16(frame.data() + 12);
  if (type == kEtherTypeVlan) {
    type = load_be16(frame.data() + 16);
    l3 += kVlanTagSize;
  }
  const size_t bth = type == kEtherTypeIpv4   ? l3 + kIpv4Size + kUdpSize
                     : type == kEtherTypeIpv6 ? l3 + kIpv6Size + kUdpSize
                                              : 0;
  return bth && frame.size() >= bth + kBthSize + 4 + kIcrcSize ? bth : 0;
}

// The opcodes a template can match: RC or UC RDMA WRITE FIRST, MIDDLE,
// LAST or ONLY without immediate (IBA 9.2, table 38: transport in the top
// three bits, RC 000 and UC 001; operation in the low five, 6, 7, 8, 10).
// rx_template_match tests it first, so that ACKs, READ responses and
// SENDs, which no template matches, do not pay for the header compare.
constexpr bool predictable_opcode(uint8_t opcode) {
  // One bit per opcode below 64 (RC 0..31, UC 32..63): a compare and a
  // bit test on the 64-byte hot path.
  constexpr uint64_t kWriteOps = 1u << 6 | 1u << 7 | 1u << 8 | 1u << 10;
  constexpr uint64_t kRcAndUc = kWriteOps | kWriteOps << 32;
  return opcode < 64 && ((kRcAndUc >> opcode) & 1);
}

// True when `frame` is an RDMA WRITE (ONLY, FIRST, MIDDLE or LAST, no
// immediate) the template describes, with consistent lengths, a good IPv4
// header checksum and no CE mark; fills `out`. Whether the opcode fits the
// QP's message in progress is the QP's to say (try_predicted_write). Reads
// only bytes inside `frame`.
bool rx_template_match(const RxTemplate& t, std::span<const uint8_t> frame,
                       PredictedWrite& out);

// The ICRC check of a frame rx_template_match accepted (icrc_check_many).
inline IcrcCheck icrc_check(const RxTemplate& t, std::span<const uint8_t> frame,
                            const PredictedWrite& w) {
  const size_t icrc_at = w.frame_length - kIcrcSize;
  return {frame.data() + t.l3_offset, static_cast<uint32_t>(icrc_at - t.l3_offset), t.ipv6,
          load_le32(frame.data() + icrc_at)};
}

}  // namespace droce::wire
