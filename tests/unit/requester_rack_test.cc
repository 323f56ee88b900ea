// Selective repeat's record of each send (requester_rack.cc): time-based
// loss detection (RACK, RFC 8985) finds holes lost by time, leaves late
// ones alone, finds lost resends again and changes nothing when off,
// widens an adaptive window when a resend proves spurious; the
// tail loss probe resends the newest packet when its answer is overdue;
// and path-aware entropy hears each packet's round trip and loss by the
// path it took.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "droce/transport/requester.h"
#include "transport_test_util.h"

namespace droce::transport {
namespace {

using namespace testing;

wire::TransportSpec sack_nak(uint32_t first_missing, uint32_t sacked) {
  auto t = ack(first_missing, nak(wire::NakCode::kPsnSequenceError));
  t.aeth_msn = sacked;
  return t;
}

// Selective repeat with a reorder tolerance (64) that no test here
// reaches, so only time finds losses; RTO_low off, RTO_high 4.19 ms.
QpAttr rack_attr(uint64_t window_ns) {
  QpAttr a = QpBench::default_attr();
  a.recovery = Recovery::kSelectiveRepeat;
  a.sack_window = 256;
  a.sr_reorder_tolerance_pkts = 64;
  a.sr_rto_low_ns = 0;
  a.sr_reorder_window_ns = window_ns;
  return a;
}

// Eight one-packet WRITEs, PSN 100 + i sent at i us.
void send_eight(QpBench& b) {
  for (uint32_t i = 0; i < 8; ++i) {
    ASSERT_EQ(b.post_send(i, IBV_WR_RDMA_WRITE, 0, 1024), 0);
    const auto out = b.drain(i * 1000);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].p.psn, 100 + i);
  }
}

