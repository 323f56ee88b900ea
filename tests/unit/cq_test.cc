#include "droce/transport/cq.h"

#include <gtest/gtest.h>

namespace droce::transport {
namespace {

TEST(Cq, PollsInOrderAndWrapsAround) {
  CompletionQueue cq(4);
  WorkCompletion out[3];
  for (uint64_t round = 0; round < 5; ++round) {
    for (uint64_t i = 0; i < 3; ++i) {
      WorkCompletion wc;
      wc.wr_id = round * 10 + i;
      ASSERT_TRUE(cq.push(wc));
    }
    // Expect: FIFO order across the ring wrap.
    ASSERT_EQ(cq.poll(out), 3);
    for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(out[i].wr_id, round * 10 + i);
  }
  EXPECT_TRUE(cq.empty());
  EXPECT_EQ(cq.poll(out), 0);
}

TEST(Cq, OverflowIsReportedNotSilent) {
  CompletionQueue cq(2);
  WorkCompletion wc;
  EXPECT_TRUE(cq.push(wc));
  EXPECT_TRUE(cq.push(wc));
  // Expect: the third completion is refused and counted.
  EXPECT_FALSE(cq.push(wc));
  EXPECT_TRUE(cq.overflowed());
  EXPECT_EQ(cq.overflow_count(), 1u);
  EXPECT_EQ(cq.size(), 2u);
}

}  // namespace
}  // namespace droce::transport
