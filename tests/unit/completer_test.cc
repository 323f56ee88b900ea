// Completer behaviour (IBA 9.7.5.1): in-order retirement, statuses,
// implied ACK/NAK, READ response placement, atomic results.
#include <gtest/gtest.h>

#include "droce/transport/completer.h"
#include "droce/transport/requester.h"
#include "transport_test_util.h"

namespace droce::transport {
namespace {

using namespace testing;

wire::TransportSpec read_resp(uint8_t op, uint32_t psn) {
  auto t = req(op, psn, false);
  t.aeth_syndrome = wire::make_syndrome(wire::AethType::kAck, 31);
  return t;
}

TEST(Completer, UnsignaledWqesRetireSilently) {
  QpBench b;
  ASSERT_EQ(b.post_send(1, IBV_WR_SEND, 0, 10, 0), 0);
  ASSERT_EQ(b.post_send(2, IBV_WR_SEND, 0, 10), 0);
  b.drain();
  b.feed(ack(101));
  auto wc = b.poll();
  // Expect: only the signaled WR reports.
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 2u);
  EXPECT_EQ(b.qp_->send_queue_depth(), 0u);
  // Expect: no timer left once everything is acknowledged.
  EXPECT_EQ(b.qp_->next_deadline(), UINT64_MAX);
}

TEST(Completer, ReadResponsesPlaceDataAndImplyEarlierAcks) {
  QpBench b;
  ASSERT_EQ(b.post_send(1, IBV_WR_SEND, 0, 10), 0);
  ASSERT_EQ(b.post_send(2, IBV_WR_RDMA_READ, 4096, 2000), 0);
  auto out = b.drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].p.psn, 101u);
  EXPECT_EQ(b.qp_->next_send_psn(), 103u);  // the READ spans two PSNs
  std::vector<uint8_t> data(2000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i ^ 0x5A);
  b.feed(read_resp(IBV_OPCODE_RC_RDMA_READ_RESPONSE_FIRST, 101), {data.data(), 1024});
  // Expect: the READ response acknowledges the SEND before it.
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  b.feed(read_resp(IBV_OPCODE_RC_RDMA_READ_RESPONSE_LAST, 102), {data.data() + 1024, 976});
  wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc[0].byte_len, 2000u);
  EXPECT_EQ(0, std::memcmp(b.mem_.data() + 4096, data.data(), 2000));
}

TEST(Completer, MissingReadResponseReissuesRemainder) {
  QpBench b;
  ASSERT_EQ(b.post_send(1, IBV_WR_RDMA_READ, 0, 3000), 0);
  b.drain();
  std::vector<uint8_t> data(1024, 1);
  b.feed(read_resp(IBV_OPCODE_RC_RDMA_READ_RESPONSE_FIRST, 100), data);
  b.feed(read_resp(IBV_OPCODE_RC_RDMA_READ_RESPONSE_LAST, 102), {data.data(), 952});
  // Expect: response 101 missing -> READ re-issued at PSN 101 for the
  // remaining 1976 bytes at VA + 1024.
  auto out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_RC_RDMA_READ_REQUEST);
  EXPECT_EQ(out[0].p.psn, 101u);
  EXPECT_EQ(out[0].p.reth_va, 0x5000u + 1024);
  EXPECT_EQ(out[0].p.reth_dma_length, 1976u);
}

TEST(Completer, AckBeyondUnansweredReadReissuesIt) {
  QpBench b;
  ASSERT_EQ(b.post_send(1, IBV_WR_RDMA_READ, 0, 8), 0);
  ASSERT_EQ(b.post_send(2, IBV_WR_SEND, 0, 8), 0);
  b.drain();
  b.feed(ack(101));
  // Expect: implied NAK: the READ goes out again; nothing completes.
  auto out = b.drain();
  ASSERT_GE(out.size(), 1u);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_RC_RDMA_READ_REQUEST);
  EXPECT_EQ(out[0].p.psn, 100u);
  EXPECT_TRUE(b.poll().empty());
  EXPECT_EQ(b.qp_->counters().retransmit_implied_nak, 1u);
}

