// Zeroed memory from anonymous mappings (zeroed_memory.h).
#include "droce/memory/zeroed_memory.h"

#include <sys/mman.h>

#include <cstring>
#include <new>

#include "droce/memory/carving_pool.h"

namespace droce::memory {

namespace {

constexpr size_t kOwnMapping = size_t{1} << 20;
constexpr size_t kPiece = size_t{64} << 20;

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
  if (b.reused) std::memset(b.p, 0, bytes);
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
