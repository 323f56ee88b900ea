// The Swift-like worked example (docs/CC.md): hand-computed windows.
#include "droce/cc/swift.h"

#include <gtest/gtest.h>

namespace droce::cc {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kLine = 12'500'000'000;

SwiftConfig hand_config() {
  SwiftConfig c;
  c.target_delay_us = 25;
  c.ai = 4096;
  c.beta = 0.8;
  c.max_mdf = 0.5;
  c.min_cwnd = 64;
  c.max_cwnd = 204'800;
  c.init_cwnd = 102'400;
  c.mtu = 4096;
  return c;
}

AckEvent ack(uint64_t acked, uint64_t rtt_ns) {
  AckEvent a;
  a.acked_bytes = acked;
  a.rtt_ns = rtt_ns;
  return a;
}

TEST(Swift, IncreaseBelowTargetDecreaseOncePerRtt) {
  Swift cc(hand_config(), kLine);
  EXPECT_EQ(cc.window_bytes(), 102'400u);

  cc.on_ack(10 * kUs, ack(25'600, 20 * kUs));
  // Expect: 20us < 25us target: cwnd += 4096 * 25600/102400 = 1024
  //         -> 103424.
  EXPECT_EQ(cc.window_bytes(), 103'424u);

  cc.on_ack(20 * kUs, ack(4096, 50 * kUs));
  // Expect: over target: factor max(1 - 0.8*(50-25)/50, 1 - 0.5) = 0.6:
  //         103424 * 0.6 = 62054.4.
  EXPECT_DOUBLE_EQ(cc.cwnd(), 62'054.4);

  cc.on_ack(30 * kUs, ack(4096, 50 * kUs));
  cc.on_ack(80 * kUs, ack(4096, 100 * kUs));
  // Expect: both within one RTT of the last decrease (10us < 50us,
  //         60us < 100us): unchanged.
  EXPECT_DOUBLE_EQ(cc.cwnd(), 62'054.4);

  cc.on_ack(120 * kUs, ack(4096, 100 * kUs));
  // Expect: 100us since the decrease: factor max(1 - 0.8*75/100, 0.5) = 0.5
  //         (bounded by max_mdf): 31027.2 -> 31027.
  EXPECT_EQ(cc.window_bytes(), 31'027u);
  // A window of at least one MTU is ACK-clocked at line rate.
  EXPECT_EQ(cc.rate_bytes_per_sec(), kLine);
}

TEST(Swift, PacesBelowOneMtu) {
  SwiftConfig c = hand_config();
  c.init_cwnd = 2048;
  Swift cc(c, kLine);
  cc.on_ack(1, ack(1024, 20 * kUs));
  // Expect: below one MTU the increase is per ACK: 2048 + 4096*1024/4096
  //         = 3072; paced at 3072 B / 20us = 1.536e8 B/s.
  EXPECT_EQ(cc.window_bytes(), 3072u);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 153'600'000u);
}

TEST(Swift, WindowStaysWithinBounds) {
  Swift cc(hand_config(), kLine);
  for (uint64_t i = 0; i < 1000; ++i) {
    cc.on_ack(i * 1000 * kUs, ack(4096, 10'000 * kUs));
  }
  EXPECT_EQ(cc.window_bytes(), 64u);
  for (uint64_t i = 0; i < 100'000; ++i) {
    cc.on_ack(i, ack(1'000'000, 1 * kUs));
  }
  EXPECT_EQ(cc.window_bytes(), 204'800u);
}

}  // namespace
}  // namespace droce::cc
