// End-to-end credits (IBA 9.7.7.2): the AETH credit codes against the IBA
// table, the requester's limit, what the responder advertises, and the
// flow between two QPs that honour them.
#include "droce/transport/credits.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "transport_link.h"
#include "transport_test_util.h"

namespace droce::transport {
namespace {

using testing::QpBench;

// IBA table 46, written out: code -> receive WQEs.
constexpr uint32_t kTable46[31] = {0,    1,    2,    3,    4,    6,     8,     12,
                                   16,   24,   32,   48,   64,   96,    128,   192,
                                   256,  384,  512,  768,  1024, 1536,  2048,  3072,
                                   4096, 6144, 8192, 12288, 16384, 24576, 32768};

TEST(Credits, EveryCodeStandsForItsTableCount) {
  for (uint8_t code = 0; code < 31; ++code) {
    ASSERT_TRUE(credits_of_code(code).has_value()) << int{code};
    EXPECT_EQ(*credits_of_code(code), kTable46[code]) << int{code};
  }
  // Expect: 0x1F is the invalid count (no count at all), and nothing above
  // five bits is a code.
  EXPECT_FALSE(credits_of_code(kCreditCodeInvalid).has_value());
  EXPECT_FALSE(credits_of_code(0x20).has_value());
  EXPECT_FALSE(credits_of_code(0xFF).has_value());
}

TEST(Credits, AdvertisedCodeRoundsDownToATableCount) {
  // Expect: a count in the table is advertised exactly ...
  for (uint8_t code = 0; code < 31; ++code) EXPECT_EQ(credit_code_for(kTable46[code]), code);
  // ... one between two table entries as the lower (never a WQE that is
  // not there), and more than the largest as the largest.
  EXPECT_EQ(credit_code_for(5), 4);   // 4 credits
  EXPECT_EQ(credit_code_for(7), 5);   // 6
  EXPECT_EQ(credit_code_for(100), 13);  // 96
  EXPECT_EQ(credit_code_for(32767), 29);  // 24576
  EXPECT_EQ(credit_code_for(1u << 20), 30);
  for (uint32_t n = 0; n <= 40000; ++n)
    ASSERT_LE(kTable46[credit_code_for(n)], n) << n;
}

TEST(Credits, LimitIsTheAckedMsnPlusTheCredits) {
  CreditLimit c;
  // Expect: before any ACK a message may go only when none is outstanding
  // (the probe).
  EXPECT_TRUE(c.allows(1, true));
  EXPECT_FALSE(c.allows(2, false));
  // Three messages sent; the ACK of the first advertises 3 WQEs beyond it.
  EXPECT_EQ(c.on_ack(1, credit_code_for(3), 3), CreditLimit::Update::kApplied);
  EXPECT_EQ(c.limit(), 4u);
  EXPECT_TRUE(c.allows(4, false));
  EXPECT_FALSE(c.allows(5, false));
  // Expect: an older ACK (overtaken) does not take the limit back.
  EXPECT_EQ(c.on_ack(0, 0, 3), CreditLimit::Update::kApplied);
  EXPECT_EQ(c.limit(), 4u);
  EXPECT_EQ(c.acked_msn(), 1u);
  // All four acknowledged, no WQE left: the next one only as a probe, when
  // nothing is outstanding.
  EXPECT_EQ(c.on_ack(4, 0, 4), CreditLimit::Update::kApplied);
  EXPECT_FALSE(c.allows(5, false));
  EXPECT_TRUE(c.allows(5, true));
}

TEST(Credits, LimitWrapsWithTheMsn) {
  CreditLimit c;
  const uint32_t msn = 0xFFFFFE;
  EXPECT_EQ(c.on_ack(msn, credit_code_for(4), msn), CreditLimit::Update::kApplied);
  // Expect: the limit is 0xFFFFFE + 4 modulo 2^24 = 2.
  EXPECT_EQ(c.limit(), 2u);
  EXPECT_TRUE(c.allows(0xFFFFFF, false));
  EXPECT_TRUE(c.allows(0, false));
  EXPECT_TRUE(c.allows(2, false));
  EXPECT_FALSE(c.allows(3, false));
}

TEST(Credits, MalformedFieldsAreIgnored) {
  CreditLimit c;
  // Expect: an MSN beyond the newest message sent is malformed and changes
  // nothing.
  EXPECT_EQ(c.on_ack(5, credit_code_for(8), 2), CreditLimit::Update::kMalformed);
  EXPECT_FALSE(c.allows(2, false));
  // A counting responder ...
  EXPECT_EQ(c.on_ack(1, credit_code_for(2), 2), CreditLimit::Update::kApplied);
  // ... that says "invalid" later is malformed: the limit stays.
  EXPECT_EQ(c.on_ack(2, kCreditCodeInvalid, 2), CreditLimit::Update::kMalformed);
  EXPECT_FALSE(c.unlimited());
  EXPECT_EQ(c.limit(), 3u);
  // Expect: a code wider than five bits is malformed.
  EXPECT_EQ(c.on_ack(2, 0x20, 2), CreditLimit::Update::kMalformed);
}

TEST(Credits, InvalidCountMeansUnlimited) {
  CreditLimit c;
  EXPECT_EQ(c.on_ack(0, kCreditCodeInvalid, 1), CreditLimit::Update::kApplied);
  EXPECT_TRUE(c.unlimited());
  EXPECT_TRUE(c.allows(1000, false));
  // Expect: a responder that did not count and now counts is malformed.
  EXPECT_EQ(c.on_ack(1, 3, 1), CreditLimit::Update::kMalformed);
  EXPECT_TRUE(c.unlimited());
}

// The responder side: every ACK advertises the receive WQEs left.
TEST(Credits, AckAdvertisesTheReceiveWqesLeft) {
  QpBench b;
  for (uint64_t i = 0; i < 5; ++i) b.post_recv(i, i * 1024, 1024);
  std::vector<uint8_t> data(16, 7);
  b.feed(testing::req(IBV_OPCODE_RC_SEND_ONLY, 500), data);
  // Expect: the SEND took one of five: 4 credits (code 4), MSN 1.
  auto out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.aeth_syndrome, wire::make_syndrome(wire::AethType::kAck, 4));
  EXPECT_EQ(out[0].p.aeth_msn, 1u);
  // Expect: an RDMA WRITE takes no WQE; its ACK still says 4. Posting more
  // shows in the next ACK (7 -> code 5, 6 credits: rounded down).
  for (uint64_t i = 5; i < 8; ++i) b.post_recv(i, i * 1024, 1024);
  auto w = testing::req(IBV_OPCODE_RC_RDMA_WRITE_ONLY, 501);
  w.reth_va = b.va(32768);
  w.reth_rkey = b.mr_->rkey();
  w.reth_dma_length = 16;
  b.feed(w, data);
  out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.aeth_syndrome, wire::make_syndrome(wire::AethType::kAck, 5));
  EXPECT_EQ(out[0].p.aeth_msn, 2u);
}

