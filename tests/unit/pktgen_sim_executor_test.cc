// The Simulator's programmatic workload API (connect, reg_mr, post_send,
// completion handler, pause) and the collective executor on small cases.
// Longer runs (N = 2..16 with loss, the app) are in tests/pktgen.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "droce/sim/simulator.h"
#include "replay_memory.h"
#include "sim_executor.h"

namespace droce::pktgen {
namespace {

// down_from: the last host's link goes down then, for good ("" = never).
sim::Scenario star(uint32_t hosts, double loss = 0, const std::string& down_from = "") {
  std::string t = "[run]\nstop_when_done = false\ncsv_interval = 0\n[link]\nrate = \"100G\"\n";
  if (loss > 0) t += fmt::format("loss = {}\n", loss);
  for (uint32_t h = 0; h < hosts; ++h) t += fmt::format("[[hosts]]\nname = \"h{}\"\n", h);
  t += "[[switches]]\nname = \"s0\"\n";
  for (uint32_t h = 0; h < hosts; ++h) t += fmt::format("[[links]]\na = \"h{}\"\nb = \"s0\"\n", h);
  if (!down_from.empty()) t += fmt::format("down = [{{ from = \"{}\" }}]\n", down_from);
  return sim::parse_scenario(t, "star");
}

// run() refuses the schedule, saying `reason`.
void expect_refused(SimExecutor& ex, const Schedule& sched, const std::string& reason) {
  try {
    ex.run(sched);
    ADD_FAILURE() << "run() accepted the schedule; expected a refusal naming: " << reason;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}

TEST(SimWorkload, WriteWithImmediateLandsAndCompletesOnBothSides) {
  sim::Simulator s(star(2));
  const auto qp = s.connect(0, 1);
  std::vector<uint8_t> src(256 * 1024), dst(src.size(), 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  auto* smr = s.reg_mr(0, src.data(), src.size());
  auto* dmr = s.reg_mr(1, dst.data(), dst.size());
  ASSERT_TRUE(smr && dmr);
  std::vector<std::pair<size_t, transport::WorkCompletion>> wcs;
  s.set_completion_handler([&](size_t h, const transport::WorkCompletion& wc) {
    wcs.emplace_back(h, wc);
    if (wcs.size() == 2) s.pause();
  });
  transport::RecvWr rwr;
  rwr.wr_id = 9;
  ASSERT_EQ(s.post_recv(1, *qp.b, rwr), 0);
  transport::Sge sge{reinterpret_cast<uint64_t>(src.data()), static_cast<uint32_t>(src.size()),
                     smr->lkey()};
  transport::SendWr wr;
  wr.wr_id = 5;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = {&sge, 1};
  wr.imm_data = 0x1234;
  wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  wr.rkey = dmr->rkey();
  ASSERT_EQ(s.post_send(0, *qp.a, wr), 0);
  EXPECT_TRUE(s.run_until(1'000'000'000));  // paused, not at the limit
  EXPECT_LT(s.now(), 1'000'000u);
  ASSERT_EQ(wcs.size(), 2u);
  // The receiver's immediate arrives before the sender's ACK-driven completion.
  EXPECT_EQ(wcs[0].first, 1u);
  EXPECT_EQ(wcs[0].second.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wcs[0].second.imm_data, 0x1234u);
  EXPECT_EQ(wcs[0].second.wr_id, 9u);
  EXPECT_EQ(wcs[1].first, 0u);
  EXPECT_EQ(wcs[1].second.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(wcs[1].second.wr_id, 5u);
  EXPECT_EQ(wcs[1].second.status, IBV_WC_SUCCESS);
  EXPECT_EQ(src, dst);
  EXPECT_GT(s.host_tx_bytes(0), src.size());
}

TEST(SimWorkload, ConnectRefusesBadHostsAndCc) {
  sim::Simulator s(star(2));
  EXPECT_THROW(s.connect(0, 0), sim::ScenarioError);
  EXPECT_THROW(s.connect(0, 5), sim::ScenarioError);
  sim::QpOptions o;
  o.cc = "no-such-cc";
  EXPECT_THROW(s.connect(0, 1, o), sim::ScenarioError);
}

TEST(SimExecutor, RingAllReduceVerifiesAndTimesIterations) {
  sim::Simulator s(star(4));
  SimExecutorOptions o;
  o.verify = true;
  o.iters = 2;
  o.warmup = 1;
  SimExecutor ex(s, {0, 1, 2, 3}, o);
  const Schedule sched = make_schedule({Pattern::kRingAllReduce, 4, 64 * 1024, 2, 0, 0, 1});
  const SizeRun r = ex.run(sched);
  EXPECT_FALSE(r.stalled);
  EXPECT_EQ(r.wrong, 0);
  EXPECT_EQ(r.failed_wrs, 0u);
  ASSERT_EQ(r.iterations.size(), 3u);
  EXPECT_TRUE(r.iterations[0].warmup);
  EXPECT_EQ(r.stats.jct().count(), 2u);
  // Every step message ends with an immediate: steps x ranks x channels.
  uint64_t imm = 0;
  for (const Transfer& t : sched.transfers) imm += t.with_imm;
  EXPECT_EQ(r.imm_received, 3 * imm);
  EXPECT_EQ(r.imm_bad, 0u);
  EXPECT_EQ(ex.num_qp_pairs(), 4u * 2u);  // 4 neighbour pairs x 2 channels
  // Iterations run back to back, each at least the line-rate bound:
  // 2 (N-1)/N x S per rank at 12.5 GB/s.
  for (const auto& it : r.iterations) EXPECT_GE(it.jct_ns(), 2 * 3 * 16 * 1024 * 1000 / 12'500);
}

// Without kept latencies (droce-pktgen without --csv) the run is the same,
// its histograms hold every timed transfer, and no per-transfer list grows.
TEST(SimExecutor, LatenciesNotKeptLeaveTheRunAndItsHistogramsAlone) {
  const Schedule sched = make_schedule({Pattern::kRingAllReduce, 4, 64 * 1024, 1, 0, 0, 1});
  SizeRun runs[2];
  for (bool keep : {true, false}) {
    sim::Simulator s(star(4));
    SimExecutorOptions o;
    o.iters = 3;
    o.warmup = 1;
    o.keep_transfer_latencies = keep;
    SimExecutor ex(s, {0, 1, 2, 3}, o);
    runs[keep ? 0 : 1] = ex.run(sched);
  }
  const SizeRun& kept = runs[0];
  const SizeRun& not_kept = runs[1];
  EXPECT_EQ(kept.transfer_latencies.size(), 3 * sched.transfers.size());
  EXPECT_TRUE(not_kept.transfer_latencies.empty());
  EXPECT_EQ(not_kept.stats.transfers().count(), 3 * sched.transfers.size());
  EXPECT_EQ(not_kept.stats.transfers().percentile(0.99), kept.stats.transfers().percentile(0.99));
  EXPECT_EQ(not_kept.stats.worst_step_p99(), kept.stats.worst_step_p99());
  ASSERT_EQ(not_kept.iterations.size(), kept.iterations.size());
  for (size_t i = 0; i < kept.iterations.size(); ++i)
    EXPECT_EQ(not_kept.iterations[i].end_ns, kept.iterations[i].end_ns) << i;
}

// A link that goes down stalls the iteration running then. That iteration
// is counted, not timed: the finished ones keep their JCTs and busbw, and
// a size with none finished prints N/A rather than busbw 0.00.
TEST(SimExecutor, StalledIterationsAreCountedNotTimed) {
  const Schedule sched = make_schedule({Pattern::kRingAllReduce, 4, 64 * 1024, 1, 0, 0, 1});
  SimExecutorOptions o;
  o.iters = 1000;
  o.iteration_timeout_ns = 20'000'000;
  {
    sim::Simulator s(star(4, 0, "300us"));  // after a few iterations
    SimExecutor ex(s, {0, 1, 2, 3}, o);
    const SizeRun r = ex.run(sched);
    EXPECT_TRUE(r.stalled);
    ASSERT_GE(r.iterations.size(), 3u);
    EXPECT_TRUE(r.iterations.back().stalled);
    EXPECT_EQ(r.stats.stalled(), 1u);
    // Every finished iteration is timed, the stalled one is not.
    EXPECT_EQ(r.stats.jct().count(), r.iterations.size() - 1);
    EXPECT_LT(r.stats.jct().max(), 100'000u);  // a finished one takes tens of us
    uint64_t finished_transfers = 0;
    for (const auto& st : r.stats.steps()) finished_transfers += st.second.count();
    EXPECT_EQ(finished_transfers, (r.iterations.size() - 1) * sched.transfers.size());
    EXPECT_EQ(r.transfer_latencies.size(), finished_transfers);
    const CollectiveResult row = make_result(sched.params, r.stats, r.wrong);
    EXPECT_EQ(row.stalled_iterations, 1u);
    EXPECT_GT(row.busbw_gbps, 1.0);
    EXPECT_NE(table_row(row).find("1 iteration(s) stalled"), std::string::npos) << table_row(row);
  }
  {
    sim::Simulator s(star(4, 0, "0us"));  // down from the start: nothing finishes
    SimExecutor ex(s, {0, 1, 2, 3}, o);
    const SizeRun r = ex.run(sched);
    EXPECT_TRUE(r.stalled);
    EXPECT_EQ(r.stats.jct().count(), 0u);
    EXPECT_EQ(r.stats.stalled(), 1u);
    const CollectiveResult row = make_result(sched.params, r.stats, r.wrong);
    const std::string line = table_row(row);
    EXPECT_EQ(line.find("0.00"), std::string::npos) << line;
    EXPECT_NE(line.find("N/A"), std::string::npos) << line;
    EXPECT_TRUE(to_json(row)["busbw_gbps"].is_null());
    EXPECT_EQ(to_json(row)["stalled_iterations"], 1);
  }
}

// The receiver trigger: every transfer is a WRITE with immediate whose
// arrival the destination sees, and a transfer that waits for something at
// its destination gets exactly one credit from there. Every pattern still
// computes the right result.
TEST(SimExecutor, ReceiverTriggerVerifiesEveryPattern) {
  for (Pattern p : kAllPatterns) {
    SCOPED_TRACE(std::string(to_string(p)));
    sim::Simulator s(star(6));
    SimExecutorOptions o;
    o.verify = true;
    o.iters = 2;
    o.trigger = Trigger::kReceiver;
    SimExecutor ex(s, {0, 1, 2, 3, 4, 5}, o);
    const Schedule sched = make_schedule({p, 6, 6 * 4 * 4096, 2, 0, 0, 1});
    const SizeRun r = ex.run(sched);
    EXPECT_FALSE(r.stalled);
    EXPECT_EQ(r.wrong, 0);
    EXPECT_EQ(r.failed_wrs, 0u);
    EXPECT_EQ(r.imm_bad, 0u);
    EXPECT_EQ(r.imm_received, 2 * sched.transfers.size());
    // A credit for each transfer that waits for a WRITE its source neither
    // sent nor received (one at its destination).
    uint64_t credited = 0;
    for (const Transfer& t : sched.transfers) {
      bool waits_there = false;
      for (uint32_t d : sched.depends_on[t.id]) {
        const Transfer& w = sched.transfers[d];
        waits_there = waits_there || (w.src != t.src && w.dst != t.src);
      }
      credited += waits_there;
    }
    EXPECT_EQ(r.credits, 2 * credited);
    EXPECT_EQ(r.stats.jct().count(), 2u);
  }
}

// The ring needs credits (a reduction may not land before the destination
// has sent the value it replaces); the all-to-all needs none.
TEST(SimExecutor, ReceiverTriggerCreditsWhatTheDestinationMustDoFirst) {
  auto credits = [](Pattern p) {
    sim::Simulator s(star(4));
    SimExecutorOptions o;
    o.trigger = Trigger::kReceiver;
    SimExecutor ex(s, {0, 1, 2, 3}, o);
    return ex.run(make_schedule({p, 4, 64 * 1024, 1, 0, 0, 1})).credits;
  };
  EXPECT_GT(credits(Pattern::kRingAllReduce), 0u);
  EXPECT_EQ(credits(Pattern::kAllToAll), 0u);
}

// Queues sized to the schedule (SimExecutorOptions::size_queues) change
// nothing but their memory: every pattern under both triggers, over a
// sweep whose second size (chunked) needs deeper queues than the first
// made, runs exactly as with every QP at the configured depth.
TEST(SimExecutor, QueuesSizedToTheScheduleRunAsAtTheConfiguredDepth) {
  for (Trigger trigger : {Trigger::kSender, Trigger::kReceiver}) {
    for (Pattern p : kAllPatterns) {
      SCOPED_TRACE(fmt::format("{}, trigger {}", to_string(p),
                               trigger == Trigger::kSender ? "sender" : "receiver"));
      const Schedule sweep[2] = {make_schedule({p, 6, 6 * 4096, 1, 0, 0, 1}),
                                 make_schedule({p, 6, 6 * 64 * 1024, 1, 4096, 0, 1})};
      SizeRun runs[2][2];
      size_t bytes[2][2];
      for (bool sized : {false, true}) {
        sim::Simulator s(star(6));
        SimExecutorOptions o;
        o.iters = 2;
        o.warmup = 1;
        o.trigger = trigger;
        o.size_queues = sized;
        SimExecutor ex(s, {0, 1, 2, 3, 4, 5}, o);
        for (int i = 0; i < 2; ++i) {
          runs[sized][i] = ex.run(sweep[i]);
          bytes[sized][i] = ex.queue_bytes();
        }
      }
      for (int i = 0; i < 2; ++i) {
        const SizeRun& want = runs[0][i];
        const SizeRun& got = runs[1][i];
        EXPECT_FALSE(got.stalled);
        EXPECT_EQ(got.failed_wrs, 0u);
        EXPECT_EQ(got.imm_bad, 0u);
        EXPECT_EQ(got.imm_received, want.imm_received);
        EXPECT_EQ(got.credits, want.credits);
        EXPECT_EQ(got.stats.transfers().percentile(0.99), want.stats.transfers().percentile(0.99));
        ASSERT_EQ(got.iterations.size(), want.iterations.size());
        for (size_t k = 0; k < got.iterations.size(); ++k) {
          EXPECT_EQ(got.iterations[k].start_ns, want.iterations[k].start_ns) << i << " " << k;
          EXPECT_EQ(got.iterations[k].end_ns, want.iterations[k].end_ns) << i << " " << k;
        }
      }
      // Expect: the first size's queues far smaller than 256 slots each,
      // grown by the second.
      EXPECT_LT(bytes[1][0] * 8, bytes[0][0]);
      EXPECT_GT(bytes[1][1], bytes[1][0]);
      EXPECT_LE(bytes[1][1], bytes[0][1]);
    }
  }
}

// A dependency that neither rank of a transfer could observe is refused
// by the receiver trigger, by name, before anything is posted.
TEST(SimExecutor, ReceiverTriggerRefusesWhatNoRankOfTheTransferSees) {
  // An all-to-all has no dependencies; make a later transfer wait for an
  // earlier one between the two other ranks.
  Schedule sched = make_schedule({Pattern::kAllToAll, 4, 4 * 4096, 1, 0, 0, 1});
  auto disjoint = [](const Transfer& a, const Transfer& b) {
    return a.src != b.src && a.src != b.dst && a.dst != b.src && a.dst != b.dst;
  };
  size_t later = 1;
  while (later < sched.transfers.size() && !disjoint(sched.transfers[0], sched.transfers[later]))
    ++later;
  ASSERT_LT(later, sched.transfers.size());
  ASSERT_EQ(sched.depends_on.total(), 0u);
  sched.depends_on =
      IndexLists::build(sched.transfers.size(), [&](auto&& emit) { emit(uint32_t(later), 0); });
  sim::Simulator s(star(4));
  SimExecutorOptions o;
  o.trigger = Trigger::kReceiver;
  SimExecutor ex(s, {0, 1, 2, 3}, o);
  expect_refused(ex, sched, "between two other ranks");
  // The sender trigger (every completion known everywhere) runs it.
  SimExecutorOptions so;
  SimExecutor sx(s, {0, 1, 2, 3}, so);
  EXPECT_FALSE(sx.run(sched).stalled);
}

// A schedule put together by hand without its dependency lists, or with
// one naming a later transfer (which would wait forever), is refused with
// a reason, before anything is posted.
TEST(SimExecutor, RefusesASchedulesMissingOrLaterDependencies) {
  Schedule sched = make_schedule({Pattern::kAllToAll, 4, 4 * 4096, 1, 0, 0, 1});
  const auto refused = [&](const std::string& reason) {
    sim::Simulator s(star(4));
    SimExecutor ex(s, {0, 1, 2, 3}, {});
    expect_refused(ex, sched, reason);
  };
  sched.depends_on = {};
  refused("dependency lists");
  sched.depends_on = IndexLists::build(sched.transfers.size(), [](auto&& emit) { emit(0, 1); });
  refused("not before it");
}

// An all-to-all with a window keeps no connections: each transfer has a QP
// pair of its own from its post to its completion, at most window messages
// of a rank are in flight, the bytes land as without the window, and the
// connections are counted.
TEST(SimExecutor, WindowedAllToAllConnectsPerTransferAndKeepsTheWindow) {
  constexpr uint32_t kRanks = 6, kWindow = 2;
  ScheduleParams p{Pattern::kAllToAll, kRanks, kRanks * 16 * 1024, 2, 4096, 0, 1};
  p.window = kWindow;
  const Schedule sched = make_schedule(p);
  sim::Simulator s(star(kRanks));
  SimExecutorOptions o;
  o.verify = true;
  o.iters = 2;
  o.warmup = 1;
  // In flight per rank: messages (src, step) posted and not all completed.
  std::vector<std::vector<uint32_t>> open(kRanks, std::vector<uint32_t>(kRanks));
  uint32_t most = 0;
  o.trace = [&](const SimTraceEvent& e) {
    const Transfer& t = sched.transfers[e.transfer];
    uint32_t& n = open[t.src][t.step];
    n += e.kind == SimTraceEvent::Kind::kPost ? 1 : -1;
    uint32_t messages = 0;
    for (uint32_t step = 0; step < kRanks; ++step) messages += open[t.src][step] > 0;
    most = std::max(most, messages);
  };
  std::vector<uint32_t> hosts(kRanks);
  for (uint32_t r = 0; r < kRanks; ++r) hosts[r] = r;
  SimExecutor ex(s, hosts, o);
  const SizeRun r = ex.run(sched);
  EXPECT_FALSE(r.stalled);
  EXPECT_EQ(r.wrong, 0);
  EXPECT_EQ(r.failed_wrs, 0u);
  EXPECT_EQ(most, kWindow);
  EXPECT_EQ(ex.num_qp_pairs(), 0u);  // nothing kept
  EXPECT_EQ(r.connections, 3 * sched.transfers.size());
  // A message is 2 channels x 2 chunks of 4 KiB: 4 transfers, 4 connections.
  EXPECT_GT(r.connections_open_max, 4u);
  EXPECT_LE(r.connections_open_max, uint64_t{kRanks} * kWindow * 4);
  EXPECT_EQ(r.imm_bad, 0u);
}

// The memory check counts the QP pairs a replay holds at once: every rank
// pair's, kept; with a window, no more than the messages in flight.
TEST(ReplayMemory, AWindowHoldsAConnectionPerMessageInFlight) {
  ScheduleParams p{Pattern::kAllToAll, 64, 64 * 4096, 2, 0, 0, 1};
  const ScheduleSize size = schedule_size(p);
  EXPECT_EQ(replay_connections(p, size), size.rank_pairs * 2);
  p.window = 4;
  EXPECT_EQ(replay_connections(p, size), 64u * 4 * 2);
  p.window = 63;  // more than the rank pairs: never above them
  EXPECT_EQ(replay_connections(p, size), size.rank_pairs * 2);
  p.window = 0;
  EXPECT_EQ(replay_memory_floor(p, size, 0, 0),
            size.transfers * kReplayBytesPerTransfer +
                size.rank_pairs * 2 * kReplayBytesPerConnection);
  p.window = 4;  // a windowed transfer's QP pair has small rings
  EXPECT_EQ(replay_memory_floor(p, size, 2, 10),
            size.transfers * (kReplayBytesPerTransfer + 2 * kReplayBytesPerKeptLatency) +
                64 * 4 * 2 * kReplayBytesPerWindowConnection + 10 * kReplayBytesPerHost);
}

// The window's connections are made as the run goes: a split run could
// not agree on them, and the receiver trigger keeps its receive WRs and
// credits on kept connections.
TEST(SimExecutor, WindowedAllToAllNeedsTheSenderTrigger) {
  ScheduleParams p{Pattern::kAllToAll, 4, 4 * 4096, 1, 0, 0, 1};
  p.window = 1;
  const Schedule sched = make_schedule(p);
  sim::Simulator s(star(4));
  SimExecutorOptions o;
  o.trigger = Trigger::kReceiver;
  SimExecutor ex(s, {0, 1, 2, 3}, o);
  expect_refused(ex, sched, "sender trigger");
}

}  // namespace
}  // namespace droce::pktgen
