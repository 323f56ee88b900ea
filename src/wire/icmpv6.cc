#include "droce/wire/icmpv6.h"

#include <algorithm>

#include "droce/wire/bytes.h"
#include "droce/wire/checksum.h"

namespace droce::wire {

namespace {

constexpr size_t kNdMessageSize = 24;  // type .. target address (RFC 4861 4.3, 4.4)
constexpr size_t kNdLinkLayerOptionSize = 8;

IpAddress v6_from(const uint8_t* p) {
  IpAddress a;
  a.v6 = true;
  std::copy_n(p, 16, a.bytes);
  return a;
}

// The upper-layer checksum over the IPv6 pseudo-header (RFC 8200 8.1) and
// the message.
uint16_t icmpv6_checksum(const uint8_t* src, const uint8_t* dst, const uint8_t* msg,
                         size_t len) {
  uint64_t sum = checksum_add(0, src, 16);
  sum = checksum_add(sum, dst, 16);
  sum += len >> 16;
  sum += len & 0xFFFF;
  sum += kIpProtoIcmpv6;
  return checksum_fold(checksum_add(sum, msg, len));
}

// RFC 4861 7.1.1 / 7.1.2 and the options of 4.6: the checks both messages
// share. Fills the link-layer option of the given type.
Icmpv6Error parse_nd(const uint8_t* msg, size_t len, uint8_t option_type, Icmpv6Message& out) {
  if (out.hop_limit != kNdHopLimit || out.code != 0 || len < kNdMessageSize)
    return Icmpv6Error::kBadNd;
  out.target = v6_from(msg + 8);
  if (is_ipv6_multicast(out.target)) return Icmpv6Error::kBadNd;
  for (size_t o = kNdMessageSize; o < len;) {
    if (len - o < 2) return Icmpv6Error::kBadNd;
    const size_t opt_len = size_t{msg[o + 1]} * 8;
    if (opt_len == 0 || opt_len > len - o) return Icmpv6Error::kBadNd;
    // Ethernet's link-layer option is 8 bytes (RFC 2464 section 6).
    if (msg[o] == option_type && opt_len == kNdLinkLayerOptionSize) {
      out.has_link_layer = true;
      std::copy_n(msg + o + 2, 6, out.link_layer.begin());
    }
    o += opt_len;
  }
  return Icmpv6Error::kOk;
}

}  // namespace

std::string_view to_string(Icmpv6Error e) {
  switch (e) {
    case Icmpv6Error::kOk: return "ok";
    case Icmpv6Error::kNotIcmpv6: return "not_icmpv6";
    case Icmpv6Error::kTruncated: return "truncated";
    case Icmpv6Error::kBadIpHeader: return "bad_ip_header";
    case Icmpv6Error::kBadChecksum: return "bad_checksum";
    case Icmpv6Error::kBadNd: return "bad_nd";
    case Icmpv6Error::kOtherType: return "other_type";
    case Icmpv6Error::kCount: break;
  }
  return "unknown";
}

bool is_ipv6_multicast(const IpAddress& a) { return a.v6 && a.bytes[0] == 0xFF; }

bool is_ipv6_unspecified(const IpAddress& a) {
  return a.v6 && std::all_of(a.bytes, a.bytes + 16, [](uint8_t b) { return b == 0; });
}

bool is_ipv6_link_local(const IpAddress& a) {
  return a.v6 && a.bytes[0] == 0xFE && (a.bytes[1] & 0xC0) == 0x80;
}

IpAddress solicited_node_address(const IpAddress& a) {
  IpAddress s;
  s.v6 = true;
  s.bytes[0] = 0xFF;
  s.bytes[1] = 0x02;
  s.bytes[11] = 0x01;
  s.bytes[12] = 0xFF;
  std::copy_n(a.bytes + 13, 3, s.bytes + 13);
  return s;
}

MacAddress ipv6_multicast_mac(const IpAddress& group) {
  return {0x33, 0x33, group.bytes[12], group.bytes[13], group.bytes[14], group.bytes[15]};
}

IpAddress link_local_address(const MacAddress& mac) {
  IpAddress a;
  a.v6 = true;
  a.bytes[0] = 0xFE;
  a.bytes[1] = 0x80;
  a.bytes[8] = mac[0] ^ 0x02;  // the universal/local bit inverted
  a.bytes[9] = mac[1];
  a.bytes[10] = mac[2];
  a.bytes[11] = 0xFF;
  a.bytes[12] = 0xFE;
  a.bytes[13] = mac[3];
  a.bytes[14] = mac[4];
  a.bytes[15] = mac[5];
  return a;
}

IpAddress all_nodes_address() {
  IpAddress a;
  a.v6 = true;
  a.bytes[0] = 0xFF;
  a.bytes[1] = 0x02;
  a.bytes[15] = 0x01;
  return a;
}

Icmpv6Error parse_icmpv6(std::span<const uint8_t> frame, Icmpv6Message& out) {
  uint16_t ether_type = 0;
  size_t off = 0;
  if (!read_l2(frame, out.l2, ether_type, off)) return Icmpv6Error::kTruncated;
  if (ether_type != kEtherTypeIpv6) return Icmpv6Error::kNotIcmpv6;
  if (frame.size() < off + kIpv6Size) return Icmpv6Error::kTruncated;
  const uint8_t* ip = frame.data() + off;
  if (ip[6] != kIpProtoIcmpv6) return Icmpv6Error::kNotIcmpv6;
  if (ip[0] >> 4 != 6) return Icmpv6Error::kBadIpHeader;
  const size_t len = load_be16(ip + 4);
  if (frame.size() < off + kIpv6Size + len) return Icmpv6Error::kTruncated;
  if (len < 4) return Icmpv6Error::kTruncated;
  const uint8_t* msg = ip + kIpv6Size;
  if (icmpv6_checksum(ip + 8, ip + 24, msg, len) != 0) return Icmpv6Error::kBadChecksum;
  out.src_ip = v6_from(ip + 8);
  out.dst_ip = v6_from(ip + 24);
  // RFC 4291 2.7: a multicast address is never a source. An answer to one
  // (an echo reply, a solicited advertisement) would go to a group.
  if (is_ipv6_multicast(out.src_ip)) return Icmpv6Error::kBadIpHeader;
  out.hop_limit = ip[7];
  out.type = msg[0];
  out.code = msg[1];
  out.has_link_layer = false;
  switch (out.type) {
    case kIcmpv6EchoRequest:
    case kIcmpv6EchoReply:
      if (len < 8) return Icmpv6Error::kTruncated;
      out.identifier = load_be16(msg + 4);
      out.sequence = load_be16(msg + 6);
      out.data = {msg + 8, len - 8};
      return Icmpv6Error::kOk;
    case kIcmpv6NeighbourSolicitation: {
      const Icmpv6Error e = parse_nd(msg, len, kNdOptSourceLinkLayer, out);
      if (e != Icmpv6Error::kOk) return e;
      // RFC 4861 7.1.1: from the unspecified address (duplicate address
      // detection) only to a solicited-node group and without a source
      // link-layer option.
      if (is_ipv6_unspecified(out.src_ip) &&
          (out.has_link_layer || out.dst_ip != solicited_node_address(out.dst_ip) ||
           out.dst_ip.bytes[12] != 0xFF))
        return Icmpv6Error::kBadNd;
      return Icmpv6Error::kOk;
    }
    case kIcmpv6NeighbourAdvertisement: {
      const Icmpv6Error e = parse_nd(msg, len, kNdOptTargetLinkLayer, out);
      if (e != Icmpv6Error::kOk) return e;
      out.router = msg[4] & 0x80;
      out.solicited = msg[4] & 0x40;
      out.override_flag = msg[4] & 0x20;
      // RFC 4861 7.1.2: to a multicast address, Solicited must be zero.
      if (is_ipv6_multicast(out.dst_ip) && out.solicited) return Icmpv6Error::kBadNd;
      return Icmpv6Error::kOk;
    }
    default:
      return Icmpv6Error::kOtherType;
  }
}

namespace {

// Writes L2, the IPv6 header and `msg_len` bytes of message that `fill`
// writes, then the checksum; returns the padded frame length or 0.
template <class Fill>
size_t build_icmpv6(const L2Header& l2, const IpAddress& src, const IpAddress& dst,
                    uint8_t hop_limit, size_t msg_len, std::span<uint8_t> out, Fill&& fill) {
  const size_t off = write_l2(l2, kEtherTypeIpv6, out);
  if (off == 0 || msg_len > 0xFFFF || out.size() < off + kIpv6Size + msg_len) return 0;
  uint8_t* ip = out.data() + off;
  store_be32(ip, 0x60000000);  // version 6, traffic class 0, no flow label
  store_be16(ip + 4, static_cast<uint16_t>(msg_len));
  ip[6] = kIpProtoIcmpv6;
  ip[7] = hop_limit;
  std::copy_n(src.bytes, 16, ip + 8);
  std::copy_n(dst.bytes, 16, ip + 24);
  uint8_t* msg = ip + kIpv6Size;
  std::fill_n(msg, msg_len, 0);
  fill(msg);
  store_be16(msg + 2, icmpv6_checksum(ip + 8, ip + 24, msg, msg_len));
  return pad_frame(out, off + kIpv6Size + msg_len);
}

constexpr size_t kNdWithOptionSize = kNdMessageSize + kNdLinkLayerOptionSize;

void write_nd(uint8_t* msg, uint8_t type, const IpAddress& target, uint8_t option,
              const MacAddress& mac) {
  msg[0] = type;
  std::copy_n(target.bytes, 16, msg + 8);
  msg[kNdMessageSize] = option;
  msg[kNdMessageSize + 1] = 1;  // length in units of 8 bytes
  std::copy(mac.begin(), mac.end(), msg + kNdMessageSize + 2);
}

}  // namespace

size_t build_neighbour_solicitation(const L2Header& l2, const IpAddress& src,
                                    const IpAddress& dst, const IpAddress& target,
                                    std::span<uint8_t> out) {
  return build_icmpv6(l2, src, dst, kNdHopLimit, kNdWithOptionSize, out, [&](uint8_t* msg) {
    write_nd(msg, kIcmpv6NeighbourSolicitation, target, kNdOptSourceLinkLayer, l2.src);
  });
}

size_t build_neighbour_advertisement(const L2Header& l2, const IpAddress& src,
                                     const IpAddress& dst, const IpAddress& target,
                                     bool solicited, bool override_flag,
                                     std::span<uint8_t> out) {
  return build_icmpv6(l2, src, dst, kNdHopLimit, kNdWithOptionSize, out, [&](uint8_t* msg) {
    write_nd(msg, kIcmpv6NeighbourAdvertisement, target, kNdOptTargetLinkLayer, l2.src);
    msg[4] = static_cast<uint8_t>((solicited ? 0x40 : 0) | (override_flag ? 0x20 : 0));
  });
}

namespace {
size_t build_echo6(const L2Header& l2, const IpAddress& src, const IpAddress& dst, uint8_t type,
                   uint16_t identifier, uint16_t sequence, std::span<const uint8_t> data,
                   std::span<uint8_t> out) {
  return build_icmpv6(l2, src, dst, 64, 8 + data.size(), out, [&](uint8_t* msg) {
    msg[0] = type;
    store_be16(msg + 4, identifier);
    store_be16(msg + 6, sequence);
    std::copy(data.begin(), data.end(), msg + 8);
  });
}
}  // namespace

size_t build_icmpv6_echo_reply(const Icmpv6Message& request, const MacAddress& our_mac,
                               const IpAddress& our_ip, std::span<uint8_t> out) {
  L2Header l2 = request.l2;
  l2.dst = request.l2.src;
  l2.src = our_mac;
  return build_echo6(l2, our_ip, request.src_ip, kIcmpv6EchoReply, request.identifier,
                     request.sequence, request.data, out);
}

size_t build_icmpv6_echo_request(const L2Header& l2, const IpAddress& src, const IpAddress& dst,
                                 uint16_t identifier, uint16_t sequence,
                                 std::span<const uint8_t> data, std::span<uint8_t> out) {
  return build_echo6(l2, src, dst, kIcmpv6EchoRequest, identifier, sequence, data, out);
}

}  // namespace droce::wire
