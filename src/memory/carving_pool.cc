// Blocks carved from large mappings (carving_pool.h).
#include "droce/memory/carving_pool.h"

namespace droce::memory {

CarvingPool::SizeClass& CarvingPool::size_class(size_t bytes) {
  for (SizeClass& c : classes_)
    if (c.bytes == bytes) return c;
  return classes_.emplace_back(SizeClass{bytes, {}});
}

CarvingPool::Block CarvingPool::take(size_t bytes) {
  const size_t n = rounded(bytes);
  std::lock_guard g(lock_);
  SizeClass& c = size_class(n);
  if (!c.free.empty()) {
    void* p = c.free.back();
    c.free.pop_back();
    return {p, true};
  }
  // What is left of the current piece stays unused: blocks are few sizes,
  // pieces large, so little is.
  if (static_cast<size_t>(end_ - next_) < n) {
    next_ = static_cast<uint8_t*>(map_(piece_));
    end_ = next_ + piece_;
  }
  void* p = next_;
  next_ += n;
  return {p, false};
}

void CarvingPool::give(void* p, size_t bytes) noexcept {
  std::lock_guard g(lock_);
  // The free list may need room: if that fails, the block stays unused.
  try {
    size_class(rounded(bytes)).free.push_back(p);
  } catch (...) {
  }
}

}  // namespace droce::memory
