// Lists of 32-bit values, one per index, kept in one array (compressed
// sparse rows): what each transfer of a schedule waits for and what its
// completion releases, and the transfers touching each rank while a
// schedule's dependencies are derived.
// A schedule has millions of transfers and each releases one or two
// others; a std::vector per transfer took 24 bytes and a heap block of at
// least 32 for that, here it is the values and one offset.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

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

  // Sorts each list and keeps one of each value, without those for which
  // drop(index, value) holds; the memory freed is given back.
  template <typename Drop>
  void sort_unique_each(Drop&& drop) {
    uint32_t out = 0;
    for (size_t i = 0; i < size(); ++i) {
      // List i is still at its place: only lists before it have moved.
      const auto begin = values_.begin() + first_[i], end = values_.begin() + first_[i + 1];
      std::sort(begin, end);
      const uint32_t start = out;
      for (auto v = begin; v != end; ++v) {
        if (drop(i, *v) || (out > start && values_[out - 1] == *v)) continue;
        values_[out++] = *v;
      }
      first_[i] = start;
    }
    if (!first_.empty()) first_.back() = out;
    values_.resize(out);
    values_.shrink_to_fit();
  }

  size_t size() const { return first_.empty() ? 0 : first_.size() - 1; }
  size_t total() const { return values_.size(); }
  std::span<const uint32_t> operator[](size_t i) const {
    return {values_.data() + first_[i], first_[i + 1] - first_[i]};
  }

 private:
  std::vector<uint32_t> first_;  // list i is values_[first_[i], first_[i + 1])
  std::vector<uint32_t> values_;
};

}  // namespace droce::pktgen
