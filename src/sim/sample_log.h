// Compact storage for the runner's CSV time series (flows, queues, links).
//
// Every sample instant reads ~200 values in a 16-to-1 incast (16 flows, 17
// switch ports x 8 classes, 34 link directions). Appending a full row per
// value cost a fifth of a simulator run: tens of MB of rows first touched
// during the run (page faults) and per-queue history vectors reallocating.
// Most of those values do not change from one sample to the next (idle
// queues, finished flows, quiet links), so each series here stores only its
// changes; the rows the public API returns are rebuilt from them on demand,
// bit for bit what recording every row gave.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace droce::sim {

// One series sampled at every instant 0, 1, 2, ...: the value is 0 until the
// first recorded change.
class ChangeSeries {
 public:
  void record(uint32_t instant, uint64_t value) {
    if (value == last_) return;
    last_ = value;
    changes_.emplace_back(instant, value);
  }
  uint64_t last() const { return last_; }

  // (instant, value) in instant order.
  using Changes = std::vector<std::pair<uint32_t, uint64_t>>;
  const Changes& changes() const { return changes_; }
  // The series as another process recorded it (a partitioned run's merge:
  // each series is recorded by the one partition that runs what it reads).
  void adopt(Changes changes) {
    changes_ = std::move(changes);
    last_ = changes_.empty() ? 0 : changes_.back().second;
  }

  // Replays a series instant by instant (instants must not go backwards).
  class Reader {
   public:
    uint64_t at(const ChangeSeries& s, uint32_t instant) {
      while (next_ < s.changes_.size() && s.changes_[next_].first <= instant)
        value_ = s.changes_[next_++].second;
      return value_;
    }

   private:
    size_t next_ = 0;
    uint64_t value_ = 0;
  };

  // The whole series over `instants` instants (for percentiles).
  std::vector<uint64_t> expand(uint32_t instants) const;

 private:
  uint64_t last_ = 0;
  Changes changes_;
};

}  // namespace droce::sim
