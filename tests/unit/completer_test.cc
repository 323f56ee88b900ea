// Completer behaviour (IBA 9.7.5.1): in-order retirement, statuses,
// implied ACK/NAK, READ response placement, atomic results.
#include <gtest/gtest.h>

#include "droce/transport/completer.h"
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

}  // namespace
}  // namespace droce::transport
