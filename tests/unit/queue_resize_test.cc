// QueuePair::resize_queues: new depths for both work queues of an idle QP
// (IBA 11.2.4.2), as the simulator's replays size a connection's rings to
// what its schedule can post.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "work_queue_pair.h"

namespace droce::transport {
namespace {

// Receives for `n` SENDs into b's region, ids from `first`.
void post_recvs(Pair& p, uint64_t first, int n) {
  for (int i = 0; i < n; ++i) {
    Sge sge{static_cast<uint64_t>(i) * 64, 64, p.b_mr->lkey()};
    RecvWr wr;
    wr.wr_id = first + static_cast<uint64_t>(i);
    wr.sg_list = std::span(&sge, 1);
    ASSERT_EQ(p.qb->post_recv(wr), 0) << i;
  }
}

SendWr send_of(Pair& p, uint64_t id, Sge& sge) {
  sge = Sge{0, 8, p.a_mr->lkey()};
  SendWr wr;
  wr.wr_id = id;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = std::span(&sge, 1);
  return wr;
}

TEST(QueueResize, RefusedWhileAnythingPostedIsOutstanding) {
  Pair p(4);
  Sge sge;
  ASSERT_EQ(p.qa->post_send(p.write(1, 0, 0, 8, sge)), 0);
  // Expect: a WR posted and not completed keeps the send queue as it is.
  EXPECT_EQ(p.qa->resize_queues(64, 64), EBUSY);
  EXPECT_EQ(p.qa->caps().max_send_wr, 4u);
  post_recvs(p, 100, 1);
  // ... and so does a receive WR nothing consumed yet, on the other side.
  EXPECT_EQ(p.qb->resize_queues(64, 64), EBUSY);
  p.settle();
  ASSERT_EQ(p.drain(p.a_cq).size(), 1u);
  // Expect: a depth of 0 is invalid; a QP whose WRs all completed (b's
  // receive is still posted) takes new depths.
  EXPECT_EQ(p.qa->resize_queues(0, 4), EINVAL);
  EXPECT_EQ(p.qa->resize_queues(4, 0), EINVAL);
  EXPECT_EQ(p.qb->resize_queues(64, 64), EBUSY);
  EXPECT_EQ(p.qa->resize_queues(64, 2), 0);
  EXPECT_EQ(p.qa->caps().max_send_wr, 64u);
  EXPECT_EQ(p.qa->caps().max_recv_wr, 2u);
  const size_t sges = p.qa->caps().max_send_sge;  // room for them per slot, beside the WQE
  EXPECT_EQ(p.qa->queue_bytes(), 64 * (sizeof(SendWqe) + sges * sizeof(Sge)) + 2 * sizeof(RecvWqe));
}

// The rings' counters go on across a resize: WRs posted after it, past the
// old and the new sizes many times, complete in order with nothing lost,
// and each depth is what a post may fill.
TEST(QueueResize, GrownAndShrunkQueuesKeepOrderAndDepth) {
  Pair p(4);
  Sge sge;
  uint64_t next = 0;
  const auto fill_and_check = [&](uint32_t depth) {
    for (int round = 0; round < 5; ++round) {
      for (uint32_t i = 0; i < depth; ++i) {
        ASSERT_EQ(p.qa->post_send(p.write(next, 0, next * 8 % 4096, 8, sge)), 0) << i;
        ++next;
      }
      EXPECT_EQ(p.qa->post_send(p.write(999999, 0, 0, 8, sge)), ENOMEM);
      p.settle();
      const auto wcs = p.drain(p.a_cq);
      ASSERT_EQ(wcs.size(), depth);
      for (uint32_t i = 0; i < depth; ++i) {
        EXPECT_EQ(wcs[i].status, IBV_WC_SUCCESS);
        EXPECT_EQ(wcs[i].wr_id, next - depth + i);
      }
    }
  };
  fill_and_check(4);
  ASSERT_EQ(p.qa->resize_queues(16, 4), 0);
  fill_and_check(16);
  ASSERT_EQ(p.qa->resize_queues(2, 4), 0);
  fill_and_check(2);
  // A depth that is not a power of two is what a post may fill all the same.
  ASSERT_EQ(p.qa->resize_queues(5, 4), 0);
  fill_and_check(5);
}

TEST(QueueResize, AGrownReceiveQueueTakesAndFillsItsNewDepth) {
  Pair p(2);
  ASSERT_EQ(p.qb->resize_queues(2, 8), 0);
  post_recvs(p, 0, 8);
  RecvWr extra;
  Sge rsge{0, 64, p.b_mr->lkey()};
  extra.sg_list = std::span(&rsge, 1);
  EXPECT_EQ(p.qb->post_recv(extra), ENOMEM);
  std::memcpy(p.a_mem.data(), "resized", 8);
  Sge sge;
  for (uint64_t i = 0; i < 8; i += 2) {
    ASSERT_EQ(p.qa->post_send(send_of(p, i, sge)), 0);
    ASSERT_EQ(p.qa->post_send(send_of(p, i + 1, sge)), 0);
    p.settle();
    ASSERT_EQ(p.drain(p.a_cq).size(), 2u);
  }
  // Expect: all eight receives consumed in the order posted, each with the
  // bytes sent.
  const auto got = p.drain(p.b_cq);
  ASSERT_EQ(got.size(), 8u);
  for (uint64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(got[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(got[i].opcode, IBV_WC_RECV);
    EXPECT_EQ(got[i].wr_id, i);
    EXPECT_EQ(std::memcmp(p.b_mem.data() + i * 64, "resized", 8), 0);
  }
}

}  // namespace
}  // namespace droce::transport
