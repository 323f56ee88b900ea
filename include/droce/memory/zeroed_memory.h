// Zeroed memory that is paid for only when touched: the storage of
// work-queue and completion rings (transport/zeroed_array.h), sized for
// the most a QP or CQ may hold while most use a few slots, and the
// simulated collectives' windows, which virtual payload never writes.
//
// Blocks under 1 MiB are cut from 64 MiB pieces (carving_pool.h) mapped
// with MAP_NORESERVE, so that what is never written costs neither memory
// nor swap reservation; larger blocks get a mapping each. A freed block is
// cleared when handed out again: from 64 KiB up by handing its whole pages
// back to the kernel, so that pages nothing wrote stay unpaid for.
#pragma once

#include <cstddef>

namespace droce::memory {

// `bytes` of zero bytes aligned to a cache line; throws std::bad_alloc.
// Any thread.
void* zeroed_memory(size_t bytes);
// Gives back what zeroed_memory(bytes) returned, with the same `bytes`.
void free_zeroed_memory(void* p, size_t bytes) noexcept;

}  // namespace droce::memory