TEST(Credits, ResponderOnASharedReceiveQueueAdvertisesInvalid) {
  Device dev;
  ProtectionDomain* pd = dev.alloc_pd();
  CompletionQueue* cq = dev.create_cq(64);
  SharedReceiveQueue* srq = dev.create_srq(pd, 16);
  ASSERT_NE(srq, nullptr);
  std::vector<uint8_t> mem(4096);
  MemoryRegion* mr = dev.reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE);
  for (uint64_t i = 0; i < 4; ++i) {
    Sge s{mr->iova() + i * 1024, 1024, mr->lkey()};
    RecvWr r;
    r.wr_id = i;
    r.sg_list = {&s, 1};
    ASSERT_EQ(srq->post(r), 0);
  }
  QpInitAttr init;
  init.pd = pd;
  init.send_cq = init.recv_cq = cq;
  init.srq = srq;
  QueuePair* qp = dev.create_qp(init);
  QpAttr attr = QpBench::default_attr();
  attr.path = testing::test_path(1, 2, qp->qpn(), testing::kPeerQpn);
  attr.dest_qpn = testing::kPeerQpn;
  attr.rq_psn = 500;
  ASSERT_EQ(qp->modify(QpState::kInit, attr), 0);
  ASSERT_EQ(qp->modify(QpState::kRtr, attr), 0);
  wire::TransportSpec t = testing::req(IBV_OPCODE_RC_SEND_ONLY, 500);
  t.dest_qp = qp->qpn();
  std::vector<uint8_t> data(16, 1), buf(9000);
  const size_t n = wire::build_packet(testing::test_path(2, 1, testing::kPeerQpn, qp->qpn()), t,
                                      data, buf);
  wire::ParsedPacket p;
  ASSERT_EQ(wire::parse({buf.data(), n}, p), wire::ParseError::kOk);
  qp->on_packet(p, 0);
  ASSERT_TRUE(qp->has_work(0));
  const size_t m = qp->produce(0, buf);
  ASSERT_GT(m, 0u);
  ASSERT_EQ(wire::parse({buf.data(), m}, p), wire::ParseError::kOk);
  // Expect: the WQEs are shared with other QPs, so the ACK counts none
  // (IBA 9.7.7.2: the invalid credit count, 0x1F).
  EXPECT_EQ(p.aeth_syndrome, wire::make_syndrome(wire::AethType::kAck, kCreditCodeInvalid));
}