TEST(Completer, AtomicAckWritesOriginalValue) {
  QpBench b;
  ASSERT_EQ(b.post_send(1, IBV_WR_ATOMIC_FETCH_AND_ADD, 64, 8), 0);
  auto out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_RC_FETCH_ADD);
  auto t = req(IBV_OPCODE_RC_ATOMIC_ACKNOWLEDGE, 100, false);
  t.aeth_syndrome = wire::make_syndrome(wire::AethType::kAck, 31);
  t.atomic_ack_original = 0x1122334455667788ull;
  b.feed(t);
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].opcode, IBV_WC_FETCH_ADD);
  uint64_t v;
  std::memcpy(&v, b.mem_.data() + 64, 8);
  EXPECT_EQ(v, 0x1122334455667788ull);
}

TEST(Completer, FatalNaksMapToStatusesAndFlush) {
  const std::pair<wire::NakCode, ibv_wc_status> cases[] = {
      {wire::NakCode::kInvalidRequest, IBV_WC_REM_INV_REQ_ERR},
      {wire::NakCode::kRemoteAccessError, IBV_WC_REM_ACCESS_ERR},
      {wire::NakCode::kRemoteOperationalError, IBV_WC_REM_OP_ERR},
  };
  for (auto [code, status] : cases) {
    QpBench b;
    ASSERT_EQ(b.post_send(1, IBV_WR_SEND, 0, 8), 0);
    ASSERT_EQ(b.post_send(2, IBV_WR_RDMA_WRITE, 0, 8), 0);
    ASSERT_EQ(b.post_send(3, IBV_WR_SEND, 0, 8), 0);
    b.drain();
    b.feed(ack(101, nak(code)));
    auto wc = b.poll();
    // Expect: WR 1 succeeded (implied ACK), WR 2 carries the NAK's status,
    // WR 3 is flushed and the QP is in ERR.
    ASSERT_EQ(wc.size(), 3u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc[1].status, status);
    EXPECT_EQ(wc[2].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(b.qp_->state(), QpState::kErr);
  }
}

TEST(Completer, GhostAndStaleAcksAreCountedAndIgnored) {
  QpBench b;
  ASSERT_EQ(b.post_send(1, IBV_WR_SEND, 0, 8), 0);
  b.drain();
  b.feed(ack(5000));  // never sent
  EXPECT_TRUE(b.poll().empty());
  EXPECT_EQ(b.qp_->counters().acks_ghost, 1u);
  b.feed(ack(100));
  b.feed(ack(100));
  EXPECT_EQ(b.poll().size(), 1u);
  EXPECT_EQ(b.qp_->counters().acks_stale, 1u);
}

TEST(Completer, SelectiveRepeatResendsOnlyHoles) {
  QpAttr a = QpBench::default_attr();
  a.recovery = Recovery::kSelectiveRepeat;
  a.sack_window = 256;
  QpBench b(QpType::kRc, a);
  ASSERT_EQ(b.post_send(1, IBV_WR_RDMA_WRITE, 0, 5 * 1024), 0);
  ASSERT_EQ(b.drain().size(), 5u);  // PSNs 100..104
  // Responder got 100, 102, 104: SACK NAKs name 101 as first missing.
  auto n1 = ack(101, nak(wire::NakCode::kPsnSequenceError));
  n1.aeth_msn = 102;
  b.feed(n1);
  auto n2 = n1;
  n2.aeth_msn = 104;
  b.feed(n2);
  auto out = b.drain();
  // Expect: only 101 and 103 are resent.
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].p.psn, 101u);
  EXPECT_EQ(out[1].p.psn, 103u);
  b.feed(ack(104));
  EXPECT_EQ(b.poll().size(), 1u);
}

wire::TransportSpec sack_nak(uint32_t first_missing, uint32_t sacked) {
  auto t = ack(first_missing, nak(wire::NakCode::kPsnSequenceError));
  t.aeth_msn = sacked;
  return t;
}

