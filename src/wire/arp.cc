#include "droce/wire/arp.h"

#include <algorithm>

#include "droce/wire/bytes.h"

namespace droce::wire {

namespace {
constexpr uint16_t kHardwareEthernet = 1;  // RFC 826 ar$hrd, IANA hardware type 1
}  // namespace

std::string_view to_string(ArpError e) {
  switch (e) {
    case ArpError::kOk: return "ok";
    case ArpError::kNotArp: return "not_arp";
    case ArpError::kTruncated: return "truncated";
    case ArpError::kUnsupported: return "unsupported";
    case ArpError::kBadOp: return "bad_op";
    case ArpError::kCount: break;
  }
  return "unknown";
}

ArpError parse_arp(std::span<const uint8_t> frame, L2Header& l2, ArpPacket& out) {
  uint16_t ether_type = 0;
  size_t off = 0;
  if (!read_l2(frame, l2, ether_type, off)) return ArpError::kTruncated;
  if (ether_type != kEtherTypeArp) return ArpError::kNotArp;
  if (frame.size() < off + kArpSize) return ArpError::kTruncated;
  const uint8_t* p = frame.data() + off;
  // RFC 826 "Packet Reception": ar$hrd, ar$pro and the lengths must be
  // ones we speak, else the packet is discarded.
  if (load_be16(p) != kHardwareEthernet || load_be16(p + 2) != kEtherTypeIpv4 || p[4] != 6 ||
      p[5] != 4)
    return ArpError::kUnsupported;
  const uint16_t op = load_be16(p + 6);
  if (op != static_cast<uint16_t>(ArpOp::kRequest) && op != static_cast<uint16_t>(ArpOp::kReply))
    return ArpError::kBadOp;
  out.op = static_cast<ArpOp>(op);
  std::copy_n(p + 8, 6, out.sender_mac.begin());
  out.sender_ip = load_be32(p + 14);
  std::copy_n(p + 18, 6, out.target_mac.begin());
  out.target_ip = load_be32(p + 24);
  return ArpError::kOk;
}

size_t build_arp(const L2Header& l2, const ArpPacket& arp, std::span<uint8_t> out) {
  const size_t off = write_l2(l2, kEtherTypeArp, out);
  if (off == 0 || out.size() < off + kArpSize) return 0;
  uint8_t* p = out.data() + off;
  store_be16(p, kHardwareEthernet);
  store_be16(p + 2, kEtherTypeIpv4);
  p[4] = 6;
  p[5] = 4;
  store_be16(p + 6, static_cast<uint16_t>(arp.op));
  std::copy(arp.sender_mac.begin(), arp.sender_mac.end(), p + 8);
  store_be32(p + 14, arp.sender_ip);
  std::copy(arp.target_mac.begin(), arp.target_mac.end(), p + 18);
  store_be32(p + 24, arp.target_ip);
  return pad_frame(out, off + kArpSize);
}

}  // namespace droce::wire