// The requester side against a scripted responder.
QpAttr honouring() {
  QpAttr a = QpBench::default_attr();
  a.honour_credits = true;
  return a;
}

uint8_t ack_with(uint8_t code) { return wire::make_syndrome(wire::AethType::kAck, code); }

TEST(Credits, RequesterHoldsSendsBeyondTheLimit) {
  QpBench b(QpType::kRc, honouring());
  for (uint64_t i = 0; i < 4; ++i) ASSERT_EQ(b.post_send(i, IBV_WR_SEND, i * 64, 64), 0);
  // Expect: with no ACK yet, one SEND goes (the probe), the rest wait.
  auto out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 100u);
  // Its ACK: MSN 1, two WQEs left -> two more SENDs, not the fourth.
  auto a = testing::ack(100, ack_with(credit_code_for(2)));
  a.aeth_msn = 1;
  b.feed(a);
  out = b.drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].p.psn, 101u);
  EXPECT_EQ(out[1].p.psn, 102u);
  // Expect: both acknowledged with no WQE left, the fourth goes alone, as
  // the probe.
  a = testing::ack(102, ack_with(0));
  a.aeth_msn = 3;
  b.feed(a);
  out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 103u);
  EXPECT_EQ(b.poll().size(), 3u);
  EXPECT_EQ(b.qp_->counters().credits_malformed, 0u);
}

TEST(Credits, RequesterIgnoresCreditsUnlessTold) {
  QpBench b;  // honour_credits off: the default
  for (uint64_t i = 0; i < 4; ++i) ASSERT_EQ(b.post_send(i, IBV_WR_SEND, i * 64, 64), 0);
  // Expect: all four SENDs go at once.
  EXPECT_EQ(b.drain().size(), 4u);
}

TEST(Credits, WritesWithoutImmediateAreNotHeld) {
  QpBench b(QpType::kRc, honouring());
  ASSERT_EQ(b.post_send(0, IBV_WR_SEND, 0, 64), 0);
  for (uint64_t i = 1; i < 4; ++i) ASSERT_EQ(b.post_send(i, IBV_WR_RDMA_WRITE, i * 64, 64), 0);
  ASSERT_EQ(b.post_send(4, IBV_WR_RDMA_WRITE_WITH_IMM, 256, 64), 0);
  // Expect: the probe SEND, then the three WRITEs (no WQE needed); the
  // WRITE with immediate needs one and waits for the probe's answer.
  auto out = b.drain();
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[3].p.psn, 103u);
  EXPECT_EQ(out[3].p.opcode, IBV_OPCODE_RC_RDMA_WRITE_ONLY);
  auto a = testing::ack(103, ack_with(credit_code_for(1)));
  a.aeth_msn = 4;
  b.feed(a);
  out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE);
}

TEST(Credits, MalformedCreditFieldIsCountedAndIgnored) {
  QpBench b(QpType::kRc, honouring());
  for (uint64_t i = 0; i < 3; ++i) ASSERT_EQ(b.post_send(i, IBV_WR_SEND, i * 64, 64), 0);
  ASSERT_EQ(b.drain().size(), 1u);
  // An ACK whose MSN names a message never sent (only one was), with
  // plenty of credits.
  auto a = testing::ack(100, ack_with(credit_code_for(64)));
  a.aeth_msn = 9;
  b.feed(a);
  // Expect: counted; the ACK still acknowledges PSN 100, but its credits
  // are not believed: the second SEND goes only as the next probe.
  EXPECT_EQ(b.qp_->counters().credits_malformed, 1u);
  EXPECT_EQ(b.poll().size(), 1u);
  EXPECT_EQ(b.drain().size(), 1u);
}

// Two QPs over the loopback, the requester honouring the responder's
// credits: a receive queue that runs dry holds the SENDs at the requester
// (one probe at a time) instead of costing an RNR NAK and a go-back-N
// resend of everything behind it.
struct Flow {
  uint64_t tx_request_packets = 0;
  uint64_t rnr_naks = 0;
  uint32_t psns_started = 0;  // after the first 3 receives were used up
  bool completed = false;
};

