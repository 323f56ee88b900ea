// TIMELY: hand-computed runs of Mittal et al. SIGCOMM 2015 Algorithm 1 with
// alpha = beta = 0.5 so every EWMA and product is a short binary fraction.
#include "droce/cc/timely.h"

#include <gtest/gtest.h>

namespace droce::cc {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kLine = 12'500'000'000;  // 100 Gbit/s

TimelyConfig hand_config() {
  TimelyConfig c;
  c.alpha = 0.5;
  c.beta = 0.5;
  c.delta_mbps = 80;  // 1e7 B/s
  c.t_low_us = 20;
  c.t_high_us = 200;
  c.min_rtt_us = 10;  // fixed normaliser
  c.hai_threshold = 3;
  c.hai_factor = 5;
  c.initial_rate_mbps = 8000;  // 1e9 B/s
  return c;
}

AckEvent rtt(uint64_t rtt_ns) {
  AckEvent ack;
  ack.acked_bytes = 4096;
  ack.rtt_ns = rtt_ns;
  return ack;
}

TEST(Timely, GradientSteps) {
  Timely cc(hand_config(), kLine);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 1'000'000'000u);

  cc.on_ack(1, rtt(30 * kUs));
  // Expect: first sample, inside [T_low, T_high], no gradient yet: 1e9.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 1'000'000'000u);

  cc.on_ack(2, rtt(40 * kUs));
  // Expect: new_rtt_diff = 10000; rtt_diff = 0.5*0 + 0.5*10000 = 5000;
  //         gradient = 5000/10000 = 0.5 > 0: rate = 1e9*(1 - 0.5*0.5)
  //         = 7.5e8.
  EXPECT_DOUBLE_EQ(cc.rtt_diff_ns(), 5000);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 750'000'000u);

  cc.on_ack(3, rtt(30 * kUs));
  // Expect: diff -10000; rtt_diff = 2500 - 5000 = -2500; gradient -0.25;
  //         1st non-positive: rate += delta = 7.6e8.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 760'000'000u);

  cc.on_ack(4, rtt(20 * kUs));
  // Expect: 20us is not below T_low=20us; diff -10000; rtt_diff = -6250;
  //         2nd non-positive: rate = 7.7e8.
  EXPECT_DOUBLE_EQ(cc.rtt_diff_ns(), -6250);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 770'000'000u);

  cc.on_ack(5, rtt(20 * kUs));
  // Expect: diff 0; rtt_diff = -3125; 3rd non-positive = hai_threshold:
  //         HAI, rate += 5*delta = 8.2e8.
  EXPECT_EQ(cc.negative_gradient_count(), 3u);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 820'000'000u);

  cc.on_ack(6, rtt(10 * kUs));
  // Expect: RTT below T_low: rate += delta = 8.3e8 (gradient -6562.5/10000
  //         still counts: 4 in a row).
  EXPECT_EQ(cc.rate_bytes_per_sec(), 830'000'000u);
  EXPECT_EQ(cc.negative_gradient_count(), 4u);

  cc.on_ack(7, rtt(400 * kUs));
  // Expect: RTT above T_high: rate *= 1 - 0.5*(1 - 200/400) = 0.75:
  //         6.225e8; gradient positive again, HAI count resets.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 622'500'000u);
  EXPECT_EQ(cc.negative_gradient_count(), 0u);

  cc.on_ack(8, rtt(100 * kUs));
  // Expect: diff -300000; rtt_diff = 0.5*191718.75 - 150000 = -54140.625;
  //         non-positive, not yet HAI: rate += delta = 6.325e8.
  EXPECT_DOUBLE_EQ(cc.rtt_diff_ns(), -54140.625);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 632'500'000u);
}

TEST(Timely, TracksMinimumRttWhenNotFixed) {
  TimelyConfig c = hand_config();
  c.min_rtt_us = 0;
  Timely cc(c, kLine);
  cc.on_ack(1, rtt(25 * kUs));
  cc.on_ack(2, rtt(30 * kUs));
  // Expect: min RTT 25us; rtt_diff = 0.5*5000 = 2500; gradient 0.1;
  //         rate = 1e9 * (1 - 0.5*0.1) = 9.5e8.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 950'000'000u);
}

TEST(Timely, AcksWithoutRttAreIgnored) {
  Timely cc(hand_config(), kLine);
  AckEvent ack;
  ack.acked_bytes = 1 << 20;
  cc.on_ack(1, ack);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 1'000'000'000u);
  EXPECT_FALSE(cc.next_timer().has_value());
}

TEST(Timely, ClampsToMinRateAndLineRate) {
  TimelyConfig c = hand_config();
  c.min_rate_mbps = 100;  // 1.25e7 B/s
  Timely cc(c, kLine);
  for (uint64_t i = 0; i < 100; ++i) cc.on_ack(i, rtt(10'000 * kUs));
  EXPECT_EQ(cc.rate_bytes_per_sec(), 12'500'000u);
  for (uint64_t i = 0; i < 100'000; ++i) cc.on_ack(i, rtt(1 * kUs));
  EXPECT_EQ(cc.rate_bytes_per_sec(), kLine);
}

TEST(Timely, TLowAboveTHighIsAConfigError) {
  TimelyConfig c;
  c.t_low_us = 600;
  EXPECT_THROW(Timely(c, kLine), ConfigError);
}

}  // namespace
}  // namespace droce::cc
