// Per-packet and per-flowlet UDP source ports (see entropy.h).
#include "droce/transport/entropy.h"

namespace droce::transport {

std::string_view to_string(EntropyMode m) {
  switch (m) {
    case EntropyMode::kFixed: return "fixed";
    case EntropyMode::kSpray: return "spray";
    case EntropyMode::kFlowlet: return "flowlet";
  }
  return "?";
}

uint16_t entropy_port(uint16_t base, uint32_t index) {
  if (index == 0) return base;
  // An odd stride is a bijection on the 14-bit space, so the first 2^14
  // indices give distinct ports; a large stride keeps consecutive indices
  // far apart, whatever the switches' hash does with nearby values.
  constexpr uint32_t kStride = 0x2C49;
  return static_cast<uint16_t>(0xC000 | ((base + index * kStride) & (kMaxEntropyPaths - 1)));
}

void EntropySource::reset(const EntropyConfig& cfg, uint16_t base_port) {
  cfg_ = cfg;
  base_ = base_port;
  index_ = 0;
  sent_ = false;
  last_ns_ = 0;
  changes_ = 0;
}

uint16_t EntropySource::next(uint64_t now) {
  const uint32_t n = cfg_.paths ? cfg_.paths : 1;
  switch (cfg_.mode) {
    case EntropyMode::kFixed:
      return base_;
    case EntropyMode::kSpray:
      if (sent_) {
        index_ = index_ + 1 == n ? 0 : index_ + 1;
        changes_ += n > 1;
      }
      break;
    case EntropyMode::kFlowlet:
      if (sent_ && now - last_ns_ > cfg_.flowlet_gap_ns && n > 1) {
        index_ = index_ + 1 == n ? 0 : index_ + 1;
        ++changes_;
      }
      break;
  }
  sent_ = true;
  last_ns_ = now;
  return entropy_port(base_, index_);
}

}  // namespace droce::transport
