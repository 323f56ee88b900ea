#include "droce/wire/ethernet.h"

#include <algorithm>

#include "droce/wire/bytes.h"

namespace droce::wire {

bool read_l2(std::span<const uint8_t> frame, L2Header& l2, uint16_t& ether_type,
             size_t& offset) {
  if (frame.size() < kEthSize) return false;
  const uint8_t* p = frame.data();
  std::copy_n(p, 6, l2.dst.begin());
  std::copy_n(p + 6, 6, l2.src.begin());
  ether_type = load_be16(p + 12);
  offset = kEthSize;
  l2.vlan = false;
  l2.vlan_id = 0;
  l2.pcp = 0;
  if (ether_type == kEtherTypeVlan) {
    if (frame.size() < kEthSize + kVlanTagSize) return false;
    const uint16_t tci = load_be16(p + kEthSize);
    l2.vlan = true;
    l2.pcp = static_cast<uint8_t>(tci >> 13);
    l2.vlan_id = tci & 0x0FFF;
    ether_type = load_be16(p + kEthSize + 2);
    offset += kVlanTagSize;
  }
  return true;
}

size_t write_l2(const L2Header& l2, uint16_t ether_type, std::span<uint8_t> out) {
  const size_t n = kEthSize + (l2.vlan ? kVlanTagSize : 0);
  if (out.size() < n) return 0;
  uint8_t* p = out.data();
  std::copy(l2.dst.begin(), l2.dst.end(), p);
  std::copy(l2.src.begin(), l2.src.end(), p + 6);
  if (l2.vlan) {
    store_be16(p + 12, kEtherTypeVlan);
    store_be16(p + 14, static_cast<uint16_t>((l2.pcp & 7) << 13 | (l2.vlan_id & 0x0FFF)));
    store_be16(p + 16, ether_type);
  } else {
    store_be16(p + 12, ether_type);
  }
  return n;
}

size_t pad_frame(std::span<uint8_t> out, size_t len) {
  if (len >= kMinFrameSize) return len;
  if (out.size() < kMinFrameSize) return 0;
  std::fill(out.begin() + static_cast<std::ptrdiff_t>(len),
            out.begin() + static_cast<std::ptrdiff_t>(kMinFrameSize), 0);
  return kMinFrameSize;
}

}  // namespace droce::wire
