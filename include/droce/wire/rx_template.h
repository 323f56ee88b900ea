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

#include <infiniband/opcode.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "droce/wire/build.h"
#include "droce/wire/icrc.h"
#include "droce/wire/opcode.h"
#include "droce/wire/psn.h"

namespace droce::wire {

struct RxTemplate {
  // Bytes from the frame's start through the BTH's destination QP that
  // must equal those of a matching frame, under its layout's mask (Layout
  // below: which bits vary per packet depends on the layout alone, so the
  // mask is not the QP's). From a line boundary: an IPv4 frame's compare
  // reads one line of them, and the fields below are on the next.
  static constexpr size_t kMaxBytes = 80;  // VLAN + IPv6 + UDP + BTH = 78
  alignas(64) uint8_t expect[kMaxBytes] = {};
  uint8_t words = 0;         // 8-byte words compared; 0: matches nothing
  uint8_t l3_offset = 0;     // IP header
  uint8_t bth_offset = 0;
  bool ipv6 = false;
  uint8_t write_only = 0;  // the RDMA WRITE ONLY opcode of the transport
};

namespace detail {

// A template and the mask of the bytes it fixes, as built from a path
// (make_write_template keeps the template; the masks of the four layouts
// are constants, Layout::kMask).
struct TemplateBytes {
  RxTemplate tmpl;
  std::array<uint8_t, RxTemplate::kMaxBytes> mask{};

  // The `n` bytes at `at` must be `bytes`.
  constexpr void fixed(size_t at, const uint8_t* bytes, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      tmpl.expect[at + i] = bytes[i];
      mask[at + i] = 0xFF;
    }
  }
  constexpr void fixed_be16(size_t at, uint16_t v) {
    uint8_t b[2] = {};
    store_be16(b, v);
    fixed(at, b, 2);
  }
  // Bits of one byte that must equal `value` (the others vary per packet).
  constexpr void fixed_bits(size_t at, uint8_t bits, uint8_t value) {
    mask[at] = bits;
    tmpl.expect[at] = static_cast<uint8_t>(value & bits);
  }
};

constexpr TemplateBytes write_template_bytes(const PathSpec& path, uint32_t qpn,
                                             uint8_t opcode_base, uint16_t pkey) {
  TemplateBytes t;
  // Ethernet: MACs are not compared (parse() does not; a router rewrites
  // them). The EtherType, and with a tag its VID, fix the layout.
  size_t at = 12;
  if (path.vlan) {
    t.fixed_be16(at, kEtherTypeVlan);
    t.fixed_bits(at + 2, 0x0F, static_cast<uint8_t>(path.vlan_id >> 8));  // PCP, DEI vary
    t.fixed_bits(at + 3, 0xFF, static_cast<uint8_t>(path.vlan_id));
    at += kVlanTagSize;
  }
  const bool v6 = path.src_ip.v6;
  t.fixed_be16(at, v6 ? kEtherTypeIpv6 : kEtherTypeIpv4);
  at += 2;
  t.tmpl.l3_offset = static_cast<uint8_t>(at);
  t.tmpl.ipv6 = v6;
  // IP: the peer's address as source, ours as destination, UDP; lengths,
  // TOS/traffic class, TTL, ID and the checksum vary (checked in match).
  if (v6) {
    t.fixed_bits(at, 0xF0, 0x60);
    t.fixed_bits(at + 6, 0xFF, kIpProtoUdp);
    t.fixed(at + 8, path.dst_ip.bytes, 16);
    t.fixed(at + 24, path.src_ip.bytes, 16);
    at += kIpv6Size;
  } else {
    t.fixed_bits(at, 0xFF, 0x45);  // version 4, no options
    // Flags and fragment offset: DF and the reserved bit may be anything,
    // MF and the offset must be zero (RoCEv2 is never fragmented).
    t.fixed_bits(at + 6, 0x3F, 0);
    t.fixed_bits(at + 7, 0xFF, 0);
    t.fixed_bits(at + 9, 0xFF, kIpProtoUdp);
    t.fixed(at + 12, path.dst_ip.bytes, 4);
    t.fixed(at + 16, path.src_ip.bytes, 4);
    at += kIpv4Size;
  }
  // UDP: any source port (the peer's entropy), RoCEv2's destination port.
  t.fixed_be16(at + 2, kRoceV2Port);
  at += kUdpSize;
  // BTH (IBA 9.2): the opcode's transport bits (the operation, one of four,
  // is checked in match), pad count 0 and TVer 0 (SE and M vary), P_Key,
  // destination QP. FECN/BECN and the reserved bits, AckReq and the PSN vary.
  t.tmpl.bth_offset = static_cast<uint8_t>(at);
  t.fixed_bits(at, 0xE0, opcode_base);
  t.tmpl.write_only = static_cast<uint8_t>(opcode_base | IBV_OPCODE_RDMA_WRITE_ONLY);
  t.fixed_bits(at + 1, 0x3F, 0);
  t.fixed_be16(at + 2, pkey);
  uint8_t q[3] = {};
  store_be24(q, qpn);
  t.fixed(at + 5, q, 3);
  t.tmpl.words = static_cast<uint8_t>((at + kBthSize + 7) / 8);
  return t;
}

}  // namespace detail

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

