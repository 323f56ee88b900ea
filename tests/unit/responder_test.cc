// Responder behaviour from crafted request packets (IBA 9.7.5.2).
#include <gtest/gtest.h>

#include "transport_test_util.h"

namespace droce::transport {
namespace {

using namespace testing;
using wire::NakCode;

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 3);
  return v;
}

// An RDMA READ request for `len` bytes at `va`: its RETH carries the
// address, the region's key and the length.
wire::TransportSpec read_req(uint32_t psn, uint64_t va, uint32_t rkey, uint32_t len) {
  auto t = req(IBV_OPCODE_RC_RDMA_READ_REQUEST, psn);
  t.reth_va = va;
  t.reth_rkey = rkey;
  t.reth_dma_length = len;
  return t;
}

void expect_nak(const std::vector<Frame>& out, uint32_t psn, uint8_t syndrome) {
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_RC_ACKNOWLEDGE);
  EXPECT_EQ(out[0].p.psn, psn);
  EXPECT_EQ(out[0].p.aeth_syndrome, syndrome);
}

TEST(Responder, SendWithImmLandsInReceiveWqeAndIsAcked) {
  QpBench b;
  b.post_recv(7, 0, 4096);
  auto data = bytes(1500, 1);
  // Expect: FIRST (1024 B) + LAST_WITH_IMM (476 B) fill the receive buffer.
  b.feed(req(IBV_OPCODE_RC_SEND_FIRST, 500, false), {data.data(), 1024});
  auto t = req(IBV_OPCODE_RC_SEND_LAST_WITH_IMMEDIATE, 501);
  t.imm_data = 0xCAFE;
  b.feed(t, {data.data() + 1024, 476});
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 7u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(wc[0].byte_len, 1500u);
  EXPECT_TRUE(wc[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(wc[0].imm_data, 0xCAFEu);
  EXPECT_EQ(0, std::memcmp(b.mem_.data(), data.data(), 1500));
  // Expect: one ACK for PSN 501 (AckReq on the last packet), MSN 1.
  auto out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 501u);
  EXPECT_EQ(wire::aeth_type(out[0].p.aeth_syndrome), wire::AethType::kAck);
  EXPECT_EQ(out[0].p.aeth_msn, 1u);
  EXPECT_EQ(b.qp_->expected_psn(), 502u);
}

TEST(Responder, RnrNakWhenNoReceiveWqe) {
  QpBench b;
  auto data = bytes(10, 1);
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 500), data);
  // Expect: RNR NAK carrying min_rnr_timer (5), PSN not consumed.
  expect_nak(b.drain(), 500, wire::make_syndrome(wire::AethType::kRnrNak, 5));
  EXPECT_EQ(b.qp_->expected_psn(), 500u);
  EXPECT_EQ(b.qp_->counters().rnr_naks_sent, 1u);
  // Expect: after a receive is posted the retry is accepted.
  b.post_recv(1, 0, 64);
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 500), data);
  EXPECT_EQ(b.poll().size(), 1u);
  EXPECT_EQ(b.qp_->expected_psn(), 501u);
}

// IBA 9.7.5.2.8: an RNR NAK consumes no PSN and leaves no responder state.
// A WRITE ONLY WITH IMMEDIATE that finds no receive WQE is RNR NAKed; its
// retry (the same packet, same PSN) once a receive is posted must execute,
// not be taken for an ONLY inside a message in progress (invalid request).
TEST(Responder, RnrOnWriteOnlyWithImmediateLeavesNoStateForTheRetry) {
  QpBench b;
  auto data = bytes(16, 3);
  auto t = req(IBV_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 500);
  t.reth_va = b.va(256);
  t.reth_rkey = b.mr_->rkey();
  t.reth_dma_length = 16;
  t.imm_data = 0xBEEF;
  b.feed(t, data);
  // Expect: RNR NAK for PSN 500, nothing placed, the PSN not consumed.
  expect_nak(b.drain(), 500, wire::make_syndrome(wire::AethType::kRnrNak, 5));
  EXPECT_EQ(b.qp_->expected_psn(), 500u);
  EXPECT_NE(0, std::memcmp(b.mem_.data() + 256, data.data(), 16));
  b.post_recv(4, 1024, 64);
  b.feed(t, data);
  // Expect: the retry lands, consumes the receive WQE with
  // IBV_WC_RECV_RDMA_WITH_IMM and is ACKed; the QP stays in RTS.
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 4u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc[0].byte_len, 16u);
  EXPECT_TRUE(wc[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(wc[0].imm_data, 0xBEEFu);
  EXPECT_EQ(0, std::memcmp(b.mem_.data() + 256, data.data(), 16));
  auto out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 500u);
  // (No receive WQE left: the ACK advertises 0 credits, IBA 9.7.7.2.)
  EXPECT_EQ(out[0].p.aeth_syndrome, wire::make_syndrome(wire::AethType::kAck, 0));
  EXPECT_EQ(out[0].p.aeth_msn, 1u);
  EXPECT_EQ(b.qp_->counters().naks_invalid_request_sent, 0u);
  EXPECT_EQ(b.qp_->state(), QpState::kRts);
  EXPECT_EQ(b.qp_->expected_psn(), 501u);
  // Expect: no message is left in progress: the next plain WRITE ONLY is
  // taken by header prediction (it declines a packet out of sequence).
  auto more = bytes(8, 9);
  wire::PredictedWrite w;
  w.position = wire::Position::kOnly;
  w.psn = 501;
  w.ack_req = true;
  w.va = b.va(512);
  w.rkey = b.mr_->rkey();
  w.dma_length = 8;
  w.payload = more.data();
  w.payload_length = 8;
  EXPECT_EQ(b.qp_->try_predicted_writes({&w, 1}), 1u);
  EXPECT_EQ(0, std::memcmp(b.mem_.data() + 512, more.data(), 8));
}

