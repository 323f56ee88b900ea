// Blocks of a few sizes cut from large anonymous mappings: the mechanism
// under huge_page_pool.h (frame buffers in 2 MiB pages) and
// zeroed_memory.h (ring storage paid for only when touched), which differ
// only in how a piece is mapped.
//
// Why carve: one mapping per block would cost a system call per block and,
// at thousands of QPs or frames in flight, exceed the kernel's limit on
// mappings per process (vm.max_map_count). A freed block goes on a free
// list of its size for the next block of that size; pieces are kept for
// the process's life, as malloc keeps its arenas, so the memory stays at
// the peak in use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace droce::memory {

class CarvingPool {
 public:
  // Maps a fresh piece of `bytes`, zeroed (anonymous memory is); throws
  // std::bad_alloc when the kernel refuses.
  using MapPiece = void* (*)(size_t bytes);
  static constexpr size_t kAlign = 64;  // every block starts on a cache line

  CarvingPool(size_t piece_bytes, MapPiece map) : piece_(piece_bytes), map_(map) {}
  CarvingPool(const CarvingPool&) = delete;
  CarvingPool& operator=(const CarvingPool&) = delete;

  struct Block {
    void* p;
    bool reused;  // from the free list: holds what its last owner left
  };
  // A block of `bytes` (at most the piece size), rounded up to kAlign. Any
  // thread.
  Block take(size_t bytes);
  // Gives back a block from take(bytes), with the same `bytes`. Any thread.
  void give(void* p, size_t bytes) noexcept;

  static size_t rounded(size_t bytes) { return (bytes + kAlign - 1) & ~(kAlign - 1); }

 private:
  struct SizeClass {
    size_t bytes;
    std::vector<void*> free;
  };
  SizeClass& size_class(size_t bytes);

  const size_t piece_;
  const MapPiece map_;
  std::mutex lock_;
  std::vector<SizeClass> classes_;  // few: one per kind of object
  uint8_t* next_ = nullptr;         // the current piece's first free byte
  uint8_t* end_ = nullptr;
};

}  // namespace droce::memory
