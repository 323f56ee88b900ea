#include "droce/endpoint/far_timers.h"

#include <algorithm>
#include <stdexcept>

namespace droce::endpoint {

namespace {
// The order within a bucket; ties keep their places (filing order).
bool earlier(const FarTimers::Entry& x, const FarTimers::Entry& y) { return x.when < y.when; }
}  // namespace

FarTimers::FarTimers(uint64_t width_ns) : width_(width_ns) {
  if (width_ns == 0) throw std::invalid_argument("FarTimers: bucket width must be > 0");
}

void FarTimers::push(uint32_t id, uint64_t when) {
  auto [it, fresh] = buckets_.try_emplace(when / width_);
  Bucket& b = it->second;
  if (fresh && !spare_.empty()) {
    b.entries = std::move(spare_.back());
    spare_.pop_back();
  }
  ++size_;
  const Entry e{when, id};
  if (b.entries.empty() || when >= b.entries.back().when) {
    b.entries.push_back(e);  // in order: a later deadline, or the first
  } else if (b.next != 0) {
    // The front bucket, being taken: it stays sorted, the newcomer after
    // every entry due at the same time (filed before it).
    const auto first = b.entries.begin() + static_cast<std::ptrdiff_t>(b.next);
    b.entries.insert(std::upper_bound(first, b.entries.end(), e, earlier), e);
  } else {
    b.entries.push_back(e);
    b.sorted = false;
  }
}

FarTimers::Bucket& FarTimers::front_bucket() const {
  Bucket& b = buckets_.begin()->second;
  if (!b.sorted) {
    // Stable: equal deadlines stay in filing order.
    std::stable_sort(b.entries.begin() + static_cast<std::ptrdiff_t>(b.next), b.entries.end(),
                     earlier);
    b.sorted = true;
  }
  return b;
}

const FarTimers::Entry& FarTimers::front() const {
  const Bucket& b = front_bucket();
  return b.entries[b.next];
}

void FarTimers::pop_front() {
  Bucket& b = front_bucket();
  --size_;
  if (++b.next == b.entries.size()) drop(buckets_.begin());
}

FarTimers::Buckets::iterator FarTimers::drop(Buckets::iterator it) {
  std::vector<Entry>& v = it->second.entries;
  v.clear();
  // A few emptied vectors keep their capacity for the buckets to come.
  if (spare_.size() < 4) spare_.push_back(std::move(v));
  return buckets_.erase(it);
}

}  // namespace droce::endpoint
