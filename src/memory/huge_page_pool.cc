// Blocks in huge-page regions (huge_page_pool.h).
#include "droce/memory/huge_page_pool.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

#include "droce/memory/carving_pool.h"

namespace droce::memory {

namespace {

// Under AddressSanitizer every block comes from operator new, so that its
// redzones still catch a frame written past its end (the fuzzers).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPlainHeap = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kPlainHeap = true;
#else
constexpr bool kPlainHeap = false;
#endif
#else
constexpr bool kPlainHeap = false;
#endif

constexpr size_t kSmall = 1024;            // below: operator new
constexpr size_t kLargest = 64 * 1024;     // above: operator new
constexpr size_t kHugePage = 2u << 20;     // x86-64's transparent huge page
constexpr size_t kRegion = 8 * kHugePage;  // mapped at a time

// A region aligned to the huge page, so every 2 MiB of it can be one.
void* map_region(size_t bytes) {
  const size_t len = bytes + kHugePage;
  void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (base + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
  // The unaligned head and tail go back at once.
  if (aligned > base) ::munmap(p, aligned - base);
  const uintptr_t stop = aligned + bytes;
  if (base + len > stop) ::munmap(reinterpret_cast<void*>(stop), base + len - stop);
  // Advice only: without transparent huge pages the region is plain pages.
  ::madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

CarvingPool& pool() {
  // Never destroyed: blocks may outlive statics.
  static CarvingPool* p = new CarvingPool(kRegion, map_region);
  return *p;
}

// An object takes an odd number of cache lines. Objects carved one after
// another out of physically contiguous memory at a stride of an even
// number of lines put the same field of every object into a fraction of
// the cache's sets (1792-byte QPs: 16 of the 64 sets of L1), and the
// send path over 64K QPs lost 6 %; at an odd stride the field visits every
// set, as a slab allocator's colouring spreads its objects.
size_t odd_lines(size_t bytes) { return CarvingPool::rounded(bytes) | CarvingPool::kAlign; }

// `bytes` from operator new where the pool does not serve them (below
// `smallest`, above kLargest, under AddressSanitizer), else a block of
// `block` bytes from the pool.
void* allocate(size_t bytes, size_t smallest, size_t block) {
  if (kPlainHeap || bytes < smallest || bytes > kLargest)
    return ::operator new(bytes, std::align_val_t{CarvingPool::kAlign});
  return pool().take(block).p;
}

void deallocate(void* p, size_t bytes, size_t smallest, size_t block) noexcept {
  if (!p) return;
  if (kPlainHeap || bytes < smallest || bytes > kLargest) {
    ::operator delete(p, std::align_val_t{CarvingPool::kAlign});
    return;
  }
  pool().give(p, block);
}

}  // namespace

void* huge_page_allocate(size_t bytes) { return allocate(bytes, kSmall, bytes); }
void huge_page_deallocate(void* p, size_t bytes) noexcept { deallocate(p, bytes, kSmall, bytes); }

void* huge_page_object_allocate(size_t bytes) { return allocate(bytes, 0, odd_lines(bytes)); }
void huge_page_object_deallocate(void* p, size_t bytes) noexcept {
  deallocate(p, bytes, 0, odd_lines(bytes));
}

}  // namespace droce::memory
