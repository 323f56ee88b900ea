// The deadlines a TimingWheel holds beyond its span, in the order the wheel
// takes them back: by deadline, ties in filing order. A calendar of coarse
// buckets (one per `width` ns of time, kept in a map by bucket number),
// each a vector in filing order that is sorted once, when it comes to the
// front. Retransmit timers are filed in nearly increasing order, so most
// buckets are sorted already and are only read front to back: with 64K QPs
// each filing such a timer, a binary heap cost a sift through ~16
// scattered levels per entry taken (7.7 % of the QP-scale bench's profile).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <vector>

namespace droce::endpoint {

class FarTimers {
 public:
  struct Entry {
    uint64_t when;
    uint32_t id;
  };
  explicit FarTimers(uint64_t width_ns);
  void push(uint32_t id, uint64_t when);
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // The earliest entry (ties: the first filed). Not on an empty calendar.
  const Entry& front() const;
  void pop_front();
  // Drops every entry whose id `gone(id)` says is no longer wanted; the
  // others keep their order. Returns how many went.
  template <class Pred>
  size_t erase_if(Pred gone) {
    size_t erased = 0;
    for (auto it = buckets_.begin(); it != buckets_.end();) {
      Bucket& b = it->second;
      const auto first = b.entries.begin() + static_cast<std::ptrdiff_t>(b.next);
      const auto kept = std::stable_partition(first, b.entries.end(),
                                              [&](const Entry& e) { return !gone(e.id); });
      erased += static_cast<size_t>(b.entries.end() - kept);
      b.entries.erase(kept, b.entries.end());
      it = b.next == b.entries.size() ? drop(it) : std::next(it);
    }
    size_ -= erased;
    return erased;
  }

 private:
  struct Bucket {
    std::vector<Entry> entries;  // [next, end) still held
    size_t next = 0;
    bool sorted = true;  // [next, end) in (deadline, filing) order
  };
  using Buckets = std::map<uint64_t, Bucket>;
  // The front bucket, sorted.
  Bucket& front_bucket() const;
  Buckets::iterator drop(Buckets::iterator it);
  uint64_t width_;
  size_t size_ = 0;
  mutable Buckets buckets_;
  std::vector<std::vector<Entry>> spare_;  // emptied buckets' storage, reused
};

}  // namespace droce::endpoint