// IBA 9.7.5.2.8 for a multi-packet WRITE WITH IMMEDIATE: the receive WQE is
// needed at the LAST, so that is where the RNR NAK falls. Go-back-N resends
// from the NAKed PSN, the LAST alone: the message its FIRST started (here
// through header prediction) must still be in progress for it.
TEST(Responder, RnrOnWriteLastWithImmediateKeepsTheMessageForTheRetriedLast) {
  QpBench b;
  auto data = bytes(1500, 5);
  wire::PredictedWrite first;
  first.position = wire::Position::kFirst;
  first.psn = 500;
  first.va = b.va(2048);
  first.rkey = b.mr_->rkey();
  first.dma_length = 1500;
  first.payload = data.data();
  first.payload_length = 1024;
  ASSERT_EQ(b.qp_->try_predicted_writes({&first, 1}), 1u);
  auto last = req(IBV_OPCODE_RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, 501);
  last.imm_data = 0x1234;
  b.feed(last, {data.data() + 1024, 476});
  // Expect: RNR NAK for the LAST's PSN; the FIRST stays placed and acknowledged
  // by the NAK's PSN (everything before 501).
  expect_nak(b.drain(), 501, wire::make_syndrome(wire::AethType::kRnrNak, 5));
  EXPECT_EQ(b.qp_->expected_psn(), 501u);
  b.post_recv(6, 0, 64);
  b.feed(last, {data.data() + 1024, 476});
  // Expect: the retried LAST completes the 1500-byte message.
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc[0].byte_len, 1500u);
  EXPECT_EQ(wc[0].imm_data, 0x1234u);
  EXPECT_EQ(0, std::memcmp(b.mem_.data() + 2048, data.data(), 1500));
  auto out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 501u);
  // (No receive WQE left: the ACK advertises 0 credits, IBA 9.7.7.2.)
  EXPECT_EQ(out[0].p.aeth_syndrome, wire::make_syndrome(wire::AethType::kAck, 0));
  EXPECT_EQ(out[0].p.aeth_msn, 1u);
  EXPECT_EQ(b.qp_->state(), QpState::kRts);
}

TEST(Responder, OutOfSequenceGivesOneNakPerGap) {
  QpBench b;
  b.post_recv(1, 0, 64);
  auto data = bytes(8, 1);
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 502), data);
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 503), data);
  // Expect: a single PSN sequence error NAK naming the expected PSN 500.
  expect_nak(b.drain(), 500, nak(NakCode::kPsnSequenceError));
  EXPECT_EQ(b.qp_->counters().rx_out_of_sequence, 2u);
  // Expect: after the hole is filled, a new gap gets its own NAK.
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 500), data);
  b.drain();
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 505), data);
  expect_nak(b.drain(), 501, nak(NakCode::kPsnSequenceError));
}

TEST(Responder, DuplicateSendIsReAckedNotRedelivered) {
  QpBench b;
  b.post_recv(1, 0, 64);
  b.post_recv(2, 64, 64);
  auto data = bytes(8, 1);
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 500), data);
  b.drain();
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 500), data);
  // Expect: ACK of PSN 500 again, only one receive completion.
  auto out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 500u);
  EXPECT_EQ(b.poll().size(), 1u);
  EXPECT_EQ(b.qp_->counters().rx_duplicate_packets, 1u);
}

TEST(Responder, CoalescesAcksEveryN) {
  QpAttr a = QpBench::default_attr();
  a.ack_every_n = 4;
  QpBench b(QpType::kRc, a);
  auto data = bytes(16, 1);
  for (uint32_t i = 0; i < 8; ++i) {
    auto t = req(IBV_OPCODE_RC_RDMA_WRITE_ONLY, 500 + i, false);
    t.reth_va = b.va(0);
    t.reth_rkey = b.mr_->rkey();
    t.reth_dma_length = 16;
    b.feed(t, data);
  }
  // Expect: 8 packets without AckReq -> ACKs after the 4th and 8th only,
  // and consecutive ACKs coalesce into the newest one.
  auto out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 507u);
}

struct NakCase {
  const char* name;
  uint8_t opcode;
  uint64_t va_off;
  uint32_t dma_len;
  uint32_t payload;
  bool bad_rkey;
  bool no_perm;
  NakCode code;
};

TEST(Responder, RemoteErrorsNakAndMoveToErr) {
  const NakCase cases[] = {
      {"bad rkey", IBV_OPCODE_RC_RDMA_WRITE_ONLY, 0, 16, 16, true, false, NakCode::kRemoteAccessError},
      {"out of range", IBV_OPCODE_RC_RDMA_WRITE_ONLY, 65530, 16, 16, false, false, NakCode::kRemoteAccessError},
      {"before region", IBV_OPCODE_RC_RDMA_WRITE_ONLY, uint64_t(-8), 16, 16, false, false, NakCode::kRemoteAccessError},
      {"no permission", IBV_OPCODE_RC_RDMA_WRITE_ONLY, 0, 16, 16, false, true, NakCode::kRemoteAccessError},
      {"length mismatch", IBV_OPCODE_RC_RDMA_WRITE_ONLY, 0, 32, 16, false, false, NakCode::kInvalidRequest},
      {"read bad rkey", IBV_OPCODE_RC_RDMA_READ_REQUEST, 0, 16, 0, true, false, NakCode::kRemoteAccessError},
      {"read out of range", IBV_OPCODE_RC_RDMA_READ_REQUEST, 0, 70000, 0, false, false, NakCode::kRemoteAccessError},
      {"middle without first", IBV_OPCODE_RC_RDMA_WRITE_MIDDLE, 0, 0, 1024, false, false, NakCode::kInvalidRequest},
      {"short first", IBV_OPCODE_RC_RDMA_WRITE_FIRST, 0, 4096, 100, false, false, NakCode::kInvalidRequest},
  };
  for (const NakCase& c : cases) {
    SCOPED_TRACE(c.name);
    QpBench b;
    MemoryRegion* ro = b.dev_.reg_mr(b.pd_, b.mem_.data(), 64, IBV_ACCESS_LOCAL_WRITE);
    auto t = req(c.opcode, 500);
    t.reth_va = b.va(0) + c.va_off;
    t.reth_rkey = c.bad_rkey ? 0xDEAD00 : c.no_perm ? ro->rkey() : b.mr_->rkey();
    t.reth_dma_length = c.dma_len;
    auto data = bytes(c.payload, 1);
    b.feed(t, data);
    // Expect: the NAK with the class's code, then the QP is in ERR.
    expect_nak(b.drain(), 500, nak(c.code));
    EXPECT_EQ(b.qp_->state(), QpState::kErr);
  }
}

