#include "droce/wire/rx_template.h"

#include <infiniband/opcode.h>

#include <cstring>

namespace droce::wire {

namespace {

// Fills expect/mask for the `n` bytes at `at` that must be `bytes`.
void fixed(RxTemplate& t, size_t at, const uint8_t* bytes, size_t n) {
  std::memcpy(t.expect + at, bytes, n);
  std::memset(t.mask + at, 0xFF, n);
}

void fixed_be16(RxTemplate& t, size_t at, uint16_t v) {
  uint8_t b[2];
  store_be16(b, v);
  fixed(t, at, b, 2);
}

// Bits of one byte that must equal `value` (the others vary per packet).
void fixed_bits(RxTemplate& t, size_t at, uint8_t bits, uint8_t value) {
  t.mask[at] = bits;
  t.expect[at] = static_cast<uint8_t>(value & bits);
}

}  // namespace

RxTemplate make_write_template(const PathSpec& path, uint32_t qpn, uint8_t opcode_base,
                               uint16_t pkey) {
  RxTemplate t;
  // Ethernet: MACs are not compared (parse() does not; a router rewrites
  // them). The EtherType, and with a tag its VID, fix the layout.
  size_t at = 12;
  if (path.vlan) {
    fixed_be16(t, at, kEtherTypeVlan);
    fixed_bits(t, at + 2, 0x0F, static_cast<uint8_t>(path.vlan_id >> 8));  // PCP, DEI vary
    fixed_bits(t, at + 3, 0xFF, static_cast<uint8_t>(path.vlan_id));
    at += kVlanTagSize;
  }
  const bool v6 = path.src_ip.v6;
  fixed_be16(t, at, v6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
  at += 2;
  t.l3_offset = static_cast<uint8_t>(at);
  t.ipv6 = v6;
  // IP: the peer's address as source, ours as destination, UDP; lengths,
  // TOS/traffic class, TTL, ID and the checksum vary (checked in match).
  if (v6) {
    fixed_bits(t, at, 0xF0, 0x60);
    t.mask[at + 6] = 0xFF;
    t.expect[at + 6] = kIpProtoUdp;
    fixed(t, at + 8, path.dst_ip.bytes, 16);
    fixed(t, at + 24, path.src_ip.bytes, 16);
    at += kIpv6Size;
  } else {
    fixed_bits(t, at, 0xFF, 0x45);  // version 4, no options
    // Flags and fragment offset: DF and the reserved bit may be anything,
    // MF and the offset must be zero (RoCEv2 is never fragmented).
    fixed_bits(t, at + 6, 0x3F, 0);
    fixed_bits(t, at + 7, 0xFF, 0);
    fixed_bits(t, at + 9, 0xFF, kIpProtoUdp);
    fixed(t, at + 12, path.dst_ip.bytes, 4);
    fixed(t, at + 16, path.src_ip.bytes, 4);
    at += kIpv4Size;
  }
  // UDP: any source port (the peer's entropy), RoCEv2's destination port.
  fixed_be16(t, at + 2, kRoceV2Port);
  at += kUdpSize;
  // BTH (IBA 9.2): the opcode's transport bits (the operation, one of four,
  // is checked in match), pad count 0 and TVer 0 (SE and M vary), P_Key,
  // destination QP. FECN/BECN and the reserved bits, AckReq and the PSN vary.
  t.bth_offset = static_cast<uint8_t>(at);
  fixed_bits(t, at, 0xE0, opcode_base);
  t.write_only = static_cast<uint8_t>(opcode_base | IBV_OPCODE_RDMA_WRITE_ONLY);
  fixed_bits(t, at + 1, 0x3F, 0);
  fixed_be16(t, at + 2, pkey);
  uint8_t q[3];
  store_be24(q, qpn);
  fixed(t, at + 5, q, 3);
  t.words = static_cast<uint8_t>((at + kBthSize + 7) / 8);
  static_assert(RxTemplate::kMaxBytes == 80);
  return t;
}

namespace detail {

WriteShape write_shape(uint8_t opcode) {
  const OpcodeInfo& info = opcode_info(opcode);
  return {(info.ext & kExtReth) != 0, info.position};
}

}  // namespace detail

size_t rx_template_match_run(const RxTemplate& shared,
                             std::span<const std::span<const uint8_t>> frames,
                             PredictedWrite* out, IcrcCheck* checks) {
  if (shared.words == 0) return 0;
  const RxTemplate t = shared;
  return detail::with_layout(t, [&](auto layout) {
    using L = decltype(layout);
    size_t n = 0;
    for (; n < frames.size() && detail::match<L>(t, frames[n], out[n]); ++n)
      checks[n] = detail::icrc_check<L>(frames[n], out[n]);
    return n;
  });
}

}  // namespace droce::wire
