#include "droce/transport/cq.h"

#include <algorithm>

namespace droce::transport {

CompletionQueue::CompletionQueue(uint32_t capacity)
    : capacity_(std::max<uint32_t>(capacity, 1)), ring_(capacity_) {}

int CompletionQueue::poll(std::span<WorkCompletion> out) {
  if (out.empty()) return 0;
  // Empty needs no lock: head never passes tail and only grows, so a head
  // read before a tail equal to it means the ring was empty when the tail
  // was read. The common poll finds nothing, and the locked exchange is
  // what such a poll would cost.
  if (head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_seq_cst)) return 0;
  while (poll_lock_.test_and_set(std::memory_order_acquire)) {
  }
  const uint64_t head = head_.load(std::memory_order_relaxed);
  const uint64_t tail = tail_.load(std::memory_order_seq_cst);  // see arm()
  const size_t n = std::min<uint64_t>(tail - head, out.size());
  for (size_t i = 0; i < n; ++i) out[i] = ring_[(head + i) % capacity_];
  // The slots are free for the producer only after they were copied.
  head_.store(head + n, std::memory_order_release);
  poll_lock_.clear(std::memory_order_release);
  return static_cast<int>(n);
}

bool CompletionQueue::push(const WorkCompletion& wc) {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  if (tail - head_seen_ >= capacity_) head_seen_ = head_.load(std::memory_order_acquire);
  if (overflowed_.load(std::memory_order_relaxed) || tail - head_seen_ >= capacity_) {
    overflow_count_.fetch_add(1, std::memory_order_relaxed);
    if (!overflowed_.exchange(true, std::memory_order_acq_rel) && error_fn_)
      error_fn_(error_ctx_, *this);
    return false;
  }
  ring_[tail % capacity_] = wc;
  tail_.store(tail + 1, std::memory_order_seq_cst);  // see arm()
  maybe_notify(wc);
  return true;
}

void CompletionQueue::maybe_notify(const WorkCompletion& wc) {
  const uint8_t armed = armed_.load(std::memory_order_seq_cst);  // see arm()
  if (armed == kDisarmed) return;
  // IBA 11.4.2.2: "solicited" completions are receives of messages whose
  // last packet had the Solicited Event bit, and every unsuccessful one.
  if (armed == kArmedSolicited && !wc.solicited && wc.status == IBV_WC_SUCCESS) return;
  uint8_t expected = armed;
  if (!armed_.compare_exchange_strong(expected, kDisarmed, std::memory_order_acq_rel)) return;
  if (notify_fn_) notify_fn_(notify_ctx_, *this);
}

}  // namespace droce::transport
