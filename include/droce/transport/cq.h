// Completion queue: a fixed ring of work completions (IBA 11.4.2.1
// "Poll for completion"). The transport pushes, the application polls.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "droce/transport/wqe.h"

namespace droce::transport {

class CompletionQueue {
 public:
  explicit CompletionQueue(uint32_t capacity);

  // Returns how many completions were copied into `out` (oldest first).
  int poll(std::span<WorkCompletion> out);
  // Adds a completion; when the ring is full the completion is lost and
  // overflowed() becomes true (a real CQ raises IBV_EVENT_CQ_ERR).
  bool push(const WorkCompletion& wc);

  uint32_t capacity() const { return static_cast<uint32_t>(ring_.size()); }
  uint32_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  bool overflowed() const { return overflowed_; }
  uint64_t overflow_count() const { return overflow_count_; }

 private:
  std::vector<WorkCompletion> ring_;
  uint32_t head_ = 0;
  uint32_t count_ = 0;
  bool overflowed_ = false;
  uint64_t overflow_count_ = 0;
};

}  // namespace droce::transport