Flow run_flow(bool honour) {
  testing::TwoEnds ends(64, 64);
  auto& [da, db, pa, pb, a_cq, b_cq, qa, qb] = ends;
  QpAttr attr;
  attr.path_mtu = IBV_MTU_1024;
  attr.min_rnr_timer = 1;  // 0.01 ms
  attr.rnr_retry = 7;      // infinite
  attr.honour_credits = honour;
  EXPECT_TRUE(testing::connect(*qa, *qb, attr, 100, 900));
  std::vector<uint8_t> amem(8 * 2048), bmem(8 * 2048, 0);
  for (size_t i = 0; i < amem.size(); ++i) amem[i] = static_cast<uint8_t>(i * 5 + 1);
  MemoryRegion* amr = da.reg_mr(pa, amem.data(), amem.size(), IBV_ACCESS_LOCAL_WRITE);
  MemoryRegion* bmr = db.reg_mr(pb, bmem.data(), bmem.size(), IBV_ACCESS_LOCAL_WRITE);
  auto post_recv = [&](uint64_t id) {
    Sge s{bmr->iova() + id * 2048, 2048, bmr->lkey()};
    RecvWr r;
    r.wr_id = id;
    r.sg_list = {&s, 1};
    EXPECT_EQ(qb->post_recv(r), 0);
  };
  for (uint64_t id = 0; id < 3; ++id) post_recv(id);
  // Eight SENDs of 1500 bytes (two packets each).
  for (uint64_t i = 0; i < 8; ++i) {
    Sge s{amr->iova() + i * 2048, 1500, amr->lkey()};
    SendWr w;
    w.wr_id = i;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED;
    w.sg_list = {&s, 1};
    EXPECT_EQ(qa->post_send(w), 0);
  }
  testing::Loopback net(da, db, 1, {});
  std::vector<WorkCompletion> sends, recvs;
  auto completed = [&](size_t r, size_t s) {
    WorkCompletion wcs[16];
    for (int n; (n = a_cq->poll(wcs)) > 0;) sends.insert(sends.end(), wcs, wcs + n);
    for (int n; (n = b_cq->poll(wcs)) > 0;) recvs.insert(recvs.end(), wcs, wcs + n);
    return recvs.size() >= r && sends.size() >= s;
  };
  // Until the responder has said RNR once: its three WQEs are used up.
  net.run([&] { return qb->counters().rnr_naks_sent > 0; }, 10'000'000);
  net.run([&] { return completed(3, 3); }, net.now() + 10'000'000);
  Flow f;
  f.psns_started = wire::psn_distance(100, qa->next_send_psn());
  for (uint64_t id = 3; id < 8; ++id) post_recv(id);
  net.run([&] { return completed(8, 8); }, net.now() + 10'000'000);
  f.completed = sends.size() == 8 && recvs.size() == 8;
  for (size_t i = 0; i < recvs.size(); ++i) {
    EXPECT_EQ(recvs[i].wr_id, i);
    EXPECT_EQ(recvs[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(recvs[i].byte_len, 1500u);
    EXPECT_EQ(0, std::memcmp(bmem.data() + i * 2048, amem.data() + i * 2048, 1500)) << i;
  }
  EXPECT_EQ(qb->counters().naks_invalid_request_sent, 0u);
  EXPECT_EQ(qa->counters().credits_malformed, 0u);
  f.tx_request_packets = qa->counters().tx_request_packets;
  f.rnr_naks = qb->counters().rnr_naks_sent;
  return f;
}

TEST(Credits, RequesterHonouringCreditsWaitsInsteadOfResending) {
  const Flow held = run_flow(true);
  const Flow blind = run_flow(false);
  ASSERT_TRUE(held.completed);
  ASSERT_TRUE(blind.completed);
  // Expect: honouring, the requester started the three SENDs the credits
  // covered and one probe (4 messages, 8 PSNs) while the queue was dry;
  // not honouring, all eight.
  EXPECT_EQ(held.psns_started, 8u);
  EXPECT_EQ(blind.psns_started, 16u);
  // Expect: fewer request packets on the wire: the blind requester went
  // back over everything sent after each RNR NAK.
  EXPECT_LT(held.tx_request_packets, blind.tx_request_packets);
}

}  // namespace
}  // namespace droce::transport
