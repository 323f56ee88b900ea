// Collectives in the simulator: an all-to-all with a window of transfers in
// flight per rank, each over a connection made for it and closed at its
// completion (sim/collective.h), and Simulator::disconnect under it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "droce/sim/collective.h"
#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"

namespace droce::sim {
namespace {

// 8 ranks on 2 leaves of 4 hosts and 2 spines; `extra` goes into
// [collective], `link` into [link].
std::string a2a_scenario(const std::string& extra, const std::string& link = "",
                         const std::string& pattern = "all_to_all") {
  return "[run]\nduration = \"2s\"\ncsv_interval = 0\n"
         "[topology]\nkind = \"leaf_spine\"\nleaves = 2\nspines = 2\nhosts_per_leaf = 4\n"
         "[link]\n" +
         link +
         "\n[flow]\nverify = false\n"
         "[collective]\npattern = \"" +
         pattern + "\"\nbytes = \"64KiB\"\n" + extra + "\n";
}

TEST(SimCollective, WindowedAllToAllKeepsAtMostTheWindowOpenPerRank) {
  const Scenario all = parse_scenario(a2a_scenario(""));
  Simulator sa(all);
  const CollectiveResult ra = run_collective(sa, all, *all.collective);
  ASSERT_FALSE(ra.stalled);
  EXPECT_EQ(ra.connections, 28u) << "one kept connection per rank pair";

  const Scenario win = parse_scenario(a2a_scenario("window = 2\niterations = 2"));
  ASSERT_EQ(win.collective->window, 2u);
  Simulator sw(win);
  const CollectiveResult rw = run_collective(sw, win, *win.collective);
  ASSERT_FALSE(rw.stalled);
  EXPECT_EQ(rw.failed_wrs, 0u);
  ASSERT_EQ(rw.jct_ns.size(), 2u);
  EXPECT_EQ(rw.transfers, 56u);
  EXPECT_EQ(rw.connections, 2u * 56) << "one per transfer, per iteration";
  EXPECT_LE(rw.connections_open_max, 8u * 2);
  EXPECT_GE(rw.connections_open_max, 8u);
  // Two at a time per rank cannot beat every transfer at once by much, and
  // the same bytes crossed the fabric.
  EXPECT_GT(rw.jct_ns[0] * 10, ra.jct_ns[0] * 9);
  uint64_t bytes_all = 0, bytes_win = 0;
  for (size_t h = 0; h < sa.num_hosts(); ++h) {
    bytes_all += sa.host_tx_bytes(h);
    bytes_win += sw.host_tx_bytes(h);
  }
  EXPECT_EQ(bytes_win, 2 * bytes_all) << "two iterations of the same transfers";
}

TEST(SimCollective, FlowsThatFinishFirstDoNotEndTheRunUnderIt) {
  // A short flow beside a ring that runs much longer: with
  // run.stop_when_done the run ends when both are done, where the ring
  // ended, not when the flow finished (that stalled the ring at once).
  const Scenario sc = parse_scenario(
      a2a_scenario("iterations = 2", "", "ring") +
      "[[flows]]\nsrc = \"h0\"\ndst = \"h5\"\nbytes = \"8KiB\"\n");
  ASSERT_TRUE(sc.run.stop_when_done);
  Simulator s(sc);
  const CollectiveResult r = run_collective(s, sc, *sc.collective);
  ASSERT_FALSE(r.stalled);
  ASSERT_EQ(r.jct_ns.size(), 2u);
  EXPECT_TRUE(s.flow(0).done());
  const uint64_t ring_end = s.now();
  EXPECT_GT(ring_end, s.flow(0).finish_ns) << "the flow finished first";
  s.run();
  EXPECT_EQ(s.now(), ring_end) << "nothing was left once the ring ended";
  EXPECT_TRUE(s.summary().all_done);
}

TEST(SimCollective, ClosedConnectionsKeepTheirCountsInTheSummary) {
  const Scenario sc = parse_scenario(a2a_scenario("window = 3", "loss = 0.02"));
  Simulator s(sc);
  const CollectiveResult r = run_collective(s, sc, *sc.collective);
  ASSERT_FALSE(r.stalled);
  EXPECT_EQ(r.failed_wrs, 0u);
  ASSERT_GT(r.retransmits, 0u) << "2 % loss on every link";
  const Summary sum = s.summary();
  EXPECT_EQ(sum.retransmits, r.retransmits);
  EXPECT_EQ(sum.timeouts, r.timeouts);
  EXPECT_NE(collective_json(s, sc, *sc.collective, r).find("\"connections_open_max\""),
            std::string::npos);
}

TEST(SimCollective, DisconnectDropsFramesStillInFlight) {
  const Scenario sc = parse_scenario(a2a_scenario(""));
  Simulator s(sc);
  const QpPairRef p = s.connect(0, 5);
  std::vector<uint8_t> src(1 << 20, 7), dst(1 << 20);
  transport::MemoryRegion* smr = s.reg_mr(0, src.data(), src.size());
  transport::MemoryRegion* dmr = s.reg_mr(5, dst.data(), dst.size());
  transport::Sge sge{reinterpret_cast<uint64_t>(src.data()), 1 << 20, smr->lkey()};
  transport::SendWr wr;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = {&sge, 1};
  wr.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  wr.rkey = dmr->rkey();
  std::vector<transport::WorkCompletion> wcs;
  s.set_completion_handler([&](size_t, const transport::WorkCompletion& wc) { wcs.push_back(wc); });
  ASSERT_EQ(s.post_send(0, *p.a, wr), 0);
  s.run_until(20'000);  // 1 MiB at 100 G takes ~85 us: frames are on the wire
  EXPECT_THROW(s.disconnect(5, 0, p), ScenarioError) << "QPs named with the wrong hosts";
  s.disconnect(0, 5, p);
  s.run();
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_WR_FLUSH_ERR) << "the WRITE was outstanding";
  EXPECT_GT(s.host_endpoint(5).counters().rx_unknown_qpn, 0u);
  EXPECT_THROW(s.disconnect(0, 5, p), ScenarioError) << "already closed";
}

TEST(SimCollective, ReceiverTriggeredRingStartsEachStepOnTheDataArriving) {
  const Scenario snd = parse_scenario(a2a_scenario("iterations = 2", "", "ring"));
  const Scenario rcv =
      parse_scenario(a2a_scenario("iterations = 2\ntrigger = \"receiver\"", "", "ring"));
  ASSERT_EQ(rcv.collective->trigger, CollectiveSpec::Trigger::kReceiver);
  Simulator ss(snd), sr(rcv);
  const CollectiveResult a = run_collective(ss, snd, *snd.collective);
  const CollectiveResult b = run_collective(sr, rcv, *rcv.collective);
  ASSERT_FALSE(a.stalled);
  ASSERT_FALSE(b.stalled);
  EXPECT_EQ(b.failed_wrs, 0u);
  ASSERT_EQ(b.jct_ns.size(), 2u);
  // The same transfers. A rank still waits for its own previous WRITE's
  // completion, which here comes after its predecessor's data: the JCTs
  // are within a few ns a step (the immediate's 4 bytes on the wire).
  EXPECT_EQ(b.transfers, a.transfers);
  for (int i = 0; i < 2; ++i) {
    EXPECT_LT(b.jct_ns[i], a.jct_ns[i] * 101 / 100) << i;
    EXPECT_GT(b.jct_ns[i], a.jct_ns[i] * 99 / 100) << i;
    EXPECT_GT(b.jct_ns[i], b.bound_ns) << i;
  }
  uint64_t bytes_a = 0, bytes_b = 0;
  for (size_t h = 0; h < ss.num_hosts(); ++h) {
    bytes_a += ss.host_tx_bytes(h);
    bytes_b += sr.host_tx_bytes(h);
  }
  EXPECT_GT(bytes_b, bytes_a * 99 / 100) << "the WRITEs carry the same data";
  EXPECT_LT(bytes_b, bytes_a * 101 / 100);
  // Every WRITE with immediate found a receive WR: none was refused
  // (receiver not ready) and sent again.
  EXPECT_EQ(a.retransmits, 0u);
  EXPECT_EQ(b.retransmits, 0u);
  EXPECT_EQ(b.seq_naks_sent, 0u);
}

TEST(SimCollective, SlicedRingForwardsEachSliceOnItsOwnInput) {
  for (const char* trigger : {"sender", "receiver"}) {
    SCOPED_TRACE(trigger);
    const std::string t = std::string("iterations = 2\ntrigger = \"") + trigger + "\"";
    const Scenario one = parse_scenario(a2a_scenario(t, "", "ring"));
    const Scenario four = parse_scenario(a2a_scenario(t + "\nslices = 4", "", "ring"));
    ASSERT_EQ(four.collective->slices, 4u);
    Simulator s1(one), s4(four);
    const CollectiveResult a = run_collective(s1, one, *one.collective);
    const CollectiveResult b = run_collective(s4, four, *four.collective);
    ASSERT_FALSE(b.stalled);
    EXPECT_EQ(b.failed_wrs, 0u);
    ASSERT_EQ(b.jct_ns.size(), 2u);
    // 8 ranks, 2 x 7 steps, each step's 8 KiB chunk as four WRITEs.
    EXPECT_EQ(a.transfers, 8u * 14u);
    EXPECT_EQ(b.transfers, 8u * 14u * 4u);
    uint64_t bytes_a = 0, bytes_b = 0;
    for (size_t h = 0; h < s1.num_hosts(); ++h) {
      bytes_a += s1.host_tx_bytes(h);
      bytes_b += s4.host_tx_bytes(h);
    }
    // The same payload; a packet per slice instead of two per chunk, so
    // headers and ACKs differ a little.
    EXPECT_GT(bytes_b, bytes_a * 95 / 100);
    EXPECT_LT(bytes_b, bytes_a * 125 / 100);
    // A slice goes on as soon as its own input is in, while the rest of
    // its step is still on the way: a step no longer waits a round trip
    // for the whole chunk before the next starts.
    for (int i = 0; i < 2; ++i) {
      EXPECT_LT(b.jct_ns[i], a.jct_ns[i]) << i;
      EXPECT_GT(b.jct_ns[i], b.bound_ns) << i;
    }
    EXPECT_EQ(b.retransmits, 0u);
  }
}

TEST(SimCollective, WindowAndSlicesAreRefusedWhereTheyMeanNothing) {
  auto error = [](const std::string& text) {
    try {
      parse_scenario(text);
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error(a2a_scenario("window = 2", "", "ring"))
                .find("collective.window: only for pattern = \"all_to_all\""),
            std::string::npos);
  EXPECT_NE(error(a2a_scenario("window = 8")).find("collective.window: out of range 0..7"),
            std::string::npos);
  EXPECT_NE(
      error(a2a_scenario("slices = 2")).find("collective.slices: only for pattern = \"ring\""),
      std::string::npos);
  // 64 KiB over 8 ranks: chunks of 8192 bytes.
  EXPECT_NE(error(a2a_scenario("slices = 65", "", "ring")).find("collective.slices: out of range"),
            std::string::npos);
}

}  // namespace
}  // namespace droce::sim