TEST(Responder, SendLongerThanReceiveBufferIsInvalidRequest) {
  QpBench b;
  b.post_recv(9, 0, 100);
  auto data = bytes(200, 1);
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 500), data);
  expect_nak(b.drain(), 500, nak(NakCode::kInvalidRequest));
  auto wc = b.poll();
  ASSERT_GE(wc.size(), 1u);
  // Expect: the receive WQE completes with a local length error.
  EXPECT_EQ(wc[0].wr_id, 9u);
  EXPECT_EQ(wc[0].status, IBV_WC_LOC_LEN_ERR);
}

TEST(Responder, ReceiveBufferGoneIsRemoteOperationalError) {
  QpBench b;
  MemoryRegion* tmp = b.dev_.reg_mr(b.pd_, b.mem_.data(), 256, IBV_ACCESS_LOCAL_WRITE);
  Sge s{tmp->iova(), 256, tmp->lkey()};
  RecvWr r;
  r.wr_id = 3;
  r.sg_list = {&s, 1};
  ASSERT_EQ(b.qp_->post_recv(r), 0);
  ASSERT_EQ(b.dev_.dereg_mr(tmp), 0);
  auto data = bytes(10, 1);
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 500), data);
  expect_nak(b.drain(), 500, nak(NakCode::kRemoteOperationalError));
  EXPECT_EQ(b.poll()[0].status, IBV_WC_LOC_PROT_ERR);
}

TEST(Responder, ReadIsSegmentedByMtuAndReExecutedOnDuplicate) {
  QpBench b;
  auto t = read_req(500, b.va(100), b.mr_->rkey(), 2500);
  b.feed(t);
  auto out = b.drain();
  // Expect: FIRST/MIDDLE/LAST at PSNs 500..502 with 1024/1024/452 bytes
  // copied from the region; the READ consumes three PSNs.
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_RC_RDMA_READ_RESPONSE_FIRST);
  EXPECT_EQ(out[1].p.opcode, IBV_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE);
  EXPECT_EQ(out[2].p.opcode, IBV_OPCODE_RC_RDMA_READ_RESPONSE_LAST);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(out[i].p.psn, 500 + i);
  EXPECT_EQ(out[2].p.payload_length, 452u);
  EXPECT_EQ(0, std::memcmp(out[1].p.payload, b.mem_.data() + 100 + 1024, 1024));
  EXPECT_EQ(b.qp_->expected_psn(), 503u);
  // Expect: a duplicate READ for the tail (PSN 502, VA + 2048) is answered
  // again from that PSN, as an ONLY response.
  t.psn = 502;
  t.reth_va = b.va(100 + 2048);
  t.reth_dma_length = 452;
  b.feed(t);
  out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_RC_RDMA_READ_RESPONSE_ONLY);
  EXPECT_EQ(out[0].p.psn, 502u);
  EXPECT_EQ(b.qp_->counters().rx_duplicate_reads, 1u);
}

TEST(Responder, DuplicateOfAReadBeingAnsweredRestartsItsStream) {
  // A READ of three packets whose FIRST and MIDDLE are out; the requester
  // asks for it again from its first PSN (it took the responses for lost):
  // the queued stream starts over from there, as one stream. A second one
  // would answer the READ twice and count twice as an outstanding READ.
  QpBench b;
  auto t = read_req(500, b.va(100), b.mr_->rkey(), 2500);
  b.feed(t);
  std::vector<uint8_t> buf(9000);
  ASSERT_GT(b.qp_->produce(0, buf), 0u);
  ASSERT_GT(b.qp_->produce(0, buf), 0u);
  b.feed(t);
  EXPECT_EQ(b.qp_->responses_queued(), 1u);
  EXPECT_EQ(b.qp_->counters().rx_duplicate_reads, 1u);
  auto out = b.drain();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_RC_RDMA_READ_RESPONSE_FIRST);
  EXPECT_EQ(out[2].p.opcode, IBV_OPCODE_RC_RDMA_READ_RESPONSE_LAST);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(out[i].p.psn, 500 + i);
  EXPECT_EQ(0, std::memcmp(out[0].p.payload, b.mem_.data() + 100, 1024));
  EXPECT_EQ(b.qp_->counters().naks_invalid_request_sent, 0u);
}

TEST(Responder, ReadResponsesWaitForTheRateAndAreBookedAgainstIt) {
  // READ responses are the responder's data: congestion control paces them
  // (may_send_response) and counts each one's payload (on_response_sent),
  // never the window: nothing acknowledges a response.
  struct Gate {
    bool open = false;
    std::vector<uint32_t> booked;
  } gate;
  CcHooks h;
  h.may_send_response = [](void* c, uint64_t) { return static_cast<Gate*>(c)->open; };
  h.on_response_sent = [](void* c, uint32_t bytes, uint64_t) {
    static_cast<Gate*>(c)->booked.push_back(bytes);
  };
  h.may_send = [](void*, uint32_t, uint32_t, uint64_t) -> bool {
    ADD_FAILURE() << "a response asked the request gate (the window)";
    return false;
  };
  QpBench b;
  b.qp_->set_cc_hooks(&h, &gate);
  b.feed(read_req(500, b.va(0), b.mr_->rkey(), 2500));
  std::vector<uint8_t> buf(9000);
  EXPECT_EQ(b.qp_->produce(0, buf), 0u) << "held by the rate";
  EXPECT_TRUE(b.qp_->has_work(0)) << "still to send, so the pacer asks again";
  EXPECT_EQ(b.qp_->counters().cc_stalls, 1u);
  gate.open = true;
  const auto out = b.drain();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].p.psn, 500u);
  EXPECT_EQ(gate.booked, (std::vector<uint32_t>{1024, 1024, 452}));
}

