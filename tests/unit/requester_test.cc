// Requester behaviour (IBA 9.7.4, 9.7.6): segmentation, PSNs, AckReq,
// limits, timers and retries, from crafted responses.
#include <gtest/gtest.h>

#include "droce/transport/requester.h"
#include "transport_test_util.h"

namespace droce::transport {
namespace {

using namespace testing;

TEST(Requester, TimerEncodings) {
  // Expect: IBA 9.7.6.1.3 timeout 4.096 us * 2^t, 0 = infinite.
  EXPECT_EQ(ack_timeout_ns(0), 0u);
  EXPECT_EQ(ack_timeout_ns(1), 8192u);
  EXPECT_EQ(ack_timeout_ns(14), 67108864u);
  // Expect: table 45 of IBA 9.7.5.2.8.
  EXPECT_EQ(rnr_timer_ns(12), 640'000u);
  EXPECT_EQ(rnr_timer_ns(31), 491'520'000u);
  EXPECT_EQ(mtu_bytes(IBV_MTU_256), 256u);
  EXPECT_EQ(mtu_bytes(IBV_MTU_4096), 4096u);
}

TEST(Requester, ActiveMtuIsTheLargestThatFitsTheLink) {
  EXPECT_EQ(active_mtu(4096, 1500), 1024u);  // Ethernet, as rxe reports
  EXPECT_EQ(active_mtu(4096, 9000), 4096u);  // jumbo frames
  EXPECT_EQ(active_mtu(2048, 9000), 2048u);  // the configuration caps it
  EXPECT_EQ(active_mtu(4096, 4096 + 84), 4096u);  // exactly the fullest packet
  EXPECT_EQ(active_mtu(4096, 4096 + 83), 2048u);  // one byte short
  EXPECT_EQ(active_mtu(4096, 200), 256u);    // nothing fits: the IB minimum
}

TEST(Requester, SegmentsByMtuAcrossPsnWrapWithAckReqOnLast) {
  QpBench b(QpType::kRc, QpBench::default_attr(), 0xFFFFFE);
  ASSERT_EQ(b.post_send(1, IBV_WR_SEND, 0, 3000), 0);
  auto out = b.drain();
  // Expect: FIRST/MIDDLE/LAST at PSNs 0xFFFFFE, 0xFFFFFF, 0; AckReq on LAST.
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_RC_SEND_FIRST);
  EXPECT_EQ(out[1].p.opcode, IBV_OPCODE_RC_SEND_MIDDLE);
  EXPECT_EQ(out[2].p.opcode, IBV_OPCODE_RC_SEND_LAST);
  EXPECT_EQ(out[0].p.psn, 0xFFFFFEu);
  EXPECT_EQ(out[1].p.psn, 0xFFFFFFu);
  EXPECT_EQ(out[2].p.psn, 0u);
  EXPECT_FALSE(out[0].p.ack_req);
  EXPECT_TRUE(out[2].p.ack_req);
  EXPECT_EQ(out[2].p.payload_length, 3000u - 2048u);
  EXPECT_EQ(0, std::memcmp(out[1].p.payload, b.mem_.data() + 1024, 1024));
  b.feed(ack(0));
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_SEND);
}

TEST(Requester, WriteCarriesRethOnFirstOnlyAndImmOnLast) {
  QpBench b;
  ASSERT_EQ(b.post_send(1, IBV_WR_RDMA_WRITE_WITH_IMM, 0, 1500), 0);
  auto out = b.drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_RC_RDMA_WRITE_FIRST);
  EXPECT_EQ(out[0].p.reth_va, 0x5000u);
  EXPECT_EQ(out[0].p.reth_rkey, 0x777u);
  EXPECT_EQ(out[0].p.reth_dma_length, 1500u);
  EXPECT_EQ(out[1].p.opcode, IBV_OPCODE_RC_RDMA_WRITE_LAST_WITH_IMMEDIATE);
}

TEST(Requester, TimeoutGoesBackNThenRetryExceeded) {
  QpBench b;  // timeout 10 (4.19 ms), retry_cnt 2
  ASSERT_EQ(b.post_send(1, IBV_WR_SEND, 0, 10), 0);
  ASSERT_EQ(b.post_send(2, IBV_WR_SEND, 0, 10), 0);
  ASSERT_EQ(b.drain(0).size(), 2u);
  uint64_t now = b.qp_->next_deadline();
  EXPECT_EQ(now, ack_timeout_ns(10));
  for (int retry = 0; retry < 2; ++retry) {
    b.qp_->on_timer(now);
    auto out = b.drain(now);
    // Expect: both packets again from the oldest unacked PSN.
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].p.psn, 100u);
    now = b.qp_->next_deadline();
  }
  b.qp_->on_timer(now);
  // Expect: third timeout -> RETRY_EXC_ERR on WR 1, WR 2 flushed, QP in ERR.
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(b.qp_->state(), QpState::kErr);
  EXPECT_EQ(b.qp_->counters().retransmit_timeouts, 3u);
}

