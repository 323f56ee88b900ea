// IndexLists: flat per-index lists filled in two passes.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "index_lists.h"

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
    for (uint32_t d : t.depends_on) want[d].push_back(t.id);
  size_t released = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(list(deps, i), want[i]) << "transfer " << i;
    released += want[i].size();
  }
  EXPECT_GT(released, 0u);
}

}  // namespace
}  // namespace droce::pktgen
