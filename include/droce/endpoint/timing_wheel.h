// A timing wheel for TX pacing and timers: each QP that has something to
// send is scheduled at the time its rate (from congestion control, or a
// fixed rate) next allows a packet, or at its next transport or CC timer.
// One slot per `granularity` ns; schedule and pop are O(1), popping due
// entries touches only the occupied slots that passed (a bitmap skips the
// empty ones). Entries further out than the
// wheel's span wait in order of deadline (far_timers.h) and move into their slot
// once, when the cursor comes within a span of them: a retransmit timer of
// tens of ms on a wheel of a few ms is filed twice, not once per lap (with
// 64K QPs, re-filing on every lap was a fifth of the run). Any deadline
// works. Deterministic: entries in a slot pop in the order they were filed
// there. `now` is always a parameter.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "droce/endpoint/far_timers.h"

namespace droce::endpoint {

class TimingWheel {
 public:
  // `slots` must be a power of two; span = slots * granularity_ns.
  TimingWheel(uint64_t granularity_ns, uint32_t slots, uint64_t start_ns = 0);

  // Schedules `id` (e.g. a QPN) at `when_ns`; a time already due is filed in
  // the current slot. An id may be scheduled several times; the caller
  // de-duplicates if it needs to.
  void schedule(uint32_t id, uint64_t when_ns);

  // Appends to `out` every id whose deadline is <= `now_ns` (slot by slot,
  // so in deadline order up to slot granularity) and advances the wheel up
  // to `now_ns`. Returns how many.
  size_t pop_due(uint64_t now_ns, std::vector<uint32_t>& out);

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // Earliest deadline among the scheduled ids; UINT64_MAX when empty.
  // Cached: the simulator asks after every event of its endpoint, and the
  // answer only changes when entries are scheduled, popped or re-filed (see
  // next_valid_); the next call after one of those scans again.
  uint64_t next_deadline() const {
    if (!next_valid_) {
      next_ = scan_next_deadline();
      next_valid_ = true;
    }
    return next_;
  }
  // next_deadline() without the cache (tests compare the two): finds the
  // first occupied slot from the cursor in a bitmap of occupied slots (one
  // word test per 64 slots), then the earliest entry of this lap in it.
  uint64_t scan_next_deadline() const;

  // Drops every entry whose id `gone(id)` says is no longer wanted (the
  // QPN of a destroyed QP); the others keep their slots and order. O(size):
  // for callers that do it once enough entries went stale, so that a QP
  // destroyed with a far-off timer neither waits in a slot until its time
  // nor lengthens every scan meanwhile.
  template <class Pred>
  size_t erase_if(Pred gone) {
    size_t erased = 0;
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      std::vector<Entry>& slot = slots_[i];
      if (slot.empty()) continue;
      erased += std::erase_if(slot, [&](const Entry& e) { return gone(e.id); });
      if (slot.empty()) mark(i, false);
    }
    erased += far_.erase_if(gone);
    size_ -= erased;
    if (erased) next_valid_ = false;
    return erased;
  }

 private:
  struct Entry {
    uint32_t id;
    uint64_t when;
  };
  uint64_t span() const { return granularity_ * (uint64_t{mask_} + 1); }
  void file_near(uint32_t id, uint64_t when);
  // Moves the far entries now within a span of the cursor to their slots.
  void pull_far();
  uint64_t slot_start(uint64_t t) const { return t - t % granularity_; }
  uint32_t slot_index(uint64_t t) const {
    return static_cast<uint32_t>((t / granularity_) & mask_);
  }
  void mark(uint32_t slot, bool occupied) {
    const uint64_t bit = uint64_t{1} << (slot % 64);
    occupied ? occupied_[slot / 64] |= bit : occupied_[slot / 64] &= ~bit;
  }
  // First occupied slot at or after `from` going round the wheel.
  uint32_t first_occupied(uint32_t from) const;
  // Where pop_due's cursor goes next: the first occupied slot, the slot of
  // the earliest far entry, or `now_slot`, whichever comes first.
  uint64_t next_stop(uint64_t now_slot) const;

  uint64_t granularity_;
  uint32_t mask_;
  uint64_t current_;  // start time of the slot at the wheel's cursor
  size_t size_ = 0;
  // Made at the first schedule(): an endpoint's two wheels are 12 KiB of
  // empty vectors at the simulator's 256 slots, and most of a large
  // fabric's hosts are idle at any time (and some never send).
  std::vector<std::vector<Entry>> slots_;
  std::vector<uint64_t> occupied_;  // bit per slot: has entries
  std::vector<Entry> scratch_;
  FarTimers far_;  // beyond the span, counted in size_
  // next_deadline()'s answer while next_valid_. The scan depends on the
  // entries, their slots and the cursor; moving the cursor over empty slots
  // leaves its answer as it was (every entry stays in the same lap, slots
  // keep their order), so only schedule, pop and re-file invalidate.
  mutable uint64_t next_ = UINT64_MAX;
  mutable bool next_valid_ = true;
};

}  // namespace droce::endpoint
