// Adaptive choice of ECMP members (see load_balance.h).
#include "droce/fabric/load_balance.h"

#include <bit>

namespace droce::fabric {

std::string_view to_string(LoadBalance lb) {
  switch (lb) {
    case LoadBalance::kEcmp: return "ecmp";
    case LoadBalance::kAdaptivePacket: return "adaptive";
    case LoadBalance::kAdaptiveFlowlet: return "adaptive_flowlet";
  }
  return "?";
}

FlowletTable::FlowletTable(size_t buckets) {
  if (buckets == 0) return;
  table_.resize(std::bit_ceil(buckets));
  mask_ = table_.size() - 1;
}

int FlowletTable::lookup(uint32_t hash, uint64_t now, uint64_t gap_ns) {
  Entry& e = table_[hash & mask_];
  const bool live = e.port >= 0 && now - e.last_ns <= gap_ns;
  e.last_ns = now;
  return live ? e.port : -1;
}

void FlowletTable::assign(uint32_t hash, uint16_t port) {
  table_[hash & mask_].port = port;
  ++flowlets_;
}

}  // namespace droce::fabric
