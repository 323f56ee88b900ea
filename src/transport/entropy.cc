// Per-packet and per-flowlet UDP source ports (see entropy.h).
#include "droce/transport/entropy.h"

#include <algorithm>

namespace droce::transport {

std::string_view to_string(EntropyMode m) {
  switch (m) {
    case EntropyMode::kFixed: return "fixed";
    case EntropyMode::kSpray: return "spray";
    case EntropyMode::kFlowlet: return "flowlet";
    case EntropyMode::kPathAware: return "path_aware";
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
  avoided_ = 0;
  base_rtt_ns_ = UINT64_MAX;
  mean_rtt_ns_ = 0;
  if (cfg.mode == EntropyMode::kPathAware)
    avoid_until_.assign(cfg.paths ? cfg.paths : 1, 0);
  else
    avoid_until_.clear();
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
    case EntropyMode::kPathAware:
      if (sent_ && n > 1) {
        const uint32_t was = index_;
        index_ = next_path_aware(now, n);
        changes_ += index_ != was;
      }
      break;
  }
  sent_ = true;
  last_ns_ = now;
  return entropy_port(base_, index_);
}

// Round robin from the path after the last one, over the paths not being
// avoided; with every path avoided, plain round robin: sending all on the
// one free soonest would pile the QP's whole rate onto one path.
uint32_t EntropySource::next_path_aware(uint64_t now, uint32_t n) {
  const uint32_t after = index_ + 1 == n ? 0 : index_ + 1;
  uint32_t j = after;
  for (uint32_t i = 0; i < n; ++i) {
    if (avoid_until_[j] <= now) return j;
    ++avoided_;
    j = j + 1 == n ? 0 : j + 1;
  }
  return after;
}

void EntropySource::on_delivered(uint32_t path, uint64_t rtt_ns, uint64_t now) {
  if (path >= avoid_until_.size()) return;
  base_rtt_ns_ = std::min(base_rtt_ns_, rtt_ns);
  // The QP's round trip over all its paths (EWMA, gain 1/8 as TCP's SRTT,
  // RFC 6298): queues every path shares (the receiver's link) raise it
  // too, so only what one path adds above it is that path's own.
  mean_rtt_ns_ = mean_rtt_ns_ ? mean_rtt_ns_ - mean_rtt_ns_ / 8 + rtt_ns / 8 : rtt_ns;
  if (rtt_ns > mean_rtt_ns_ + cfg_.path_rtt_threshold_ns)
    avoid_until_[path] = std::max(avoid_until_[path], now + (rtt_ns - mean_rtt_ns_));
}

void EntropySource::on_lost(uint32_t path, uint64_t now) {
  if (path >= avoid_until_.size()) return;
  const uint64_t rtt = base_rtt_ns_ == UINT64_MAX ? 0 : base_rtt_ns_;
  avoid_until_[path] = std::max(avoid_until_[path], now + rtt + cfg_.path_rtt_threshold_ns);
}

}  // namespace droce::transport
