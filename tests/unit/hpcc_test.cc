// HPCC: hand-computed runs of Li et al. SIGCOMM 2019 Algorithm 1.
// Line rate 100 Gbit/s = 12.5e9 B/s, T = 10us, so B*T = W_init = 125000 B.
#include "droce/cc/hpcc.h"

#include <gtest/gtest.h>

namespace droce::cc {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kLine = 12'500'000'000;

HpccConfig hand_config() {
  HpccConfig c;
  c.eta = 0.95;
  c.max_stage = 5;
  c.w_ai = 100;
  c.base_rtt_us = 10;
  return c;
}

AckEvent int_ack(uint64_t acked, uint64_t ts, uint64_t tx, uint64_t qlen) {
  AckEvent ack;
  ack.acked_bytes = acked;
  ack.int_hops.push({ts, tx, qlen, kLine});
  return ack;
}

TEST(Hpcc, StartsAtLineRateWithBdpWindow) {
  Hpcc cc(hand_config(), kLine);
  EXPECT_EQ(cc.window_bytes(), 125'000u);
  EXPECT_EQ(cc.rate_bytes_per_sec(), kLine);
}

TEST(Hpcc, WindowAfterIntAcks) {
  Hpcc cc(hand_config(), kLine);
  cc.on_send(0, 200'000);

  cc.on_ack(10 * kUs, int_ack(1000, 10'000, 1'000'000, 50'000));
  // Expect: first INT only records L; window unchanged.
  EXPECT_EQ(cc.window_bytes(), 125'000u);

  cc.on_ack(20 * kUs, int_ack(1000, 20'000, 1'125'000, 31'250));
  // Expect: txRate = 125000 B / 10000 ns = 12.5e9 = B -> 1.0;
  //         queue term min(31250, 50000) / 125000 = 0.25; u = 1.25;
  //         tau = 10us = T so U = 1.25 >= eta:
  //         W = 125000 / (1.25/0.95) + 100 = 95000 + 100 = 95100;
  //         seq 2000 > lastUpdateSeq 0: W^c = 95100, stage 0,
  //         lastUpdateSeq = snd_nxt = 200000. Rate = W/T = 9.51e9.
  EXPECT_NEAR(cc.utilisation(), 1.25, 1e-12);
  EXPECT_EQ(cc.window_bytes(), 95'100u);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 9'510'000'000u);
  EXPECT_NEAR(cc.reference_window(), 95'100, 1e-6);

  cc.on_ack(25 * kUs, int_ack(1000, 25'000, 1'150'000, 0));
  // Expect: txRate = 25000/5000 ns = 5e9 -> 0.4; queue min(0, 31250) = 0;
  //         tau = 5us: U = 0.5*1.25 + 0.5*0.4 = 0.825 < eta, stage 0 < 5:
  //         W = W^c + 100 = 95200; seq 3000 <= 200000: W^c stays 95100.
  EXPECT_NEAR(cc.utilisation(), 0.825, 1e-12);
  EXPECT_EQ(cc.window_bytes(), 95'200u);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 9'520'000'000u);

  cc.on_ack(30 * kUs, int_ack(1000, 30'000, 1'175'000, 0));
  // Expect: U = 0.5*0.825 + 0.5*0.4 = 0.6125; W = 95100 + 100 = 95200 again
  //         (fast reaction from the same reference, no compounding).
  EXPECT_NEAR(cc.utilisation(), 0.6125, 1e-12);
  EXPECT_EQ(cc.window_bytes(), 95'200u);
  EXPECT_EQ(cc.inc_stage(), 0u);

  cc.on_ack(40 * kUs, int_ack(200'000, 40'000, 1'225'000, 0));
  // Expect: seq 203000 > 200000 closes the RTT: tau = T, U = 0.4:
  //         W = 95100 + 100 = 95200 and now W^c = 95200, stage 1.
  EXPECT_EQ(cc.window_bytes(), 95'200u);
  EXPECT_NEAR(cc.reference_window(), 95'200, 1e-6);
  EXPECT_EQ(cc.inc_stage(), 1u);
}

TEST(Hpcc, MaxStageSwitchesToMultiplicativeIncreaseAndClamps) {
  HpccConfig c = hand_config();
  c.max_stage = 1;
  Hpcc cc(c, kLine);
  uint64_t t = 0;
  uint64_t tx = 0;
  auto step = [&](uint64_t tx_bytes, uint64_t qlen) {
    cc.on_send(t, 1);
    t += 10 * kUs;
    tx += tx_bytes;
    cc.on_ack(t, int_ack(1, t, tx, qlen));
  };
  step(0, 112'500);        // primes L
  step(125'000, 112'500);  // u = 0.9 + 1.0 = 1.9
  // Expect: W = 125000 / (1.9/0.95) + 100 = 62500 + 100 = 62600, stage 0.
  EXPECT_EQ(cc.window_bytes(), 62'600u);
  step(59'375, 0);  // u = 0.475 < eta, stage 0 < 1
  // Expect: W = 62600 + 100 = 62700, stage 1.
  EXPECT_EQ(cc.window_bytes(), 62'700u);
  step(59'375, 0);  // stage 1 >= max_stage: multiplicative
  // Expect: W = 62700 / (0.475/0.95) + 100 = 125500, clamped to W_init
  //         125000 (rate never above line rate).
  EXPECT_EQ(cc.window_bytes(), 125'000u);
  EXPECT_EQ(cc.rate_bytes_per_sec(), kLine);
  EXPECT_EQ(cc.inc_stage(), 0u);
}

TEST(Hpcc, PicksTheMostUtilisedHop) {
  Hpcc cc(hand_config(), kLine);
  cc.on_send(0, 1'000'000);
  AckEvent a;
  a.acked_bytes = 1;
  a.int_hops.push({10'000, 0, 0, kLine});
  a.int_hops.push({10'000, 0, 0, kLine / 2});
  cc.on_ack(10 * kUs, a);
  AckEvent b;
  b.acked_bytes = 1;
  // Hop 0 sends 62500 B in 10us (u = 0.5); hop 1, a 50G link, sends the
  // same (u = 1.0 on its own rate).
  b.int_hops.push({20'000, 62'500, 0, kLine});
  b.int_hops.push({20'000, 62'500, 0, kLine / 2});
  cc.on_ack(20 * kUs, b);
  // Expect: U = 1.0 from hop 1: W = 125000 * 0.95 + 100 = 118850.
  EXPECT_NEAR(cc.utilisation(), 1.0, 1e-12);
  EXPECT_EQ(cc.window_bytes(), 118'850u);
}

TEST(Hpcc, PathChangeResetsHopState) {
  Hpcc cc(hand_config(), kLine);
  cc.on_send(0, 1'000'000);
  cc.on_ack(10 * kUs, int_ack(1, 10'000, 0, 0));
  AckEvent two_hops;
  two_hops.acked_bytes = 1;
  two_hops.int_hops.push({20'000, 125'000, 100'000, kLine});
  two_hops.int_hops.push({20'000, 125'000, 100'000, kLine});
  cc.on_ack(20 * kUs, two_hops);
  // Expect: hop count changed: no measurement, window unchanged.
  EXPECT_EQ(cc.window_bytes(), 125'000u);
}

// A sprayed QP's packets cross a different uplink each: a hop is compared
// with the last record of its own link, never with another port's counter.
TEST(Hpcc, ComparesEachHopWithItsOwnLinkOnManyPaths) {
  Hpcc cc(hand_config(), kLine);
  cc.on_send(0, 1'000'000);
  auto via = [](uint64_t link, uint64_t ts, uint64_t tx) {
    AckEvent a;
    a.acked_bytes = 1;
    a.int_hops.push({ts, tx, 0, kLine, link});
    return a;
  };
  cc.on_ack(10 * kUs, via(1, 10'000, 0));
  // Expect: link 2 is new, its counter far ahead of link 1's: no
  // measurement (hop 0 against hop 0 would read 200 B/ns, u = 16).
  cc.on_ack(15 * kUs, via(2, 15'000, 1'000'000));
  EXPECT_EQ(cc.window_bytes(), 125'000u);
  // Expect: link 1 again, against its own record 10us before: 125000 B in
  // 10us, u = 1.0: W = 125000 * 0.95 + 100 = 118850.
  cc.on_ack(20 * kUs, via(1, 20'000, 125'000));
  EXPECT_NEAR(cc.utilisation(), 1.0, 1e-12);
  EXPECT_EQ(cc.window_bytes(), 118'850u);
}

TEST(Hpcc, WindowNeverBelowMinRateTimesT) {
  HpccConfig c = hand_config();
  c.min_rate_mbps = 1000;  // 1.25e8 B/s * 10us = 1250 B
  Hpcc cc(c, kLine);
  uint64_t tx = 0;
  for (uint64_t i = 1; i < 100; ++i) {
    cc.on_send(i, 1);
    tx += 125'000;
    cc.on_ack(i * 10 * kUs, int_ack(1, i * 10'000, tx, 10'000'000));
  }
  EXPECT_EQ(cc.window_bytes(), 1250u);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 125'000'000u);
}

}  // namespace
}  // namespace droce::cc
