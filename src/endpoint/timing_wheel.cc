#include "droce/endpoint/timing_wheel.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace droce::endpoint {

TimingWheel::TimingWheel(uint64_t granularity_ns, uint32_t slots, uint64_t start_ns)
    : granularity_(granularity_ns),
      mask_(slots - 1),
      slots_(slots),
      occupied_((slots + 63) / 64, 0) {
  if (granularity_ns == 0 || slots == 0 || (slots & (slots - 1)) != 0)
    throw std::invalid_argument("TimingWheel: slots must be a power of two, granularity > 0");
  current_ = slot_start(start_ns);
}

void TimingWheel::schedule(uint32_t id, uint64_t when) {
  if (when < current_) when = current_;
  const uint64_t span = granularity_ * (uint64_t{mask_} + 1);
  // Beyond the span: park in the slot just behind the cursor (the last one
  // reached); pop_due re-files it once its time is within reach.
  const uint64_t file_at = when - current_ >= span ? current_ + span - granularity_ : when;
  const uint32_t slot = slot_index(file_at);
  slots_[slot].push_back({id, when});
  mark(slot, true);
  ++size_;
  next_valid_ = false;
}

size_t TimingWheel::pop_due(uint64_t now, std::vector<uint32_t>& out) {
  size_t popped = 0;
  const uint64_t now_slot = slot_start(now);
  while (size_ != 0 && current_ <= now_slot) {
    const uint32_t index = slot_index(current_);
    auto& slot = slots_[index];
    if (!slot.empty()) {
      scratch_.swap(slot);
      for (const Entry& e : scratch_) {
        if (e.when < current_ + granularity_) {
          if (e.when <= now) {
            out.push_back(e.id);
            ++popped;
            --size_;
          } else {
            slot.push_back(e);  // same slot as `now`, a little later
          }
        } else {
          // Parked far-future entry (or one for a later lap): file again
          // (schedule() drops the cached next deadline).
          --size_;
          const uint64_t saved = current_;
          current_ += granularity_;
          schedule(e.id, e.when);
          current_ = saved;
        }
      }
      scratch_.clear();
      // Re-filing may have put entries back into this very slot.
      mark(index, !slot.empty());
    }
    if (current_ == now_slot) break;  // the cursor never passes `now`
    current_ += granularity_;
  }
  if (size_ == 0) current_ = now_slot;
  if (popped != 0) next_valid_ = false;
  return popped;
}

uint32_t TimingWheel::first_occupied(uint32_t from) const {
  const uint32_t words = static_cast<uint32_t>(occupied_.size());
  // The word holding `from`, with the bits before it masked off, then the
  // following words round the wheel, then the start of the first word.
  uint32_t w = from / 64;
  uint64_t bits = occupied_[w] & (~uint64_t{0} << (from % 64));
  for (uint32_t i = 0; i <= words; ++i) {
    if (bits != 0) return w * 64 + static_cast<uint32_t>(std::countr_zero(bits));
    w = (w + 1) % words;
    bits = occupied_[w];
  }
  return from;  // not reached while size_ != 0
}

uint64_t TimingWheel::scan_next_deadline() const {
  if (size_ == 0) return UINT64_MAX;
  // Walk occupied slots from the cursor. A slot d slots ahead stands for
  // [current_ + d*g, current_ + (d+1)*g) in this lap; entries in it for a
  // later lap (or parked far-future ones) do not count there. The first
  // slot with an entry of this lap holds the earliest deadline of this lap
  // and of every slot after it; a parked entry in a slot before it may
  // still be earlier (it was filed a span ahead of an older cursor, so it
  // is only known to be past its own slot's window), hence the min with
  // what the slots before held.
  const uint32_t start = slot_index(current_);
  uint64_t later_lap_min = UINT64_MAX;
  uint32_t from = start;
  for (uint32_t visited = 0; visited <= mask_;) {
    const uint32_t slot = first_occupied(from);
    const uint32_t ahead = (slot - start) & mask_;
    if (ahead < visited) break;  // wrapped round to slots already seen
    const uint64_t lap_end = current_ + (uint64_t{ahead} + 1) * granularity_;
    uint64_t this_lap = UINT64_MAX;
    for (const Entry& e : slots_[slot]) {
      if (e.when < lap_end) {
        this_lap = std::min(this_lap, e.when);
      } else {
        later_lap_min = std::min(later_lap_min, e.when);
      }
    }
    if (this_lap != UINT64_MAX) return std::max(std::min(this_lap, later_lap_min), current_);
    visited = ahead + 1;
    from = (slot + 1) & mask_;
  }
  return later_lap_min;
}

}  // namespace droce::endpoint