TEST(Responder, ReadsResentByGoBackNAreAnsweredInPsnOrder) {
  // Two READs of three packets; the first is answered whole and the
  // second's FIRST is out when the requester times out and sends both
  // again. The first one's stream is gone from the queue, so it is
  // answered by a new one, which must go out ahead of the second's
  // (IBA 9.7.5.1: responses in request order), not behind it.
  QpBench b;
  auto first = read_req(500, b.va(0), b.mr_->rkey(), 2500);
  auto second = read_req(503, b.va(4096), b.mr_->rkey(), 2500);
  b.feed(first);
  b.feed(second);
  std::vector<uint8_t> buf(9000);
  for (int i = 0; i < 4; ++i) ASSERT_GT(b.qp_->produce(0, buf), 0u);
  b.feed(first);
  b.feed(second);
  auto out = b.drain();
  ASSERT_EQ(out.size(), 6u);
  for (uint32_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].p.psn, 500 + i);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_RC_RDMA_READ_RESPONSE_FIRST);
  EXPECT_EQ(0, std::memcmp(out[0].p.payload, b.mem_.data(), 1024));
  EXPECT_EQ(out[3].p.opcode, IBV_OPCODE_RC_RDMA_READ_RESPONSE_FIRST);
  EXPECT_EQ(0, std::memcmp(out[3].p.payload, b.mem_.data() + 4096, 1024));
  EXPECT_EQ(b.qp_->counters().rx_duplicate_reads, 2u);
}

TEST(Responder, ReadAnsweredAgainIsNotAnotherOutstandingRead) {
  // The requester may hold max_dest_rd_atomic READs outstanding. A READ
  // it sent again, answered again after its answer had left, is one it
  // may already have completed: counting its second answer against the
  // limit would refuse the next new READ as an invalid request and end a
  // connection that did nothing wrong.
  QpAttr attr = QpBench::default_attr();
  attr.max_dest_rd_atomic = 2;
  QpBench b(QpType::kRc, attr);
  auto read_at = [&](uint32_t psn) {
    return read_req(psn, b.va(64 * (psn - 500)), b.mr_->rkey(), 16);
  };
  b.feed(read_at(500));
  std::vector<uint8_t> buf(9000);
  ASSERT_GT(b.qp_->produce(0, buf), 0u);
  b.feed(read_at(500));  // answered again, not yet sent
  b.feed(read_at(501));
  b.feed(read_at(502));
  auto out = b.drain();
  ASSERT_EQ(out.size(), 3u);
  for (uint32_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].p.opcode, IBV_OPCODE_RC_RDMA_READ_RESPONSE_ONLY);
    EXPECT_EQ(out[i].p.psn, 500 + i);
  }
  EXPECT_EQ(b.qp_->counters().naks_invalid_request_sent, 0u);
  // Expect: a third new READ beyond the two outstanding is still refused.
  b.feed(read_at(503));
  b.feed(read_at(504));
  b.feed(read_at(505));
  out = b.drain();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].p.psn, 504u);
  EXPECT_EQ(out[2].p.opcode, IBV_OPCODE_RC_ACKNOWLEDGE);
  EXPECT_EQ(out[2].p.aeth_syndrome, nak(NakCode::kInvalidRequest));
}

TEST(Responder, AnswerRingGrowsOnDemandKeepingTheAnswersInOrder) {
  // The answer ring starts empty and doubles when full (an idle QP should
  // not carry room for 16 outstanding READs): growing it while its queued
  // answers wrap around the end must keep them in order, and sixteen
  // READs, the advertised maximum, are all answered.
  QpBench b;
  auto read_at = [&](uint32_t psn) {
    b.feed(read_req(psn, b.va(64 * (psn - 500)), b.mr_->rkey(), 16));
  };
  for (uint32_t psn = 500; psn < 503; ++psn) read_at(psn);
  // Two answers out, so the queued ones start mid-ring ...
  std::vector<uint8_t> buf(9000);
  ASSERT_GT(b.qp_->produce(0, buf), 0u);
  ASSERT_GT(b.qp_->produce(0, buf), 0u);
  // ... and fourteen more READs wrap around and grow it, twice.
  for (uint32_t psn = 503; psn < 517; ++psn) read_at(psn);
  EXPECT_EQ(b.qp_->responses_queued(), 15u);
  auto out = b.drain();
  ASSERT_EQ(out.size(), 15u);
  for (uint32_t i = 0; i < out.size(); ++i) {
    const uint32_t psn = 502 + i;
    EXPECT_EQ(out[i].p.opcode, IBV_OPCODE_RC_RDMA_READ_RESPONSE_ONLY);
    EXPECT_EQ(out[i].p.psn, psn);
    ASSERT_EQ(out[i].p.payload_length, 16u);
    EXPECT_EQ(0, std::memcmp(out[i].p.payload, b.mem_.data() + 64 * (psn - 500), 16));
  }
  EXPECT_EQ(b.qp_->counters().rx_response_queue_full, 0u);
  EXPECT_EQ(b.qp_->counters().naks_invalid_request_sent, 0u);
  EXPECT_EQ(b.qp_->expected_psn(), 517u);
}

TEST(Responder, RareCountersReadZeroUntilTheFirstRareEvent) {
  // A QP allocates its drop, NAK and retransmission counters when it first
  // counts one; until then the snapshot reads zero, and afterwards the
  // counts are exact.
  QpBench b;
  auto t = req(IBV_OPCODE_RC_RDMA_WRITE_ONLY, 500);
  t.reth_va = b.va(0);
  t.reth_rkey = b.mr_->rkey();
  t.reth_dma_length = 8;
  const uint8_t data[8] = {};
  b.feed(t, data);
  b.drain();
  EXPECT_EQ(b.qp_->counters().rx_request_packets, 1u);
  EXPECT_EQ(b.qp_->counters().rx_duplicate_packets, 0u);
  b.feed(t, data);  // the same PSN again: a duplicate
  b.feed(t, data);
  b.drain();
  EXPECT_EQ(b.qp_->counters().rx_duplicate_packets, 2u);
  EXPECT_EQ(b.qp_->counters().rx_request_packets, 3u);
}

