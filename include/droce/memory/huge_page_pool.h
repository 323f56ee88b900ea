// Memory for objects a data path touches in no particular order, many of
// one size: the fabric model's frame buffers and the QueuePair objects.
// Blocks come from 2 MiB regions (carving_pool.h) that the kernel may back
// with transparent huge pages (madvise(MADV_HUGEPAGE), honoured where
// /sys/kernel/mm/transparent_hugepage/enabled is "madvise" or "always").
//
// Why: with tens of thousands of frames in flight or QPs in use, each new
// buffer in 4 KiB pages was two page faults and each touch a likely TLB
// miss; in 2 MiB pages the translations fit the TLB. A freed block goes to
// a free list of its size for the next block of that size, and regions
// are kept for the process's life: the memory stays at the peak in use,
// as a pool's does.
#pragma once

#include <cstddef>

namespace droce::memory {

// `bytes` of memory aligned to 64; never null (throws std::bad_alloc).
// Sizes below a kilobyte or above 64 KiB come from operator new, and all
// sizes under AddressSanitizer.
void* huge_page_allocate(size_t bytes);
// Gives back what huge_page_allocate(bytes) returned, with the same `bytes`.
void huge_page_deallocate(void* p, size_t bytes) noexcept;

// The same for objects of any size up to 64 KiB, small ones too, each
// taking an odd number of cache lines (so that the same field of objects
// side by side falls in different cache sets): the per-QP state a data
// path reaches for one of thousands of QPs per packet (InHugePages), whose
// translations then fit a few TLB entries instead of one 4 KiB page's
// each.
void* huge_page_object_allocate(size_t bytes);
void huge_page_object_deallocate(void* p, size_t bytes) noexcept;

// A class deriving from this is created with new in huge pages.
struct InHugePages {
  static void* operator new(size_t bytes) { return huge_page_object_allocate(bytes); }
  static void operator delete(void* p, size_t bytes) noexcept {
    huge_page_object_deallocate(p, bytes);
  }
};

}  // namespace droce::memory
