// What a poster on any thread checks its SGEs against (Device::check_sges):
// a copy of each registered region's key, PD, access and bounds, read
// without a lock.
//
// The data path looks regions up in the Device's own table on its lcore,
// where registration runs too; posters run on application threads at the
// same time. A reader-writer lock around the table cost every posted WR a
// lock and an unlock: two atomic read-modify-writes on one shared cache
// line and about 70 instructions (callgrind, 64-byte WRITEs), and 13 % of
// droce-bench-transmit's time per frame. Here a reader takes none:
//
// - Each slot's copy is guarded by a sequence count (a seqlock): odd while
//   its writer changes it; a reader that saw it odd or changed reads again.
//   The fields are atomics, stored with release and loaded with acquire,
//   one of the orderings Boehm gives for seqlocks in C++ ("Can seqlocks
//   get along with programming language memory models?", MSPC 2012).
// - Slots live in chunks that never move: a directory of chunk pointers
//   grows by doubling into a new directory, and the old one is kept until
//   the table goes (a reader may still be walking it), so growth needs no
//   lock either. A Device with a few regions holds one chunk.
//
// Writers (publish, clear) are serialised by the caller. A check that
// overlaps a registration or deregistration of the same key may see
// either state, as with any two concurrent calls; a region's memory is
// guarded by the data path's own lookup, not by this check.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "droce/transport/mr.h"
#include "droce/transport/pd.h"

namespace droce::transport {

class MrViews {
 public:
  MrViews() = default;
  MrViews(const MrViews&) = delete;
  MrViews& operator=(const MrViews&) = delete;
  ~MrViews();

  // Writers: `mr` is now the region in its key's slot; the slot is empty.
  void publish(const MemoryRegion& mr);
  void clear(uint32_t key);

  // Any thread: the region with `key` belongs to `pd`, has every bit of
  // `access` and holds [addr, addr + length).
  bool allows(uint32_t key, const ProtectionDomain* pd, uint32_t access, uint64_t addr,
              uint64_t length) const;

 private:
  static constexpr size_t kChunkSlots = 16;
  struct View {
    std::atomic<uint32_t> seq{0};  // odd while written
    std::atomic<uint32_t> key{0};
    std::atomic<uint32_t> access{0};
    std::atomic<const ProtectionDomain*> pd{nullptr};  // nullptr: no region
    std::atomic<uint64_t> iova{0};
    std::atomic<uint64_t> length{0};
  };
  struct Chunk {
    View views[kChunkSlots];
  };
  struct Directory {
    explicit Directory(size_t n) : size(n), chunks(new std::atomic<Chunk*>[n]) {
      for (size_t i = 0; i < n; ++i) chunks[i].store(nullptr, std::memory_order_relaxed);
    }
    size_t size;
    std::unique_ptr<std::atomic<Chunk*>[]> chunks;
  };

  // The slot's view, made (with its chunk and a larger directory) if need be.
  View& writable(size_t slot);
  const View* readable(size_t slot) const;

  std::atomic<Directory*> directory_{nullptr};
  std::vector<std::unique_ptr<Directory>> directories_;  // the current one last
  std::vector<std::unique_ptr<Chunk>> chunks_;
};

}  // namespace droce::transport
