#include "droce/wire/icmp.h"

#include <algorithm>

#include "droce/wire/build.h"
#include "droce/wire/bytes.h"
#include "droce/wire/checksum.h"

namespace droce::wire {

std::string_view to_string(IcmpError e) {
  switch (e) {
    case IcmpError::kOk: return "ok";
    case IcmpError::kNotIcmp: return "not_icmp";
    case IcmpError::kTruncated: return "truncated";
    case IcmpError::kBadIpHeader: return "bad_ip_header";
    case IcmpError::kFragment: return "fragment";
    case IcmpError::kBadChecksum: return "bad_checksum";
    case IcmpError::kOtherType: return "other_type";
    case IcmpError::kCount: break;
  }
  return "unknown";
}

IcmpError parse_icmp_echo(std::span<const uint8_t> frame, IcmpEcho& out) {
  uint16_t ether_type = 0;
  size_t off = 0;
  if (!read_l2(frame, out.l2, ether_type, off)) return IcmpError::kTruncated;
  if (ether_type != kEtherTypeIpv4) return IcmpError::kNotIcmp;
  if (frame.size() < off + kIpv4Size) return IcmpError::kTruncated;
  const uint8_t* ip = frame.data() + off;
  if (ip[9] != kIpProtoIcmp) return IcmpError::kNotIcmp;
  const size_t ihl = size_t{ip[0] & 0x0Fu} * 4;
  if (ip[0] >> 4 != 4 || ihl < kIpv4Size) return IcmpError::kBadIpHeader;
  const size_t total = load_be16(ip + 2);
  if (total < ihl || frame.size() < off + ihl) return IcmpError::kBadIpHeader;
  if (frame.size() < off + total) return IcmpError::kTruncated;
  if (ipv4_checksum(ip, ihl) != 0) return IcmpError::kBadIpHeader;
  // RFC 791: more-fragments set or a non-zero offset.
  if ((load_be16(ip + 6) & 0x3FFF) != 0) return IcmpError::kFragment;
  const uint8_t* icmp = ip + ihl;
  const size_t icmp_len = total - ihl;
  if (icmp_len < kIcmpEchoHeaderSize) return IcmpError::kTruncated;
  // RFC 792: the checksum covers the ICMP message, from its type on.
  if (checksum_fold(checksum_add(0, icmp, icmp_len)) != 0) return IcmpError::kBadChecksum;
  out.src_ip = load_be32(ip + 12);
  out.dst_ip = load_be32(ip + 16);
  // RFC 1122 3.2.1.3: a datagram whose source is a multicast (224/4) or the
  // limited broadcast address is discarded; an echo reply would go to it.
  if ((out.src_ip >> 28) == 0xE || out.src_ip == 0xFFFFFFFF) return IcmpError::kBadIpHeader;
  out.ttl = ip[8];
  out.type = icmp[0];
  if ((out.type != kIcmpEchoRequest && out.type != kIcmpEchoReply) || icmp[1] != 0)
    return IcmpError::kOtherType;
  out.identifier = load_be16(icmp + 4);
  out.sequence = load_be16(icmp + 6);
  out.data = {icmp + kIcmpEchoHeaderSize, icmp_len - kIcmpEchoHeaderSize};
  return IcmpError::kOk;
}

namespace {

size_t build_echo(const L2Header& l2, uint32_t src_ip, uint32_t dst_ip, uint8_t type,
                  uint16_t identifier, uint16_t sequence, std::span<const uint8_t> data,
                  std::span<uint8_t> out) {
  const size_t off = write_l2(l2, kEtherTypeIpv4, out);
  const size_t total = kIpv4Size + kIcmpEchoHeaderSize + data.size();
  if (off == 0 || total > 0xFFFF || out.size() < off + total) return 0;
  uint8_t* ip = out.data() + off;
  ip[0] = 0x45;
  ip[1] = 0;  // DSCP 0 (best effort), not ECN-capable
  store_be16(ip + 2, static_cast<uint16_t>(total));
  store_be16(ip + 4, 0);
  store_be16(ip + 6, 0x4000);  // don't fragment
  ip[8] = 64;                  // RFC 1700's recommended TTL, Linux's default
  ip[9] = kIpProtoIcmp;
  store_be16(ip + 10, 0);
  store_be32(ip + 12, src_ip);
  store_be32(ip + 16, dst_ip);
  store_be16(ip + 10, ipv4_checksum(ip, kIpv4Size));
  uint8_t* icmp = ip + kIpv4Size;
  icmp[0] = type;
  icmp[1] = 0;
  store_be16(icmp + 2, 0);
  store_be16(icmp + 4, identifier);
  store_be16(icmp + 6, sequence);
  std::copy(data.begin(), data.end(), icmp + kIcmpEchoHeaderSize);
  store_be16(icmp + 2,
             checksum_fold(checksum_add(0, icmp, kIcmpEchoHeaderSize + data.size())));
  return pad_frame(out, off + total);
}

}  // namespace

size_t build_icmp_echo_reply(const IcmpEcho& request, const MacAddress& our_mac,
                             std::span<uint8_t> out) {
  L2Header l2 = request.l2;
  l2.dst = request.l2.src;
  l2.src = our_mac;
  return build_echo(l2, request.dst_ip, request.src_ip, kIcmpEchoReply, request.identifier,
                    request.sequence, request.data, out);
}

size_t build_icmp_echo_request(const L2Header& l2, uint32_t src_ip, uint32_t dst_ip,
                               uint16_t identifier, uint16_t sequence,
                               std::span<const uint8_t> data, std::span<uint8_t> out) {
  return build_echo(l2, src_ip, dst_ip, kIcmpEchoRequest, identifier, sequence, data, out);
}

}  // namespace droce::wire
