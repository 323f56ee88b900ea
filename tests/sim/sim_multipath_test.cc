// Multipath in the simulator: the scenario keys of the entropy and
// load-balancing modes and of selective repeat's loss recovery, and a ring
// all-reduce on a leaf-spine where hashing collides and per-packet choices
// do not (docs/MULTIPATH.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "droce/sim/collective.h"
#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"

namespace droce::sim {
namespace {

// 8 ranks on 2 leaves of 4 hosts and 4 spines (1:1), placed round robin:
// every ring neighbour is on the other leaf, so each leaf sends 4 flows
// over its 4 uplinks.
std::string ring_scenario(const std::string& sw, const std::string& flow,
                          const std::string& bytes = "16MiB") {
  return "[run]\nduration = \"1s\"\ncsv_interval = 0\n"
         "[topology]\nkind = \"leaf_spine\"\nleaves = 2\nspines = 4\nhosts_per_leaf = 4\n"
         "[switch]\n" + sw + "\n[flow]\nverify = false\n" + flow + "\n"
         "[collective]\npattern = \"ring\"\nbytes = \"" + bytes + "\"\n"
         "hosts = [\"h0\", \"h4\", \"h1\", \"h5\", \"h2\", \"h6\", \"h3\", \"h7\"]\n";
}

struct Outcome {
  CollectiveResult r;
  double of_bound = 0;
  double uplink_max_over_mean = 0;
};

Outcome run(const std::string& text) {
  const Scenario sc = parse_scenario(text);
  Simulator s(sc);
  Outcome o;
  o.r = run_collective(s, sc, *sc.collective);
  EXPECT_FALSE(o.r.stalled);
  EXPECT_EQ(o.r.failed_wrs, 0u);
  if (!o.r.jct_ns.empty()) o.of_bound = static_cast<double>(o.r.bound_ns) / o.r.jct_ns[0];
  uint64_t sum = 0, mx = 0, n = 0;
  for (size_t l = 0; l < s.num_links(); ++l) {
    if (s.link_name(l).rfind("leaf", 0) != 0) continue;  // leaf->spine and leaf->host
    if (s.link_name(l).find("spine") == std::string::npos) continue;
    const uint64_t b = s.link_at(l).counters().delivered_bytes;
    sum += b;
    mx = std::max(mx, b);
    ++n;
  }
  o.uplink_max_over_mean = sum ? static_cast<double>(mx) * n / sum : 0;
  return o;
}

const char* kSr = "recovery = \"sr\"\nreorder_tolerance = 64\nsack_window = 8192\n";

TEST(SimMultipath, HashedEcmpCollidesAdaptiveRoutingReachesTheBound) {
  const Outcome ecmp = run(ring_scenario("", kSr));
  const Outcome ada = run(ring_scenario("load_balance = \"adaptive\"", kSr));
  EXPECT_GE(ada.of_bound, 0.9);
  EXPECT_LT(ecmp.of_bound, 0.8) << "two ring flows hashed onto one uplink halve the ring";
  EXPECT_GT(ecmp.uplink_max_over_mean, 1.5);
  EXPECT_LT(ada.uplink_max_over_mean, 1.1);
  EXPECT_EQ(ecmp.r.out_of_sequence, 0u) << "one path per QP: no reordering";
  EXPECT_GT(ada.r.out_of_sequence, 0u) << "per-packet choices reorder";
}

TEST(SimMultipath, SprayedQpsSpreadOverUplinksAndReorderWithoutResending) {
  const Outcome sp = run(ring_scenario(
      "", std::string(kSr) + "entropy = \"spray\"\nentropy_paths = 16384\n"));
  EXPECT_GT(sp.of_bound, 0.8);
  EXPECT_LT(sp.uplink_max_over_mean, 1.1);
  EXPECT_GT(sp.r.entropy_changes, 0u);
  EXPECT_GT(sp.r.reorder_depth_max, 0u);
  // 8 ranks x 14 steps x 512 packets: reordered, not lost.
  EXPECT_LT(sp.r.retransmits, 8u * 14 * 512 / 100);
}

TEST(SimMultipath, FlowletsTakeANewPortBetweenRingSteps) {
  const Outcome fl = run(ring_scenario(
      "", std::string(kSr) + "entropy = \"flowlet\"\nflowlet_gap = \"4us\"\n"));
  EXPECT_GT(fl.r.entropy_changes, 0u) << "a ring step's wait for its ACK is a gap";
}

TEST(SimMultipath, SprayWithSelectiveRepeatSurvivesLoss) {
  const Outcome sp = run(ring_scenario(
      "", std::string(kSr) + "entropy = \"spray\"\nentropy_paths = 16384\ntimeout = 7\n"
          "rto_low = \"25us\"\nrto_low_threshold = 16\n",
      "4MiB") + "[link]\nloss = 0.0025\n");
  EXPECT_GT(sp.r.retransmits, 0u);
  EXPECT_EQ(sp.r.jct_ns.size(), 1u);
}

// The same lossy ring with loss found by time (a 20 us reorder window)
// and a RETH in every WRITE packet: holes are found without RTO_high, and
// the ring finishes sooner (docs/MULTIPATH.md).
TEST(SimMultipath, ReorderWindowAndRethEveryPacketRecoverFaster) {
  const std::string flow = std::string(kSr) +
                           "entropy = \"spray\"\nentropy_paths = 16384\ntimeout = 7\n"
                           "rto_low = \"25us\"\nrto_low_threshold = 16\n";
  const std::string loss = "[link]\nloss = 0.0025\n";
  const Outcome before = run(ring_scenario("", flow, "16MiB") + loss);
  const Outcome after = run(
      ring_scenario("", flow + "reorder_window = \"20us\"\nreth_every_packet = true\n",
                    "16MiB") + loss);
  ASSERT_EQ(before.r.jct_ns.size(), 1u);
  ASSERT_EQ(after.r.jct_ns.size(), 1u);
  EXPECT_LT(after.r.jct_ns[0], before.r.jct_ns[0]);
  EXPECT_LT(after.r.timeouts_low, before.r.timeouts_low) << "tail losses found by time";
  EXPECT_EQ(after.r.timeouts, 0u) << "no message waits for RTO_high";
}

// Path-aware spraying over 64 ports runs the ring to completion, changing
// ports and passing over some.
TEST(SimMultipath, PathAwareSprayingCompletesTheRing) {
  const Outcome pa = run(ring_scenario(
      "", std::string(kSr) + "entropy = \"path_aware\"\nentropy_paths = 64\n"
          "path_rtt_threshold = \"4us\"\nreorder_window = \"20us\"\n"));
  EXPECT_EQ(pa.r.jct_ns.size(), 1u);
  EXPECT_GT(pa.r.entropy_changes, 0u);
  EXPECT_GT(pa.of_bound, 0.5);
}

TEST(SimMultipath, ScenarioKeysAreCheckedAndNamed) {
  const auto error = [](const std::string& text) {
    try {
      parse_scenario(text, "x.toml");
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error(ring_scenario("", "entropy = \"spray\"")).find(
                "flow.entropy: entropy = \"spray\" reorders packets: it needs recovery = "
                "\"selective_repeat\""),
            std::string::npos);
  EXPECT_NE(error(ring_scenario("load_balance = \"random\"", kSr))
                .find("switch.load_balance: \"random\" is not one of: ecmp, adaptive, "
                      "adaptive_flowlet"),
            std::string::npos);
  EXPECT_NE(error(ring_scenario("", std::string(kSr) + "entropy_paths = 0")).find(
                "flow.entropy_paths: out of range 1..16384"),
            std::string::npos);
  EXPECT_NE(error(ring_scenario("", kSr, "1000")).find("collective.bytes: must be a multiple"),
            std::string::npos);
  EXPECT_NE(error(ring_scenario("", "reorder_window = \"20us\"")).find(
                "flow.reorder_window: time-based loss detection is selective repeat's"),
            std::string::npos);
  EXPECT_NE(error(ring_scenario("", std::string(kSr) + "reth_every_packet = 1")).find(
                "flow.reth_every_packet"),
            std::string::npos);
  // An adaptive window's floor needs a window at least as large.
  EXPECT_NE(error(ring_scenario("", std::string(kSr) + "reorder_window_min = \"2us\"")).find(
                "flow.reorder_window_min: the adaptive floor of a reorder_window"),
            std::string::npos);
  EXPECT_NE(error(ring_scenario("", std::string(kSr) + "reorder_window = \"2us\"\n"
                                    "reorder_window_min = \"3us\"")).find(
                "flow.reorder_window_min"),
            std::string::npos);
  const Scenario pa = parse_scenario(ring_scenario(
      "", std::string(kSr) + "entropy = \"path_aware\"\npath_rtt_threshold = \"2us\"\n"
          "reorder_window = \"15us\"\nreth_every_packet = true\nreorder_window_min = \"3us\""));
  ASSERT_TRUE(pa.collective);
  EXPECT_EQ(pa.collective->qp.entropy.mode, transport::EntropyMode::kPathAware);
  EXPECT_EQ(pa.collective->qp.entropy.path_rtt_threshold_ns, 2000u);
  EXPECT_EQ(pa.collective->qp.reorder_window_ns, 15000u);
  EXPECT_EQ(pa.collective->qp.reorder_window_min_ns, 3000u);
  EXPECT_TRUE(pa.collective->qp.reth_every_packet);
  const Scenario sc = parse_scenario(ring_scenario(
      "load_balance = \"adaptive_flowlet\"\nflowlet_gap = \"3us\"",
      std::string(kSr) + "entropy = \"flowlet\"\nentropy_paths = 8\nflowlet_gap = \"5us\""));
  EXPECT_EQ(sc.switches[0].cfg.load_balance, fabric::LoadBalance::kAdaptiveFlowlet);
  EXPECT_EQ(sc.switches[0].cfg.flowlet_gap_ns, 3000u);
  ASSERT_TRUE(sc.collective);
  EXPECT_EQ(sc.collective->qp.entropy.mode, transport::EntropyMode::kFlowlet);
  EXPECT_EQ(sc.collective->qp.entropy.paths, 8u);
  EXPECT_EQ(sc.collective->qp.entropy.flowlet_gap_ns, 5000u);
  EXPECT_EQ(sc.collective->ranks.size(), 8u);
  EXPECT_EQ(sc.collective->ranks[1], 4u);
}

}  // namespace
}  // namespace droce::sim