namespace detail {

// The masked compare of the first L::kCompared bytes: 64 (every IPv4
// layout) or 80 (IPv6), straight through, since a loop over the exact
// word count cost as much as the rest of the match. Bytes past the
// template are masked out; the caller has checked the frame is longer
// than the compare reads.
template <class L>
[[gnu::always_inline]] inline bool headers_equal(const RxTemplate& t, const uint8_t* f) {
  constexpr size_t kBytes = L::kCompared;
  static_assert(kBytes == 64 || kBytes == 80);
  const uint8_t* m = L::kMask.bytes.data();
#if defined(__SSE2__)
  const auto chunk = [&](size_t at) {
    const __m128i have = _mm_loadu_si128(reinterpret_cast<const __m128i*>(f + at));
    const __m128i want = _mm_load_si128(reinterpret_cast<const __m128i*>(t.expect + at));
    const __m128i mask = _mm_load_si128(reinterpret_cast<const __m128i*>(m + at));
    return _mm_and_si128(_mm_xor_si128(have, want), mask);
  };
  __m128i diff =
      _mm_or_si128(_mm_or_si128(chunk(0), chunk(16)), _mm_or_si128(chunk(32), chunk(48)));
  if constexpr (kBytes == 80) diff = _mm_or_si128(diff, chunk(64));
  return _mm_movemask_epi8(_mm_cmpeq_epi8(diff, _mm_setzero_si128())) == 0xFFFF;
#else
  uint64_t diff = 0;
  for (size_t i = 0; i < kBytes / 8; ++i) {
    uint64_t have, want, mask;
    std::memcpy(&have, f + 8 * i, 8);
    std::memcpy(&want, t.expect + 8 * i, 8);
    std::memcpy(&mask, m + 8 * i, 8);
    diff |= (have ^ want) & mask;
  }
  return diff == 0;
#endif
}

// What the opcode table says of a WRITE opcode other than ONLY (one that
// predictable_opcode() let through): its position, a RETH or not (IBA
// 9.3.2). Out of line (rx_template.cc), so the WRITE ONLY path of the
// match keeps its few registers.
struct WriteShape {
  bool reth;
  Position position;
};
WriteShape write_shape(uint8_t opcode);

// The fields of a WRITE packet that are its own, from its BTH at `bth`:
// the PSN and AckReq, and with a RETH (FIRST, ONLY) the RETH's; 0 without.
[[gnu::always_inline]] inline void read_own_fields(const uint8_t* bth, bool reth,
                                                   PredictedWrite& out) {
  const uint32_t ack_req_psn = load_be32(bth + 8);  // AckReq, 7 reserved bits, PSN
  out.psn = ack_req_psn & kPsnMask;
  out.ack_req = ack_req_psn >> 31;
  if (reth) {
    const auto* r = reinterpret_cast<const Reth*>(bth + kBthSize);
    out.va = r->va();
    out.rkey = r->rkey();
    out.dma_length = r->dma_length();
  } else {
    out.va = 0;
    out.rkey = 0;
    out.dma_length = 0;
  }
}

// A template's layout as compile-time constants (a template has one of
// four: IPv4 without options or IPv6, with or without one VLAN tag), so
// the match of a run of frames folds every offset into its addressing.
template <bool kIpv6, bool kVlan>
struct Layout {
  static constexpr size_t kL3 = kEthSize + (kVlan ? kVlanTagSize : 0);
  static constexpr size_t kBth = kL3 + (kIpv6 ? kIpv6Size : kIpv4Size) + kUdpSize;
  static constexpr size_t kCompared = kIpv6 ? 80 : 64;  // bytes headers_equal reads
  static constexpr size_t kThroughDestQp = kBth + 8;   // the template's bytes end there
  static_assert(kBth + kBthSize <= kCompared);
  // The mask of every template of this layout: the bits that are fixed
  // depend on the layout, not on the path's values.
  static constexpr PathSpec kPath = [] {
    PathSpec p;
    p.vlan = kVlan;
    p.src_ip.v6 = p.dst_ip.v6 = kIpv6;
    return p;
  }();
  struct Mask {
    alignas(16) std::array<uint8_t, RxTemplate::kMaxBytes> bytes;
  };
  static constexpr Mask kMask{write_template_bytes(kPath, 0, 0, 0).mask};
};

// rx_template_match for a template of layout L (t.l3_offset == L::kL3,
// t.ipv6 == L's).
template <class L>
[[gnu::always_inline]] inline bool match(const RxTemplate& t, std::span<const uint8_t> f,
                                         PredictedWrite& out) {
  if (f.size() < L::kCompared) return false;
  // The operation must be an RDMA WRITE without immediate (the transport is
  // compared with the headers). WRITE ONLY, the bulk at small sizes where
  // every instruction shows, is known by one compare; ACKs, READ responses
  // and SENDs leave at the opcode filter before the compare; the other
  // WRITEs ask the table. predictable_opcode() is exactly the RC and UC
  // WRITEs without immediate (those with one consume a receive WQE: the
  // general path); its test checks it against the opcode table.
  const uint8_t* bth = f.data() + L::kBth;
  WriteShape shape{true, Position::kOnly};
  if (bth[0] != t.write_only) {
    if (!predictable_opcode(bth[0])) return false;
    shape = write_shape(bth[0]);
  }
  if (!headers_equal<L>(t, f.data())) return false;
  const size_t payload_off = L::kBth + kBthSize + (shape.reth ? kRethSize : 0);
  const uint8_t* l3 = f.data() + L::kL3;
  size_t l3_end;
  if constexpr (L::kCompared == 80) {
    // A CE mark (RFC 3168) needs a CNP: the general path sends it.
    if (((load_be16(l3) >> 4) & 3) == static_cast<uint8_t>(Ecn::kCe)) return false;
    l3_end = L::kL3 + kIpv6Size + load_be16(l3 + 4);
  } else {
    if ((l3[1] & 3) == static_cast<uint8_t>(Ecn::kCe)) return false;
    if (ipv4_checksum(l3, kIpv4Size) != 0) return false;
    l3_end = L::kL3 + load_be16(l3 + 2);
  }
  // The datagram must fit the frame (anything after it is Ethernet
  // padding), hold the headers and ICRC, and agree with the UDP length.
  if (l3_end > f.size() || l3_end < payload_off + kIcrcSize) return false;
  constexpr size_t kL4 = L::kBth - kUdpSize;
  if (load_be16(f.data() + kL4 + 4) != l3_end - kL4) return false;
  // Pad count 0 (the template): the payload is whole 4-byte words (IBA 9.2.5).
  const size_t len = l3_end - kIcrcSize - payload_off;
  if (len % 4 != 0) return false;
  out.position = shape.position;
  read_own_fields(bth, shape.reth, out);
  out.payload = f.data() + payload_off;
  out.payload_length = static_cast<uint32_t>(len);
  out.frame_length = static_cast<uint32_t>(l3_end);
  return true;
}

// The ICRC check of a frame match<L> accepted (icrc_check_many).
template <class L>
[[gnu::always_inline]] inline IcrcCheck icrc_check(std::span<const uint8_t> frame,
                                                   const PredictedWrite& w) {
  const size_t icrc_at = w.frame_length - kIcrcSize;
  return {frame.data() + L::kL3, static_cast<uint32_t>(icrc_at - L::kL3), L::kCompared == 80,
          load_le32(frame.data() + icrc_at)};
}

// Calls f(Layout<...>{}) for the template's layout.
template <class F>
[[gnu::always_inline]] inline decltype(auto) with_layout(const RxTemplate& t, F&& f) {
  const bool vlan = t.l3_offset != kEthSize;
  if (t.ipv6) return vlan ? f(Layout<true, true>{}) : f(Layout<true, false>{});
  return vlan ? f(Layout<false, true>{}) : f(Layout<false, false>{});
}

}  // namespace detail

