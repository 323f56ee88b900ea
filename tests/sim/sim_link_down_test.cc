// Link down/up from a scenario ([[links]] down): the runner takes both
// directions of the cable and the switch port down and back up at exactly
// the given virtual times; frames in flight and queued for the port are
// lost, RC retransmission recovers, the data arrives byte-exact, later than
// without the outage, and the same scenario gives the same outputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <unistd.h>

#include "../unit/sim_test_util.h"
#include "droce/sim/simulator.h"

namespace droce::sim {
namespace {

// h1 writes 1 MiB to h0 through s0 in 64 KiB messages, at 100 G into h0's
// 50 G link, so s0's queue to h0 grows while h1 sends (~170 us without an
// outage). `down` is the [[links]] down value of the link named by `which`
// ("h0" or "h1"), empty for none.
// With `pfc`, s0 runs PFC (default thresholds) and h0's link is 10G: s0
// pauses h1 for most of the run.
std::string scenario(const std::string& which, const std::string& down, bool pfc = false) {
  std::ostringstream s;
  s << "[run]\nduration = \"20ms\"\ncsv_interval = \"5us\"\n"
    << "[[hosts]]\nname = \"h0\"\n[[hosts]]\nname = \"h1\"\n"
    << "[[switches]]\nname = \"s0\"\n";
  if (pfc) s << "pfc = { enabled = true }\n";
  for (const char* h : {"h0", "h1"}) {
    s << "[[links]]\na = \"" << h << "\"\nb = \"s0\"\nrate = \""
      << (h == std::string("h0") ? (pfc ? "10G" : "50G") : "100G") << "\"\n";
    if (which == h && !down.empty()) s << "down = " << down << "\n";
  }
  s << "[[flows]]\nsrc = \"h1\"\ndst = \"h0\"\nbytes = \"1MiB\"\nmessage = \"64KiB\"\n"
    << "timeout = 8\n";
  return s.str();
}

constexpr uint64_t kFrom = 30'000, kUntil = 50'000;
const std::string kOutage = "[{ from = \"30us\", until = \"50us\" }]";

void expect_verified(const Simulator& s) {
  ASSERT_TRUE(s.all_done()) << "virtual time " << s.now();
  EXPECT_EQ(s.flow(0).failed, 0u);
  EXPECT_TRUE(s.verify(0)) << "destination memory differs";
  EXPECT_EQ(s.summary().flows_verified, 1u);
}

TEST(SimLinkDown, ReceiverLinkDownMidFlowLosesFramesAndRecovers) {
  Simulator base(parse_scenario(scenario("h0", "")));
  base.run();
  expect_verified(base);
  ASSERT_GT(base.flow(0).fct_ns(), kUntil);  // the outage is mid-flow

  Simulator s(parse_scenario(scenario("h0", kOutage)));
  // Link 0 (h0 - s0) is directions 0 (h0->s0) and 1 (s0->h0); s0's port 0.
  ASSERT_EQ(s.link_name(1), "s0->h0");
  ASSERT_EQ(s.port_peer(0, 0), "h0");
  auto state = [&] {
    return std::array<bool, 3>{s.link_at(0).up(), s.link_at(1).up(), s.switch_at(0).port_up(0)};
  };
  const std::array<bool, 3> up{true, true, true}, down{false, false, false};
  // Exactly at the given times: up through 30 us - 1 ns, down from 30 us
  // through 50 us - 1 ns, up again from 50 us.
  s.run_until(kFrom - 1);
  EXPECT_EQ(state(), up);
  EXPECT_GT(s.link_at(1).in_flight(), 0u);  // data on its way to h0
  const uint64_t queued = s.switch_at(0).queue_packets(0, 3);
  ASSERT_GT(queued, 1u);
  s.run_until(kFrom);
  EXPECT_EQ(state(), down);
  EXPECT_EQ(s.link_at(1).in_flight(), 0u);
  EXPECT_GT(s.link_at(1).counters().lost_down, 0u);  // in flight when it went down
  EXPECT_EQ(s.switch_at(0).queue_packets(0, 3), 0u);  // the port's queue flushed
  EXPECT_EQ(s.switch_at(0).counters(0).down_drops, queued);
  s.run_until(kUntil - 1);
  EXPECT_EQ(state(), down);
  const uint64_t delivered = s.link_at(1).counters().delivered;
  s.run_until(kUntil);
  EXPECT_EQ(state(), up);
  s.run();
  expect_verified(s);
  EXPECT_GT(s.link_at(1).counters().delivered, delivered);  // it carries data again

  const Summary sum = s.summary();
  EXPECT_GT(sum.link_losses, 0u);
  // h1's frames for h0 meanwhile: the only route to h0 is down, so s0
  // drops them on arrival (no route), besides what it flushed at port 0.
  const fabric::Switch& sw = s.switch_at(0);
  EXPECT_GT(sw.counters(1).no_route, 0u);
  EXPECT_EQ(sum.switch_drops, sw.counters(0).down_drops + sw.counters(1).no_route);
  EXPECT_GT(sum.retransmits, 0u);
  // Nothing reached h0 for 20 us, and what h1 sent meanwhile is sent again.
  EXPECT_GE(s.flow(0).fct_ns(), base.flow(0).fct_ns() + (kUntil - kFrom));
  // s0->h0 delivered nothing in the intervals inside the outage, and its
  // sender (the switch port) was idle: (30, 35] .. (45, 50].
  size_t inside = 0;
  for (const LinkSample& l : s.link_samples()) {
    if (l.link != 1 || l.time_ns <= kFrom || l.time_ns > kUntil) continue;
    ++inside;
    EXPECT_EQ(l.bytes, 0u) << l.time_ns;
    if (l.time_ns > kFrom + 5'000) {
      EXPECT_EQ(l.utilisation, 0.0) << l.time_ns;
    }
  }
  EXPECT_EQ(inside, 4u);
}

TEST(SimLinkDown, SenderLinkDownLosesWhatTheHostSends) {
  // The host has no link state of its own: it keeps sending while its
  // cable is down, every frame is lost on the link (no bits on the wire:
  // utilisation 0), and RC recovers once it is back.
  Simulator s(parse_scenario(scenario("h1", kOutage)));
  ASSERT_EQ(s.link_name(2), "h1->s0");
  s.run_until(kUntil);
  const uint64_t lost = s.link_at(2).counters().lost_down;
  EXPECT_GT(lost, 10u);
  EXPECT_EQ(s.link_at(2).counters().sent, s.host_endpoint(1).counters().tx_frames);
  s.run();
  expect_verified(s);
  EXPECT_GT(s.summary().retransmits, 0u);
  size_t inside = 0;
  for (const LinkSample& l : s.link_samples()) {
    if (l.link != 2 || l.time_ns <= kFrom + 5'000 || l.time_ns > kUntil) continue;
    EXPECT_EQ(l.bytes, 0u) << l.time_ns;
    EXPECT_EQ(l.utilisation, 0.0) << l.time_ns;
    ++inside;
  }
  EXPECT_EQ(inside, 3u);
}

TEST(SimLinkDown, LinkDownEndsPfcOnTheLink) {
  // s0 has paused h1 (its queue to h0 is above XOFF) when h1's cable goes
  // down: the pause ends there at both ends, s0 forgets its XOFF and sends
  // (and counts) no XON while the port is down; PFC works again after.
  // Down 100 us: long enough for s0's queue to h0 (10G) to drain below XON.
  constexpr uint64_t kBack = 130'000;
  Simulator s(parse_scenario(
      scenario("h1", "[{ from = \"30us\", until = \"130us\" }]", /*pfc=*/true)));
  ASSERT_EQ(s.port_peer(0, 1), "h1");
  constexpr uint8_t kPrio = 3;  // DSCP 26
  s.run_until(kFrom - 1);
  ASSERT_TRUE(s.host_endpoint(1).paused(kPrio, s.now())) << "premise: h1 paused";
  ASSERT_TRUE(s.switch_at(0).xoff_asserted(1, kPrio));
  const uint64_t xon = s.switch_at(0).counters(1).tx_xon;
  const uint64_t xoff = s.switch_at(0).counters(1).tx_xoff;
  s.run_until(kFrom);
  EXPECT_FALSE(s.host_endpoint(1).paused(kPrio, kFrom));
  EXPECT_FALSE(s.switch_at(0).xoff_asserted(1, kPrio));
  const uint64_t paused = s.host_endpoint(1).paused_ns(kPrio, kFrom);
  EXPECT_EQ(s.host_endpoint(1).paused_ns(kPrio, kBack), paused);  // not while down
  s.run_until(kBack - 1);
  // s0's queue to h0 drained below XON meanwhile: no XON went out of the
  // down port, and none was counted.
  ASSERT_LE(s.switch_at(0).ingress_bytes(1, kPrio), 64u * 1024) << "premise: below XON";
  EXPECT_EQ(s.switch_at(0).counters(1).tx_xon, xon);
  EXPECT_EQ(s.switch_at(0).counters(1).tx_xoff, xoff);
  s.run();
  expect_verified(s);
  EXPECT_GT(s.switch_at(0).counters(1).tx_xoff, xoff);  // PFC again once up
  EXPECT_GT(s.host_endpoint(1).paused_ns(kPrio, s.now()), paused);
  // Lossless: the queue to h0 never overflowed (what s0 dropped was h0's
  // ACKs for h1 while h1's port was down).
  EXPECT_EQ(s.switch_at(0).counters(0).queues[kPrio].drops, 0u);
  EXPECT_EQ(s.summary().switch_drops, s.switch_at(0).counters(0).no_route);
}

// A 2x2 leaf-spine (two hosts per leaf, 100G everywhere): h2 and h3 on
// leaf1 write 256 KiB each to h0 and h1 on leaf0 over eight QPs, which
// ECMP spreads over both spines. The uplink leaf0 - spine0, a generated
// link, fails for good at 30 us ([[outages]]).
std::string leaf_spine_outage(const std::string& reconverge) {
  std::ostringstream s;
  s << "[run]\nduration = \"20ms\"\ncsv_interval = \"5us\"\n";
  if (!reconverge.empty()) s << "reconverge = \"" << reconverge << "\"\n";
  s << "[topology]\nkind = \"leaf_spine\"\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\n"
    << "host_rate = \"100G\"\n"
    << "[flow]\nbytes = \"256KiB\"\nmessage = \"64KiB\"\ntimeout = 8\n"
    << "[[outages]]\na = \"leaf0\"\nb = \"spine0\"\ndown = [{ from = \"30us\" }]\n";
  for (int i = 0; i < 8; ++i)
    s << "[[flows]]\nsrc = \"h" << 2 + i % 2 << "\"\ndst = \"h" << (i / 2) % 2 << "\"\n";
  return s.str();
}

TEST(SimLinkDown, ReconvergedRoutesAvoidAFailedUplink) {
  constexpr uint64_t kDown = 30'000, kReconverge = 10'000;
  // Static routes: spine0 keeps its only route to leaf0's hosts through
  // the dead link and drops what the leaf1 ECMP groups still send it.
  const Scenario static_routes = parse_scenario(leaf_spine_outage(""));
  const int spine0 = static_routes.switch_index("spine0");
  ASSERT_GE(spine0, 0);
  Simulator fixed(static_routes);
  const auto no_route = [&](const Simulator& s) {
    uint64_t n = 0;
    const fabric::Switch& sw = s.switch_at(static_cast<size_t>(spine0));
    for (uint16_t p = 0; p < sw.num_ports(); ++p) n += sw.counters(p).no_route;
    return n;
  };
  fixed.run();
  EXPECT_GT(no_route(fixed), 0u) << "premise: some QPs hash onto spine0";
  // Their flows give up: the retries (7, 1 ms apart) all take the dead path.
  uint64_t failed = 0;
  for (size_t f = 0; f < fixed.num_flows(); ++f) failed += fixed.flow(f).failed;
  EXPECT_GT(failed, 0u);
  EXPECT_EQ(fixed.route_updates(), 0u);

  // Reconverging 10 us after the failure: drops only in those 10 us, then
  // every switch routes around the link; all data arrives byte-exact.
  Simulator s(parse_scenario(leaf_spine_outage("10us")));
  s.run_until(kDown + kReconverge - 1);
  EXPECT_EQ(s.route_updates(), 0u);
  s.run_until(kDown + kReconverge);
  EXPECT_EQ(s.route_updates(), 1u);
  const uint64_t blackholed = no_route(s);
  EXPECT_GT(blackholed, 0u);
  s.run();
  ASSERT_TRUE(s.all_done()) << "virtual time " << s.now();
  for (size_t f = 0; f < s.num_flows(); ++f) {
    EXPECT_EQ(s.flow(f).failed, 0u) << f;
    EXPECT_TRUE(s.verify(f)) << "flow " << f << ": destination memory differs";
  }
  EXPECT_EQ(no_route(s), blackholed);  // nothing dropped after the update
  EXPECT_GT(s.summary().retransmits, 0u);
}

TEST(SimLinkDown, DownWithoutUntilStaysDown) {
  // Down for good from 60 us: the flow cannot finish within the run.
  Simulator s(parse_scenario(
      scenario("h0", "[{ from = \"30us\", until = \"50us\" }, { from = \"60us\" }]")));
  s.run_until(1'000'000);
  EXPECT_FALSE(s.link_at(0).up());
  EXPECT_FALSE(s.switch_at(0).port_up(0));
  EXPECT_FALSE(s.all_done());
}

TEST(SimLinkDown, SameScenarioTwiceGivesIdenticalOutputs) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("sim_link_down_" + std::to_string(::getpid()));
  const auto outputs = [&](const std::string& text, const std::string& name) {
    return testing::run_outputs(parse_scenario(text, "down.toml"), dir / name);
  };
  const auto first = outputs(scenario("h0", kOutage), "1");
  const auto second = outputs(scenario("h0", kOutage), "2");
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_GT(first[i].size(), 40u) << testing::kOutputFiles[i];
    EXPECT_TRUE(first[i] == second[i]) << testing::kOutputFiles[i] << " differs between runs";
  }
  // The outage shows in the outputs: they differ from the run without it.
  const auto plain = outputs(scenario("h0", ""), "3");
  EXPECT_NE(plain[0], first[0]);
  EXPECT_NE(plain[3], first[3]);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace droce::sim
