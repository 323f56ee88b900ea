#include "droce/endpoint/qpn_table.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <random>
#include <vector>

namespace droce::endpoint {
namespace {

TEST(QpnTable, FindsWhatWasInsertedAndNothingElse) {
  QpnTable<int> t;
  EXPECT_EQ(t.find(2), nullptr);
  t[2] = 20;
  t[65] = 650;        // the next page
  t[0xffffff] = 7;    // the highest 24-bit QPN
  EXPECT_EQ(t.size(), 3u);
  ASSERT_NE(t.find(2), nullptr);
  EXPECT_EQ(*t.find(2), 20);
  EXPECT_EQ(*t.find(65), 650);
  EXPECT_EQ(*t.find(0xffffff), 7);
  // Same page, not inserted: absent, though its page exists.
  EXPECT_EQ(t.find(3), nullptr);
  EXPECT_FALSE(t.contains(3));
  // Past the directory: absent.
  EXPECT_EQ(t.find(0x1000000), nullptr);
  EXPECT_FALSE(t.erase(0x1000000));
  EXPECT_FALSE(t.erase(3));
  // Erased, and made again: a fresh item, not the old value.
  t[4] = 44;
  EXPECT_TRUE(t.erase(4));
  EXPECT_EQ(t.find(4), nullptr);
  EXPECT_EQ(t[4], 0);
}

TEST(QpnTable, ItemsStayPutWhileOthersComeAndGo) {
  QpnTable<int> t;
  t[100] = 1;
  int* kept = t.find(100);
  for (uint32_t q = 2; q < 20000; ++q)
    if (q != 100) t[q] = static_cast<int>(q);
  for (uint32_t q = 2; q < 20000; ++q) {
    if (q == 100) continue;
    EXPECT_TRUE(t.erase(q)) << q;
  }
  EXPECT_EQ(t.find(100), kept);
  EXPECT_EQ(*kept, 1);
  EXPECT_EQ(t.size(), 1u);
}

TEST(QpnTable, EraseDestroysTheItemAndAReinsertStartsFresh) {
  QpnTable<std::shared_ptr<int>> t;
  auto owned = std::make_shared<int>(5);
  std::weak_ptr<int> watch = owned;
  t[9] = std::move(owned);
  EXPECT_FALSE(watch.expired());
  EXPECT_TRUE(t.erase(9));
  EXPECT_TRUE(watch.expired());  // as a map's erase destroys its value
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.find(9), nullptr);
  t[9];
  ASSERT_NE(t.find(9), nullptr);
  EXPECT_EQ(*t.find(9), nullptr);  // value-initialised, not the old value
}

TEST(QpnTable, RandomUseMatchesAnOrderedMap) {
  std::mt19937 rng(5);
  QpnTable<uint32_t> t;
  std::map<uint32_t, uint32_t> oracle;
  for (int step = 0; step < 200000; ++step) {
    // Mostly dense low QPNs, as a Device hands them out; some anywhere.
    const uint32_t q = rng() % 8 == 0 ? rng() & 0xffffff : 2 + rng() % 3000;
    switch (rng() % 3) {
      case 0:
        t[q] = static_cast<uint32_t>(step);
        oracle[q] = static_cast<uint32_t>(step);
        break;
      case 1:
        ASSERT_EQ(t.erase(q), oracle.erase(q) == 1) << q;
        break;
      default: {
        const uint32_t* v = t.find(q);
        auto it = oracle.find(q);
        ASSERT_EQ(v != nullptr, it != oracle.end()) << q;
        if (v) {
          ASSERT_EQ(*v, it->second);
        }
      }
    }
    ASSERT_EQ(t.size(), oracle.size());
  }
  std::vector<std::pair<uint32_t, uint32_t>> seen;
  t.for_each([&](uint32_t q, uint32_t v) { seen.emplace_back(q, v); });
  const std::vector<std::pair<uint32_t, uint32_t>> want(oracle.begin(), oracle.end());
  EXPECT_EQ(seen, want);
}

}  // namespace
}  // namespace droce::endpoint
