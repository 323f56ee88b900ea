#include "droce/wire/psn.h"

#include <gtest/gtest.h>

namespace droce::wire {
namespace {

TEST(Psn, AddWrapsAt24Bits) {
  // Expect: 0xFFFFFF + 1 wraps to 0 (IBA 9.7.1).
  EXPECT_EQ(psn_add(0xFFFFFF, 1), 0u);
  EXPECT_EQ(psn_add(0xFFFFF0, 0x20), 0x10u);
  EXPECT_EQ(psn_add(5, 0), 5u);
}

TEST(Psn, CompareAcrossWrap) {
  // Expect: 0 comes after 0xFFFFFF; 0x10 after 0xFFFFF0.
  EXPECT_TRUE(psn_gt(0, 0xFFFFFF));
  EXPECT_TRUE(psn_lt(0xFFFFFF, 0));
  EXPECT_TRUE(psn_gt(0x10, 0xFFFFF0));
  EXPECT_EQ(psn_diff(0x10, 0xFFFFF0), 0x20);
  EXPECT_EQ(psn_diff(0xFFFFF0, 0x10), -0x20);
  EXPECT_TRUE(psn_le(7, 7));
  EXPECT_TRUE(psn_ge(7, 7));
}

TEST(Psn, HalfSpaceBoundary) {
  // Expect: just under half the space ahead is "later"; exactly half is the
  // most negative difference (behind).
  EXPECT_EQ(psn_diff(kPsnHalfSpace - 1, 0), static_cast<int32_t>(kPsnHalfSpace - 1));
  EXPECT_EQ(psn_diff(kPsnHalfSpace, 0), -static_cast<int32_t>(kPsnHalfSpace));
}

TEST(Psn, DistanceGoesForward) {
  EXPECT_EQ(psn_distance(0xFFFFFE, 2), 4u);
  EXPECT_EQ(psn_distance(3, 3), 0u);
  EXPECT_EQ(psn_distance(4, 3), kPsnMask);
}

}  // namespace
}  // namespace droce::wire
