// Blocks in huge-page regions (huge_page_pool.h).
#include "droce/memory/huge_page_pool.h"

#include <sys/mman.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

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
constexpr size_t kAlign = 64;

size_t rounded(size_t bytes) { return (bytes + kAlign - 1) & ~(kAlign - 1); }

struct SizeClass {
  size_t bytes;
  std::vector<void*> free;
};

struct Arena {
  std::mutex lock;
  std::vector<SizeClass> classes;  // few: one per kind of object
  uint8_t* next = nullptr;
  uint8_t* end = nullptr;

  SizeClass& of(size_t bytes) {
    for (SizeClass& c : classes)
      if (c.bytes == bytes) return c;
    return classes.emplace_back(SizeClass{bytes, {}});
  }

  // A region aligned to the huge page, so every 2 MiB of it can be one.
  void map_region() {
    const size_t len = kRegion + kHugePage;
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t base = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (base + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
    // The unaligned head and tail go back at once.
    if (aligned > base) ::munmap(p, aligned - base);
    const uintptr_t stop = aligned + kRegion;
    if (base + len > stop) ::munmap(reinterpret_cast<void*>(stop), base + len - stop);
    // Advice only: without transparent huge pages the region is plain pages.
    ::madvise(reinterpret_cast<void*>(aligned), kRegion, MADV_HUGEPAGE);
    next = reinterpret_cast<uint8_t*>(aligned);
    end = next + kRegion;
  }
};

Arena& arena() {
  static Arena* a = new Arena;  // never destroyed: blocks may outlive statics
  return *a;
}

}  // namespace

void* huge_page_allocate(size_t bytes) {
  if (kPlainHeap || bytes < kSmall || bytes > kLargest)
    return ::operator new(bytes, std::align_val_t{kAlign});
  const size_t n = rounded(bytes);
  Arena& a = arena();
  std::lock_guard g(a.lock);
  SizeClass& c = a.of(n);
  if (!c.free.empty()) {
    void* p = c.free.back();
    c.free.pop_back();
    return p;
  }
  if (static_cast<size_t>(a.end - a.next) < n) a.map_region();
  void* p = a.next;
  a.next += n;
  return p;
}

void huge_page_deallocate(void* p, size_t bytes) noexcept {
  if (!p) return;
  if (kPlainHeap || bytes < kSmall || bytes > kLargest) {
    ::operator delete(p, std::align_val_t{kAlign});
    return;
  }
  Arena& a = arena();
  std::lock_guard g(a.lock);
  // The free list may need room: if that fails, the block stays unused.
  try {
    a.of(rounded(bytes)).free.push_back(p);
  } catch (...) {
  }
}

}  // namespace droce::memory