TEST(Responder, AtomicExecutesOnceAndDuplicateReplaysResult) {
  QpBench b;
  uint64_t v = 40;
  std::memcpy(b.mem_.data() + 8, &v, 8);
  auto t = req(IBV_OPCODE_RC_FETCH_ADD, 500);
  t.atomic_va = b.va(8);
  t.atomic_rkey = b.mr_->rkey();
  t.atomic_swap_add = 2;
  b.feed(t);
  b.feed(t);  // duplicate
  auto out = b.drain();
  // Expect: two atomic ACKs both carrying the original 40; memory is 42.
  ASSERT_EQ(out.size(), 2u);
  for (auto& f : out) {
    EXPECT_EQ(f.p.opcode, IBV_OPCODE_RC_ATOMIC_ACKNOWLEDGE);
    EXPECT_EQ(f.p.atomic_ack_original, 40u);
  }
  std::memcpy(&v, b.mem_.data() + 8, 8);
  EXPECT_EQ(v, 42u);
  EXPECT_EQ(b.qp_->counters().rx_duplicate_atomics_replayed, 1u);
  // Compare-and-swap: swaps only on equality.
  auto c = req(IBV_OPCODE_RC_COMPARE_SWAP, 501);
  c.atomic_va = b.va(8);
  c.atomic_rkey = b.mr_->rkey();
  c.atomic_compare = 42;
  c.atomic_swap_add = 7;
  b.feed(c);
  b.drain();
  std::memcpy(&v, b.mem_.data() + 8, 8);
  EXPECT_EQ(v, 7u);
}

TEST(Responder, MisalignedAtomicIsInvalidRequest) {
  QpBench b;
  auto t = req(IBV_OPCODE_RC_FETCH_ADD, 500);
  t.atomic_va = b.va(4);
  t.atomic_rkey = b.mr_->rkey();
  b.feed(t);
  expect_nak(b.drain(), 500, nak(NakCode::kInvalidRequest));
}

TEST(Responder, ExpectedPsnWrapsAt2To24) {
  QpBench b(QpType::kRc, QpBench::default_attr(), 0, 0xFFFFFF);
  b.post_recv(1, 0, 64);
  b.post_recv(2, 64, 64);
  auto data = bytes(4, 1);
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 0xFFFFFF), data);
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 0), data);
  // Expect: both accepted, expected PSN is 1; PSN 0xFFFFFF is now a duplicate.
  EXPECT_EQ(b.qp_->expected_psn(), 1u);
  EXPECT_EQ(b.poll().size(), 2u);
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 0xFFFFFF), data);
  EXPECT_EQ(b.qp_->counters().rx_duplicate_packets, 1u);
}

TEST(Responder, SendWithInvalidateReportsAndRevokesRkey) {
  QpBench b;
  b.post_recv(1, 0, 64);
  auto t = req(wire::kOpRcSendOnlyWithInvalidate, 500);
  t.ieth_rkey = b.mr_->rkey();
  auto data = bytes(4, 1);
  b.feed(t, data);
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_TRUE(wc[0].wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(wc[0].invalidated_rkey, b.mr_->rkey());
  b.drain();
  // Expect: a WRITE with the invalidated rkey is a remote access error.
  auto w = req(IBV_OPCODE_RC_RDMA_WRITE_ONLY, 501);
  w.reth_va = b.va(0);
  w.reth_rkey = b.mr_->rkey();
  w.reth_dma_length = 4;
  b.feed(w, data);
  expect_nak(b.drain(), 501, nak(NakCode::kRemoteAccessError));
}

// A Send with Invalidate (IBA 10.6.7.2) revokes the R_Key for the requests
// that follow it; an RDMA READ and an atomic accepted before it, in the same
// burst, still complete against the region as it was, and every answer goes
// out in order (IBA 9.7.5.1): the READ's responses, the atomic ACK, the
// SEND's ACK.
TEST(Responder, SendWithInvalidateLeavesEarlierReadAndAtomicToComplete) {
  QpBench b;
  b.post_recv(1, 60000, 64);
  uint64_t v = 41;
  std::memcpy(b.mem_.data() + 8, &v, 8);
  const std::vector<uint8_t> before = b.mem_;
  auto rd = read_req(500, b.va(1000), b.mr_->rkey(), 1500);  // two responses: PSNs 500, 501
  b.feed(rd);
  auto cas = req(IBV_OPCODE_RC_COMPARE_SWAP, 502);
  cas.atomic_va = b.va(8);
  cas.atomic_rkey = b.mr_->rkey();
  cas.atomic_compare = 41;
  cas.atomic_swap_add = 99;
  b.feed(cas);
  auto inv = req(wire::kOpRcSendOnlyWithInvalidate, 503);
  inv.ieth_rkey = b.mr_->rkey();
  const uint8_t data[4] = {1, 2, 3, 4};
  b.feed(inv, data);
  // Expect: four answers, in order: READ FIRST and LAST with the region's
  // bytes as they were, the atomic ACK with the original value, the ACK of
  // the SEND (MSN 3).
  auto out = b.drain();
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_RC_RDMA_READ_RESPONSE_FIRST);
  EXPECT_EQ(out[0].p.psn, 500u);
  EXPECT_EQ(0, std::memcmp(out[0].p.payload, before.data() + 1000, 1024));
  EXPECT_EQ(out[1].p.opcode, IBV_OPCODE_RC_RDMA_READ_RESPONSE_LAST);
  EXPECT_EQ(out[1].p.psn, 501u);
  ASSERT_EQ(out[1].p.payload_length, 476u);
  EXPECT_EQ(0, std::memcmp(out[1].p.payload, before.data() + 2024, 476));
  EXPECT_EQ(out[2].p.opcode, IBV_OPCODE_RC_ATOMIC_ACKNOWLEDGE);
  EXPECT_EQ(out[2].p.psn, 502u);
  EXPECT_EQ(out[2].p.atomic_ack_original, 41u);
  EXPECT_EQ(out[3].p.opcode, IBV_OPCODE_RC_ACKNOWLEDGE);
  EXPECT_EQ(out[3].p.psn, 503u);
  EXPECT_EQ(wire::aeth_type(out[3].p.aeth_syndrome), wire::AethType::kAck);
  EXPECT_EQ(out[3].p.aeth_msn, 3u);
  std::memcpy(&v, b.mem_.data() + 8, 8);
  EXPECT_EQ(v, 99u);
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_TRUE(wc[0].wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(wc[0].invalidated_rkey, b.mr_->rkey());
  EXPECT_EQ(b.qp_->counters().read_responses_region_gone, 0u);
  EXPECT_EQ(b.qp_->state(), QpState::kRts);
  // Expect: a READ after the invalidation is refused (remote access error).
  rd.psn = 504;
  b.feed(rd);
  expect_nak(b.drain(), 504, nak(NakCode::kRemoteAccessError));
}

// A queued READ whose region is deregistered before all its responses went
// out cannot complete; it must not read the region's memory, nor stall the
// answers queued behind it. IBA 9.7.5.2: the responder answers with the NAK
// for an error local to it, Remote Operational Error, at the response PSN
// it could not send, and (IBA 9.9.3) the QP goes to the error state. Also
// when a new region took the same (requested) key meanwhile.
TEST(Responder, ReadOfADeregisteredRegionIsNakedRemoteOperationalError) {
  for (bool same_key_again : {false, true}) {
    SCOPED_TRACE(same_key_again ? "key registered again" : "deregistered");
    QpBench b;
    b.post_recv(1, 60000, 64);
    MemoryRegion* tmp =
        b.dev_.reg_mr(b.pd_, b.mem_.data() + 8192, 8192, IBV_ACCESS_REMOTE_READ, uint64_t{0x90000});
    ASSERT_NE(tmp, nullptr);
    const uint32_t key = tmp->rkey();
    auto rd = read_req(500, 0x90000, key, 2500);  // PSNs 500..502
    b.feed(rd);
    const uint8_t data[4] = {1, 2, 3, 4};
    b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 503), data);
    std::vector<uint8_t> frame(4096);
    ASSERT_GT(b.qp_->produce(0, frame), 0u);  // READ FIRST, PSN 500
    ASSERT_EQ(b.dev_.dereg_mr(tmp), 0);
    std::vector<uint8_t> other(8192, 0xEE);
    if (same_key_again) {
      ASSERT_NE(b.dev_.reg_mr(b.pd_, other.data(), other.size(), IBV_ACCESS_REMOTE_READ,
                              uint64_t{0x90000}, key),
                nullptr);
    }
    // Expect: the NAK comes out at once (PSN 501, MSN 0: nothing completed
    // before the READ), is counted, and the QP is in ERR afterwards.
    auto out = b.drain();
    expect_nak(out, 501, nak(NakCode::kRemoteOperationalError));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].p.aeth_msn, 0u);
    EXPECT_EQ(b.qp_->counters().read_responses_region_gone, 1u);
    EXPECT_EQ(b.qp_->counters().naks_remote_operational_sent, 1u);
    EXPECT_EQ(b.qp_->state(), QpState::kErr);
  }
}

