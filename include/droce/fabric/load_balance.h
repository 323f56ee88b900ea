// How a switch picks the member of an ECMP group for a packet.
//
//  - kEcmp: a seeded hash of the 5-tuple (routing.h): a flow stays on one
//    path whatever the load, so two elephants hashed onto one uplink share
//    it while another stays idle.
//  - kAdaptivePacket: each packet goes to the member whose egress queue
//    holds the fewest bytes (adaptive routing as in InfiniBand and
//    Ultra Ethernet switches, and DRILL's per-packet choice by local queue
//    length, Ghorbani et al. SIGCOMM 2017). Packets of one flow reorder.
//  - kAdaptiveFlowlet: the least-loaded member is chosen when a flowlet
//    starts, i.e. when the flow's previous packet passed more than
//    `flowlet_gap_ns` earlier, and kept for the flowlet (CONGA, Alizadeh
//    et al. SIGCOMM 2014; LetFlow, Vanini et al. NSDI 2017). Flows are
//    tracked in a table indexed by their hash, as switch ASICs do.
//
// Only the switch's own queues are looked at (no remote congestion), and
// ties between equally loaded members go to the first one at or after the
// member ECMP would pick, so an idle fabric spreads like ECMP.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace droce::fabric {

enum class LoadBalance : uint8_t { kEcmp, kAdaptivePacket, kAdaptiveFlowlet };
std::string_view to_string(LoadBalance lb);

// The live member of `ports` with the least `load(port)`, scanning from the
// member the hash picks; -1 when none is live. `up` may be empty (all up).
template <class Load>
int least_loaded(const std::vector<uint16_t>& ports, uint32_t hash,
                 const std::vector<bool>& up, Load&& load) {
  const size_t n = ports.size();
  if (n == 0) return -1;
  const size_t start = static_cast<size_t>((uint64_t{hash} * n) >> 32);
  int best = -1;
  uint64_t best_load = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t p = ports[(start + i) % n];
    if (!up.empty() && (p >= up.size() || !up[p])) continue;
    const uint64_t l = load(p);
    if (best < 0 || l < best_load) {
      best = p;
      best_load = l;
    }
  }
  return best;
}

// Flowlet state: per hash bucket, the member the current flowlet uses and
// when its last packet passed. Two flows sharing a bucket share a flowlet,
// as in hardware tables; the bucket count bounds the memory.
class FlowletTable {
 public:
  // `buckets` is rounded up to a power of two; 0: an empty table, for a
  // switch that does not route by flowlets (lookup must not be called).
  explicit FlowletTable(size_t buckets = 0);
  // The member the flow's current flowlet uses, or -1 when a new flowlet
  // starts (first packet, or idle for more than gap_ns). Records `now`.
  int lookup(uint32_t hash, uint64_t now, uint64_t gap_ns);
  // The member a new flowlet was given.
  void assign(uint32_t hash, uint16_t port);
  uint64_t flowlets() const { return flowlets_; }

 private:
  struct Entry {
    uint64_t last_ns = 0;
    int32_t port = -1;
  };
  std::vector<Entry> table_;
  size_t mask_ = 0;
  uint64_t flowlets_ = 0;
};

}  // namespace droce::fabric
