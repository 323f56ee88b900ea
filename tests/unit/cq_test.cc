#include "droce/transport/cq.h"

#include <gtest/gtest.h>

#include "droce/memory/resident.h"

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

// Pushes and polls one completion at a time, `rounds` times: how much the
// process's resident memory grew meanwhile.
uint64_t growth_of_push_poll(CompletionQueue& cq, int rounds, bool rewind) {
  const uint64_t before = memory::resident_bytes();
  WorkCompletion out[1];
  for (int i = 0; i < rounds; ++i) {
    WorkCompletion wc;
    wc.wr_id = static_cast<uint64_t>(i);
    EXPECT_TRUE(cq.push(wc));
    EXPECT_EQ(cq.poll(out), 1);
    EXPECT_EQ(out[0].wr_id, static_cast<uint64_t>(i));
    if (rewind) cq.rewind_if_empty();
  }
  return memory::resident_bytes() - before;
}

// A ring polled empty and rewound keeps using its first slots: a deep CQ
// (48 MiB, pages paid for when written) that takes 200,000 completions one
// at a time grows the process by a page or so, where without the rewind
// it walks (and makes resident) 9.6 MB of itself.
TEST(Cq, RewoundWhenEmptyItReusesItsFirstSlots) {
  constexpr int kRounds = 200'000;
  CompletionQueue walked(1u << 20), rewound(1u << 20);
  EXPECT_GT(growth_of_push_poll(walked, kRounds, false), uint64_t{8} << 20);
  EXPECT_LT(growth_of_push_poll(rewound, kRounds, true), uint64_t{1} << 20);
}

// Only an empty ring is rewound: what is still queued stays, in order.
TEST(Cq, ARingWithCompletionsIsNotRewound) {
  CompletionQueue cq(4);
  WorkCompletion out[4];
  for (uint64_t round = 0; round < 6; ++round) {
    for (uint64_t i = 0; i < 3; ++i) {
      WorkCompletion wc;
      wc.wr_id = round * 10 + i;
      ASSERT_TRUE(cq.push(wc));
    }
    ASSERT_EQ(cq.poll(std::span(out, 1)), 1);
    EXPECT_EQ(out[0].wr_id, round * 10);
    cq.rewind_if_empty();  // two left: nothing moves
    ASSERT_EQ(cq.poll(out), 2);
    EXPECT_EQ(out[0].wr_id, round * 10 + 1);
    EXPECT_EQ(out[1].wr_id, round * 10 + 2);
    cq.rewind_if_empty();
    EXPECT_TRUE(cq.empty());
  }
  EXPECT_FALSE(cq.overflowed());
}

}  // namespace
}  // namespace droce::transport
