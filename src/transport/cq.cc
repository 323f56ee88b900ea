#include "droce/transport/cq.h"

namespace droce::transport {

CompletionQueue::CompletionQueue(uint32_t capacity)
    : ring_(capacity == 0 ? 1 : capacity) {}

int CompletionQueue::poll(std::span<WorkCompletion> out) {
  int n = 0;
  while (count_ > 0 && static_cast<size_t>(n) < out.size()) {
    out[static_cast<size_t>(n++)] = ring_[head_];
    head_ = (head_ + 1) % capacity();
    --count_;
  }
  return n;
}

bool CompletionQueue::push(const WorkCompletion& wc) {
  if (count_ == capacity()) {
    overflowed_ = true;
    ++overflow_count_;
    return false;
  }
  ring_[(head_ + count_) % capacity()] = wc;
  ++count_;
  return true;
}

}  // namespace droce::transport
