// A queue pair's work queues as memory: rings sized from the capabilities,
// made anew by resize_queues, and what posters ask of them.
#include <algorithm>
#include <bit>
#include <cerrno>

#include "droce/transport/qp.h"

namespace droce::transport {

namespace {
// A work queue ring of at least `depth` slots: a power of two.
size_t ring_size(uint32_t depth) { return std::bit_ceil(size_t{std::max<uint32_t>(depth, 1)}); }
}  // namespace

void QueuePair::make_queues() {
  sq_ = ZeroedArray<SendWqe>(ring_size(caps_.max_send_wr));
  sq_mask_ = sq_.size() - 1;
  sge_more_ = ZeroedArray<Sge>(caps_.max_send_sge > 1 ? sq_.size() * caps_.max_send_sge : 0);
  ud_dest_ = ZeroedArray<UdDest>(type_ == QpType::kUd ? sq_.size() : 0);
  inline_ = ZeroedArray<uint8_t>(sq_.size() * caps_.max_inline_data);
  rq_ = ZeroedArray<RecvWqe>(srq_ ? 0 : ring_size(caps_.max_recv_wr));
  rq_mask_ = rq_.empty() ? 0 : rq_.size() - 1;
}

int QueuePair::resize_queues(uint32_t max_send_wr, uint32_t max_recv_wr) {
  if (max_send_wr == 0 || (max_recv_wr == 0 && !srq_)) return EINVAL;
  // Nothing posted is still in a ring: every WQE up to the posters'
  // counters has completed (the heads are the data path's own, and this
  // is its thread). The counters go on from where they are; slots are
  // counter & mask, so an empty ring may take any power-of-two size.
  const bool sq_empty = sq_posted_.load(std::memory_order_relaxed) == sq_head_;
  const bool rq_empty = srq_ || rq_posted_.load(std::memory_order_relaxed) == rq_head_;
  if (!sq_empty || !rq_empty) return EBUSY;
  caps_.max_send_wr = max_send_wr;
  if (!srq_) caps_.max_recv_wr = max_recv_wr;
  make_queues();
  return 0;
}

bool QueuePair::ring_has_room(uint64_t tail, uint64_t& seen, const std::atomic<uint64_t>& retired,
                              uint32_t depth) {
  if (tail - seen < depth) return true;
  seen = retired.load(std::memory_order_acquire);
  return tail - seen < depth;
}

uint32_t QueuePair::send_queue_depth() const {
  return static_cast<uint32_t>(sq_posted_.load(std::memory_order_acquire) -
                               sq_retired_.load(std::memory_order_acquire));
}

uint32_t QueuePair::recv_queue_depth() const {
  return srq_ ? 0
              : static_cast<uint32_t>(rq_posted_.load(std::memory_order_acquire) -
                                      rq_retired_.load(std::memory_order_acquire));
}

size_t QueuePair::queue_bytes() const {
  return sq_.size() * sizeof(SendWqe) + sge_more_.size() * sizeof(Sge) +
         ud_dest_.size() * sizeof(UdDest) + inline_.size() + rq_.size() * sizeof(RecvWqe);
}

}  // namespace droce::transport