TEST(Responder, CnpAtMostOnePerInterval) {
  QpBench b;  // np_min_time_between_cnps = 4 us
  b.post_recv(1, 0, 64);
  auto data = bytes(4, 1);
  auto w = req(IBV_OPCODE_RC_RDMA_WRITE_ONLY, 500, false);
  w.reth_va = b.va(0);
  w.reth_rkey = b.mr_->rkey();
  w.reth_dma_length = 4;
  uint32_t cnps = 0;
  const uint64_t times[] = {0, 1000, 3999, 4000, 5000, 9000};
  uint32_t psn = 500;
  for (uint64_t now : times) {
    w.psn = psn++;
    b.feed(w, data, now, wire::Ecn::kCe);
    for (auto& f : b.drain(now)) {
      if (f.p.opcode == wire::kOpCnp) {
        ++cnps;
        EXPECT_EQ(f.p.dest_qp, kPeerQpn);
        EXPECT_TRUE(f.p.becn);
      }
    }
  }
  // Expect: CNPs at t=0, 4000 and 9000 ns only.
  EXPECT_EQ(cnps, 3u);
  EXPECT_EQ(b.qp_->counters().cnps_suppressed, 3u);
}

// The bench's QP attributes with selective repeat over a 256-PSN window.
QpAttr selective_repeat_attr() {
  QpAttr a = QpBench::default_attr();
  a.recovery = Recovery::kSelectiveRepeat;
  a.sack_window = 256;
  return a;
}

// `out` is one selective ACK: a PSN-sequence-error NAK whose BTH PSN is the
// first missing PSN and whose MSN field names the PSN received (qp.h).
void expect_sack(const std::vector<Frame>& out, uint32_t first_missing, uint32_t sacked) {
  expect_nak(out, first_missing, nak(NakCode::kPsnSequenceError));
  if (out.size() == 1) {
    EXPECT_EQ(out[0].p.aeth_msn, sacked);
  }
}

TEST(Responder, SelectiveRepeatPlacesOutOfOrderWriteAndSacks) {
  QpBench b(QpType::kRc, selective_repeat_attr());
  auto data = bytes(3000, 9);
  auto first = req(IBV_OPCODE_RC_RDMA_WRITE_FIRST, 500, false);
  first.reth_va = b.va(0);
  first.reth_rkey = b.mr_->rkey();
  first.reth_dma_length = 3000;
  b.feed(first, {data.data(), 1024});
  // PSN 501 lost; 502 (LAST) arrives out of order and is placed.
  b.feed(req(IBV_OPCODE_RC_RDMA_WRITE_LAST, 502), {data.data() + 2048, 952});
  auto out = b.drain();
  // Expect: a sequence-error NAK for 501 whose MSN field SACKs 502.
  expect_sack(out, 501, 502);
  EXPECT_EQ(0, std::memcmp(b.mem_.data() + 2048, data.data() + 2048, 952));
  // Expect: the retransmitted hole completes the message; ACK covers 502.
  b.feed(req(IBV_OPCODE_RC_RDMA_WRITE_MIDDLE, 501, false), {data.data() + 1024, 1024});
  out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 502u);
  EXPECT_EQ(out[0].p.aeth_msn, 1u);
  EXPECT_EQ(b.qp_->expected_psn(), 503u);
  EXPECT_EQ(0, std::memcmp(b.mem_.data(), data.data(), 3000));
}