// A window counts the packets in the network (RFC 6675's pipe): a SACKed
// packet beyond a hole frees its room, a resent hole takes none of its
// own. Counting everything above the hole, plus each resend, shut the
// window of a window-based CC (HPCC, Swift) for good after a few losses.
TEST(Completer, SelectiveRepeatWindowCountsWhatIsInFlight) {
  QpAttr a = QpBench::default_attr();
  a.recovery = Recovery::kSelectiveRepeat;
  a.sack_window = 256;
  QpBench b(QpType::kRc, a);
  PipeWindow win{4 * 1024};
  const CcHooks h = win.hooks();
  b.qp_->set_cc_hooks(&h, &win);
  ASSERT_EQ(b.post_send(1, IBV_WR_RDMA_WRITE, 0, 8 * 1024), 0);
  auto out = b.drain();
  ASSERT_EQ(out.size(), 4u);  // PSNs 100..103 fill the window
  EXPECT_EQ(win.inflight, 4u * 1024);
  // 100 and 102 arrived, 101 lost: the NAK acknowledges 100 and SACKs 102.
  b.feed(sack_nak(101, 102));
  out = b.drain();
  // Expect: the hole resent, and two new PSNs in the room 100 and 102 left.
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].p.psn, 101u);
  EXPECT_EQ(out[1].p.psn, 104u);
  EXPECT_EQ(out[2].p.psn, 105u);
  EXPECT_EQ(win.inflight, 4u * 1024);  // 101, 103, 104, 105
  // 103 SACKed twice (a duplicate's answer): it leaves once.
  b.feed(sack_nak(101, 103));
  b.feed(sack_nak(101, 103));
  EXPECT_EQ(win.inflight, 3u * 1024);
  // Expect: the cumulative ACK counts only the PSNs no SACK had answered.
  out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 106u);
  b.feed(ack(106));
  EXPECT_EQ(win.inflight, 0u);
  out = b.drain();
  ASSERT_EQ(out.size(), 1u);  // 107, the last
  b.feed(ack(107));
  EXPECT_EQ(win.inflight, 0u);
  EXPECT_EQ(b.poll().size(), 1u);
}

// IRN §3.2: a resent hole is resent again once a PSN first sent after the
// resend is SACKed (in-order network: the resend was lost), not before.
TEST(Completer, SelectiveRepeatResendsHoleAgainOnLaterSack) {
  QpAttr a = QpBench::default_attr();
  a.recovery = Recovery::kSelectiveRepeat;
  a.sack_window = 256;
  a.max_inflight_psns = 4;
  QpBench b(QpType::kRc, a);
  ASSERT_EQ(b.post_send(1, IBV_WR_RDMA_WRITE, 0, 8 * 1024), 0);
  auto out = b.drain();
  ASSERT_EQ(out.size(), 4u);  // PSNs 100..103, the window is full
  // 100 and 102 arrived, 101 lost.
  b.feed(sack_nak(101, 102));
  out = b.drain();
  // Expect: the hole 101 (its resend marked "sent before PSN 104"), then
  // the new PSN 104 the ACK of 100 let into the window.
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].p.psn, 101u);
  EXPECT_EQ(out[1].p.psn, 104u);
  // 103 SACKed: sent before the resend of 101, so no news about it.
  b.feed(sack_nak(101, 103));
  // Expect: nothing (101's resend may still be on its way; window full).
  EXPECT_EQ(b.drain().size(), 0u);
  EXPECT_EQ(b.qp_->counters().retransmit_sack_again, 0u);
  // 104 SACKed: sent after the resend of 101, so that resend was lost.
  b.feed(sack_nak(101, 104));
  out = b.drain();
  // Expect: 101 once more, and nothing else (102..104 are SACKed).
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 101u);
  EXPECT_EQ(b.qp_->counters().retransmit_sack_again, 1u);
  EXPECT_EQ(b.qp_->counters().retransmit_sack_holes, 2u);
  // Expect: the same SACK again changes nothing (second resend is marked
  // "before 105").
  b.feed(sack_nak(101, 104));
  EXPECT_EQ(b.drain().size(), 0u);
  // The responder gets 101: cumulative ACK 104 opens the window for 105..107.
  b.feed(ack(104));
  out = b.drain();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].p.psn, 105u);
  b.feed(ack(107));
  EXPECT_EQ(b.poll().size(), 1u);
  EXPECT_EQ(b.qp_->counters().retransmit_timeouts, 0u);
}

