// Partitions as threads in one process: a sim::PartitionComm over shared
// memory, for tests of partitioned runs without MPI.
#pragma once

#include <barrier>
#include <cstdint>
#include <span>
#include <vector>

#include "droce/sim/partition.h"

namespace droce::sim {

// Partitions as threads: each collective is a write into a shared slot, a
// barrier, the reads, and a barrier before the slots are written again.
struct Rendezvous {
  explicit Rendezvous(uint32_t k) : barrier(k), frames(k), words(k) {}
  std::barrier<> barrier;
  std::vector<const std::vector<std::vector<uint8_t>>*> frames;
  std::vector<std::vector<uint64_t>> words;
};

class ThreadComm : public PartitionComm {
 public:
  ThreadComm(Rendezvous& r, uint32_t index) : r_(r), index_(index) {}
  uint32_t index() const override { return index_; }
  uint32_t count() const override { return static_cast<uint32_t>(r_.words.size()); }
  std::span<const uint8_t> exchange(const std::vector<std::vector<uint8_t>>& out) override {
    r_.frames[index_] = &out;
    r_.barrier.arrive_and_wait();
    in_.clear();
    for (uint32_t q = 0; q < count(); ++q)
      if (q != index_)
        in_.insert(in_.end(), (*r_.frames[q])[index_].begin(), (*r_.frames[q])[index_].end());
    r_.barrier.arrive_and_wait();
    return in_;
  }
  std::vector<uint64_t> allgather(std::span<const uint64_t> mine) override {
    r_.words[index_].assign(mine.begin(), mine.end());
    r_.barrier.arrive_and_wait();
    std::vector<uint64_t> all;
    for (const auto& w : r_.words) all.insert(all.end(), w.begin(), w.end());
    r_.barrier.arrive_and_wait();
    return all;
  }

 private:
  Rendezvous& r_;
  uint32_t index_;
  std::vector<uint8_t> in_;
};

}  // namespace droce::sim