// Two-packet RDMA WRITE (FIRST + LAST) of `data` at PSN `psn` to offset `off`.
wire::TransportSpec write_first(QpBench& b, uint32_t psn, uint64_t off, uint32_t length) {
  auto t = req(IBV_OPCODE_RC_RDMA_WRITE_FIRST, psn, false);
  t.reth_va = b.va(off);
  t.reth_rkey = b.mr_->rkey();
  t.reth_dma_length = length;
  return t;
}

// A packet placed out of order that arrives again (its SACK was lost, so
// the requester resent it on a timeout or as a tail loss probe) is SACKed
// again, not met with silence, and written once.
TEST(Responder, SelectiveRepeatSacksAPlacedPacketAgain) {
  QpBench b(QpType::kRc, selective_repeat_attr());
  auto data = bytes(3000, 9);
  b.feed(write_first(b, 500, 0, 3000), {data.data(), 1024});
  b.feed(req(IBV_OPCODE_RC_RDMA_WRITE_LAST, 502), {data.data() + 2048, 952});
  ASSERT_EQ(b.drain().size(), 1u);  // the SACK of 502, lost
  // The copy differs: had it been written again, the memory would show it.
  auto other = bytes(952, 3);
  b.feed(req(IBV_OPCODE_RC_RDMA_WRITE_LAST, 502), {other.data(), 952});
  auto out = b.drain();
  expect_sack(out, 501, 502);
  EXPECT_EQ(b.qp_->counters().rx_duplicate_packets, 1u);
  EXPECT_EQ(b.qp_->counters().rx_ooo_accepted, 1u);
  EXPECT_EQ(0, std::memcmp(b.mem_.data() + 2048, data.data() + 2048, 952));
}

// The last packet of a WRITE with immediate overtakes the packet before it
// (a loss, or a sprayed path): it is placed and SACKed at once, and its
// receive WQE is consumed, with the completion, only when the hole fills,
// in order (IBA 9.7.5.2). Dropping it made the requester find it lost by a
// timer, after the hole had been resent.
TEST(Responder, SelectiveRepeatPlacesWriteWithImmediateOutOfOrderAndCompletesInOrder) {
  QpBench b(QpType::kRc, selective_repeat_attr());
  b.post_recv(9, 0, 64);
  auto data = bytes(3000, 4);
  b.feed(write_first(b, 500, 0, 3000), {data.data(), 1024});
  // PSN 501 is missing; the LAST WITH IMMEDIATE arrives.
  auto last = req(IBV_OPCODE_RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, 502);
  last.imm_data = 0xC0FFEE;
  b.feed(last, {data.data() + 2048, 952});
  // Expect: placed and SACKed (NAK for 501 naming 502), no completion yet.
  auto out = b.drain();
  expect_sack(out, 501, 502);
  EXPECT_EQ(b.qp_->counters().rx_ooo_accepted, 1u);
  EXPECT_EQ(0, std::memcmp(b.mem_.data() + 2048, data.data() + 2048, 952));
  EXPECT_TRUE(b.poll().empty());
  // The hole fills: the message completes with its immediate, ACKed to 502.
  b.feed(req(IBV_OPCODE_RC_RDMA_WRITE_MIDDLE, 501, false), {data.data() + 1024, 1024});
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 9u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc[0].byte_len, 3000u);
  EXPECT_TRUE(wc[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(wc[0].imm_data, 0xC0FFEEu);
  out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, 502u);
  EXPECT_EQ(out[0].p.aeth_msn, 1u);
  EXPECT_EQ(b.qp_->expected_psn(), 503u);
  EXPECT_EQ(0, std::memcmp(b.mem_.data(), data.data(), 3000));
  // A late copy of the placed packet is a duplicate: ACKed, no second
  // completion.
  b.feed(last, {data.data() + 2048, 952});
  EXPECT_TRUE(b.poll().empty());
  EXPECT_EQ(b.qp_->counters().rx_ooo_rnr, 0u);
}

// A WRITE ONLY WITH IMMEDIATE placed out of order whose receive WQE is not
// there when the hole before it fills: the placement is forgotten and the
// packet RNR-NAKed after the ACK of what precedes it (IBA 9.7.5.2.8); the
// requester's resend, once a receive is posted, completes it in order.
TEST(Responder, SelectiveRepeatRnrNaksAPlacedImmediateWithoutReceiveWqe) {
  QpBench b(QpType::kRc, selective_repeat_attr());
  auto data = bytes(64, 6);
  auto only = req(IBV_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 501);
  only.reth_va = b.va(64);
  only.reth_rkey = b.mr_->rkey();
  only.reth_dma_length = 32;
  only.imm_data = 77;
  b.feed(only, {data.data() + 32, 32});
  EXPECT_EQ(b.qp_->counters().rx_ooo_accepted, 1u);
  b.drain();
  auto first = req(IBV_OPCODE_RC_RDMA_WRITE_ONLY, 500);
  first.reth_va = b.va(0);
  first.reth_rkey = b.mr_->rkey();
  first.reth_dma_length = 32;
  b.feed(first, {data.data(), 32});
  // Expect: 500 ACKed, then an RNR NAK for 501; 501 not consumed.
  auto out = b.drain();
  ASSERT_GE(out.size(), 2u);
  EXPECT_EQ(out.front().p.aeth_syndrome, wire::make_syndrome(wire::AethType::kAck, 0));
  EXPECT_EQ(out.front().p.psn, 500u);
  expect_nak({out.back()}, 501, wire::make_syndrome(wire::AethType::kRnrNak, 5));
  EXPECT_EQ(b.qp_->expected_psn(), 501u);
  EXPECT_EQ(b.qp_->counters().rx_ooo_rnr, 1u);
  EXPECT_TRUE(b.poll().empty());
  // The resend, with a receive posted: completed in order.
  b.post_recv(3, 0, 64);
  b.feed(only, {data.data() + 32, 32});
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 3u);
  EXPECT_EQ(wc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc[0].imm_data, 77u);
  EXPECT_EQ(b.qp_->expected_psn(), 502u);
  EXPECT_EQ(0, std::memcmp(b.mem_.data(), data.data(), 32));
  EXPECT_EQ(0, std::memcmp(b.mem_.data() + 64, data.data() + 32, 32));
}

