// The TX watchdog's rule: when held frames stop waiting for a port's queue.
#include "tx_watchdog.h"

#include <gtest/gtest.h>

namespace droce::engine {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kStart = 100'000 * kMs;  // an arbitrary clock reading

TEST(TxWatchdog, ALinkNeverUpIsWaitedForFiveSeconds) {
  EXPECT_FALSE(tx_held_too_long(kStart, 0, 0, kStart + kFirstLinkUpWaitNs));
  EXPECT_TRUE(tx_held_too_long(kStart, 0, 0, kStart + kFirstLinkUpWaitNs + 1));
}

TEST(TxWatchdog, FramesHeldBeforeTheLinkCameUpGetTheWholeTimeFromTheLinkUp) {
  // Held for 500 ms waiting for the peer, then the link comes up: the queue
  // is not judged stuck at once, but 200 ms later.
  const uint64_t up = kStart + 500 * kMs;
  EXPECT_FALSE(tx_held_too_long(kStart, 0, up, up));
  EXPECT_FALSE(tx_held_too_long(kStart, 0, up, up + kTxStuckNs));
  EXPECT_TRUE(tx_held_too_long(kStart, 0, up, up + kTxStuckNs + 1));
}

TEST(TxWatchdog, AQueueRefusingEverythingOnALiveLinkIsStuckAfter200ms) {
  const uint64_t up = kStart - 10'000 * kMs;  // up long before the frames came
  EXPECT_FALSE(tx_held_too_long(kStart, 0, up, kStart + kTxStuckNs));
  EXPECT_TRUE(tx_held_too_long(kStart, 0, up, kStart + kTxStuckNs + 1));
}

TEST(TxWatchdog, AQueueThatStillTakesFramesIsNotStuck) {
  const uint64_t up = kStart - 10'000 * kMs;
  const uint64_t took = kStart + 150 * kMs;  // some of the held frames left then
  EXPECT_FALSE(tx_held_too_long(kStart, took, up, took + kTxStuckNs));
  EXPECT_TRUE(tx_held_too_long(kStart, took, up, took + kTxStuckNs + 1));
}

}  // namespace
}  // namespace droce::engine
