// DCQCN reaction point: hand-computed sequences from Zhu et al. SIGCOMM 2015
// §3.1 (Eq. 1-2, Fig. 7) with mlx5's parameterisation. Parameters are chosen
// so every intermediate value is a short binary fraction: g = 1/4
// (rp_dce_tcp_g 768), alpha_0 = 1/2 (rp_initial_alpha_value 512),
// cut = alpha/2 (rp_gd 11).
#include "droce/cc/dcqcn.h"
#include "droce/cc/registry.h"

#include <gtest/gtest.h>

namespace droce::cc {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kLine = 12'500'000'000;  // 100 Gbit/s in bytes/s

DcqcnConfig hand_config() {
  DcqcnConfig c;
  c.rp_initial_alpha_value = 512;  // alpha_0 = 0.5
  c.rp_dce_tcp_g = 768;            // g = (1024-768)/1024 = 0.25
  c.rp_gd = 11;                    // cut = alpha * 2^(10-11) = alpha/2
  c.rp_dce_tcp_rtt_us = 55;        // K, the paper's alpha timer
  c.rp_time_reset_us = 100;        // increase timer
  c.rp_byte_reset = 0;             // byte counter off
  c.rp_threshold = 1;              // F
  c.rp_ai_rate_mbps = 400;         // R_AI = 5e7 B/s
  c.rp_hai_rate_mbps = 800;        // R_HAI = 1e8 B/s
  c.rp_rate_reduce_monitor_period_us = 4;
  return c;
}

TEST(Dcqcn, StartsAtLineRateWithNoTimer) {
  Dcqcn cc(hand_config(), kLine);
  EXPECT_EQ(cc.rate_bytes_per_sec(), kLine);
  EXPECT_FALSE(cc.next_timer().has_value());
  EXPECT_FALSE(cc.window_bytes().has_value());
  EXPECT_FALSE(cc.rate_limited());
}

TEST(Dcqcn, TwoCutsThenThreeTimerIncreases) {
  Dcqcn cc(hand_config(), kLine);

  cc.on_cnp(0);
  // Expect: R_T = 12.5e9; R_C = 12.5e9 * (1 - 0.5/2) = 9.375e9;
  //         alpha = 0.75*0.5 + 0.25 = 0.625.
  EXPECT_DOUBLE_EQ(cc.target_rate(), 12.5e9);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 9'375'000'000u);
  EXPECT_DOUBLE_EQ(cc.alpha(), 0.625);
  EXPECT_EQ(cc.next_timer(), 100 * kUs);

  cc.on_cnp(10 * kUs);  // 10us >= 4us monitor period: cuts now
  // Expect: no alpha decay yet (10us < K=55us);
  //         R_T = 9.375e9; R_C = 9.375e9 * (1 - 0.625/2) = 6.4453125e9;
  //         alpha = 0.75*0.625 + 0.25 = 0.71875; alpha timer restarts at 10us.
  EXPECT_DOUBLE_EQ(cc.target_rate(), 9.375e9);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 6'445'312'500u);
  EXPECT_DOUBLE_EQ(cc.alpha(), 0.71875);
  EXPECT_EQ(cc.next_timer(), 110 * kUs);

  cc.on_timer(110 * kUs);
  // Expect: T=1, not > F: fast recovery R_C = (9.375e9 + 6.4453125e9)/2
  //         = 7.91015625e9; alpha: one K elapsed (10->65us):
  //         0.71875 * 0.75 = 0.5390625.
  EXPECT_EQ(cc.time_stage(), 1u);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 7'910'156'250u);
  EXPECT_DOUBLE_EQ(cc.alpha(), 0.5390625);

  cc.on_timer(210 * kUs);
  // Expect: T=2 > F: additive R_T = 9.375e9 + 5e7 = 9.425e9;
  //         R_C = (9.425e9 + 7.91015625e9)/2 = 8.667578125e9;
  //         alpha: two more K (65->175us): 0.5390625 * 0.75^2 = 0.30322265625.
  EXPECT_DOUBLE_EQ(cc.target_rate(), 9.425e9);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 8'667'578'125u);
  EXPECT_DOUBLE_EQ(cc.alpha(), 0.30322265625);

  cc.on_timer(310 * kUs);
  // Expect: T=3: R_T = 9.475e9; R_C = (9.475e9 + 8.667578125e9)/2
  //         = 9.0712890625e9 (output rounds to ...063);
  //         alpha: two more K (175->285us): 0.30322265625 * 0.5625
  //         = 0.170562744140625.
  EXPECT_DOUBLE_EQ(cc.target_rate(), 9.475e9);
  EXPECT_DOUBLE_EQ(cc.current_rate(), 9.0712890625e9);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 9'071'289'063u);
  EXPECT_DOUBLE_EQ(cc.alpha(), 0.170562744140625);
  EXPECT_EQ(cc.next_timer(), 410 * kUs);
}

TEST(Dcqcn, TargetRateIsCappedAtTheLineBeforeTheAverage) {
  Dcqcn cc(hand_config(), kLine);
  cc.on_cnp(0);  // R_T = 12.5e9, R_C = 9.375e9
  cc.on_timer(100 * kUs);
  // Expect: fast recovery R_C = (12.5e9 + 9.375e9)/2 = 10.9375e9.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 10'937'500'000u);
  cc.on_timer(200 * kUs);
  // Expect: additive R_T = 12.5e9 + 5e7, capped at the line 12.5e9 first;
  //         R_C = (12.5e9 + 10.9375e9)/2 = 11.71875e9 (not 11.74375e9).
  EXPECT_DOUBLE_EQ(cc.target_rate(), 12.5e9);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 11'718'750'000u);
}

TEST(Dcqcn, ByteCounterDrivesAdditiveThenHyperIncrease) {
  DcqcnConfig c = hand_config();
  c.rp_byte_reset = 1'000'000;
  c.rp_rate_to_set_on_first_cnp_mbps = 40'000;  // 5e9 B/s
  Dcqcn cc(c, kLine);

  cc.on_cnp(0);
  // Expect: first CNP sets R_C = R_T = 5e9 without a cut; alpha = 0.5.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 5'000'000'000u);
  EXPECT_DOUBLE_EQ(cc.alpha(), 0.5);

  cc.on_cnp(10 * kUs);
  // Expect: R_T = 5e9, R_C = 5e9 * 0.75 = 3.75e9, alpha = 0.625.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 3'750'000'000u);

  cc.on_send(20 * kUs, 2'000'000);
  // Expect: two byte stages. BC=1: fast recovery R_C = (5e9+3.75e9)/2
  //         = 4.375e9. BC=2 > F, T=0: additive R_T = 5.05e9,
  //         R_C = (5.05e9 + 4.375e9)/2 = 4.7125e9.
  EXPECT_EQ(cc.byte_stage(), 2u);
  EXPECT_DOUBLE_EQ(cc.target_rate(), 5.05e9);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 4'712'500'000u);

  cc.on_timer(110 * kUs);
  // Expect: T=1, BC=2: one counter > F: additive R_T = 5.1e9,
  //         R_C = (5.1e9 + 4.7125e9)/2 = 4.90625e9.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 4'906'250'000u);

  cc.on_timer(210 * kUs);
  // Expect: T=2, BC=2: both > F: hyper, i = min(2,2)-1 = 1:
  //         R_T = 5.1e9 + 1e8 = 5.2e9; R_C = (5.2e9 + 4.90625e9)/2
  //         = 5.053125e9.
  EXPECT_DOUBLE_EQ(cc.target_rate(), 5.2e9);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 5'053'125'000u);

  cc.on_send(220 * kUs, 999'999);
  EXPECT_EQ(cc.byte_stage(), 2u);  // one byte short of a stage
  cc.on_send(221 * kUs, 1);
  // Expect: BC=3, T=2: i = 1: R_T = 5.3e9; R_C = (5.3e9 + 5.053125e9)/2
  //         = 5.1765625e9.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 5'176'562'500u);

  cc.on_timer(310 * kUs);
  // Expect: T=3, BC=3: i = 2: R_T = 5.3e9 + 2e8 = 5.5e9;
  //         R_C = (5.5e9 + 5.1765625e9)/2 = 5.33828125e9.
  EXPECT_DOUBLE_EQ(cc.target_rate(), 5.5e9);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 5'338'281'250u);
}

TEST(Dcqcn, AtMostOneCutPerMonitorPeriod) {
  DcqcnConfig c = hand_config();
  c.rp_rate_reduce_monitor_period_us = 50;
  Dcqcn cc(c, kLine);

  cc.on_cnp(0);  // R_C = 9.375e9, alpha = 0.625
  cc.on_cnp(10 * kUs);
  cc.on_cnp(30 * kUs);
  // Expect: both CNPs fall inside [0, 50us): no cut yet, one cut pending at
  //         50us, which is earlier than the increase timer at 100us.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 9'375'000'000u);
  EXPECT_EQ(cc.next_timer(), 50 * kUs);

  cc.on_timer(50 * kUs);
  // Expect: one merged cut: R_C = 9.375e9 * (1 - 0.625/2) = 6.4453125e9;
  //         alpha = 0.71875 (no decay: last CNP at 30us, 20us < K);
  //         increase timer restarts at 50 + 100 = 150us.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 6'445'312'500u);
  EXPECT_DOUBLE_EQ(cc.alpha(), 0.71875);
  EXPECT_EQ(cc.next_timer(), 150 * kUs);
}

TEST(Dcqcn, RpGdSetsDepthOfCut) {
  DcqcnConfig c = hand_config();
  c.rp_gd = 12;  // cut = alpha * 2^(10-12) = alpha/4
  Dcqcn cc(c, kLine);
  cc.on_cnp(0);
  // Expect: R_C = 12.5e9 * (1 - 0.5/4) = 10.9375e9.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 10'937'500'000u);
}

TEST(Dcqcn, MinDecFacBoundsOneCut) {
  DcqcnConfig c = hand_config();
  c.rp_initial_alpha_value = 1024;  // alpha = 1: the paper would halve
  c.rp_min_dec_fac = 90;            // but keep at least 90%
  Dcqcn cc(c, kLine);
  cc.on_cnp(0);
  // Expect: R_C = 12.5e9 * max(1 - 1/2, 0.9) = 11.25e9.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 11'250'000'000u);
}

TEST(Dcqcn, RateNeverBelowMinRate) {
  DcqcnConfig c = hand_config();
  c.rp_min_rate_mbps = 1000;  // 1.25e8 B/s
  c.rp_rate_reduce_monitor_period_us = 0;
  Dcqcn cc(c, kLine);
  for (uint64_t t = 0; t < 200; ++t) {
    cc.on_cnp(t * kUs);
    ASSERT_GE(cc.rate_bytes_per_sec(), 125'000'000u);
  }
  // Expect: 200 cuts of at least alpha/2 each end at the floor exactly.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 125'000'000u);
}

TEST(Dcqcn, RecoversToLineRateAndReleasesTimers) {
  DcqcnConfig c = hand_config();
  c.rp_ai_rate_mbps = 10'000;
  Dcqcn cc(c, kLine);
  cc.on_cnp(0);
  int steps = 0;
  while (auto deadline = cc.next_timer()) {
    cc.on_timer(*deadline);
    ASSERT_LE(cc.rate_bytes_per_sec(), kLine);
    ASSERT_LT(++steps, 10'000);
  }
  // Expect: R_T pinned at line rate, R_C converges and the limiter is
  //         released: line rate, no timers.
  EXPECT_EQ(cc.rate_bytes_per_sec(), kLine);
  EXPECT_FALSE(cc.rate_limited());
  // A new CNP starts over from rp_initial_alpha_value.
  cc.on_cnp(1'000'000 * kUs);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 9'375'000'000u);
}

TEST(Dcqcn, OverdueTimersFireBeforeAnEvent) {
  Dcqcn a(hand_config(), kLine);
  Dcqcn b(hand_config(), kLine);
  a.on_cnp(0);
  b.on_cnp(0);
  // a is driven by its timers, b only sees a CNP at 250us: b must first
  // apply the increases due at 100us and 200us, then cut.
  a.on_timer(100 * kUs);
  a.on_timer(200 * kUs);
  a.on_cnp(250 * kUs);
  b.on_cnp(250 * kUs);
  EXPECT_EQ(a.rate_bytes_per_sec(), b.rate_bytes_per_sec());
  EXPECT_DOUBLE_EQ(a.alpha(), b.alpha());
  EXPECT_EQ(a.next_timer(), b.next_timer());
}

TEST(Dcqcn, ExposesNpInterval) {
  DcqcnConfig c;
  EXPECT_EQ(Dcqcn(c, kLine).np_min_time_between_cnps_ns(), 4000u);
  c.np_min_time_between_cnps_us = 50;
  EXPECT_EQ(Dcqcn(c, kLine).np_min_time_between_cnps_ns(), 50'000u);
}

TEST(Dcqcn, MinRateAboveLineRateIsAConfigError) {
  DcqcnConfig c;
  c.rp_min_rate_mbps = 200'000;
  EXPECT_THROW(Dcqcn(c, kLine), ConfigError);
}

// clamp_tgt_rate = 1 (the paper, the default): every cut sets R_T = R_C,
// even a second cut before any increase.
TEST(Dcqcn, ClampTgtRateOneSetsTargetOnEveryCut) {
  DcqcnConfig c = hand_config();
  c.clamp_tgt_rate = 1;
  Dcqcn cc(c, kLine);
  cc.on_cnp(0);
  cc.on_cnp(10 * kUs);
  // Expect: R_T = R_C before the second cut = 9.375e9;
  //         R_C = 9.375e9 * (1 - 0.625/2) = 6.4453125e9.
  EXPECT_DOUBLE_EQ(cc.target_rate(), 9.375e9);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 6'445'312'500u);
  cc.on_timer(110 * kUs);
  // Expect: fast recovery towards the cut rate:
  //         R_C = (9.375e9 + 6.4453125e9)/2 = 7.91015625e9.
  EXPECT_EQ(cc.rate_bytes_per_sec(), 7'910'156'250u);
}

// clamp_tgt_rate = 0 (mlx5 firmware, the HPCC authors' ns-3 DCQCN): a cut
// sets R_T = R_C only when the increase timer fired since the last cut.
TEST(Dcqcn, ClampTgtRateZeroKeepsTargetUntilATimerIncrease) {
  DcqcnConfig c = hand_config();
  c.clamp_tgt_rate = 0;
  Dcqcn cc(c, kLine);
  cc.on_cnp(0);
  // Expect: first cut from line rate as before: R_T = 12.5e9, R_C = 9.375e9.
  EXPECT_DOUBLE_EQ(cc.target_rate(), 12.5e9);
  cc.on_cnp(10 * kUs);
  // Expect: no timer increase since the first cut (T = 0): R_T stays
  //         12.5e9; R_C = 9.375e9 * (1 - 0.625/2) = 6.4453125e9.
  EXPECT_DOUBLE_EQ(cc.target_rate(), 12.5e9);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 6'445'312'500u);
  cc.on_timer(110 * kUs);
  // Expect: T = 1, fast recovery towards the old target:
  //         R_C = (12.5e9 + 6.4453125e9)/2 = 9.47265625e9.
  EXPECT_EQ(cc.time_stage(), 1u);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 9'472'656'250u);
  cc.on_cnp(120 * kUs);
  // Expect: the timer fired since the last cut: R_T = R_C = 9.47265625e9;
  //         alpha decayed one K (65->120us): 0.5390625 * 0.75 = 0.404296875;
  //         R_C = 9.47265625e9 * (1 - 0.404296875/2) = 7557773590.087891.
  EXPECT_DOUBLE_EQ(cc.target_rate(), 9.47265625e9);
  EXPECT_EQ(cc.rate_bytes_per_sec(), 7'557'773'590u);
  EXPECT_EQ(cc.time_stage(), 0u);
}

// Byte-counter increases alone do not re-arm the clamp (mlx5
// clamp_tgt_rate_after_time_inc, as the HPCC authors' ns-3 code has it).
TEST(Dcqcn, ClampTgtRateZeroIgnoresByteCounterIncreases) {
  DcqcnConfig c = hand_config();
  c.clamp_tgt_rate = 0;
  c.rp_byte_reset = 1'000'000;
  Dcqcn cc(c, kLine);
  cc.on_cnp(0);                  // R_T = 12.5e9, R_C = 9.375e9
  cc.on_send(5 * kUs, 1'000'000);  // BC = 1: R_C = (12.5e9 + 9.375e9)/2
  EXPECT_EQ(cc.rate_bytes_per_sec(), 10'937'500'000u);
  cc.on_cnp(10 * kUs);
  // Expect: T = 0, so R_T stays 12.5e9.
  EXPECT_DOUBLE_EQ(cc.target_rate(), 12.5e9);
}

TEST(Dcqcn, ClampTgtRateByNameAndAlias) {
  for (const char* key : {"clamp_tgt_rate", "rp_clamp_tgt_rate"}) {
    auto cc = make_algorithm("dcqcn", {{key, "0"}}, kLine);
    cc->on_cnp(0);
    cc->on_cnp(10 * kUs);
    EXPECT_DOUBLE_EQ(dynamic_cast<Dcqcn&>(*cc).target_rate(), 12.5e9) << key;
  }
  EXPECT_THROW(make_algorithm("dcqcn", {{"clamp_tgt_rate", "2"}}, kLine), ConfigError);
}

}  // namespace
}  // namespace droce::cc
