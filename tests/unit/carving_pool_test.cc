// memory/carving_pool.h: blocks cut in order from pieces the map function
// gives, a piece mapped only when the current one cannot hold a block,
// freed blocks reused by size and flagged as such.
#include "droce/memory/carving_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

namespace droce::memory {
namespace {

constexpr size_t kPiece = 4096;
std::vector<void*> g_pieces;  // what the test map function handed out

void* map_counted(size_t bytes) {
  void* p = std::aligned_alloc(CarvingPool::kAlign, bytes);
  g_pieces.push_back(p);
  return p;
}

class CarvingPoolTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (void* p : g_pieces) std::free(p);
    g_pieces.clear();
  }
};

TEST_F(CarvingPoolTest, CutsInOrderAndMapsAPieceOnlyWhenFull) {
  CarvingPool pool(kPiece, map_counted);
  const CarvingPool::Block a = pool.take(100);  // rounded to 128
  ASSERT_EQ(g_pieces.size(), 1u);
  EXPECT_EQ(a.p, g_pieces[0]);
  EXPECT_FALSE(a.reused);
  const CarvingPool::Block b = pool.take(64);
  EXPECT_EQ(static_cast<uint8_t*>(b.p), static_cast<uint8_t*>(a.p) + 128);
  // 4096 - 192 left: a block of 4000 does not fit, so a second piece.
  const CarvingPool::Block c = pool.take(4000);
  ASSERT_EQ(g_pieces.size(), 2u);
  EXPECT_EQ(c.p, g_pieces[1]);
  for (const CarvingPool::Block& x : {a, b, c})
    EXPECT_EQ(reinterpret_cast<uintptr_t>(x.p) % CarvingPool::kAlign, 0u);
}

TEST_F(CarvingPoolTest, ReusesAFreedBlockOfItsSizeOnly) {
  CarvingPool pool(kPiece, map_counted);
  const CarvingPool::Block a = pool.take(256);
  pool.give(a.p, 256);
  // Another size does not get it.
  const CarvingPool::Block b = pool.take(512);
  EXPECT_NE(b.p, a.p);
  EXPECT_FALSE(b.reused);
  // The same size, given as any length that rounds alike, does.
  const CarvingPool::Block c = pool.take(200);
  EXPECT_EQ(c.p, a.p);
  EXPECT_TRUE(c.reused);
  EXPECT_EQ(g_pieces.size(), 1u);
}

TEST(CarvingPoolRounding, RoundsToACacheLine) {
  EXPECT_EQ(CarvingPool::rounded(1), 64u);
  EXPECT_EQ(CarvingPool::rounded(64), 64u);
  EXPECT_EQ(CarvingPool::rounded(65), 128u);
}

}  // namespace
}  // namespace droce::memory
