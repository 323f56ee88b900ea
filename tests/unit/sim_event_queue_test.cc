// The runner's private containers (src/sim): the tournament-tree event queue
// against an ordered set, and the change-only sample series against a full
// row per instant. Runs are only deterministic if both are exact.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <utility>
#include <vector>

#include "event_queue.h"
#include "sample_log.h"

namespace droce::sim {
namespace {

TEST(EventQueue, OrdersByTimeThenIdLikeAnOrderedSet) {
  // Expect: after every random set / clear / pop, the top is the smallest
  // (time, id) pair of an std::set kept alongside, and at() agrees.
  for (uint32_t n : {1u, 5u, 64u, 100u}) {
    EventQueue q(n);
    std::set<std::pair<uint64_t, uint32_t>> ref;
    std::vector<uint64_t> at(n, EventQueue::kNever);
    std::mt19937_64 rng(n);
    for (int step = 0; step < 20000; ++step) {
      const uint32_t id = static_cast<uint32_t>(rng() % n);
      const unsigned op = rng() % 8;
      if (op == 0 && !q.empty()) {
        ASSERT_EQ(q.top_id(), ref.begin()->second);
        at[q.top_id()] = EventQueue::kNever;
        ref.erase(ref.begin());
        q.pop();
      } else {
        // Few distinct times, so ties between ids are common.
        const uint64_t t = op == 1 ? EventQueue::kNever : rng() % 50;
        if (at[id] != EventQueue::kNever) ref.erase({at[id], id});
        at[id] = t;
        if (t != EventQueue::kNever) ref.insert({t, id});
        q.set(id, t);
      }
      ASSERT_EQ(q.empty(), ref.empty());
      if (!ref.empty()) {
        ASSERT_EQ(q.top_time(), ref.begin()->first);
        ASSERT_EQ(q.top_id(), ref.begin()->second);
      }
      ASSERT_EQ(q.at(id), at[id]);
    }
  }
}

TEST(EventQueue, TakeTopThenSetOrSettleEqualsPop) {
  // Expect: the runner's take_top() (leaf cleared, walk deferred) followed
  // by sets of any components and a settle() leaves the same top and
  // times as pop() followed by the same sets.
  constexpr uint32_t n = 37;
  EventQueue a(n), b(n);
  std::mt19937_64 rng(5);
  for (uint32_t id = 0; id < n; ++id) {
    const uint64_t t = rng() % 100;
    a.set(id, t);
    b.set(id, t);
  }
  for (int step = 0; step < 20000 && !a.empty(); ++step) {
    ASSERT_EQ(a.top_id(), b.top_id());
    ASSERT_EQ(a.top_time(), b.top_time());
    const uint32_t top = a.top_id();
    const uint64_t now = a.top_time();
    a.take_top();
    b.pop();
    ASSERT_EQ(a.at(top), EventQueue::kNever);
    // What handling an event does: wake others, usually reschedule itself.
    for (int k = static_cast<int>(rng() % 3); k > 0; --k) {
      const uint32_t id = static_cast<uint32_t>(rng() % n);
      const uint64_t t = now + rng() % 50;
      a.set(id, t);
      b.set(id, t);
    }
    if (rng() % 4 != 0) {
      const uint64_t t = rng() % 16 == 0 ? EventQueue::kNever : now + 1 + rng() % 50;
      a.set(top, t);
      b.set(top, t);
    }
    a.settle();
    for (uint32_t id = 0; id < n; ++id) ASSERT_EQ(a.at(id), b.at(id));
  }
}

TEST(ChangeSeries, ReplaysEveryInstantFromItsChanges) {
  // Expect: a series recorded at every instant (mostly unchanged values)
  // replays, and expands, to exactly the values recorded.
  std::mt19937 rng(9);
  std::vector<uint64_t> full;
  ChangeSeries s;
  for (uint32_t i = 0; i < 5000; ++i) {
    const uint64_t v = rng() % 4 == 0 ? rng() % 3 : (full.empty() ? 0 : full.back());
    full.push_back(v);
    s.record(i, v);
    ASSERT_EQ(s.last(), v);
  }
  ChangeSeries::Reader r;
  for (uint32_t i = 0; i < full.size(); ++i) ASSERT_EQ(r.at(s, i), full[i]) << i;
  EXPECT_EQ(s.expand(static_cast<uint32_t>(full.size())), full);
  // Before any change the value is 0.
  ChangeSeries empty;
  EXPECT_EQ(empty.expand(3), (std::vector<uint64_t>{0, 0, 0}));
}

}  // namespace
}  // namespace droce::sim