// Regression (bench: SR, 64 KiB, 5 % loss, message 901 failed with
// IBV_WC_REM_INV_REQ_ERR). Write contexts were a FIFO ring: the context of
// a FIRST placed out of order was evicted by later FIRSTs even though the
// ring still held contexts of messages already complete. When the expected
// PSN then walked over the placed FIRST, the responder kept the previous
// message's RETH and NAKed the next in-order packet as invalid.
TEST(Responder, SelectiveRepeatKeepsLiveWriteContextOverDeadOnes) {
  QpBench b(QpType::kRc, selective_repeat_attr());
  auto data = bytes(2048 * 17, 5);
  auto pl = [&](uint64_t off, uint32_t n) { return std::span<const uint8_t>(data.data() + off, n); };
  // Messages A0..A14 at PSNs 500..529, B at 530/531, C at 532/533; each
  // 2048 B (two 1 KiB packets) at offset 2048 * index.
  const uint32_t kB = 530, kC = 532;
  const uint64_t b_off = 15 * 2048, c_off = 16 * 2048;
  // B's FIRST arrives early, out of order: placed, its context learned.
  b.feed(write_first(b, kB, b_off, 2048), pl(b_off, 1024));
  b.drain();
  EXPECT_EQ(b.qp_->counters().rx_ooo_accepted, 1u);
  // A0..A13 complete in order (15 contexts used in total, 14 now dead),
  // then A14's FIRST: A14 and B are the live contexts.
  for (uint32_t i = 0; i < 15; ++i) {
    b.feed(write_first(b, 500 + 2 * i, 2048 * i, 2048), pl(2048 * i, 1024));
    if (i < 14) b.feed(req(IBV_OPCODE_RC_RDMA_WRITE_LAST, 501 + 2 * i), pl(2048 * i + 1024, 1024));
    b.drain();
  }
  // C's FIRST, out of order: the 17th context. It must take a dead slot,
  // not B's.
  b.feed(write_first(b, kC, c_off, 2048), pl(c_off, 1024));
  b.drain();
  EXPECT_EQ(b.qp_->counters().rx_ooo_accepted, 2u);
  // A14's LAST: the expected PSN walks over B's placed FIRST to 531.
  b.feed(req(IBV_OPCODE_RC_RDMA_WRITE_LAST, 529), pl(14 * 2048 + 1024, 1024));
  b.drain();
  EXPECT_EQ(b.qp_->expected_psn(), kB + 1);
  // Expect: B's LAST in order lands at B's offset 1024 (not measured from
  // A14's first PSN), the walk continues over C's FIRST, and the ACK names
  // PSN 532 with MSN 16 (A0..A14, B); no invalid-request NAK, QP stays RTS.
  b.feed(req(IBV_OPCODE_RC_RDMA_WRITE_LAST, kB + 1), pl(b_off + 1024, 1024));
  auto out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  // (No receive WQE left: the ACK advertises 0 credits, IBA 9.7.7.2.)
  EXPECT_EQ(out[0].p.aeth_syndrome, wire::make_syndrome(wire::AethType::kAck, 0));
  EXPECT_EQ(out[0].p.psn, kC);
  EXPECT_EQ(out[0].p.aeth_msn, 16u);
  EXPECT_EQ(b.qp_->counters().naks_invalid_request_sent, 0u);
  EXPECT_EQ(b.qp_->state(), QpState::kRts);
  EXPECT_EQ(b.qp_->expected_psn(), kC + 1);
  // Expect: C's LAST completes C; all 17 messages are in memory.
  b.feed(req(IBV_OPCODE_RC_RDMA_WRITE_LAST, kC + 1), pl(c_off + 1024, 1024));
  out = b.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.psn, kC + 1);
  EXPECT_EQ(0, std::memcmp(b.mem_.data(), data.data(), data.size()));
}

// When every write context belongs to a message still in progress, an
// out-of-order FIRST is dropped (the requester resends it as a hole), never
// placed by evicting a context that placed packets still depend on.
TEST(Responder, SelectiveRepeatDropsOutOfOrderFirstWhenContextsAreAllLive) {
  QpBench b(QpType::kRc, selective_repeat_attr());
  const uint32_t n = kWriteContexts + 1;
  auto data = bytes(2048 * (n + 1), 7);
  auto pl = [&](uint64_t off, uint32_t len) { return std::span<const uint8_t>(data.data() + off, len); };
  // Message 0 at PSN 500 is lost entirely; messages 1..n arrive FIRST only.
  for (uint32_t m = 1; m <= n; ++m) {
    b.feed(write_first(b, 500 + 2 * m, 2048 * m, 2048), pl(2048 * m, 1024));
    b.drain();
  }
  // Expect: the first kWriteContexts FIRSTs are placed, the last one is not.
  EXPECT_EQ(b.qp_->counters().rx_ooo_accepted, kWriteContexts);
  // The resent FIRST of message n is still dropped while 1..n-1 are live.
  b.feed(write_first(b, 500 + 2 * n, 2048 * n, 2048), pl(2048 * n, 1024));
  b.drain();
  EXPECT_EQ(b.qp_->counters().rx_ooo_accepted, kWriteContexts);
  // Message 0 arrives; every message completes from its LAST (n's FIRST
  // again in order), nothing is NAKed as invalid.
  b.feed(write_first(b, 500, 0, 2048), pl(0, 1024));
  for (uint32_t m = 0; m <= n; ++m) {
    if (m == n) b.feed(write_first(b, 500 + 2 * m, 2048 * m, 2048), pl(2048 * m, 1024));
    b.feed(req(IBV_OPCODE_RC_RDMA_WRITE_LAST, 501 + 2 * m), pl(2048 * m + 1024, 1024));
    b.drain();
  }
  EXPECT_EQ(b.qp_->counters().naks_invalid_request_sent, 0u);
  EXPECT_EQ(b.qp_->expected_psn(), 500 + 2 * (n + 1));
  EXPECT_EQ(b.qp_->msn(), n + 1);
  EXPECT_EQ(0, std::memcmp(b.mem_.data(), data.data(), data.size()));
}

}  // namespace
}  // namespace droce::transport