// 100..104 ACKed, 105 lost, 106 and 107 SACKed: the round trip of 107
// (sent at 7 us, SACKed at 11 us) is 4 us.
void lose_105(QpBench& b) {
  b.feed(ack(104), {}, 9'000);
  b.feed(sack_nak(105, 106), {}, 10'000);
  b.feed(sack_nak(105, 107), {}, 11'000);
}

// RFC 8985 6.2: 105 is lost once it has been out for the delivered
// packet's round trip plus the window (5 + 4 + 3 = 12 us); the reorder
// timer wakes the QP then, with no further SACK.
TEST(RequesterRack, ATailLossIsResentAfterARoundTripAndTheWindow) {
  QpBench b(QpType::kRc, rack_attr(3'000));
  send_eight(b);
  lose_105(b);
  // Expect: nothing yet (105 may still be on its way), the timer at 12 us.
  EXPECT_EQ(b.drain(11'000).size(), 0u);
  EXPECT_EQ(b.qp_->next_deadline(), 12'000u);
  b.qp_->on_timer(12'000);
  auto out = b.drain(12'000);
  // Expect: only the hole, counted as found by time.
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 105u);
  EXPECT_EQ(b.qp_->counters().retransmit_rack, 1u);
  EXPECT_EQ(b.qp_->counters().retransmit_sack_holes, 1u);
  b.feed(ack(107), {}, 14'000);
  EXPECT_EQ(b.poll().size(), 8u);
}

// A hole that arrives late, within the window, is not resent.
TEST(RequesterRack, ALatePacketWithinTheWindowIsNotResent) {
  QpBench b(QpType::kRc, rack_attr(3'000));
  send_eight(b);
  lose_105(b);
  // 105 arrives at 11.5 us: the responder ACKs 107.
  b.feed(ack(107), {}, 11'500);
  // Expect: the timer, had it stayed, finds nothing to resend.
  b.qp_->on_timer(12'000);
  EXPECT_EQ(b.drain(12'000).size(), 0u);
  EXPECT_EQ(b.qp_->counters().retransmit_rack, 0u);
  EXPECT_EQ(b.qp_->counters().tx_retransmit_packets, 0u);
  EXPECT_EQ(b.poll().size(), 8u);
}

// Off (window 0), the same events leave the hole to the tolerance and
// the timeouts: no resend at 12 us, and no reorder timer.
TEST(RequesterRack, OffLeavesTheHoleToTheTimeouts) {
  QpBench b(QpType::kRc, rack_attr(0));
  send_eight(b);
  lose_105(b);
  EXPECT_EQ(b.qp_->next_deadline(), 9'000 + ack_timeout_ns(10));
  b.qp_->on_timer(12'000);
  EXPECT_EQ(b.drain(12'000).size(), 0u);
  EXPECT_EQ(b.qp_->counters().retransmit_rack, 0u);
}

// A resend is judged by its own send time: lost again once a packet first
// sent after it was delivered and the window passed (IRN 3.2 says the
// same of an in-order network with no window).
TEST(RequesterRack, ALostResendIsFoundByALaterDelivery) {
  QpBench b(QpType::kRc, rack_attr(3'000));
  send_eight(b);
  lose_105(b);
  b.qp_->on_timer(12'000);
  ASSERT_EQ(b.drain(12'000).size(), 1u);  // 105 resent at 12 us, lost again
  ASSERT_EQ(b.post_send(8, IBV_WR_RDMA_WRITE, 0, 1024), 0);
  ASSERT_EQ(b.drain(13'000).size(), 1u);  // 108 at 13 us
  b.feed(sack_nak(105, 108), {}, 15'000);  // round trip 2 us
  // Expect: the resend is out 12 + 2 + 3 = 17 us at the earliest.
  EXPECT_EQ(b.drain(15'000).size(), 0u);
  EXPECT_EQ(b.qp_->next_deadline(), 17'000u);
  b.qp_->on_timer(17'000);
  auto out = b.drain(17'000);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 105u);
  EXPECT_EQ(b.qp_->counters().retransmit_sack_again, 1u);
  b.feed(ack(108), {}, 19'000);
  EXPECT_EQ(b.poll().size(), 9u);
}

// RACK with the tail loss probe.
QpAttr probe_attr() {
  QpAttr a = rack_attr(3'000);
  a.sr_tail_probe = true;
  return a;
}

// Eight packets, 100..104 ACKed at 9 us (104 sent at 4 us: a 5 us round
// trip), and the ACK of the rest lost.
void send_eight_to_a_lost_ack(QpBench& b) {
  send_eight(b);
  b.feed(ack(104), {}, 9'000);
}

// RFC 8985 7: the ACK of the last packets is lost. Two smoothed round
// trips (2 x 5 us) after the last answer, the newest packet goes again,
// asking for its ACK; one probe, then the timeouts as before.
TEST(RequesterRack, TheTailLossProbeResendsTheNewestPacket) {
  QpBench b(QpType::kRc, probe_attr());
  send_eight_to_a_lost_ack(b);
  EXPECT_EQ(b.qp_->next_deadline(), 19'000u);
  EXPECT_EQ(b.drain(18'000).size(), 0u);
  b.qp_->on_timer(19'000);
  auto out = b.drain(19'000);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 107u);
  EXPECT_TRUE(out[0].p.ack_req);
  EXPECT_EQ(b.qp_->counters().retransmit_tail_probes, 1u);
  EXPECT_EQ(b.qp_->counters().tx_retransmit_packets, 1u);
  // Expect: no second probe before an answer; RTO_high is next.
  EXPECT_EQ(b.qp_->next_deadline(), 9'000 + ack_timeout_ns(10));
  // The probe's answer acknowledges all: the lost ACK's work done.
  b.feed(ack(107), {}, 21'000);
  EXPECT_EQ(b.poll().size(), 8u);
  EXPECT_EQ(b.qp_->next_deadline(), UINT64_MAX);
}

// The newest packet SACKed: the holes below are RACK's (its reorder
// timer), no probe; without the setting, no probe either.
TEST(RequesterRack, NoTailLossProbeWhenTheNewestWasSackedOrWhenOff) {
  QpBench b(QpType::kRc, probe_attr());
  send_eight_to_a_lost_ack(b);
  b.feed(sack_nak(105, 107), {}, 11'000);
  EXPECT_EQ(b.qp_->next_deadline(), 5'000u + 4'000u + 3'000u);  // RACK's, for 105
  b.qp_->on_timer(40'000);
  auto out = b.drain(40'000);
  ASSERT_EQ(out.size(), 2u);  // the holes 105 and 106, found by time
  EXPECT_EQ(b.qp_->counters().retransmit_tail_probes, 0u);

  QpBench c(QpType::kRc, rack_attr(3'000));
  send_eight_to_a_lost_ack(c);
  EXPECT_EQ(c.qp_->next_deadline(), 9'000 + ack_timeout_ns(10));
  c.qp_->on_timer(40'000);
  EXPECT_EQ(c.drain(40'000).size(), 0u);
}

// A READ's answer is its response: the probe leaves it to the timeouts,
// and its deadline does not come back until an answer.
TEST(RequesterRack, NoTailLossProbeForARead) {
  QpBench b(QpType::kRc, probe_attr());
  send_eight_to_a_lost_ack(b);
  ASSERT_EQ(b.post_send(8, IBV_WR_RDMA_READ, 0, 1024), 0);
  ASSERT_EQ(b.drain(10'000).size(), 1u);  // READ request, PSN 108
  const uint64_t probe = b.qp_->next_deadline();
  ASSERT_LT(probe, 9'000 + ack_timeout_ns(10));
  b.qp_->on_timer(probe);
  EXPECT_EQ(b.drain(probe).size(), 0u);
  EXPECT_EQ(b.qp_->counters().retransmit_tail_probes, 0u);
  EXPECT_EQ(b.qp_->next_deadline(), 9'000 + ack_timeout_ns(10));
}

// The adaptive window (QpAttr::sr_reorder_window_min_ns, RFC 8985 6.2.4):
// a 1 us floor under an 8 us window. 105 is lost by time when 106 is
// SACKed at 10 us (sent at 5, round trip 4, floor 1) and resent at 11 us;
// `answer_at` is when the ACK covering it comes. The smallest round trip
// of a first send is 4 us.
struct AdaptiveWindow {
  explicit AdaptiveWindow(uint64_t answer_at) : b(QpType::kRc, attr()) {
    send_eight(b);
    lose_105(b);
    auto out = b.drain(11'000);
    EXPECT_EQ(out.size(), 1u);
    EXPECT_EQ(out.empty() ? 0u : out[0].p.psn, 105u);
    b.feed(ack(107), {}, answer_at);
  }
  static QpAttr attr() {
    QpAttr a = rack_attr(8'000);
    a.sr_reorder_window_min_ns = 1'000;
    return a;
  }
  // Then 108..115 at 20..27 us, 108..111 ACKed at 30 us and 113 (sent at
  // 25 us, round trip 6) SACKed at 31 us: 112, sent at 24 us, is lost at
  // 24 + 6 + the window in force. Returns when (the reorder timer, or the
  // SACK's own time when it is lost at once).
  uint64_t second_loss_found_at() {
    for (uint32_t i = 8; i < 16; ++i) {
      EXPECT_EQ(b.post_send(i, IBV_WR_RDMA_WRITE, 0, 1024), 0);
      EXPECT_EQ(b.drain(12'000 + i * 1'000).size(), 1u);
    }
    b.feed(ack(111), {}, 30'000);
    b.feed(sack_nak(112, 113), {}, 31'000);
    if (!b.drain(31'000).empty()) return 31'000;
    return b.qp_->next_deadline();
  }
  QpBench b;
};

// The ACK covering the resent hole came 0.5 us after the resend, sooner
// than any answer to it could: the first copy was only late. The window
// doubles to 2 us.
TEST(RequesterRack, AnEarlyAnswerToAResendWidensTheAdaptiveWindow) {
  AdaptiveWindow w(11'500);
  EXPECT_EQ(w.b.qp_->counters().retransmit_spurious, 1u);
  EXPECT_EQ(w.second_loss_found_at(), 24'000u + 6'000 + 2'000);
}

// An answer a round trip after the resend is the resend's: the window
// stays at its 1 us floor, and the next loss is found at once.
TEST(RequesterRack, AResendAnsweredAfterARoundTripLeavesTheWindow) {
  AdaptiveWindow w(16'000);
  EXPECT_EQ(w.b.qp_->counters().retransmit_spurious, 0u);
  EXPECT_EQ(w.second_loss_found_at(), 31'000u);
}

// A fixed window (no floor) judges no resend.
TEST(RequesterRack, AFixedWindowDoesNotAdapt) {
  QpBench b(QpType::kRc, rack_attr(1'000));
  send_eight(b);
  lose_105(b);
  ASSERT_EQ(b.drain(11'000).size(), 1u);
  b.feed(ack(107), {}, 11'500);
  EXPECT_EQ(b.qp_->counters().retransmit_spurious, 0u);
}

// Go-back-N keeps no send times; the window is selective repeat's.
TEST(RequesterRack, GoBackNIgnoresTheWindow) {
  QpAttr a = QpBench::default_attr();
  a.sr_reorder_window_ns = 3'000;
  QpBench b(QpType::kRc, a);
  send_eight(b);
  b.feed(ack(104), {}, 9'000);
  EXPECT_EQ(b.qp_->next_deadline(), 9'000 + ack_timeout_ns(10));
}

// Path-aware entropy over 4 ports: the round trip of each delivered packet
// and each hole resent reach the path that packet took.
TEST(RequesterRack, PathAwareEntropyHearsRoundTripsAndLossesByPath) {
  QpAttr a = rack_attr(0);
  a.sr_reorder_tolerance_pkts = 0;
  a.entropy = {EntropyMode::kPathAware, 4, 0, 4'000};
  QpBench b(QpType::kRc, a);
  std::vector<uint16_t> port;  // of PSN 100 + i
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_EQ(b.post_send(i, IBV_WR_RDMA_WRITE, 0, 1024), 0);
    const auto out = b.drain(0);
    ASSERT_EQ(out.size(), 1u);
    port.push_back(out[0].p.udp_src_port);
  }
  EXPECT_EQ(std::set<uint16_t>(port.begin(), port.end()).size(), 4u);
  // 100 ACKed after 5 us (the smallest round trip); 101 lost; 102 SACKed
  // after 6 us (1 us of queueing: under the threshold).
  b.feed(ack(100), {}, 5'000);
  b.feed(sack_nak(101, 102), {}, 6'000);
  // Expect: the hole 101 resent at once (tolerance 0), on the port after
  // 103's; path 1, which lost it, avoided until 6 + 5 + 4 = 15 us.
  auto out = b.drain(6'000);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 101u);
  EXPECT_EQ(out[0].p.udp_src_port, port[0]);
  // 103 (path 3) SACKed after 20 us: 15 us of queueing, avoided until 35 us.
  b.feed(sack_nak(101, 103), {}, 20'000);
  EXPECT_EQ(b.drain(20'000).size(), 0u);
  // Expect: new packets at 21 us pass over path 3 only.
  std::vector<uint16_t> next;
  for (uint32_t i = 4; i < 8; ++i) {
    ASSERT_EQ(b.post_send(i, IBV_WR_RDMA_WRITE, 0, 1024), 0);
    const auto o = b.drain(21'000);
    ASSERT_EQ(o.size(), 1u);
    next.push_back(o[0].p.udp_src_port);
  }
  EXPECT_EQ(next, (std::vector<uint16_t>{port[1], port[2], port[0], port[1]}));
  // And at 10 us path 1 was still avoided: a QP that sends then skips it.
  QpBench c(QpType::kRc, a);
  for (uint32_t i = 0; i < 4; ++i) {
    ASSERT_EQ(c.post_send(i, IBV_WR_RDMA_WRITE, 0, 1024), 0);
    ASSERT_EQ(c.drain(0).size(), 1u);
  }
  c.feed(ack(100), {}, 5'000);
  c.feed(sack_nak(101, 102), {}, 6'000);
  ASSERT_EQ(c.drain(6'000).size(), 1u);  // 101 on path 0
  ASSERT_EQ(c.post_send(4, IBV_WR_RDMA_WRITE, 0, 1024), 0);
  out = c.drain(10'000);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.udp_src_port, port[2]) << "path 1 passed over";
}

}  // namespace
}  // namespace droce::transport
