#include "droce/endpoint/timing_wheel.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace droce::endpoint {

TimingWheel::TimingWheel(uint64_t granularity_ns, uint32_t slots, uint64_t start_ns)
    : granularity_(granularity_ns),
      mask_(slots - 1),
      occupied_((slots + 63) / 64, 0),
      // (A zero width is refused below, with the wheel's own message.)
      far_(std::max<uint64_t>(granularity_ns * slots, 1)) {
  if (granularity_ns == 0 || slots == 0 || (slots & (slots - 1)) != 0)
    throw std::invalid_argument("TimingWheel: slots must be a power of two, granularity > 0");
  current_ = slot_start(start_ns);
}

void TimingWheel::schedule(uint32_t id, uint64_t when) {
  if (slots_.empty()) slots_.resize(size_t{mask_} + 1);
  if (when < current_) when = current_;
  ++size_;
  next_valid_ = false;
  if (when - current_ >= span()) {
    far_.push(id, when);
    return;
  }
  file_near(id, when);
}

void TimingWheel::file_near(uint32_t id, uint64_t when) {
  const uint32_t slot = slot_index(when);
  slots_[slot].push_back({id, when});
  mark(slot, true);
}

void TimingWheel::pull_far() {
  // The cursor's slot and those after it cover [current_, current_ + span):
  // a deadline in there has its slot in this lap.
  while (!far_.empty()) {
    const FarTimers::Entry& e = far_.front();  // one look at the front bucket
    if (e.when - current_ >= span()) break;
    file_near(e.id, e.when);
    far_.pop_front();
  }
}

size_t TimingWheel::pop_due(uint64_t now, std::vector<uint32_t>& out) {
  size_t popped = 0;
  const uint64_t now_slot = slot_start(now);
  while (size_ != 0 && current_ <= now_slot) {
    pull_far();
    // Empty slots are passed in one step, so a wheel woken after a long
    // quiet stretch (a far timer pending) costs the slots that hold
    // something, not every slot of the stretch. The far entries filed by
    // the end of the call, and each slot's order, stay as a slot-by-slot
    // walk leaves them.
    if (const uint64_t stop = next_stop(now_slot); stop != current_) {
      current_ = stop;
      continue;
    }
    const uint32_t index = slot_index(current_);
    auto& slot = slots_[index];
    if (!slot.empty()) {
      // Every entry here is of this lap (filed within a span of the cursor).
      scratch_.swap(slot);
      for (const Entry& e : scratch_) {
        if (e.when <= now) {
          out.push_back(e.id);
          ++popped;
          --size_;
        } else {
          slot.push_back(e);  // same slot as `now`, a little later
        }
      }
      scratch_.clear();
      mark(index, !slot.empty());
    }
    if (current_ == now_slot) break;  // the cursor never passes `now`
    current_ += granularity_;
  }
  if (size_ == 0) current_ = now_slot;
  if (popped != 0) next_valid_ = false;
  return popped;
}

uint64_t TimingWheel::next_stop(uint64_t now_slot) const {
  uint64_t stop = now_slot;
  // pull_far() left every far entry a span or more ahead: its slot is
  // ahead too, and it is filed when the cursor gets there.
  if (!far_.empty()) stop = std::min(stop, slot_start(far_.front().when));
  if (size_ > far_.size()) {
    const uint32_t from = slot_index(current_);
    const uint32_t ahead = (first_occupied(from) - from) & mask_;
    stop = std::min(stop, current_ + uint64_t{ahead} * granularity_);
  }
  return stop;
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
  // Every entry on the wheel is of the lap its slot is in from the cursor,
  // so the first occupied slot from the cursor holds the earliest of them;
  // the earliest far entry may still be earlier (the cursor moved since it was
  // filed) or the only one.
  const uint64_t far = far_.empty() ? UINT64_MAX : far_.front().when;
  if (size_ == far_.size()) return far;
  const uint32_t slot = first_occupied(slot_index(current_));
  uint64_t t = UINT64_MAX;
  for (const Entry& e : slots_[slot]) t = std::min(t, e.when);
  return std::min(std::max(t, current_), far);
}

}  // namespace droce::endpoint