// IRN §3.1: RTO_low when few packets are in flight, doubling while no
// progress comes (RFC 6298 5.5) until it would reach RTO_high; outside
// retry_cnt, so RETRY_EXC still takes (retry_cnt + 1) RTO_high after that.
TEST(Completer, SelectiveRepeatRtoLowWhenFewPacketsInFlight) {
  QpAttr a = QpBench::default_attr();  // timeout 10: RTO_high 4.19 ms, retry_cnt 2
  a.recovery = Recovery::kSelectiveRepeat;
  a.sack_window = 256;
  a.sr_rto_low_ns = 50'000;
  a.sr_rto_low_threshold_pkts = 3;
  QpBench b(QpType::kRc, a);
  const uint64_t high = ack_timeout_ns(10);
  ASSERT_EQ(b.post_send(1, IBV_WR_RDMA_WRITE, 0, 3 * 1024), 0);
  ASSERT_EQ(b.drain(0).size(), 3u);  // PSNs 100..102, AckReq on 102
  // Expect: 3 packets in flight <= threshold: the deadline is RTO_low.
  EXPECT_EQ(b.qp_->next_deadline(), 50'000u);
  b.qp_->on_timer(50'000);
  auto out = b.drain(50'000);
  // Expect: every un-SACKed packet resent; counted as RTO_low, retry
  // budget untouched; the next deadline is twice RTO_low from now.
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].p.psn, 100u);
  EXPECT_EQ(b.qp_->counters().retransmit_timeouts_low, 1u);
  EXPECT_EQ(b.qp_->counters().retransmit_timeouts, 0u);
  EXPECT_EQ(b.qp_->next_deadline(), 50'000u + 100'000u);
  // Progress (ACK of 100) brings RTO_low back to its base, counted from
  // the ACK.
  b.feed(ack(100), {}, 60'000);
  EXPECT_EQ(b.qp_->next_deadline(), 60'000u + 50'000u);
  b.qp_->on_timer(110'000);
  ASSERT_EQ(b.drain(110'000).size(), 2u);  // 101, 102
  EXPECT_EQ(b.qp_->counters().retransmit_timeouts_low, 2u);
  // No progress since: 100 us, 200 us ... 3.2 ms, each resending both
  // packets; 6.4 ms would pass RTO_high, which takes over.
  uint64_t t = 110'000;
  for (uint64_t rto = 100'000; rto < high; rto *= 2) {
    EXPECT_EQ(b.qp_->next_deadline(), t + rto);
    t += rto;
    b.qp_->on_timer(t);
    EXPECT_EQ(b.drain(t).size(), 2u);
  }
  EXPECT_EQ(b.qp_->counters().retransmit_timeouts_low, 8u);
  EXPECT_EQ(b.qp_->counters().retransmit_timeouts, 0u);
  // Then only RTO_high: retry_cnt = 2 allows two resends, the third
  // expiry fails the WQE.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(b.qp_->next_deadline(), t + high);
    t += high;
    b.qp_->on_timer(t);
    b.drain(t);
  }
  EXPECT_EQ(b.qp_->counters().retransmit_timeouts, 3u);
  EXPECT_EQ(b.qp_->counters().retransmit_timeouts_low, 8u);
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
}

// RTO_low only when an answer is due: packets without AckReq at the tail
// (the window stopped a message midway) may legitimately wait for a later
// AckReq, so they keep RTO_high. SACKs shrink "in flight" to the threshold.
TEST(Completer, SelectiveRepeatRtoLowNeedsAnAnswerDue) {
  QpAttr a = QpBench::default_attr();
  a.recovery = Recovery::kSelectiveRepeat;
  a.sack_window = 256;
  a.ack_req_every_n = 0;
  a.max_inflight_psns = 2;
  a.sr_rto_low_ns = 50'000;
  QpBench b(QpType::kRc, a);
  const uint64_t high = ack_timeout_ns(10);
  ASSERT_EQ(b.post_send(1, IBV_WR_RDMA_WRITE, 0, 8 * 1024), 0);
  auto out = b.drain(0);
  ASSERT_EQ(out.size(), 2u);  // 100, 101: FIRST, MIDDLE, no AckReq
  EXPECT_FALSE(out[1].p.ack_req);
  // Expect: 2 in flight, but nothing will answer them: RTO_high.
  EXPECT_EQ(b.qp_->next_deadline(), high);

  QpAttr c = a;
  c.max_inflight_psns = 8;
  QpBench d(QpType::kRc, c);
  ASSERT_EQ(d.post_send(1, IBV_WR_RDMA_WRITE, 0, 8 * 1024), 0);
  ASSERT_EQ(d.drain(0).size(), 8u);  // 100..107, AckReq on 107
  // Expect: 8 in flight > 3: RTO_high.
  EXPECT_EQ(d.qp_->next_deadline(), high);
  // 103..107 SACKed (five NAKs naming 100); 100..102 are resent as holes.
  for (uint32_t p = 103; p <= 107; ++p) d.feed(sack_nak(100, p), {}, 10'000);
  EXPECT_EQ(d.drain(10'000).size(), 3u);
  // Expect: 3 in flight now: RTO_low, counted from the hole resends.
  EXPECT_EQ(d.qp_->next_deadline(), 10'000u + 50'000u);
}

}  // namespace
}  // namespace droce::transport
