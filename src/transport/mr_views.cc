#include "droce/transport/mr_views.h"

#include <algorithm>

namespace droce::transport {

MrViews::~MrViews() = default;

MrViews::View& MrViews::writable(size_t slot) {
  const size_t c = slot / kChunkSlots;
  Directory* d = directory_.load(std::memory_order_relaxed);
  if (!d || c >= d->size) {
    auto grown = std::make_unique<Directory>(std::max(c + 1, d ? 2 * d->size : 1));
    for (size_t i = 0; d && i < d->size; ++i)
      grown->chunks[i].store(d->chunks[i].load(std::memory_order_relaxed),
                             std::memory_order_relaxed);
    d = grown.get();
    directories_.push_back(std::move(grown));
    directory_.store(d, std::memory_order_release);
  }
  Chunk* chunk = d->chunks[c].load(std::memory_order_relaxed);
  if (!chunk) {
    chunks_.push_back(std::make_unique<Chunk>());
    chunk = chunks_.back().get();
    d->chunks[c].store(chunk, std::memory_order_release);
  }
  return chunk->views[slot % kChunkSlots];
}

const MrViews::View* MrViews::readable(size_t slot) const {
  const Directory* d = directory_.load(std::memory_order_acquire);
  const size_t c = slot / kChunkSlots;
  if (!d || c >= d->size) return nullptr;
  const Chunk* chunk = d->chunks[c].load(std::memory_order_acquire);
  return chunk ? &chunk->views[slot % kChunkSlots] : nullptr;
}

// The writer's half of the seqlock: odd, the fields, even again. Each
// field is stored with release and loaded with acquire (free on x86): a
// reader that sees a field of this write then sees the odd count when it
// reads the count again, and retries. (Fences would do the same with
// relaxed fields, but ThreadSanitizer does not model them.)
void MrViews::publish(const MemoryRegion& mr) {
  View& v = writable(mr.lkey() >> 8);
  const uint32_t seq = v.seq.load(std::memory_order_relaxed);
  v.seq.store(seq + 1, std::memory_order_relaxed);
  v.key.store(mr.lkey(), std::memory_order_release);
  v.access.store(mr.access(), std::memory_order_release);
  v.pd.store(mr.pd(), std::memory_order_release);
  v.iova.store(mr.iova(), std::memory_order_release);
  v.length.store(mr.length(), std::memory_order_release);
  v.seq.store(seq + 2, std::memory_order_release);
}

void MrViews::clear(uint32_t key) {
  View& v = writable(key >> 8);
  const uint32_t seq = v.seq.load(std::memory_order_relaxed);
  v.seq.store(seq + 1, std::memory_order_relaxed);
  v.pd.store(nullptr, std::memory_order_release);
  v.seq.store(seq + 2, std::memory_order_release);
}

bool MrViews::allows(uint32_t key, const ProtectionDomain* pd, uint32_t access, uint64_t addr,
                     uint64_t length) const {
  const View* v = readable(key >> 8);
  if (!v) return false;
  uint32_t seen_key, seen_access;
  const ProtectionDomain* seen_pd;
  uint64_t iova, size;
  for (;;) {
    const uint32_t seq = v->seq.load(std::memory_order_acquire);
    seen_key = v->key.load(std::memory_order_acquire);
    seen_access = v->access.load(std::memory_order_acquire);
    seen_pd = v->pd.load(std::memory_order_acquire);
    iova = v->iova.load(std::memory_order_acquire);
    size = v->length.load(std::memory_order_acquire);
    if (!(seq & 1) && v->seq.load(std::memory_order_relaxed) == seq) break;
  }
  if (!seen_pd || seen_pd != pd || seen_key != key || (seen_access & access) != access)
    return false;
  return MemoryRegion::holds(iova, size, addr, length);
}

}  // namespace droce::transport
