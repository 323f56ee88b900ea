// Shared receive queue (IBA 10.2.9): one ring of receive WQEs that several
// QPs of a PD draw from, in posting order. A QP takes a WQE when a message
// that needs one begins (SEND FIRST/ONLY, WRITE with immediate) and keeps
// it until the message completes.
//
// Threads: one producer at a time (the caller serialises posters, as for
// a QP's own receive queue) and one consumer, the data path of every QP
// attached; they meet only on the ring's two indices.
#pragma once

#include <atomic>
#include <cstdint>

#include "droce/transport/pd.h"
#include "droce/transport/wqe.h"
#include "droce/transport/zeroed_array.h"

namespace droce::transport {

class Device;

class SharedReceiveQueue {
 public:
  SharedReceiveQueue(Device& device, ProtectionDomain* pd, uint32_t max_wr);
  SharedReceiveQueue(const SharedReceiveQueue&) = delete;
  SharedReceiveQueue& operator=(const SharedReceiveQueue&) = delete;

  // Verbs: 0, ENOMEM (full) or EINVAL (too many SGEs, a bad lkey or range).
  int post(const RecvWr& wr);
  // The data path: the oldest WQE into `out`; false when there is none.
  bool take(RecvWqe& out);

  // IBA 11.2.3.3 / ibv_modify_srq(IBV_SRQ_LIMIT): when a take leaves fewer
  // than `limit` WQEs, the limit event fires once (the notifier, on the
  // consumer's thread) and the limit is disarmed (0). 0 disarms.
  using Notifier = void (*)(void* ctx, SharedReceiveQueue& srq);
  void set_limit_notifier(Notifier fn, void* ctx) {
    limit_fn_ = fn;
    limit_ctx_ = ctx;
  }
  // EINVAL when the limit is larger than the queue (as ibv_modify_srq).
  int arm_limit(uint32_t limit);
  uint32_t limit() const { return limit_.load(std::memory_order_acquire); }

  const ProtectionDomain* pd() const { return pd_; }
  uint32_t max_wr() const { return static_cast<uint32_t>(ring_.size()); }
  uint32_t size() const {
    return static_cast<uint32_t>(tail_.load(std::memory_order_acquire) -
                                 head_.load(std::memory_order_acquire));
  }
  // QPs attached (Device::create_qp counts them): the SRQ cannot be
  // destroyed while one is.
  uint32_t users() const { return users_; }
  void add_user() { ++users_; }
  void remove_user() { --users_; }

 private:
  Device& device_;
  ProtectionDomain* pd_;
  ZeroedArray<RecvWqe> ring_;  // a slot is written by post before take reads it
  alignas(64) std::atomic<uint64_t> tail_{0};
  alignas(64) std::atomic<uint64_t> head_{0};
  std::atomic<uint32_t> limit_{0};
  Notifier limit_fn_ = nullptr;
  void* limit_ctx_ = nullptr;
  uint32_t users_ = 0;
};

}  // namespace droce::transport