TEST(Requester, RnrNakWaitsTableTimeThenRetriesUntilExhausted) {
  QpBench b;  // rnr_retry 2
  ASSERT_EQ(b.post_send(1, IBV_WR_SEND, 0, 10), 0);
  b.drain(0);
  uint64_t now = 1000;
  for (int i = 0; i < 2; ++i) {
    b.feed(ack(100, wire::make_syndrome(wire::AethType::kRnrNak, 14)), {}, now);
    // Expect: nothing is sent during the 1.28 ms RNR wait.
    EXPECT_FALSE(b.qp_->has_work(now));
    EXPECT_EQ(b.qp_->next_deadline(), now + 1'280'000);
    now = b.qp_->next_deadline();
    b.qp_->on_timer(now);
    auto out = b.drain(now);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].p.psn, 100u);
  }
  b.feed(ack(100, wire::make_syndrome(wire::AethType::kRnrNak, 14)), {}, now);
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
}

TEST(Requester, InfiniteRnrRetry) {
  QpAttr a = QpBench::default_attr();
  a.rnr_retry = 7;
  QpBench b(QpType::kRc, a);
  ASSERT_EQ(b.post_send(1, IBV_WR_SEND, 0, 10), 0);
  b.drain(0);
  uint64_t now = 0;
  for (int i = 0; i < 20; ++i) {
    b.feed(ack(100, wire::make_syndrome(wire::AethType::kRnrNak, 1)), {}, now);
    now = b.qp_->next_deadline();
    b.qp_->on_timer(now);
    ASSERT_EQ(b.drain(now).size(), 1u);
  }
  // Expect: rnr_retry 7 never gives up.
  EXPECT_TRUE(b.poll().empty());
  EXPECT_EQ(b.qp_->state(), QpState::kRts);
}

TEST(Requester, SequenceNakGoesBackToNamedPsn) {
  QpBench b;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(b.post_send(i, IBV_WR_SEND, 0, 10), 0);
  ASSERT_EQ(b.drain().size(), 3u);
  b.feed(ack(101, nak(wire::NakCode::kPsnSequenceError)));
  // Expect: WR 0 completes (implied ACK of PSN 100), PSNs 101, 102 resent.
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 0u);
  auto out = b.drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].p.psn, 101u);
  EXPECT_EQ(out[1].p.psn, 102u);
  EXPECT_EQ(b.qp_->counters().tx_retransmit_packets, 2u);
}

TEST(Requester, MaxRdAtomicLimitsOutstandingReads) {
  QpAttr a = QpBench::default_attr();
  a.max_rd_atomic = 2;
  QpBench b(QpType::kRc, a);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(b.post_send(i, IBV_WR_RDMA_READ, 0, 8), 0);
  // Expect: only two READ requests until a response arrives.
  ASSERT_EQ(b.drain().size(), 2u);
  auto r = req(IBV_OPCODE_RC_RDMA_READ_RESPONSE_ONLY, 100);
  r.aeth_syndrome = wire::make_syndrome(wire::AethType::kAck, 31);
  uint8_t data[8] = {};
  b.feed(r, data);
  auto out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 102u);
}

TEST(Requester, InflightWindowAndCcGate) {
  QpAttr a = QpBench::default_attr();
  a.max_inflight_psns = 2;
  QpBench b(QpType::kRc, a);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(b.post_send(i, IBV_WR_SEND, 0, 10), 0);
  // Expect: the PSN window admits two packets.
  EXPECT_EQ(b.drain().size(), 2u);
  EXPECT_GT(b.qp_->counters().window_stalls, 0u);
  int allowed = 0;
  CcHooks h;
  h.may_send = [](void* ctx, uint32_t, uint32_t, uint64_t) { return *static_cast<int*>(ctx) > 0; };
  b.qp_->set_cc_hooks(&h, &allowed);
  b.feed(ack(101));
  // Expect: the window opened but the CC gate says no.
  EXPECT_TRUE(b.drain().empty());
  EXPECT_GT(b.qp_->counters().cc_stalls, 0u);
  allowed = 1;
  EXPECT_EQ(b.drain().size(), 1u);
}

