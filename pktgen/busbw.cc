#include "droce/pktgen/busbw.h"

namespace droce::pktgen {

Collective collective_of(Pattern p) {
  switch (p) {
    case Pattern::kRingAllReduce:
    case Pattern::kHalvingDoubling:
    case Pattern::kTreeAllReduce:
      return Collective::kAllReduce;
    case Pattern::kAllGather: return Collective::kAllGather;
    case Pattern::kReduceScatter: return Collective::kReduceScatter;
    case Pattern::kAllToAll: return Collective::kAllToAll;
    case Pattern::kIncast: return Collective::kIncast;
    case Pattern::kPermutation: return Collective::kSendRecv;
  }
  return Collective::kSendRecv;
}

std::string_view to_string(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "all_reduce";
    case Collective::kAllGather: return "all_gather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllToAll: return "all_to_all";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kIncast: return "incast";
    case Collective::kSendRecv: return "sendrecv";
  }
  return "unknown";
}

double bus_factor(Collective c, uint32_t ranks) {
  const double n = ranks;
  switch (c) {
    case Collective::kAllReduce: return 2.0 * (n - 1) / n;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kAllToAll:
      return (n - 1) / n;
    case Collective::kBroadcast:
    case Collective::kReduce:
    case Collective::kSendRecv:
      return 1.0;
    case Collective::kIncast: return n - 1;
  }
  return 1.0;
}

double algbw_gbps(uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
}

double busbw_gbps(Collective c, uint32_t ranks, uint64_t bytes, double seconds) {
  return algbw_gbps(bytes, seconds) * bus_factor(c, ranks);
}

std::vector<uint64_t> size_sweep(const SweepSpec& spec) {
  std::vector<uint64_t> out;
  if (spec.min_bytes > spec.max_bytes) return out;
  for (uint64_t size = spec.min_bytes; size <= spec.max_bytes;) {
    out.push_back(size);
    uint64_t next;
    if (spec.factor > 1) {
      if (size > UINT64_MAX / spec.factor) break;
      next = size * spec.factor;
    } else {
      if (spec.step_bytes == 0 || size > UINT64_MAX - spec.step_bytes) break;
      next = size + spec.step_bytes;
    }
    if (next <= size) break;  // min_bytes = 0 with a factor
    size = next;
  }
  return out;
}

}  // namespace droce::pktgen
