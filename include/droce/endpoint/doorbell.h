// The doorbell: how a thread that posted work tells the data path which QP
// has it, as a NIC's doorbell register names the queue that grew. Posters
// on any number of threads ring; the one thread that runs the endpoint
// takes the rung QPs in order. A QP is queued at most once however often
// it is rung before the data path looks, so the queue never holds more
// entries than there are QPs and needs no bound of its own.
//
// The queue is the intrusive multi-producer / single-consumer list of
// D. Vyukov ("Intrusive MPSC node-based queue", 1024cores.net): a ring is
// one atomic exchange, taking is wait-free unless a poster is between its
// two steps (then the rest waits for the next drain).
#pragma once

#include <atomic>
#include <cstdint>

namespace droce::endpoint {

// One per QP, owned by whoever posts to it; must outlive its last ring and
// stay where it is (the queue links it).
struct DoorbellNode {
  std::atomic<DoorbellNode*> next{nullptr};
  std::atomic<bool> rung{false};
  uint32_t qpn = 0;
};

class DoorbellQueue {
 public:
  DoorbellQueue() = default;
  DoorbellQueue(const DoorbellQueue&) = delete;
  DoorbellQueue& operator=(const DoorbellQueue&) = delete;

  // Any thread, after publishing the work: queues `n` unless it is queued
  // and not yet taken. Returns whether it queued it.
  bool ring(DoorbellNode& n) {
    if (n.rung.exchange(true, std::memory_order_acq_rel)) return false;
    push(n);
    return true;
  }
  // The data path's thread: f(qpn) for every node rung since the last
  // drain, oldest first. A node is re-armed before f runs, so work
  // published after f began rings again. Returns how many.
  template <class F>
  size_t drain(F&& f) {
    size_t n = 0;
    while (DoorbellNode* node = pop()) {
      // An exchange, not a store: it reads the last ring's `true` and so
      // sees the work that ring published.
      node->rung.exchange(false, std::memory_order_acq_rel);
      f(node->qpn);
      ++n;
    }
    return n;
  }
  // Whether anything may be waiting (the data path's idle check).
  bool maybe_pending() const {
    return head_.load(std::memory_order_acquire) != tail_ ||
           tail_->next.load(std::memory_order_acquire) != nullptr;
  }

 private:
  void push(DoorbellNode& n) {
    n.next.store(nullptr, std::memory_order_relaxed);
    DoorbellNode* prev = head_.exchange(&n, std::memory_order_acq_rel);
    prev->next.store(&n, std::memory_order_release);
  }
  DoorbellNode* pop() {
    DoorbellNode* tail = tail_;
    DoorbellNode* next = tail->next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (!next) return nullptr;
      tail_ = tail = next;
      next = next->next.load(std::memory_order_acquire);
    }
    if (next) {
      tail_ = next;
      return tail;
    }
    if (tail != head_.load(std::memory_order_acquire)) return nullptr;  // a push in progress
    push(stub_);
    next = tail->next.load(std::memory_order_acquire);
    if (next) {
      tail_ = next;
      return tail;
    }
    return nullptr;
  }

  DoorbellNode stub_;
  alignas(64) std::atomic<DoorbellNode*> head_{&stub_};  // posters'
  alignas(64) DoorbellNode* tail_ = &stub_;              // the data path's
};

}  // namespace droce::endpoint
