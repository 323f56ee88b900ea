// Ingress header walk and CE marking.
#include "droce/fabric/packet.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace droce::fabric {

using namespace droce::wire;

bool classify_frame(std::span<const uint8_t> frame, FrameInfo& out) {
  out = FrameInfo{};
  const uint8_t* f = frame.data();
  const size_t len = frame.size();
  if (len < kEthSize) return false;
  out.ether_type = load_be16(f + 12);
  size_t l3 = kEthSize;
  if (out.ether_type == kEtherTypeVlan) {
    if (len < kEthSize + kVlanTagSize) return false;
    out.vlan = true;
    out.pcp = f[14] >> 5;
    out.ether_type = load_be16(f + 16);
    l3 += kVlanTagSize;
  }
  out.l3_offset = static_cast<uint16_t>(l3);
  size_t l4 = 0;
  if (out.ether_type == kEtherTypeIpv4) {
    if (len < l3 + kIpv4Size) return false;
    const uint8_t* ip = f + l3;
    out.ip_version = 4;
    out.dscp = ip[1] >> 2;
    out.ecn = static_cast<Ecn>(ip[1] & 3);
    out.protocol = ip[9];
    std::memcpy(out.src_ip, ip + 12, 4);
    std::memcpy(out.dst_ip, ip + 16, 4);
    l4 = l3 + size_t{static_cast<uint8_t>(ip[0] & 0x0F)} * 4;
  } else if (out.ether_type == kEtherTypeIpv6) {
    if (len < l3 + kIpv6Size) return false;
    const uint8_t* ip = f + l3;
    out.ip_version = 6;
    const uint8_t tclass = static_cast<uint8_t>((load_be16(ip) >> 4) & 0xFF);
    out.dscp = tclass >> 2;
    out.ecn = static_cast<Ecn>(tclass & 3);
    out.protocol = ip[6];
    std::memcpy(out.src_ip, ip + 8, 16);
    std::memcpy(out.dst_ip, ip + 24, 16);
    l4 = l3 + kIpv6Size;
  } else {
    return true;  // not IP: L2 fields only
  }
  if (out.protocol == kIpProtoUdp && len >= l4 + kUdpSize) {
    out.has_ports = true;
    out.src_port = load_be16(f + l4);
    out.dst_port = load_be16(f + l4 + 2);
  }
  return true;
}

MarkResult mark_ce(std::span<uint8_t> frame, uint16_t l3_offset, uint8_t ip_version) {
  uint8_t* ip = frame.data() + l3_offset;
  if (ip_version == 4) {
    if (frame.size() < size_t{l3_offset} + kIpv4Size) return MarkResult::kNotIp;
    const uint8_t ecn = ip[1] & 3;
    if (ecn == static_cast<uint8_t>(Ecn::kCe)) return MarkResult::kAlreadyCe;
    if (ecn == static_cast<uint8_t>(Ecn::kNotEct)) return MarkResult::kNotEct;
    // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') over the 16-bit word holding
    // the TOS byte; one's-complement arithmetic, carries folded back in.
    const uint16_t old_word = load_be16(ip);
    ip[1] |= 3;
    const uint16_t new_word = load_be16(ip);
    uint32_t sum = uint32_t{static_cast<uint16_t>(~load_be16(ip + 10))} +
                   static_cast<uint16_t>(~old_word) + new_word;
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    store_be16(ip + 10, static_cast<uint16_t>(~sum));
    return MarkResult::kMarked;
  }
  if (ip_version == 6) {
    if (frame.size() < size_t{l3_offset} + kIpv6Size) return MarkResult::kNotIp;
    // Traffic class straddles bytes 0 and 1; ECN is bits 4..5 of byte 1.
    const uint8_t ecn = (ip[1] >> 4) & 3;
    if (ecn == static_cast<uint8_t>(Ecn::kCe)) return MarkResult::kAlreadyCe;
    if (ecn == static_cast<uint8_t>(Ecn::kNotEct)) return MarkResult::kNotEct;
    ip[1] |= 0x30;
    return MarkResult::kMarked;
  }
  return MarkResult::kNotIp;
}

void elide(std::span<const uint8_t> frame, wire::UnheldPayload unheld, Packet& out) {
  const auto [first, last] = wire::unheld_range(frame.size(), unheld);
  out.unheld = unheld;
  out.elided = static_cast<uint16_t>(last - first);
  out.bytes.resize(frame.size() - out.elided);
  std::memcpy(out.bytes.data(), frame.data(), first);
  std::memcpy(out.bytes.data() + first, frame.data() + last, frame.size() - last);
}

std::span<const uint8_t> restore(const Packet& p, std::span<uint8_t> room) {
  const size_t len = p.size();
  if (room.size() < len)
    throw std::length_error("fabric::restore: room for " + std::to_string(len) + " bytes needed");
  const auto [first, last] = p.unheld_range();
  const size_t split = p.elided ? first : len;  // held bytes before the gap
  std::memcpy(room.data(), p.bytes.data(), split);
  std::memcpy(room.data() + last, p.bytes.data() + split, p.bytes.size() - split);
  return room.first(len);
}

}  // namespace droce::fabric
