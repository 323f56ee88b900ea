// The collective replay split over partitions gives one process's results:
// with the receiver trigger each rank acts only on what reached its own
// host, so every partition posts its ranks' transfers and the frames that
// cross carry the rest. Partitions run as threads here (sim::PartitionComm
// in memory); tests/sim/mpi_test.py runs droce-pktgen under mpirun.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "../sim/thread_comm.h"
#include "droce/pktgen/schedule.h"
#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"
#include "sim_executor.h"

namespace droce::pktgen {
namespace {

// 16 hosts on 4 leaves; loss so that retransmits cross the partitions too.
sim::Scenario leaf_spine() {
  return sim::parse_scenario(R"([run]
stop_when_done = false
duration = "1s"
csv_interval = "5us"
[topology]
kind = "leaf_spine"
leaves = 4
spines = 2
hosts_per_leaf = 4
delay = "1us"
[link]
loss = 0.002
)",
                             "leaf-spine");
}

SimExecutorOptions options() {
  SimExecutorOptions o;
  o.verify = true;
  o.iters = 2;
  o.warmup = 1;
  o.trigger = Trigger::kReceiver;
  o.qp.recovery = transport::Recovery::kSelectiveRepeat;
  o.qp.timeout = 8;
  return o;
}

struct Outcome {
  std::vector<SizeRun> runs;  // one per schedule
  std::string summary;        // the simulator's, merged
};

Outcome run(const std::vector<Schedule>& scheds, sim::PartitionComm* comm) {
  const sim::Scenario sc = leaf_spine();
  sim::Simulator s(sc);
  if (comm) s.enter_partition(*comm);
  SimExecutorOptions o = options();
  o.comm = comm;
  std::vector<uint32_t> hosts(16);
  for (uint32_t h = 0; h < 16; ++h) hosts[h] = h;
  SimExecutor ex(s, hosts, o);
  Outcome out;
  for (const Schedule& sched : scheds) out.runs.push_back(ex.run(sched));
  s.merge_partitions();
  out.summary = s.summary_json();
  return out;
}

void expect_same(const SizeRun& want, const SizeRun& got) {
  ASSERT_EQ(got.iterations.size(), want.iterations.size());
  for (size_t i = 0; i < want.iterations.size(); ++i) {
    EXPECT_EQ(got.iterations[i].start_ns, want.iterations[i].start_ns) << i;
    EXPECT_EQ(got.iterations[i].end_ns, want.iterations[i].end_ns) << i;
    EXPECT_EQ(got.iterations[i].wrong, want.iterations[i].wrong) << i;
  }
  EXPECT_EQ(got.transfer_latencies, want.transfer_latencies);
  EXPECT_EQ(got.wrong, want.wrong);
  EXPECT_EQ(got.imm_received, want.imm_received);
  EXPECT_EQ(got.credits, want.credits);
  EXPECT_EQ(got.failed_wrs, want.failed_wrs);
  EXPECT_EQ(got.stalled, want.stalled);
  EXPECT_EQ(got.end_ns, want.end_ns);
}

TEST(SimExecutorSplit, EveryPartitionCountMatchesOneProcess) {
  std::vector<Schedule> scheds;
  for (Pattern p : {Pattern::kRingAllReduce, Pattern::kTreeAllReduce, Pattern::kHalvingDoubling,
                    Pattern::kAllToAll})
    scheds.push_back(make_schedule({p, 16, 16 * 4 * 8192, 2, 0, 0, 1}));
  const Outcome one = run(scheds, nullptr);
  for (const SizeRun& r : one.runs) {
    EXPECT_FALSE(r.stalled);
    EXPECT_EQ(r.wrong, 0);
  }
  // Loss was recovered, so retransmits crossed the partitions too.
  EXPECT_GT(nlohmann::json::parse(one.summary).at("retransmits").get<uint64_t>(), 0u);
  for (uint32_t k : {2u, 4u}) {
    SCOPED_TRACE(fmt::format("{} partitions", k));
    sim::Rendezvous rv(k);
    std::vector<Outcome> got(k);
    std::vector<std::thread> threads;
    for (uint32_t p = 0; p < k; ++p)
      threads.emplace_back([&, p] {
        sim::ThreadComm comm(rv, p);
        got[p] = run(scheds, &comm);
      });
    for (auto& t : threads) t.join();
    ASSERT_EQ(got[0].runs.size(), scheds.size());
    for (size_t i = 0; i < scheds.size(); ++i) {
      SCOPED_TRACE(std::string(to_string(scheds[i].params.pattern)));
      expect_same(one.runs[i], got[0].runs[i]);
    }
    EXPECT_EQ(got[0].summary, one.summary);
  }
}

// The sender trigger would need another host's completion in the same
// nanosecond: a split executor refuses it.
TEST(SimExecutorSplit, TheSenderTriggerIsRefused) {
  sim::Rendezvous rv(1);
  sim::ThreadComm comm(rv, 0);
  sim::Simulator s(leaf_spine());
  SimExecutorOptions o;
  o.comm = &comm;
  EXPECT_THROW(SimExecutor(s, {0, 1}, o), std::invalid_argument);
}

}  // namespace
}  // namespace droce::pktgen
