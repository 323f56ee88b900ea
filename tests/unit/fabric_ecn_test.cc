// ECN marking: the RED curve (DCQCN's Kmin/Kmax/Pmax), step marking, the
// statistical marking rate at fixed queue depths, CE marking keeping IPv4
// checksum and ICRC valid, and enqueue- versus dequeue-point marking.
#include "droce/fabric/ecn.h"

#include <gtest/gtest.h>

#include "droce/fabric/switch.h"
#include "droce/wire/packet.h"
#include "droce/wire/pfc.h"
#include "fabric_test_util.h"

namespace droce::fabric {
namespace {

using testing::binomial_tolerance;
using testing::drain;
using testing::roce_bytes;
using testing::roce_packet;
using testing::simple_config;

TEST(Ecn, DefaultsScaleWithRate) {
  const EcnConfig c25 = ecn_defaults_for_rate(25 * kGbps);
  EXPECT_EQ(c25.kmin_bytes, 100 * kKiB);
  EXPECT_EQ(c25.kmax_bytes, 400 * kKiB);
  EXPECT_DOUBLE_EQ(c25.pmax, 0.2);
  const EcnConfig c100 = ecn_defaults_for_rate(100 * kGbps);
  EXPECT_EQ(c100.kmin_bytes, 400 * kKiB);
  EXPECT_EQ(c100.kmax_bytes, 1600 * kKiB);
  EXPECT_EQ(ecn_defaults_for_rate(400 * kGbps, MarkMode::kStep).step_bytes, 1600 * kKiB);
  EXPECT_EQ(ecn_defaults_for_rate(10 * kGbps).kmin_bytes, 40 * kKiB);
}

TEST(Ecn, RedCurve) {
  EcnConfig c;  // 100 KiB / 400 KiB / 0.2
  EXPECT_EQ(mark_probability(c, 0), 0);
  EXPECT_EQ(mark_probability(c, 100 * kKiB), 0);
  EXPECT_NEAR(mark_probability(c, 250 * kKiB), 0.1, 1e-12);
  EXPECT_NEAR(mark_probability(c, 399 * kKiB), 0.2 * 299 / 300, 1e-12);
  EXPECT_EQ(mark_probability(c, 400 * kKiB), 1);
  EXPECT_EQ(mark_probability(c, 10'000 * kKiB), 1);
  c.mode = MarkMode::kOff;
  EXPECT_EQ(mark_probability(c, 10'000 * kKiB), 0);
}

TEST(Ecn, StepMarking) {
  EcnConfig c;
  c.mode = MarkMode::kStep;
  c.step_bytes = 65 * 1500;  // DCTCP's K = 65 packets at 10 G
  Rng rng(3);
  EXPECT_FALSE(should_mark(c, 65 * 1500, rng));
  EXPECT_TRUE(should_mark(c, 65 * 1500 + 1, rng));
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(should_mark(c, 100 * 1500, rng));
    EXPECT_FALSE(should_mark(c, 10 * 1500, rng));
  }
}

TEST(Ecn, MarkingRateMatchesCurveStatistically) {
  EcnConfig c;
  Rng rng(12345);
  const size_t n = 200'000;
  for (uint64_t q : {120 * kKiB, 175 * kKiB, 250 * kKiB, 330 * kKiB, 395 * kKiB}) {
    const double p = mark_probability(c, q);
    size_t marks = 0;
    for (size_t i = 0; i < n; ++i) marks += should_mark(c, q, rng);
    EXPECT_NEAR(static_cast<double>(marks), p * n, binomial_tolerance(p, n))
        << "queue " << q << " p " << p;
  }
}

TEST(Ecn, MarkCeKeepsChecksumsValid) {
  for (bool v6 : {false, true}) {
    for (wire::Ecn e : {wire::Ecn::kEct0, wire::Ecn::kEct1}) {
      std::vector<uint8_t> f = roce_bytes({.ecn = e, .ipv6 = v6});
      ASSERT_EQ(mark_ce(f, wire::kEthSize, v6 ? 6 : 4), MarkResult::kMarked);
      wire::ParsedPacket pp;
      ASSERT_EQ(wire::parse(f, pp), wire::ParseError::kOk) << "v6=" << v6;
      EXPECT_EQ(pp.ecn, wire::Ecn::kCe);
      EXPECT_EQ(pp.dscp, 26);
      EXPECT_EQ(mark_ce(f, wire::kEthSize, v6 ? 6 : 4), MarkResult::kAlreadyCe);
    }
    std::vector<uint8_t> f = roce_bytes({.ecn = wire::Ecn::kNotEct, .ipv6 = v6});
    const auto orig = f;
    EXPECT_EQ(mark_ce(f, wire::kEthSize, v6 ? 6 : 4), MarkResult::kNotEct);
    EXPECT_EQ(f, orig);
  }
}

// Ten 1 KB-payload packets arrive back to back at t = 0 on a slow port with
// step marking at 3 frames: at enqueue, packet k sees the k-1 frames ahead of
// it (packet 0 went straight to the wire); at dequeue, packet k sees the 9-k
// frames behind it. Same number of marks, on opposite ends of the burst.
std::vector<bool> marks_for(MarkPoint point) {
  auto cfg = simple_config(2, 10 * kGbps);
  const uint64_t frame = roce_bytes({}).size();
  cfg.ports[1].ecn.mode = MarkMode::kStep;
  cfg.ports[1].ecn.point = point;
  cfg.ports[1].ecn.step_bytes = 3 * frame;
  Switch sw(cfg);
  for (uint64_t k = 0; k < 10; ++k) sw.receive(0, roce_packet({}, k), 0);
  std::vector<bool> marked(10);
  for (auto& d : drain(sw)) {
    wire::ParsedPacket pp;
    EXPECT_EQ(wire::parse(d.packet.bytes, pp), wire::ParseError::kOk);
    marked[d.packet.tag] = pp.ecn == wire::Ecn::kCe;
  }
  EXPECT_EQ(sw.counters(1).queues[3].ecn_marked, 5u);
  return marked;
}

TEST(Ecn, EnqueueVersusDequeueMarking) {
  const std::vector<bool> enq = marks_for(MarkPoint::kEnqueue);
  const std::vector<bool> deq = marks_for(MarkPoint::kDequeue);
  for (int k = 0; k < 10; ++k) {
    EXPECT_EQ(enq[k], k >= 5) << "enqueue, packet " << k;
    EXPECT_EQ(deq[k], k >= 1 && k <= 5) << "dequeue, packet " << k;
  }
}

TEST(Ecn, SwitchRedRateOverRamp) {
  // Fill a paused queue from empty to past Kmax with enqueue marking: the
  // expected number of marks is the sum of the curve over the depths seen.
  auto cfg = simple_config(2, 100 * kGbps);
  const uint64_t frame = roce_bytes({}).size();
  cfg.ports[1].ecn = EcnConfig{};
  cfg.ports[1].ecn.point = MarkPoint::kEnqueue;
  cfg.ports[1].ecn.kmin_bytes = 50 * frame;
  cfg.ports[1].ecn.kmax_bytes = 450 * frame;
  cfg.ports[1].ecn.pmax = 0.5;
  cfg.shared_buffer_bytes = 1 << 30;
  double expected = 0, var = 0;
  size_t marks = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    cfg.seed = seed;
    Switch sw(cfg);
    // Hold the port with a long PFC pause so the queue only grows.
    wire::PfcFrame pf;
    pf.enable = 0x08;
    pf.quanta[3] = 0xFFFF;
    Packet pause;
    pause.bytes.resize(wire::kPfcFrameSize);
    wire::build_pfc(pf, pause.bytes);
    sw.receive(1, std::move(pause), 0);
    for (int i = 0; i < 500; ++i) sw.receive(0, roce_packet({}), 1);
    marks += sw.counters(1).queues[3].ecn_marked;
    for (int i = 0; i < 500; ++i) {
      const double p = mark_probability(cfg.ports[1].ecn, i * frame);
      expected += p;
      var += p * (1 - p);
    }
  }
  EXPECT_NEAR(static_cast<double>(marks), expected, 5 * std::sqrt(var) + 1);
}

}  // namespace
}  // namespace droce::fabric
