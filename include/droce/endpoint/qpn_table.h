// A map from QPN to a per-QP item, indexed directly by the number.
//
// The endpoint looks a QP up by its number for every received frame (the
// BTH's DestQP, 24 bits, IBA 9.2), every doorbell and every timer. A hash
// map walks a bucket and then its nodes for that, dependent loads
// scattered over memory; with tens of thousands of QPs each misses the
// caches. QPNs are dense (a Device hands them out in rising order from
// kFirstQpn), so a table indexed by the number finds the item at an address
// computed from it: one line, its page's address being in cache (the
// directory holds 8 bytes per 64 QPNs).
//
// Items live in pages of 64, allocated when the first QPN of their range
// is inserted and freed when the last one goes, so items never move while
// they are in the table (pointers to them stay valid until erase) and a
// host with a few QPs pays for one page. The page directory grows to the
// highest live QPN: 8 bytes per 64 numbers, at most 2 MiB for the whole
// 24-bit space.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace droce::endpoint {

template <class T>
class QpnTable {
 public:
  static constexpr unsigned kPageBits = 6;
  static constexpr uint32_t kPageItems = 1u << kPageBits;

  // The item of `qpn`, or null.
  T* find(uint32_t qpn) {
    Page* page = page_of(qpn);
    return holds(page, qpn) ? &page->items[qpn & (kPageItems - 1)] : nullptr;
  }
  bool contains(uint32_t qpn) const { return holds(page_of(qpn), qpn); }
  // The item of `qpn`, made (value-initialised) if it was not there.
  T& operator[](uint32_t qpn) {
    const size_t p = qpn >> kPageBits;
    if (p >= pages_.size()) pages_.resize(p + 1);
    if (!pages_[p]) pages_[p] = std::make_unique<Page>();
    Page& page = *pages_[p];
    const uint32_t i = qpn & (kPageItems - 1);
    if (!(page.used >> i & 1)) {
      page.used |= uint64_t{1} << i;
      ++size_;
    }
    return page.items[i];
  }
  // Removes the item of `qpn` (its T destroyed, as a map's erase does);
  // false if there was none.
  bool erase(uint32_t qpn) {
    Page* page = page_of(qpn);
    if (!holds(page, qpn)) return false;
    const uint32_t i = qpn & (kPageItems - 1);
    page->used &= ~(uint64_t{1} << i);
    page->items[i] = T{};
    --size_;
    if (page->used == 0) {
      pages_[qpn >> kPageBits].reset();
      while (!pages_.empty() && !pages_.back()) pages_.pop_back();
    }
    return true;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // f(qpn, T&) for every item, in rising QPN order.
  template <class F>
  void for_each(F&& f) {
    for (size_t p = 0; p < pages_.size(); ++p) {
      if (!pages_[p]) continue;
      for (uint64_t used = pages_[p]->used; used != 0; used &= used - 1) {
        const auto i = static_cast<uint32_t>(std::countr_zero(used));
        f(static_cast<uint32_t>(p << kPageBits) | i, pages_[p]->items[i]);
      }
    }
  }

 private:
  struct Page {
    uint64_t used = 0;  // bit i: items[i] is in the table
    std::array<T, kPageItems> items{};
  };
  Page* page_of(uint32_t qpn) const {
    const size_t p = qpn >> kPageBits;
    return p < pages_.size() ? pages_[p].get() : nullptr;
  }
  static bool holds(const Page* page, uint32_t qpn) {
    return page && (page->used >> (qpn & (kPageItems - 1)) & 1);
  }
  std::vector<std::unique_ptr<Page>> pages_;
  size_t size_ = 0;
};

}  // namespace droce::endpoint
