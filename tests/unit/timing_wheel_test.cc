#include "droce/endpoint/timing_wheel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

namespace droce::endpoint {
namespace {

TEST(TimingWheel, PopsOnlyWhatIsDue) {
  TimingWheel w(100, 64);
  w.schedule(1, 250);
  w.schedule(2, 120);
  w.schedule(3, 990);
  std::vector<uint32_t> out;
  // Expect: at t=150 only id 2 (slot 100..199) is due.
  EXPECT_EQ(w.pop_due(150, out), 1u);
  EXPECT_EQ(out, std::vector<uint32_t>{2});
  EXPECT_EQ(w.next_deadline(), 250u);
  out.clear();
  EXPECT_EQ(w.pop_due(299, out), 1u);
  EXPECT_EQ(out, std::vector<uint32_t>{1});
  out.clear();
  EXPECT_EQ(w.pop_due(989, out), 0u);
  EXPECT_EQ(w.pop_due(990, out), 1u);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.next_deadline(), UINT64_MAX);
}

TEST(TimingWheel, PastDeadlinesAreDueNowAndOrderIsFifoWithinSlot) {
  TimingWheel w(10, 8, 1000);
  w.schedule(7, 5);  // already past
  w.schedule(8, 1003);
  w.schedule(9, 1001);
  std::vector<uint32_t> out;
  // Expect: at 1000 only the past one; at 1003 the other two, in the order
  // they were scheduled (same slot).
  w.pop_due(1000, out);
  EXPECT_EQ(out, (std::vector<uint32_t>{7}));
  w.pop_due(1003, out);
  EXPECT_EQ(out, (std::vector<uint32_t>{7, 8, 9}));
}

TEST(TimingWheel, DeadlinesBeyondTheSpanAreNotLostOrEarly) {
  TimingWheel w(10, 8);  // span 80 ns
  w.schedule(1, 1000);
  w.schedule(2, 85);
  std::vector<uint32_t> out;
  for (uint64_t t = 0; t < 1000; t += 7) {
    w.pop_due(t, out);
    if (t < 80) {
      EXPECT_TRUE(out.empty()) << t;
    }
  }
  EXPECT_EQ(out, std::vector<uint32_t>{2});
  w.pop_due(1005, out);
  EXPECT_EQ(out, (std::vector<uint32_t>{2, 1}));
}

TEST(TimingWheel, ErasedIdsLeaveTheRestInOrder) {
  TimingWheel w(10, 8);  // span 80 ns: 1000 and 2000 are parked
  w.schedule(1, 2000);
  w.schedule(2, 15);
  w.schedule(3, 1000);
  w.schedule(4, 12);
  w.schedule(2, 40);
  EXPECT_EQ(w.erase_if([](uint32_t id) { return id == 1 || id == 4; }), 2u);
  EXPECT_EQ(w.size(), 3u);
  EXPECT_EQ(w.next_deadline(), 15u);
  EXPECT_EQ(w.next_deadline(), w.scan_next_deadline());
  std::vector<uint32_t> out;
  w.pop_due(3000, out);
  EXPECT_EQ(out, (std::vector<uint32_t>{2, 2, 3}));
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.erase_if([](uint32_t) { return true; }), 0u);
  // Everything erased: the wheel is empty and files new entries as before.
  w.schedule(5, 3005);
  EXPECT_EQ(w.erase_if([](uint32_t id) { return id == 5; }), 1u);
  EXPECT_EQ(w.next_deadline(), UINT64_MAX);
  w.schedule(6, 3020);
  EXPECT_EQ(w.next_deadline(), 3020u);
}

TEST(TimingWheel, RefusesAZeroGranularityOrSlotsNotAPowerOfTwo) {
  EXPECT_THROW(TimingWheel(0, 64), std::invalid_argument);
  EXPECT_THROW(TimingWheel(64, 0), std::invalid_argument);
  EXPECT_THROW(TimingWheel(64, 48), std::invalid_argument);
}

TEST(TimingWheel, RandomScheduleMatchesSortedOracle) {
  // Every id pops exactly once, never before its slot, and no later than the
  // first poll at or after its deadline.
  std::mt19937_64 rng(7);
  TimingWheel w(64, 256);
  std::map<uint32_t, uint64_t> deadline;
  for (uint32_t id = 0; id < 5000; ++id) {
    const uint64_t when = rng() % 200000;
    deadline[id] = when;
    w.schedule(id, when);
  }
  std::vector<uint32_t> out;
  std::map<uint32_t, uint64_t> popped_at;
  std::multiset<uint64_t> pending;
  for (const auto& [id, when] : deadline) pending.insert(when);
  for (uint64_t t = 0; t <= 200000 + 64; t += 1 + rng() % 500) {
    out.clear();
    w.pop_due(t, out);
    for (uint32_t id : out) {
      ASSERT_FALSE(popped_at.count(id)) << "popped twice: " << id;
      popped_at[id] = t;
      ASSERT_GE(t, deadline[id]) << "popped early: " << id;
      pending.erase(pending.find(deadline[id]));
    }
    // Expect: the wheel's next deadline is exactly the earliest pending one.
    ASSERT_EQ(w.next_deadline(), pending.empty() ? UINT64_MAX : *pending.begin()) << t;
  }
  out.clear();
  w.pop_due(400000, out);
  for (uint32_t id : out) popped_at[id] = 400000;
  EXPECT_EQ(popped_at.size(), deadline.size());
  EXPECT_TRUE(w.empty());
}

