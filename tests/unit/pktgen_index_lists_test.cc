// IndexLists: flat per-index lists filled in two passes.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "droce/pktgen/index_lists.h"
#include "droce/pktgen/schedule.h"

namespace droce::pktgen {
namespace {

std::vector<uint32_t> list(const IndexLists& l, size_t i) {
  const auto s = l[i];
  return {s.begin(), s.end()};
}

TEST(IndexLists, KeepsEachListInEmitOrder) {
  const std::vector<std::pair<uint32_t, uint32_t>> pairs = {{2, 10}, {0, 7}, {2, 3},
                                                            {4, 1},  {0, 9}, {2, 10}};
  const IndexLists l = IndexLists::build(5, [&](auto&& emit) {
    for (const auto& [i, v] : pairs) emit(i, v);
  });
  ASSERT_EQ(l.size(), 5u);
  EXPECT_EQ(list(l, 0), (std::vector<uint32_t>{7, 9}));
  EXPECT_TRUE(l[1].empty());
  EXPECT_EQ(list(l, 2), (std::vector<uint32_t>{10, 3, 10}));  // repeats kept
  EXPECT_TRUE(l[3].empty());
  EXPECT_EQ(list(l, 4), (std::vector<uint32_t>{1}));
}

TEST(IndexLists, EmptyAndDefault) {
  EXPECT_EQ(IndexLists().size(), 0u);
  const IndexLists l = IndexLists::build(3, [](auto&&) {});
  ASSERT_EQ(l.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(l[i].empty());
}

TEST(IndexLists, SortUniqueEachCompactsTheLists) {
  const std::vector<std::pair<uint32_t, uint32_t>> pairs = {{0, 5}, {0, 2}, {0, 5}, {1, 1}, {2, 9},
                                                            {2, 2}, {2, 7}, {2, 9}, {2, 2}, {3, 3}};
  IndexLists l = IndexLists::build(4, [&](auto&& emit) {
    for (const auto& [i, v] : pairs) emit(i, v);
  });
  // Without a list's own index, as a schedule's dependencies are.
  l.sort_unique_each([](size_t i, uint32_t v) { return v == i; });
  ASSERT_EQ(l.size(), 4u);
  EXPECT_EQ(list(l, 0), (std::vector<uint32_t>{2, 5}));
  EXPECT_TRUE(l[1].empty());
  EXPECT_EQ(list(l, 2), (std::vector<uint32_t>{7, 9}));
  EXPECT_TRUE(l[3].empty());
  EXPECT_EQ(l.total(), 4u);
  IndexLists none;
  none.sort_unique_each([](size_t, uint32_t) { return false; });
  EXPECT_EQ(none.size(), 0u);
}

// What a transfer's completion releases, as the schedule's depends_on says.
TEST(IndexLists, DependentsOfASchedule) {
  ScheduleParams p;
  p.pattern = Pattern::kRingAllReduce;
  p.ranks = 4;
  p.bytes = 4 * 4 * 64;
  p.chunk_bytes = 64;
  const Schedule s = make_schedule(p);
  const IndexLists deps = dependents_of(s);
  ASSERT_EQ(deps.size(), s.transfers.size());
  std::vector<std::vector<uint32_t>> want(s.transfers.size());
  for (const Transfer& t : s.transfers)
    for (uint32_t d : s.depends_on[t.id]) want[d].push_back(t.id);
  size_t released = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(list(deps, i), want[i]) << "transfer " << i;
    released += want[i].size();
  }
  EXPECT_GT(released, 0u);
}

}  // namespace
}  // namespace droce::pktgen
