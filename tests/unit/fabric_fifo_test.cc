// Fifo: order across wrap-around and growth, insertion by index (also when
// full), and that elements are moved, never copied (a packet's bytes).
#include "droce/fabric/fifo.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace droce::fabric {
namespace {

std::vector<int> drain(Fifo<std::unique_ptr<int>>& q) {
  std::vector<int> out;
  while (!q.empty()) {
    out.push_back(*q.front());
    q.pop_front();
  }
  return out;
}

TEST(FabricFifo, KeepsOrderWhileWrappingAndGrowing) {
  Fifo<std::unique_ptr<int>> q;  // move-only: a copy would not compile
  int next_in = 0, next_out = 0;
  // Push three, pop two, so the ring wraps many times and grows past 16.
  for (int round = 0; round < 200; ++round) {
    for (int k = 0; k < 3; ++k) q.push_back(std::make_unique<int>(next_in++));
    for (int k = 0; k < 2; ++k) {
      ASSERT_EQ(*q.front(), next_out++);
      q.pop_front();
    }
  }
  EXPECT_EQ(q.size(), 200u);
  EXPECT_EQ(*q.back(), next_in - 1);
  for (int v : drain(q)) EXPECT_EQ(v, next_out++);
  EXPECT_EQ(next_out, next_in);
}

TEST(FabricFifo, InsertsAtAnIndexAlsoWhenFull) {
  Fifo<std::unique_ptr<int>> q;
  for (int i = 0; i < 16; ++i) q.push_back(std::make_unique<int>(i * 10));  // full at 16
  q.insert_at(3, std::make_unique<int>(25));
  q.insert_at(0, std::make_unique<int>(-1));
  q.insert_at(q.size(), std::make_unique<int>(999));
  std::vector<int> want{-1, 0, 10, 20, 25};
  for (int i = 3; i < 16; ++i) want.push_back(i * 10);
  want.push_back(999);
  EXPECT_EQ(drain(q), want);
}

TEST(FabricFifo, ClearEmptiesAndStaysUsable) {
  Fifo<std::unique_ptr<int>> q;
  for (int i = 0; i < 40; ++i) q.push_back(std::make_unique<int>(i));
  q.clear();
  EXPECT_TRUE(q.empty());
  q.push_back(std::make_unique<int>(7));
  EXPECT_EQ(drain(q), std::vector<int>{7});
}

}  // namespace
}  // namespace droce::fabric
