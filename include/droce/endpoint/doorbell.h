// The doorbell: how a thread that posted work tells the data path which QP
// has it, as a NIC's doorbell register names the queue that grew. Posters
// on any number of threads ring; the one thread that runs the endpoint
// takes the rung QPs in order. A QP is queued at most once however often
// it is rung before the data path looks, so the queue never holds more
// entries than there are QPs and needs no bound of its own.
//
// A node the data path took stays rung while the data path has the QP in
// hand (it takes newly posted work itself as it sends), so that posting to
// a busy QP rings nothing: the poster's exchange then stays on a line only
// posters write, and the data path's core touches no doorbell line per
// list of WRs. When the QP has nothing left, the data path re-arms the
// node and looks for work once more (rearm).
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
  // The data path's thread: f(node) for every node rung since the last
  // drain, oldest first. The node stays rung (rings do nothing) until the
  // data path gives it back to rearm(). Returns how many.
  template <class F>
  size_t drain(F&& f) {
    size_t n = 0;
    while (DoorbellNode* node = pop()) {
      f(*node);
      ++n;
    }
    return n;
  }
  // The data path's thread, for a node drain() handed out: rings queue it
  // again from now on. An exchange, not a store: it reads the last ring's
  // `true`, so the caller's next look at the QP sees the work that ring
  // published; work published later rings anew. Never for a node that may
  // be queued (only drain hands one out, and once).
  static void rearm(DoorbellNode& n) { n.rung.exchange(false, std::memory_order_acq_rel); }
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