TEST(Requester, ATimeoutWhileCcHoldsTheResendSpendsNoRetry) {
  // The local ACK timer measures a request's time on the wire (IBA
  // 9.7.6.1.3). A CC that paces a QP slower than its timeout (Swift with a
  // window below one packet) holds the resend back; those timeouts must
  // not exhaust retry_cnt, or the WR fails with RETRY_EXC for packets
  // that never left.
  QpAttr a = QpBench::default_attr();  // timeout 10, retry_cnt 2
  QpBench b(QpType::kRc, a);
  int allowed = 1;
  CcHooks h;
  h.may_send = [](void* ctx, uint32_t, uint32_t, uint64_t) { return *static_cast<int*>(ctx) > 0; };
  b.qp_->set_cc_hooks(&h, &allowed);
  ASSERT_EQ(b.post_send(1, IBV_WR_RDMA_WRITE, 0, 10), 0);
  ASSERT_EQ(b.drain(0).size(), 1u);
  allowed = 0;
  const uint64_t rto = ack_timeout_ns(10);
  uint64_t t = 0;
  for (int i = 0; i < 10; ++i) {
    t += rto;
    b.qp_->on_timer(t);
    EXPECT_TRUE(b.drain(t).empty());  // the resend stays held
  }
  // Expect: every expiry counted, none failed the WR (the first spent one
  // retry: the packet had left).
  EXPECT_EQ(b.qp_->counters().retransmit_timeouts, 10u);
  EXPECT_EQ(b.qp_->counters().retry_exceeded, 0u);
  EXPECT_TRUE(b.poll().empty());
  // The CC lets it go: it is resent, acknowledged, and completes.
  allowed = 1;
  const auto out = b.drain(t);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 100u);
  b.feed(ack(100));
  const auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  // Expect: once a resend left and met no answer, timeouts spend retries
  // again: retry_cnt 2 allows two more, the third fails.
  ASSERT_EQ(b.post_send(2, IBV_WR_RDMA_WRITE, 0, 10), 0);
  ASSERT_EQ(b.drain(t).size(), 1u);
  for (int i = 0; i < 3; ++i) {
    t += rto;
    b.qp_->on_timer(t);
    b.drain(t);
  }
  const auto failed = b.poll();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].status, IBV_WC_RETRY_EXC_ERR);
}

TEST(Requester, PacketThatFillsTheCcWindowAsksForItsAck) {
  // A window-limited requester that stops mid-message must ask for an ACK
  // (AckReq, IBA 9.7.4.1): the responder coalesces ACKs until one is asked
  // for (9.7.5.1.2), so otherwise nothing would reopen the window before
  // the retransmission timeout.
  QpAttr a = QpBench::default_attr();
  a.ack_req_every_n = 0;  // AckReq only on the message's last packet ...
  QpBench b(QpType::kRc, a);
  PipeWindow win{3 * 1024};  // ... and room for three 1 KiB packets
  const CcHooks h = win.hooks();
  b.qp_->set_cc_hooks(&h, &win);
  ASSERT_EQ(b.post_send(1, IBV_WR_RDMA_WRITE, 0, 8 * 1024), 0);
  auto out = b.drain();
  // Expect: three packets fit; the third fills the window and carries AckReq.
  ASSERT_EQ(out.size(), 3u);
  EXPECT_FALSE(out[0].p.ack_req);
  EXPECT_FALSE(out[1].p.ack_req);
  EXPECT_TRUE(out[2].p.ack_req);
  // Expect: its ACK reopens the window, and the next window ends the same way.
  b.feed(ack(102));
  out = b.drain();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].p.psn, 103u);
  EXPECT_FALSE(out[0].p.ack_req);
  EXPECT_TRUE(out[2].p.ack_req);
}

