#include "droce/transport/srq.h"

#include <algorithm>
#include <cerrno>

#include "droce/transport/device.h"

namespace droce::transport {

SharedReceiveQueue::SharedReceiveQueue(Device& device, ProtectionDomain* pd, uint32_t max_wr)
    : device_(device), pd_(pd), ring_(max_wr) {}

int SharedReceiveQueue::post(const RecvWr& wr) {
  if (wr.sg_list.size() > kMaxSge) return EINVAL;
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  if (tail - head_.load(std::memory_order_acquire) >= ring_.size()) return ENOMEM;
  RecvWqe& r = ring_[tail % ring_.size()];
  r.wr_id = wr.wr_id;
  r.num_sge = static_cast<uint32_t>(wr.sg_list.size());
  std::copy(wr.sg_list.begin(), wr.sg_list.end(), r.sge.begin());
  if (!device_.check_sges(pd_, r.sge.data(), r.num_sge, IBV_ACCESS_LOCAL_WRITE, &r.length))
    return EINVAL;
  tail_.store(tail + 1, std::memory_order_release);
  return 0;
}

bool SharedReceiveQueue::take(RecvWqe& out) {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  const uint64_t tail = tail_.load(std::memory_order_acquire);
  if (head == tail) return false;
  out = ring_[head % ring_.size()];
  head_.store(head + 1, std::memory_order_release);
  // IBA 10.2.9.3 (SRQ limit): the event fires when the WQEs left fall
  // below the limit, once per arming.
  const uint32_t limit = limit_.load(std::memory_order_acquire);
  if (limit != 0 && tail - (head + 1) < limit) {
    uint32_t expected = limit;
    if (limit_.compare_exchange_strong(expected, 0, std::memory_order_acq_rel) && limit_fn_)
      limit_fn_(limit_ctx_, *this);
  }
  return true;
}

int SharedReceiveQueue::arm_limit(uint32_t limit) {
  if (limit > ring_.size()) return EINVAL;
  limit_.store(limit, std::memory_order_release);
  return 0;
}

}  // namespace droce::transport
