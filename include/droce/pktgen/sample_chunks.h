// Latency samples appended in a receive loop, kept in chunks that never
// move. A std::vector doubles its capacity by copying everything it holds:
// at thousands of samples that is tens of microseconds, at millions
// milliseconds, and the probes that arrive meanwhile wait in the RX queue
// and carry the copy in their latency. A chunk is allocated whole and not
// written before samples fill it (no zeroing). DPDK-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace droce::pktgen {

class SampleChunks {
 public:
  static constexpr size_t kChunk = size_t{1} << 17;  // samples (1 MiB) per chunk

  void push(uint64_t v) {
    if (chunks_.empty() || used_ == kChunk) {
      chunks_.push_back(std::make_unique_for_overwrite<uint64_t[]>(kChunk));
      used_ = 0;
    }
    chunks_.back()[used_++] = v;
  }
  size_t size() const { return chunks_.empty() ? 0 : (chunks_.size() - 1) * kChunk + used_; }
  bool empty() const { return size() == 0; }
  size_t chunks() const { return chunks_.size(); }
  // Every sample, in the order pushed.
  std::vector<uint64_t> to_vector() const {
    std::vector<uint64_t> out;
    out.reserve(size());
    for (size_t c = 0; c < chunks_.size(); ++c) {
      const size_t n = c + 1 == chunks_.size() ? used_ : kChunk;
      out.insert(out.end(), chunks_[c].get(), chunks_[c].get() + n);
    }
    return out;
  }

 private:
  std::vector<std::unique_ptr<uint64_t[]>> chunks_;
  size_t used_ = 0;  // in the last chunk
};

}  // namespace droce::pktgen
