#include "droce/endpoint/far_timers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace droce::endpoint {
namespace {

// The order the calendar must keep: by deadline, ties in filing order.
struct Filed {
  uint64_t when;
  uint64_t seq;
  uint32_t id;
  bool operator<(const Filed& o) const { return when != o.when ? when < o.when : seq < o.seq; }
};

TEST(FarTimers, TakesEntriesByDeadlineAndTiesInFilingOrder) {
  FarTimers f(100);
  // Out of order within a bucket, across buckets, and equal deadlines.
  const std::vector<std::pair<uint64_t, uint32_t>> in = {
      {550, 1}, {120, 2}, {550, 3}, {101, 4}, {999, 5}, {120, 6}, {0, 7}, {550, 8}};
  for (auto [when, id] : in) f.push(id, when);
  EXPECT_EQ(f.size(), in.size());
  std::vector<uint32_t> ids;
  while (!f.empty()) {
    ids.push_back(f.front().id);
    f.pop_front();
  }
  EXPECT_EQ(ids, (std::vector<uint32_t>{7, 4, 2, 6, 1, 3, 8, 5}));
}

TEST(FarTimers, RandomFilingAndTakingMatchesAnOrderedOracle) {
  // Pushes land in the bucket being taken, ahead of it and behind every
  // held entry; each take must be the oracle's minimum.
  std::mt19937_64 rng(11);
  FarTimers f(1000);
  std::vector<Filed> oracle;  // a heap on operator< reversed
  const auto later = [](const Filed& a, const Filed& b) { return b < a; };
  uint64_t seq = 0, now = 0;
  for (int step = 0; step < 200000; ++step) {
    if (oracle.empty() || rng() % 3 != 0) {
      const uint64_t when = now + rng() % (rng() % 2 ? 1500 : 40000);
      const auto id = static_cast<uint32_t>(step);
      f.push(id, when);
      oracle.push_back({when, seq++, id});
      std::push_heap(oracle.begin(), oracle.end(), later);
    } else {
      std::pop_heap(oracle.begin(), oracle.end(), later);
      const Filed want = oracle.back();
      oracle.pop_back();
      ASSERT_EQ(f.front().id, want.id) << "step " << step;
      ASSERT_EQ(f.front().when, want.when);
      f.pop_front();
      now = want.when;  // later pushes never go before what was taken
    }
    ASSERT_EQ(f.size(), oracle.size());
  }
}

TEST(FarTimers, ErasedIdsLeaveTheRestInOrder) {
  FarTimers f(10);
  for (uint32_t id = 0; id < 100; ++id) f.push(id, 1000 - id % 7 * 10 + id / 50);
  f.pop_front();  // the front bucket partly taken
  const size_t before = f.size();
  EXPECT_EQ(f.erase_if([](uint32_t id) { return id % 2 == 0; }), 50u - 1);
  EXPECT_EQ(f.size(), before - 49);
  uint64_t last = 0;
  while (!f.empty()) {
    EXPECT_EQ(f.front().id % 2, 1u);
    EXPECT_GE(f.front().when, last);
    last = f.front().when;
    f.pop_front();
  }
}

}  // namespace
}  // namespace droce::endpoint