// Polls far apart (up to several spans, as a simulated host woken after a
// quiet stretch with a timer pending) with entries filed in between: each
// poll pops exactly what is due, slot after slot, and nothing else.
TEST(TimingWheel, LongQuietStretchesPopWhatIsDueSlotBySlot) {
  std::mt19937_64 rng(11);
  const uint64_t gran = 64, span = gran * 256;
  TimingWheel w(gran, 256);
  std::map<uint32_t, uint64_t> deadline;  // pending
  uint64_t now = 0;
  uint32_t next_id = 0;
  std::vector<uint32_t> out;
  for (int round = 0; round < 3000; ++round) {
    for (int k = rng() % 4; k > 0; --k) {
      const uint64_t when = now + rng() % (3 * span);
      deadline[next_id] = when;
      w.schedule(next_id++, when);
    }
    now += rng() % 8 == 0 ? rng() % (4 * span) : rng() % (2 * gran);
    out.clear();
    w.pop_due(now, out);
    uint64_t last_slot = 0;
    for (uint32_t id : out) {
      ASSERT_TRUE(deadline.count(id)) << "popped twice or never filed: " << id;
      const uint64_t when = deadline[id];
      ASSERT_LE(when, now) << "popped early: " << id;
      ASSERT_GE(when / gran, last_slot) << "slots out of order at " << now;
      last_slot = when / gran;
      deadline.erase(id);
    }
    uint64_t earliest = UINT64_MAX;
    for (const auto& [id, when] : deadline) {
      ASSERT_GT(when, now) << "due but not popped: " << id;
      earliest = std::min(earliest, when);
    }
    ASSERT_EQ(w.next_deadline(), earliest) << now;
    ASSERT_EQ(w.scan_next_deadline(), earliest) << now;
  }
}

TEST(TimingWheel, FarDeadlinesKeepTheirFilingOrderAndMixWithNearOnes) {
  TimingWheel w(10, 8);  // span 80 ns
  for (uint32_t id : {5, 3, 9}) w.schedule(id, 500);  // beyond the span
  w.schedule(1, 400);
  std::vector<uint32_t> out;
  EXPECT_EQ(w.pop_due(430, out), 1u);
  // Filed now, within the span of the cursor at 430: the same slot as the
  // far ones, after them.
  w.schedule(7, 500);
  w.schedule(2, 495);
  EXPECT_EQ(w.next_deadline(), 495u);
  EXPECT_EQ(w.scan_next_deadline(), 495u);
  EXPECT_EQ(w.pop_due(499, out), 1u);
  EXPECT_EQ(w.pop_due(500, out), 4u);
  EXPECT_EQ(out, (std::vector<uint32_t>{1, 2, 5, 3, 9, 7}));
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(w.next_deadline(), UINT64_MAX);
}

TEST(TimingWheel, ErasingReachesDeadlinesBeyondTheSpan) {
  TimingWheel w(10, 8);
  w.schedule(1, 1000);
  w.schedule(2, 2000);
  w.schedule(3, 20);
  EXPECT_EQ(w.erase_if([](uint32_t id) { return id != 3; }), 2u);
  EXPECT_EQ(w.size(), 1u);
  EXPECT_EQ(w.next_deadline(), 20u);
  std::vector<uint32_t> out;
  w.pop_due(5000, out);
  EXPECT_EQ(out, std::vector<uint32_t>{3});
}

TEST(TimingWheel, ParkedEntryEarlierThanALaterSlotIsTheNextDeadline) {
  // Expect: granularity 10, 8 slots (span 80). id 1 at 90 is filed from
  // cursor 0, beyond the span: it waits beyond the wheel until the cursor
  // comes within a span of it. After the cursor moves to 50, id 2 at 125
  // lands in slot 4. The next deadline is id 1's 90, not 125, and id 1
  // pops at 90.
  TimingWheel w(10, 8, 0);
  w.schedule(1, 90);
  std::vector<uint32_t> out;
  EXPECT_EQ(w.pop_due(50, out), 0u);
  w.schedule(2, 125);
  EXPECT_EQ(w.next_deadline(), 90u);
  EXPECT_EQ(w.scan_next_deadline(), 90u);
  EXPECT_EQ(w.pop_due(89, out), 0u);
  EXPECT_EQ(w.pop_due(90, out), 1u);
  EXPECT_EQ(out, std::vector<uint32_t>{1});
  EXPECT_EQ(w.next_deadline(), 125u);
}

TEST(TimingWheel, CachedNextDeadlineEqualsScan) {
  // next_deadline() is cached between changes: after interleaved schedules
  // (near, within the span, parked beyond it, already due) and pops it must
  // equal an uncached scan every time.
  std::mt19937_64 rng(11);
  TimingWheel w(64, 256);
  std::vector<uint32_t> out;
  uint64_t now = 0;
  for (uint32_t step = 0; step < 50000; ++step) {
    const uint64_t r = rng() % 12;
    if (r < 5) {
      const uint64_t ahead = r == 0   ? rng() % 64
                             : r == 1 ? rng() % 16384
                             : r == 2 ? rng() % 400000
                                      : rng() % 2000;
      const uint64_t when = r == 4 && now > 100 ? now - rng() % 100 : now + ahead;
      w.schedule(step, when);
    } else {
      now += rng() % 400;
      out.clear();
      w.pop_due(now, out);
    }
    // The value cached at the previous step, unless this step changed it.
    ASSERT_EQ(w.next_deadline(), w.scan_next_deadline()) << "step " << step;
  }
}

}  // namespace
}  // namespace droce::endpoint
