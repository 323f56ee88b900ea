// The shipped 16-to-1 incast scenarios at 100 Gb/s (examples/sim/), run in
// virtual time: with PFC on and no CC, pauses and no drops; with PFC off and
// a small buffer, drops, retransmissions, and every message still byte-exact.
#include <gtest/gtest.h>

#include "droce/sim/simulator.h"
#include "droce/wire/pfc.h"

#ifndef DROCE_EXAMPLES_DIR
#error "DROCE_EXAMPLES_DIR must point at examples/sim"
#endif

namespace droce::sim {
namespace {

Scenario example(const char* name) {
  return load_scenario(std::string(DROCE_EXAMPLES_DIR) + "/" + name);
}

void expect_all_verified(const Simulator& s) {
  for (size_t f = 0; f < s.num_flows(); ++f) {
    EXPECT_TRUE(s.flow(f).done()) << s.flow_spec(f).name;
    EXPECT_EQ(s.flow(f).failed, 0u) << s.flow_spec(f).name;
    EXPECT_TRUE(s.verify(f)) << s.flow_spec(f).name << ": destination memory differs";
  }
}

// PFC held the queue: pauses were sent, nothing was lost or resent.
void expect_lossless(const Summary& sum) {
  EXPECT_GT(sum.xoff_sent, 0u);
  EXPECT_EQ(sum.switch_drops, 0u);
  EXPECT_EQ(sum.link_losses, 0u);
  EXPECT_EQ(sum.retransmits, 0u);
}

TEST(SimIncast, SixteenToOneWithPfcIsLossless) {
  Simulator s(example("incast-16to1-pfc.toml"));
  s.run();
  const Summary sum = s.summary();
  ASSERT_TRUE(sum.all_done);
  expect_all_verified(s);
  EXPECT_EQ(sum.flows_verified, 16u);
  expect_lossless(sum);
  // 16 MiB through one 100 G port: ~1.35 ms of serialization at best.
  EXPECT_GE(sum.fct_max_ns, 1'340'000u);
  EXPECT_LE(sum.fct_max_ns, 1'600'000u);
}

// The senders' side of PFC: each host the switch sent XOFF to was paused,
// no longer than its XOFFs could hold it, and the summary is their sum.
TEST(SimIncast, SixteenToOneWithPfcReportsHostPauseTime) {
  Simulator s(example("incast-16to1-pfc.toml"));
  s.run();
  const Summary sum = s.summary();
  ASSERT_TRUE(sum.all_done);
  const fabric::Switch& sw = s.switch_at(0);
  const uint64_t pause_ns =
      wire::pfc_quanta_to_ns(sw.config().pfc.pause_quanta, 100 * fabric::kGbps);
  uint64_t total = 0;
  for (size_t h = 0; h < s.num_hosts(); ++h) {
    // Appended, not "h" + std::to_string(h): GCC 12 at -O3 (CI's release
    // build) takes that for an overlapping memcpy (-Wrestrict, GCC PR 105329).
    std::string name = "h";
    name += std::to_string(h);
    uint16_t port = 0;  // the switch port facing host h
    while (port < sw.num_ports() && s.port_peer(0, port) != name) ++port;
    ASSERT_LT(port, sw.num_ports()) << name;
    const fabric::PortCounters& pc = sw.counters(port);
    const uint64_t paused = s.host_endpoint(h).paused_ns(3, s.now());
    total += paused;
    // Only the lossless priority 3 is ever paused.
    for (uint8_t p = 0; p < 8; ++p) {
      if (p == 3) continue;
      EXPECT_EQ(s.host_endpoint(h).paused_ns(p, s.now()), 0u) << name;
    }
    // Every PFC frame the switch sent this host arrived (nothing is lost).
    EXPECT_EQ(s.host_endpoint(h).counters().rx_pfc_frames, pc.tx_xoff + pc.tx_xon) << name;
    if (pc.tx_xoff == 0) {
      EXPECT_EQ(paused, 0u) << name;  // the receiver h0
      continue;
    }
    EXPECT_GT(paused, 0u) << name;
    EXPECT_LE(paused, pc.tx_xoff * pause_ns) << name;
    // Without CC a sender sends at line rate whenever it is not paused:
    // 1 MiB takes ~84 us of its FCT, and pauses take most of the rest.
    const uint64_t fct = s.flow(h - 1).fct_ns();
    EXPECT_LT(paused, fct) << name;
    EXPECT_GT(paused, fct / 2) << name;
  }
  EXPECT_EQ(sum.host_paused_ns, total);
  EXPECT_GT(sum.host_paused_ns, 0u);
  EXPECT_NE(s.summary_json().find("\"host_paused_ns\": " + std::to_string(total)),
            std::string::npos);
}

TEST(SimIncast, SixteenToOneWithoutPfcDropsAndRecovers) {
  Simulator s(example("incast-16to1-lossy.toml"));
  s.run();
  const Summary sum = s.summary();
  ASSERT_TRUE(sum.all_done) << "virtual time " << s.now();
  EXPECT_EQ(sum.xoff_sent, 0u);
  EXPECT_EQ(sum.host_paused_ns, 0u);
  EXPECT_GT(sum.switch_drops, 0u);
  EXPECT_GT(sum.retransmits, 0u);
  expect_all_verified(s);
  EXPECT_EQ(sum.flows_verified, 16u);
}

TEST(SimIncast, TwoToOneExampleCompletes) {
  Simulator s(example("incast-2to1.toml"));
  s.run();
  ASSERT_TRUE(s.all_done());
  expect_all_verified(s);
  EXPECT_EQ(s.summary().switch_drops, 0u);
}

// A switch that classifies by PCP: the hosts tag their frames with their
// class (a priority tag, PCP = DSCP >> 3), so the RoCE traffic is still
// class 3, paused losslessly; untagged, it all fell into class 0, where PFC
// is off, and the switch dropped.
TEST(SimIncast, TwoToOneClassifiedByPcpIsLossless) {
  Scenario sc = example("incast-2to1.toml");
  for (auto& sw : sc.switches) sw.cfg.classifier = fabric::Classifier::kPcp;
  Simulator s(sc);
  s.run();
  const Summary sum = s.summary();
  ASSERT_TRUE(sum.all_done);
  expect_all_verified(s);
  expect_lossless(sum);
  EXPECT_GT(sum.p99_queue_bytes, 0u);  // class 3, the one sampled, held the queue
}

}  // namespace
}  // namespace droce::sim
