// The shipped 16-to-1 incast scenarios at 100 Gb/s (examples/sim/), run in
// virtual time: with PFC on and no CC, pauses and no drops; with PFC off and
// a small buffer, drops, retransmissions, and every message still byte-exact.
#include <gtest/gtest.h>

#include "droce/sim/simulator.h"

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

TEST(SimIncast, SixteenToOneWithPfcIsLossless) {
  Simulator s(example("incast-16to1-pfc.toml"));
  s.run();
  const Summary sum = s.summary();
  ASSERT_TRUE(sum.all_done);
  expect_all_verified(s);
  EXPECT_EQ(sum.flows_verified, 16u);
  EXPECT_GT(sum.xoff_sent, 0u);
  EXPECT_EQ(sum.switch_drops, 0u);
  EXPECT_EQ(sum.link_losses, 0u);
  EXPECT_EQ(sum.retransmits, 0u);
  // 16 MiB through one 100 G port: ~1.35 ms of serialization at best.
  EXPECT_GE(sum.fct_max_ns, 1'340'000u);
  EXPECT_LE(sum.fct_max_ns, 1'600'000u);
}

TEST(SimIncast, SixteenToOneWithoutPfcDropsAndRecovers) {
  Simulator s(example("incast-16to1-lossy.toml"));
  s.run();
  const Summary sum = s.summary();
  ASSERT_TRUE(sum.all_done) << "virtual time " << s.now();
  EXPECT_EQ(sum.xoff_sent, 0u);
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

}  // namespace
}  // namespace droce::sim
