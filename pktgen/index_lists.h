// Lists of 32-bit values, one per index, kept in one array (compressed
// sparse rows): what each transfer's completion releases, and the
// transfers touching each rank while a schedule's dependencies are derived.
// A schedule has millions of transfers and each releases one or two
// others; a std::vector per transfer took 24 bytes and a heap block of at
// least 32 for that, here it is the values and one offset.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

#include "droce/pktgen/schedule.h"

namespace droce::pktgen {

class IndexLists {
 public:
  IndexLists() = default;

  // `visit(emit)` calls emit(index, value) for every pair, every index
  // below `indices`; it is called twice (to count, then to place), and
  // must emit the same pairs in the same order both times. Each list keeps
  // its values in the order emitted.
  template <typename Visit>
  static IndexLists build(size_t indices, Visit&& visit) {
    IndexLists l;
    l.first_.assign(indices + 1, 0);
    uint64_t total = 0;
    visit([&](uint32_t i, uint32_t) {
      ++l.first_[i + 1];
      ++total;
    });
    if (total > std::numeric_limits<uint32_t>::max())
      throw std::length_error("more than 2^32 list entries");
    for (size_t i = 0; i < indices; ++i) l.first_[i + 1] += l.first_[i];
    l.values_.resize(total);
    std::vector<uint32_t> next(l.first_.begin(), l.first_.end() - 1);
    visit([&](uint32_t i, uint32_t v) { l.values_[next[i]++] = v; });
    return l;
  }

  size_t size() const { return first_.empty() ? 0 : first_.size() - 1; }
  std::span<const uint32_t> operator[](size_t i) const {
    return {values_.data() + first_[i], first_[i + 1] - first_[i]};
  }

 private:
  std::vector<uint32_t> first_;  // list i is values_[first_[i], first_[i + 1])
  std::vector<uint32_t> values_;
};

// What each transfer's completion releases: the transfers that depend on
// it, in id order.
inline IndexLists dependents_of(const Schedule& s) {
  return IndexLists::build(s.transfers.size(), [&](auto&& emit) {
    for (const Transfer& t : s.transfers)
      for (uint32_t d : t.depends_on) emit(d, t.id);
  });
}

}  // namespace droce::pktgen
