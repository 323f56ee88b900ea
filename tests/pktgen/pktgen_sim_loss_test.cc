// Collectives over the virtual-time testbed with loss (suite pktgen): the
// executor's results are bit-exact for N = 2..16 while the transport
// recovers lost packets, every transfer is posted only after all its
// dependencies completed (checked on a trace), and runs are deterministic.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "droce/sim/simulator.h"
#include "sim_executor.h"

namespace droce::pktgen {
namespace {

sim::Scenario star(uint32_t hosts, double loss, uint64_t seed) {
  std::string t = fmt::format(
      "[run]\nstop_when_done = false\ncsv_interval = 0\nseed = {}\n[link]\nrate = \"100G\"\n"
      "loss = {}\n",
      seed, loss);
  for (uint32_t h = 0; h < hosts; ++h) t += fmt::format("[[hosts]]\nname = \"h{}\"\n", h);
  t += "[[switches]]\nname = \"s0\"\n";
  for (uint32_t h = 0; h < hosts; ++h) t += fmt::format("[[links]]\na = \"h{}\"\nb = \"s0\"\n", h);
  return sim::parse_scenario(t, "star");
}

struct Outcome {
  SizeRun run;
  uint64_t rx_frames = 0, losses = 0;
  std::vector<SimTraceEvent> trace;
};

Outcome run_one(Pattern p, uint32_t n, uint64_t bytes, uint32_t channels, uint64_t chunk,
                double loss, transport::Recovery rec, uint64_t seed = 1, bool trace = false) {
  sim::Simulator s(star(n, loss, seed));
  SimExecutorOptions o;
  o.verify = true;
  o.iters = 1;
  o.warmup = 1;
  o.qp.recovery = rec;
  o.qp.cc = "dcqcn";
  o.qp.timeout = 8;   // 1 ms RTO at the start (4.096 us x 2^8)
  o.qp.retry_cnt = 7;
  Outcome out;
  if (trace) o.trace = [&](const SimTraceEvent& e) { out.trace.push_back(e); };
  std::vector<uint32_t> hosts(n);
  for (uint32_t r = 0; r < n; ++r) hosts[r] = r;
  SimExecutor ex(s, hosts, o);
  const Schedule sched = make_schedule({p, n, bytes, channels, chunk, 0, 7});
  out.run = ex.run(sched);
  const sim::Summary sum = s.summary();
  out.losses = sum.link_losses;
  for (size_t h = 0; h < s.num_hosts(); ++h)
    out.rx_frames += s.host_endpoint(h).counters().rx_frames;  // for determinism only
  return out;
}

// Sizes that every pattern accepts (a multiple of 4 x N): at least 256 KiB,
// so that even N = 2 sends a few hundred packets and loses some.
uint64_t size_for(uint32_t n) { return std::max<uint64_t>(4ull * n * 2048, 4ull * n * (65536 / n)); }

TEST(PktgenSimLoss, RingReducesCorrectlyForTwoToSixteenRanksWithLoss) {
  for (uint32_t n = 2; n <= 16; ++n) {
    const auto rec = n % 2 ? transport::Recovery::kGoBackN : transport::Recovery::kSelectiveRepeat;
    const Outcome o = run_one(Pattern::kRingAllReduce, n, size_for(n), 1, 0, 0.03, rec, n);
    SCOPED_TRACE(fmt::format("ring N={} recovery={}", n, n % 2 ? "gbn" : "sr"));
    EXPECT_FALSE(o.run.stalled);
    EXPECT_EQ(o.run.failed_wrs, 0u);
    EXPECT_EQ(o.run.wrong, 0);
    EXPECT_GT(o.losses, 0u) << "no packet was lost: the test would prove nothing";
  }
}

TEST(PktgenSimLoss, OtherPatternsWithLossAndChannels) {
  const Pattern pats[] = {Pattern::kHalvingDoubling, Pattern::kTreeAllReduce,
                          Pattern::kReduceScatter,   Pattern::kAllGather,
                          Pattern::kAllToAll,        Pattern::kIncast,
                          Pattern::kPermutation};
  uint64_t losses = 0;
  for (Pattern p : pats)
    for (uint32_t n : {3u, 8u, 13u}) {
      SCOPED_TRACE(fmt::format("{} N={}", to_string(p), n));
      const Outcome o = run_one(p, n, size_for(n), 2, 4096, 0.02,
                                transport::Recovery::kSelectiveRepeat, 100 + n);
      EXPECT_FALSE(o.run.stalled);
      EXPECT_EQ(o.run.wrong, 0);
      losses += o.losses;
    }
  EXPECT_GT(losses, 100u);
}

TEST(PktgenSimLoss, NoTransferIsPostedBeforeItsDependenciesCompleted) {
  const uint32_t n = 6;
  const Schedule sched =
      make_schedule({Pattern::kRingAllReduce, n, size_for(n), 2, 2048, 0, 7});
  const Outcome o = run_one(Pattern::kRingAllReduce, n, size_for(n), 2, 2048, 0.02,
                            transport::Recovery::kSelectiveRepeat, 3, true);
  ASSERT_EQ(o.run.wrong, 0);
  ASSERT_EQ(o.trace.size(), 2 * 2 * sched.transfers.size());  // 2 iterations, post + complete
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> completed_at, posted_at;
  uint64_t last = 0;
  size_t with_deps = 0;
  for (const SimTraceEvent& e : o.trace) {
    ASSERT_GE(e.time_ns, last) << "trace not in virtual-time order";
    last = e.time_ns;
    const auto key = std::make_pair(e.iteration, e.transfer);
    if (e.kind == SimTraceEvent::Kind::kPost) {
      ASSERT_FALSE(posted_at.count(key)) << "posted twice";
      for (uint32_t d : sched.depends_on[e.transfer]) {
        ASSERT_TRUE(completed_at.count({e.iteration, d}))
            << "transfer " << e.transfer << " posted before its dependency " << d;
        ++with_deps;
      }
      posted_at[key] = e.time_ns;
    } else {
      ASSERT_TRUE(posted_at.count(key)) << "completed before it was posted";
      completed_at[key] = e.time_ns;
    }
  }
  EXPECT_GT(with_deps, sched.transfers.size());
  // A transfer becomes ready exactly when its last dependency completes:
  // posted at that instant (no idle gap the schedule does not ask for).
  for (const Transfer& t : sched.transfers) {
    if (sched.depends_on[t.id].empty()) continue;
    uint64_t ready = 0;
    for (uint32_t d : sched.depends_on[t.id]) ready = std::max(ready, completed_at[{1, d}]);
    const uint64_t posted = posted_at[{1, t.id}];
    EXPECT_EQ(posted, ready) << "transfer " << t.id;
  }
}

TEST(PktgenSimLoss, SameSeedSameResult) {
  auto a = run_one(Pattern::kHalvingDoubling, 6, size_for(6), 2, 0, 0.02,
                   transport::Recovery::kGoBackN, 9, true);
  auto b = run_one(Pattern::kHalvingDoubling, 6, size_for(6), 2, 0, 0.02,
                   transport::Recovery::kGoBackN, 9, true);
  ASSERT_EQ(a.trace.size(), b.trace.size());
  for (size_t i = 0; i < a.trace.size(); ++i) {
    EXPECT_EQ(a.trace[i].time_ns, b.trace[i].time_ns);
    EXPECT_EQ(a.trace[i].transfer, b.trace[i].transfer);
  }
  EXPECT_EQ(a.rx_frames, b.rx_frames);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.run.end_ns, b.run.end_ns);
}

}  // namespace
}  // namespace droce::pktgen
