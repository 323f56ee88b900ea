// Completion queue (IBA 11.4.2.1 "Poll for completion", 11.4.2.2 "Request
// completion notification"): a fixed ring of work completions that the
// data path writes and the application polls, the way a NIC writes CQEs
// into host memory.
//
// Threads: one producer (the data path that runs the QPs feeding it) and
// any number of pollers, which take turns on a small lock of their own;
// producer and pollers meet only on the ring's two indices, so neither
// waits for the other.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include "droce/transport/wqe.h"
#include "droce/transport/zeroed_array.h"

namespace droce::transport {

class CompletionQueue {
 public:
  explicit CompletionQueue(uint32_t capacity);
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // Any thread. Returns how many completions were copied into `out`
  // (oldest first).
  int poll(std::span<WorkCompletion> out);
  // The producer. Adds a completion; false when the ring is full: the
  // completion is lost, and the CQ is in error from then on (every later
  // push fails too), as a real CQ raises IBV_EVENT_CQ_ERR and stops. The
  // QP whose completion did not fit goes to the error state.
  bool push(const WorkCompletion& wc);

  // Completion notification (ibv_req_notify_cq): the next completion
  // pushed after arm() (with `solicited_only`, the next solicited or
  // unsuccessful one) calls the notifier once, from the producer's thread.
  // One arm, one call; arm again for the next.
  using Notifier = void (*)(void* ctx, CompletionQueue& cq);
  void set_notifier(Notifier fn, void* ctx) {
    notify_fn_ = fn;
    notify_ctx_ = ctx;
  }
  // The application arms, then polls; the producer pushes, then looks at
  // the arming. Each side stores before it loads, so the four accesses
  // (this store, poll's load of the tail, push's store of it and
  // maybe_notify's load of the arming) are sequentially consistent: with
  // release and acquire only, x86 lets each load pass its store, the poll
  // find nothing and the push see no arming, and the application waits
  // for an event that never comes.
  void arm(bool solicited_only) {
    armed_.store(solicited_only ? kArmedSolicited : kArmedAll, std::memory_order_seq_cst);
  }
  // What to call when the CQ overflows (the affiliated asynchronous error,
  // IBV_EVENT_CQ_ERR), from the producer's thread, once.
  void set_error_notifier(Notifier fn, void* ctx) {
    error_fn_ = fn;
    error_ctx_ = ctx;
  }

  // Only where the producer and every poller are this one thread (the
  // simulator): an empty ring starts again at its first slot. Polled after
  // every event, such a ring then keeps reusing a few slots that stay in
  // cache, instead of walking its whole length as the counters grow and
  // making every page of it resident (192 KiB per host of a simulated
  // fabric at 4096 entries).
  void rewind_if_empty() {
    if (head_.load(std::memory_order_relaxed) != tail_.load(std::memory_order_relaxed)) return;
    head_.store(0, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
    head_seen_ = 0;
  }
  uint32_t capacity() const { return capacity_; }
  uint32_t size() const {
    return static_cast<uint32_t>(tail_.load(std::memory_order_acquire) -
                                 head_.load(std::memory_order_acquire));
  }
  bool empty() const { return size() == 0; }
  bool overflowed() const { return overflowed_.load(std::memory_order_acquire); }
  uint64_t overflow_count() const { return overflow_count_.load(std::memory_order_relaxed); }

 private:
  static constexpr uint8_t kDisarmed = 0;
  static constexpr uint8_t kArmedAll = 1;
  static constexpr uint8_t kArmedSolicited = 2;
  void maybe_notify(const WorkCompletion& wc);

  // Three lines, by who writes them: the producer and the pollers run on
  // different cores, and a line one of them writes while the other reads
  // it crosses between them each time.
  // Set up once, read by both (arming is one store per wait).
  uint32_t capacity_;
  ZeroedArray<WorkCompletion> ring_;  // written by push before poll reads
  std::atomic<uint8_t> armed_{kDisarmed};
  Notifier notify_fn_ = nullptr;
  void* notify_ctx_ = nullptr;
  Notifier error_fn_ = nullptr;
  void* error_ctx_ = nullptr;
  // Counters that only grow; the slot is counter % capacity.
  // The producer's: its tail, and its own copy of how far the pollers got
  // (push reads their head only when the ring looks full).
  alignas(64) std::atomic<uint64_t> tail_{0};
  uint64_t head_seen_ = 0;
  std::atomic<bool> overflowed_{false};
  std::atomic<uint64_t> overflow_count_{0};
  // The pollers'.
  alignas(64) std::atomic<uint64_t> head_{0};
  std::atomic_flag poll_lock_ = ATOMIC_FLAG_INIT;
};

}  // namespace droce::transport