TEST(Requester, APacedFlowAsksForAnAckAtLeastEveryInterval) {
  // A flow its CC paces slowly must still ask for ACKs: with AckReq only
  // every 64 packets, TIMELY at its floor would get no RTT sample for
  // 210 ms and its local ACK timer (67 ms) would fire with nothing lost.
  int budget = 0;  // packets the "pacer" lets out
  CcHooks h;
  h.may_send = [](void* ctx, uint32_t, uint32_t, uint64_t) { return *static_cast<int*>(ctx) > 0; };
  h.on_send = [](void* ctx, uint32_t, uint32_t, bool, uint64_t) { --*static_cast<int*>(ctx); };
  // One packet at `now`; whether it asked for an ACK.
  auto one_at = [&](QpBench& b, uint64_t now) {
    budget = 1;
    auto out = b.drain(now);
    EXPECT_EQ(out.size(), 1u) << now;
    return !out.empty() && out[0].p.ack_req;
  };
  QpAttr a = QpBench::default_attr();
  a.ack_req_interval_ns = 25'000;
  QpBench b(QpType::kRc, a);
  b.qp_->set_cc_hooks(&h, &budget);
  ASSERT_EQ(b.post_send(1, IBV_WR_RDMA_WRITE, 0, 8 * 1024), 0);
  // Expect: the first packet, and packets within 25 us of the last that
  // asked, do not ask; the first one 25 us or more later does.
  EXPECT_FALSE(one_at(b, 0));
  EXPECT_FALSE(one_at(b, 10'000));
  EXPECT_TRUE(one_at(b, 25'000));
  EXPECT_FALSE(one_at(b, 49'999));
  EXPECT_TRUE(one_at(b, 50'000));
  // Expect: 0 turns the interval off.
  a.ack_req_interval_ns = 0;
  QpBench off(QpType::kRc, a);
  off.qp_->set_cc_hooks(&h, &budget);
  ASSERT_EQ(off.post_send(1, IBV_WR_RDMA_WRITE, 0, 4 * 1024), 0);
  EXPECT_FALSE(one_at(off, 0));
  EXPECT_FALSE(one_at(off, 100'000));
  EXPECT_FALSE(one_at(off, 200'000));
}

TEST(Requester, TheTimedPacketAsksForItsAckWhenTheCcSamplesRtt) {
  // An RTT sample taken on a packet without AckReq would include the time
  // its ACK waited in the responder's coalescing (IBA 9.7.5.1.2), which
  // TIMELY and Swift read as queueing. With samples_rtt the timed packet
  // (one in flight at a time) asks for its ACK, and the sample is the
  // round trip of that packet alone.
  QpAttr a = QpBench::default_attr();
  a.ack_req_every_n = 0;
  a.ack_req_interval_ns = 0;
  QpBench b(QpType::kRc, a);
  struct Seen {
    uint64_t rtt = 0;
  } seen;
  CcHooks h;
  h.samples_rtt = true;
  h.on_ack = [](void* ctx, uint32_t, uint64_t, uint64_t rtt, uint64_t) {
    if (rtt) static_cast<Seen*>(ctx)->rtt = rtt;
  };
  b.qp_->set_cc_hooks(&h, &seen);
  ASSERT_EQ(b.post_send(1, IBV_WR_RDMA_WRITE, 0, 4 * 1024), 0);
  auto out = b.drain(1000);
  ASSERT_EQ(out.size(), 4u);
  // Expect: the first packet is timed and asks; the next two do not; the
  // last asks as every message's last packet does.
  EXPECT_TRUE(out[0].p.ack_req);
  EXPECT_FALSE(out[1].p.ack_req);
  EXPECT_FALSE(out[2].p.ack_req);
  EXPECT_TRUE(out[3].p.ack_req);
  // Expect: its ACK, 5 us later, gives a 5 us sample.
  b.feed(ack(100), {}, 6000);
  EXPECT_EQ(seen.rtt, 5000u);
  // Expect: without samples_rtt, no packet but the last asks.
  h.samples_rtt = false;
  QpBench plain(QpType::kRc, a);
  plain.qp_->set_cc_hooks(&h, &seen);
  ASSERT_EQ(plain.post_send(1, IBV_WR_RDMA_WRITE, 0, 4 * 1024), 0);
  out = plain.drain(1000);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_FALSE(out[0].p.ack_req);
  EXPECT_TRUE(out[3].p.ack_req);
}

TEST(Requester, PostValidation) {
  QpBench b;
  // Expect: bad lkey / range are EINVAL at post time.
  Sge s{b.va(0), 16, 0xBAD00};
  SendWr w;
  w.sg_list = {&s, 1};
  EXPECT_EQ(b.qp_->post_send(w), EINVAL);
  s = {b.va(65530), 16, b.mr_->lkey()};
  EXPECT_EQ(b.qp_->post_send(w), EINVAL);
  // Expect: the send queue depth is enforced.
  for (int i = 0; i < 64; ++i) ASSERT_EQ(b.post_send(i, IBV_WR_SEND, 0, 1), 0);
  EXPECT_EQ(b.post_send(99, IBV_WR_SEND, 0, 1), ENOMEM);
}

}  // namespace
}  // namespace droce::transport
