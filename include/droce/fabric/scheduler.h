// Picking the next traffic class to transmit on an egress port. Classes
// marked strict are served first, highest class first (IEEE 802.1Q 8.6.8.1
// strict priority, priority 7 highest); the rest share what is left by
// deficit weighted round robin (Shreedhar and Varghese, "Efficient Fair
// Queueing using Deficit Round Robin", SIGCOMM 1995), which gives byte
// shares proportional to the weights whatever the packet sizes.
#pragma once

#include <array>
#include <cstdint>

#include "droce/fabric/packet.h"

namespace droce::fabric {

struct SchedulerConfig {
  std::array<bool, kNumClasses> strict{};
  std::array<uint32_t, kNumClasses> weights{1, 1, 1, 1, 1, 1, 1, 1};
  // Bytes credited per round per unit of weight. At least one MTU keeps
  // each visit O(1) packets (DRR's condition for O(1) work per packet).
  uint32_t quantum_bytes = 4096 + 128;

  static SchedulerConfig strict_priority() {
    SchedulerConfig c;
    c.strict.fill(true);
    return c;
  }
  static SchedulerConfig dwrr(const std::array<uint32_t, kNumClasses>& w) {
    SchedulerConfig c;
    c.weights = w;
    return c;
  }
};

class ClassScheduler {
 public:
  explicit ClassScheduler(const SchedulerConfig& cfg = {}) : cfg_(cfg) {}

  // `eligible` bit c: class c has a packet and may send (not paused);
  // head_bytes[c]: the size of its head packet. Returns the class whose head
  // packet goes next, or -1. The choice is committed: call sent() next.
  int select(uint8_t eligible, const std::array<uint32_t, kNumClasses>& head_bytes);
  // Called after the selected packet was dequeued; `now_empty` says the
  // class queue has nothing left (DRR resets its deficit then).
  void sent(int tc, bool now_empty);
  // A queue was flushed (watchdog) or otherwise emptied out of turn.
  void emptied(int tc) {
    deficit_[tc] = 0;
    if (current_ == tc) credited_ = false;
  }

  const SchedulerConfig& config() const { return cfg_; }

 private:
  SchedulerConfig cfg_;
  std::array<uint64_t, kNumClasses> deficit_{};
  int current_ = 0;        // DRR round-robin pointer
  bool credited_ = false;  // current_ got its quantum for this visit
};

}  // namespace droce::fabric
