#include "droce/fabric/scheduler.h"

namespace droce::fabric {

int ClassScheduler::select(uint8_t eligible,
                           const std::array<uint32_t, kNumClasses>& head_bytes) {
  if (eligible == 0) return -1;
  for (int c = kNumClasses - 1; c >= 0; --c)
    if (cfg_.strict[c] && (eligible >> c & 1)) return c;
  uint8_t drr = 0;
  for (size_t c = 0; c < kNumClasses; ++c)
    if (!cfg_.strict[c]) drr |= static_cast<uint8_t>(1u << c);
  drr &= eligible;
  if (drr == 0) return -1;
  // Visit classes round robin; each visit credits one quantum x weight and
  // sends the head packet if the deficit covers it. Terminates because every
  // eligible class gains credit on each pass.
  for (;;) {
    const int c = current_;
    if (drr >> c & 1) {
      if (!credited_) {
        deficit_[c] += uint64_t{cfg_.quantum_bytes} * cfg_.weights[c];
        credited_ = true;
      }
      if (head_bytes[c] <= deficit_[c]) {
        deficit_[c] -= head_bytes[c];
        return c;
      }
    }
    // Not eligible (paused) classes keep their deficit, as in DRR a queue
    // that is not backlogged at its turn is simply skipped.
    credited_ = false;
    current_ = (current_ + 1) % static_cast<int>(kNumClasses);
  }
}

void ClassScheduler::sent(int tc, bool now_empty) {
  if (cfg_.strict[tc]) return;
  if (now_empty) {
    deficit_[tc] = 0;
    if (current_ == tc) {
      credited_ = false;
      current_ = (current_ + 1) % static_cast<int>(kNumClasses);
    }
  }
}

}  // namespace droce::fabric
