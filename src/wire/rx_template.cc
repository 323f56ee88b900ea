#include "droce/wire/rx_template.h"

#include <infiniband/opcode.h>

#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

// The masked compare: 64 bytes (every IPv4 layout), 80 for IPv6, straight
// through, since a loop over the exact word count cost as much as the rest
// of the match. Bytes past the template are masked out; the caller has
// checked the frame is longer than the compare reads.
bool headers_equal(const RxTemplate& t, const uint8_t* f) {
#if defined(__SSE2__)
  const auto chunk = [&](size_t at) {
    const __m128i have = _mm_loadu_si128(reinterpret_cast<const __m128i*>(f + at));
    const __m128i want = _mm_load_si128(reinterpret_cast<const __m128i*>(t.expect + at));
    const __m128i mask = _mm_load_si128(reinterpret_cast<const __m128i*>(t.mask + at));
    return _mm_and_si128(_mm_xor_si128(have, want), mask);
  };
  __m128i diff = _mm_or_si128(_mm_or_si128(chunk(0), chunk(16)), _mm_or_si128(chunk(32), chunk(48)));
  if (t.words > 8) diff = _mm_or_si128(diff, chunk(64));
  return _mm_movemask_epi8(_mm_cmpeq_epi8(diff, _mm_setzero_si128())) == 0xFFFF;
#else
  uint64_t diff = 0;
  for (size_t i = 0; i < t.words; ++i) {
    uint64_t have, want, mask;
    std::memcpy(&have, f + 8 * i, 8);
    std::memcpy(&want, t.expect + 8 * i, 8);
    std::memcpy(&mask, t.mask + 8 * i, 8);
    diff |= (have ^ want) & mask;
  }
  return diff == 0;
#endif
}

// What the opcode table says of a WRITE opcode other than ONLY (one that
// predictable_opcode() let through): its position, a RETH or not (IBA
// 9.3.2). Not inlined, so the WRITE ONLY path of rx_template_match keeps
// its few registers.
struct WriteShape {
  bool reth;
  Position position;
};
[[gnu::noinline]] WriteShape write_shape(uint8_t opcode) {
  const OpcodeInfo& info = opcode_info(opcode);
  return {(info.ext & kExtReth) != 0, info.position};
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

bool rx_template_match(const RxTemplate& t, std::span<const uint8_t> f, PredictedWrite& out) {
  if (t.words == 0 || f.size() < (t.words > 8 ? 80u : 64u)) return false;
  // The operation must be an RDMA WRITE without immediate (the transport is
  // compared with the headers). WRITE ONLY, the bulk at small sizes where
  // every instruction shows, is known by one compare; ACKs, READ responses
  // and SENDs leave at the opcode filter before the compare; the other
  // WRITEs ask the table.
  const uint8_t* bth = f.data() + t.bth_offset;
  // predictable_opcode() is exactly the RC and UC WRITEs without immediate
  // (those with one consume a receive WQE: the general path); its test
  // checks it against the opcode table.
  WriteShape shape{true, Position::kOnly};
  if (bth[0] != t.write_only) {
    if (!predictable_opcode(bth[0])) return false;
    shape = write_shape(bth[0]);
  }
  if (!headers_equal(t, f.data())) return false;
  const bool reth = shape.reth;
  const size_t payload_off = size_t{t.bth_offset} + kBthSize + (reth ? kRethSize : 0);
  const uint8_t* l3 = f.data() + t.l3_offset;
  size_t l3_end;
  if (t.ipv6) {
    // A CE mark (RFC 3168) needs a CNP: the general path sends it.
    if (((load_be16(l3) >> 4) & 3) == static_cast<uint8_t>(Ecn::kCe)) return false;
    l3_end = size_t{t.l3_offset} + kIpv6Size + load_be16(l3 + 4);
  } else {
    if ((l3[1] & 3) == static_cast<uint8_t>(Ecn::kCe)) return false;
    if (ipv4_checksum(l3, kIpv4Size) != 0) return false;
    l3_end = size_t{t.l3_offset} + load_be16(l3 + 2);
  }
  // The datagram must fit the frame (anything after it is Ethernet
  // padding), hold the headers and ICRC, and agree with the UDP length.
  if (l3_end > f.size() || l3_end < payload_off + kIcrcSize) return false;
  const size_t l4 = size_t{t.bth_offset} - kUdpSize;
  if (load_be16(f.data() + l4 + 4) != l3_end - l4) return false;
  // Pad count 0 (the template): the payload is whole 4-byte words (IBA 9.2.5).
  const size_t len = l3_end - kIcrcSize - payload_off;
  if (len % 4 != 0) return false;
  out.position = shape.position;
  out.psn = load_be24(bth + 9);
  out.ack_req = bth[8] & 0x80;
  if (reth) {
    const auto* reth = reinterpret_cast<const Reth*>(bth + kBthSize);
    out.va = reth->va();
    out.rkey = reth->rkey();
    out.dma_length = reth->dma_length();
  } else {
    out.va = 0;
    out.rkey = 0;
    out.dma_length = 0;
  }
  out.payload = f.data() + payload_off;
  out.payload_length = static_cast<uint32_t>(len);
  out.frame_length = static_cast<uint32_t>(l3_end);
  return true;
}

}  // namespace droce::wire