// True when `frame` is an RDMA WRITE (ONLY, FIRST, MIDDLE or LAST, no
// immediate) the template describes, with consistent lengths, a good IPv4
// header checksum and no CE mark; fills `out`. Whether the opcode fits the
// QP's message in progress is the QP's to say (try_predicted_writes). Reads
// only bytes inside `frame`.
inline bool rx_template_match(const RxTemplate& t, std::span<const uint8_t> f,
                              PredictedWrite& out) {
  if (t.words == 0) return false;
  return detail::with_layout(t, [&](auto layout) {
    return detail::match<decltype(layout)>(t, f, out);
  });
}

// The ICRC check of a frame rx_template_match accepted (icrc_check_many).
inline IcrcCheck icrc_check(const RxTemplate& t, std::span<const uint8_t> frame,
                            const PredictedWrite& w) {
  const size_t icrc_at = w.frame_length - kIcrcSize;
  return {frame.data() + t.l3_offset, static_cast<uint32_t>(icrc_at - t.l3_offset), t.ipv6,
          load_le32(frame.data() + icrc_at)};
}

// rx_template_match and icrc_check over `frames` from the first, as long
// as they match: out[j] and checks[j] for each; returns how many matched.
// The receive path's loop for a run of one QP's frames: the template's
// layout is fixed once for the run and its bytes copied where the stores
// to out and checks cannot alias them.
size_t rx_template_match_run(const RxTemplate& t, std::span<const std::span<const uint8_t>> frames,
                             PredictedWrite* out, IcrcCheck* checks);

namespace detail {
// rx_template_match_run without AVX-512, which rx_template_match_run
// takes where the CPU has AVX-512BW (declared for the tests, to run both).
size_t match_run_portable(const RxTemplate& t, std::span<const std::span<const uint8_t>> frames,
                          PredictedWrite* out, IcrcCheck* checks);
}  // namespace detail

}  // namespace droce::wire
