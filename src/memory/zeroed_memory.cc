// Zeroed memory from anonymous mappings (zeroed_memory.h).
#include "droce/memory/zeroed_memory.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <new>

#include "droce/memory/carving_pool.h"

namespace droce::memory {

namespace {

constexpr size_t kOwnMapping = size_t{1} << 20;
constexpr size_t kPiece = size_t{64} << 20;
// A reused block from this size up is cleared by giving its whole pages
// back to the kernel (they read as zeros again, and take no memory until
// written) rather than by writing zeros over them: a collective's window
// of a rank, registered again for the next size of a sweep, is mostly
// pages nothing ever wrote, and a memset made them all resident.
constexpr size_t kDropPages = size_t{64} << 10;
constexpr uintptr_t kPage = 4096;

void clear(void* p, size_t bytes) {
  auto* b = static_cast<uint8_t*>(p);
  if (bytes < kDropPages) {
    std::memset(b, 0, bytes);
    return;
  }
  const auto begin = reinterpret_cast<uintptr_t>(b);
  const uintptr_t first = (begin + kPage - 1) & ~(kPage - 1);
  const uintptr_t last = (begin + bytes) & ~(kPage - 1);
  std::memset(b, 0, first - begin);
  std::memset(reinterpret_cast<uint8_t*>(last), 0, begin + bytes - last);
  // Private anonymous pages: after MADV_DONTNEED they read as zeros.
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0)
    std::memset(reinterpret_cast<uint8_t*>(first), 0, last - first);
}

void* map_zeroed(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

CarvingPool& pool() {
  // Never destroyed: rings may outlive statics.
  static CarvingPool* p = new CarvingPool(kPiece, map_zeroed);
  return *p;
}

}  // namespace

void* zeroed_memory(size_t bytes) {
  bytes = CarvingPool::rounded(bytes);
  if (bytes >= kOwnMapping) return map_zeroed(bytes);
  const CarvingPool::Block b = pool().take(bytes);
  if (b.reused) clear(b.p, bytes);
  return b.p;
}

void free_zeroed_memory(void* p, size_t bytes) noexcept {
  bytes = CarvingPool::rounded(bytes);
  if (bytes >= kOwnMapping) {
    ::munmap(p, bytes);
    return;
  }
  pool().give(p, bytes);
}

}  // namespace droce::memory
