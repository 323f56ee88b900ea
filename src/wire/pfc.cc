// PFC frame encoding and decoding (IEEE 802.1Qbb clause 36.1.3).
#include "droce/wire/pfc.h"

#include <cstring>

namespace droce::wire {

std::string_view to_string(PfcParseError e) {
  switch (e) {
    case PfcParseError::kOk: return "ok";
    case PfcParseError::kTruncated: return "truncated";
    case PfcParseError::kNotMacControl: return "not_mac_control";
    case PfcParseError::kNotPfc: return "not_pfc";
    case PfcParseError::kBadDestination: return "bad_destination";
    case PfcParseError::kReservedBits: return "reserved_bits";
  }
  return "unknown";
}

size_t build_pfc(const PfcFrame& frame, std::span<uint8_t> out) {
  if (out.size() < kPfcFrameSize) return 0;
  uint8_t* p = out.data();
  std::memcpy(p, kPfcDstMac.data(), 6);
  std::memcpy(p + 6, frame.src_mac.data(), 6);
  store_be16(p + 12, kEtherTypeMacControl);
  store_be16(p + 14, kMacControlOpcodePfc);
  // The vector is 16 bits; the upper octet is reserved and sent as zero.
  store_be16(p + 16, frame.enable);
  for (size_t i = 0; i < kPfcPriorities; ++i)
    store_be16(p + 18 + 2 * i, frame.quanta[i]);
  std::memset(p + kPfcPayloadEnd, 0, kPfcFrameSize - kPfcPayloadEnd);
  return kPfcFrameSize;
}

bool is_pfc(std::span<const uint8_t> frame) {
  return frame.size() >= 16 && load_be16(frame.data() + 12) == kEtherTypeMacControl &&
         load_be16(frame.data() + 14) == kMacControlOpcodePfc;
}

PfcParseError parse_pfc(std::span<const uint8_t> frame, PfcFrame& out) {
  out = PfcFrame{};
  if (frame.size() < kEthSize) return PfcParseError::kTruncated;
  const uint8_t* p = frame.data();
  if (load_be16(p + 12) != kEtherTypeMacControl) return PfcParseError::kNotMacControl;
  if (frame.size() < kPfcPayloadEnd) return PfcParseError::kTruncated;
  if (load_be16(p + 14) != kMacControlOpcodePfc) return PfcParseError::kNotPfc;
  if (std::memcmp(p, kPfcDstMac.data(), 6) != 0) return PfcParseError::kBadDestination;
  if (p[16] != 0) return PfcParseError::kReservedBits;
  std::memcpy(out.src_mac.data(), p + 6, 6);
  out.enable = p[17];
  for (size_t i = 0; i < kPfcPriorities; ++i)
    out.quanta[i] = load_be16(p + 18 + 2 * i);
  return PfcParseError::kOk;
}

}  // namespace droce::wire
