// Transmit-side packet construction. Headers are written with explicit
// big-endian stores; lengths and checksums are derived here so callers can
// not get them inconsistent.
#include "droce/wire/build.h"

#include <infiniband/opcode.h>

#include <cstring>

#include "droce/wire/icrc.h"

namespace droce::wire {

uint16_t udp_src_port_entropy(uint32_t src_qp, uint32_t dest_qp) {
  // A multiplicative hash of both QPNs, folded to 14 bits; distinct QP pairs
  // spread over ECMP paths like they do on NICs that hash the QP number.
  uint64_t h = (uint64_t{src_qp} << 24 | dest_qp) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return static_cast<uint16_t>(0xC000 | ((h >> 32) & 0x3FFF));
}

namespace {

size_t l2_size(const PathSpec& path) {
  return kEthSize + (path.vlan ? kVlanTagSize : 0);
}
size_t l3_size(const PathSpec& path) {
  return path.src_ip.v6 ? kIpv6Size : kIpv4Size;
}
uint32_t padded_length(size_t payload_len) {
  return static_cast<uint32_t>((payload_len + 3) & ~size_t{3});
}

void write_l2(const PathSpec& path, uint8_t* p) {
  std::memcpy(p, path.dst_mac.data(), 6);
  std::memcpy(p + 6, path.src_mac.data(), 6);
  const uint16_t l3_type = path.src_ip.v6 ? kEtherTypeIpv6 : kEtherTypeIpv4;
  if (path.vlan) {
    store_be16(p + 12, kEtherTypeVlan);
    store_be16(p + 14, static_cast<uint16_t>((path.pcp & 7) << 13 |
                                             (path.vlan_id & 0x0FFF)));
    store_be16(p + 16, l3_type);
  } else {
    store_be16(p + 12, l3_type);
  }
}

void write_l3(const PathSpec& path, uint8_t* p, size_t l4_len) {
  const uint8_t tos =
      static_cast<uint8_t>((path.dscp & 0x3F) << 2 | static_cast<uint8_t>(path.ecn));
  if (path.src_ip.v6) {
    store_be32(p, 6u << 28 | uint32_t{tos} << 20 | (path.flow_label & 0xFFFFF));
    store_be16(p + 4, static_cast<uint16_t>(l4_len));
    p[6] = kIpProtoUdp;
    p[7] = path.ttl;
    std::memcpy(p + 8, path.src_ip.bytes, 16);
    std::memcpy(p + 24, path.dst_ip.bytes, 16);
    return;
  }
  p[0] = 0x45;
  p[1] = tos;
  store_be16(p + 2, static_cast<uint16_t>(kIpv4Size + l4_len));
  store_be16(p + 4, 0);       // identification: unused without fragmentation
  store_be16(p + 6, 0x4000);  // DF: RoCEv2 packets must not be fragmented
  p[8] = path.ttl;
  p[9] = kIpProtoUdp;
  store_be16(p + 10, 0);
  std::memcpy(p + 12, path.src_ip.bytes, 4);
  std::memcpy(p + 16, path.dst_ip.bytes, 4);
  store_be16(p + 10, ipv4_checksum(p, kIpv4Size));
}

void write_ext_headers(const OpcodeInfo& info, const TransportSpec& t,
                       uint8_t* ext) {
  if (int o = info.ext_offset(kExtDeth); o >= 0) {
    store_be32(ext + o, t.deth_qkey);
    ext[o + 4] = 0;
    store_be24(ext + o + 5, t.deth_src_qp);
  }
  if (int o = info.ext_offset(kExtReth); o >= 0) {
    store_be64(ext + o, t.reth_va);
    store_be32(ext + o + 8, t.reth_rkey);
    store_be32(ext + o + 12, t.reth_dma_length);
  }
  if (int o = info.ext_offset(kExtAtomicEth); o >= 0) {
    store_be64(ext + o, t.atomic_va);
    store_be32(ext + o + 8, t.atomic_rkey);
    store_be64(ext + o + 12, t.atomic_swap_add);
    store_be64(ext + o + 20, t.atomic_compare);
  }
  if (int o = info.ext_offset(kExtAeth); o >= 0) {
    ext[o] = t.aeth_syndrome;
    store_be24(ext + o + 1, t.aeth_msn);
  }
  if (int o = info.ext_offset(kExtAtomicAckEth); o >= 0)
    store_be64(ext + o, t.atomic_ack_original);
  if (int o = info.ext_offset(kExtImmDt); o >= 0) store_be32(ext + o, t.imm_data);
  if (int o = info.ext_offset(kExtIeth); o >= 0) store_be32(ext + o, t.ieth_rkey);
  if (int o = info.ext_offset(kExtCnpReserved); o >= 0)
    std::memset(ext + o, 0, kCnpReservedSize);
}

}  // namespace

size_t packet_size(const PathSpec& path, uint8_t opcode, size_t payload_len) {
  return l2_size(path) + l3_size(path) + kUdpSize + kBthSize +
         opcode_info(opcode).ext_length() + padded_length(payload_len) + kIcrcSize;
}

size_t payload_offset(const PathSpec& path, uint8_t opcode) {
  return l2_size(path) + l3_size(path) + kUdpSize + kBthSize + opcode_info(opcode).ext_length();
}

size_t build_packet(const PathSpec& path, const TransportSpec& t,
                    std::span<const uint8_t> payload, std::span<uint8_t> out) {
  const OpcodeInfo& info = opcode_info(t.opcode);
  if (!info.supported) return 0;
  if (!info.payload && !payload.empty()) return 0;
  // IBA 9.2.5: only the last (or only) packet of a message carries pad
  // bytes, so a first or middle packet must hold a multiple of 4 bytes.
  if (!info.is_last_or_only() && payload.size() % 4 != 0) return 0;
  if (path.src_ip.v6 != path.dst_ip.v6) return 0;
  const size_t total = packet_size(path, t.opcode, payload.size());
  const size_t l3_off = l2_size(path);
  // IPv4 total length and UDP length are 16-bit fields.
  if (total > out.size() || total - l3_off > 0xFFFF) return 0;

  uint8_t* p = out.data();
  const size_t l4_off = l3_off + l3_size(path);
  const size_t l4_len = total - l4_off;
  write_l2(path, p);
  write_l3(path, p + l3_off, l4_len);

  uint8_t* udp = p + l4_off;
  store_be16(udp, path.udp_src_port);
  store_be16(udp + 2, kRoceV2Port);
  store_be16(udp + 4, static_cast<uint16_t>(l4_len));
  // Zero: RoCEv2 NICs do not compute the UDP checksum (annex A17.4.3); the
  // ICRC protects the transport headers and payload.
  store_be16(udp + 6, 0);

  uint8_t* bth = udp + kUdpSize;
  const uint8_t pad = static_cast<uint8_t>(padded_length(payload.size()) - payload.size());
  bth[0] = t.opcode;
  bth[1] = static_cast<uint8_t>((t.solicited ? 0x80 : 0) | (t.mig_req ? 0x40 : 0) |
                                pad << 4);  // TVer = 0
  store_be16(bth + 2, t.pkey);
  bth[4] = static_cast<uint8_t>((t.fecn ? 0x80 : 0) | (t.becn ? 0x40 : 0));
  store_be24(bth + 5, t.dest_qp);
  bth[8] = t.ack_req ? 0x80 : 0;
  store_be24(bth + 9, t.psn);

  uint8_t* ext = bth + kBthSize;
  write_ext_headers(info, t, ext);
  uint8_t* pay = ext + info.ext_length();
  // A caller may have gathered the payload in place (payload_offset()).
  if (!payload.empty() && payload.data() != pay) std::memcpy(pay, payload.data(), payload.size());
  std::memset(pay + payload.size(), 0, pad);

  const size_t icrc_off = total - kIcrcSize;
  store_le32(p + icrc_off,
             icrc_compute(p + l3_off, icrc_off - l3_off, path.src_ip.v6));
  return total;
}

AckTemplate make_ack_template(const PathSpec& path, uint32_t dest_qp, uint16_t pkey) {
  AckTemplate t;
  TransportSpec ack;
  ack.opcode = static_cast<uint8_t>(IBV_OPCODE_RC_ACKNOWLEDGE);
  ack.dest_qp = dest_qp;
  ack.pkey = pkey;
  t.size = static_cast<uint8_t>(build_packet(path, ack, {}, t.bytes));
  t.l3_offset = static_cast<uint8_t>(l2_size(path));
  t.ipv6 = path.src_ip.v6;
  return t;
}

size_t build_ack(const AckTemplate& t, uint32_t psn, uint8_t syndrome, uint32_t msn,
                 std::span<uint8_t> out) {
  if (t.size == 0 || out.size() < t.size) return 0;
  uint8_t* p = out.data();
  std::memcpy(p, t.bytes.data(), t.size);
  const size_t icrc_at = t.size - kIcrcSize;
  uint8_t* aeth = p + icrc_at - kAethSize;
  store_be24(aeth - kBthSize + 9, psn);
  aeth[0] = syndrome;
  store_be24(aeth + 1, msn);
  store_le32(p + icrc_at, icrc_compute(p + t.l3_offset, icrc_at - t.l3_offset, t.ipv6));
  return t.size;
}

void refresh_checksums(std::span<uint8_t> frame, const ParsedPacket& parsed) {
  uint8_t* l3 = frame.data() + parsed.l3_offset;
  if (!parsed.ipv6()) {
    const size_t ihl = size_t{static_cast<uint8_t>(l3[0] & 0x0F)} * 4;
    store_be16(l3 + 10, 0);
    store_be16(l3 + 10, ipv4_checksum(l3, ihl));
  }
  const size_t icrc_off = parsed.frame_length - kIcrcSize;
  store_le32(frame.data() + icrc_off,
             icrc_compute(l3, icrc_off - parsed.l3_offset, parsed.ipv6()));
}

}  // namespace droce::wire
