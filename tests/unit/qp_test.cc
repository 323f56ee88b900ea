// QP state machine (IBA 10.3.1), flush on error, QPN allocation, UC and UD.
#include <gtest/gtest.h>

#include <set>

#include "transport_test_util.h"

namespace droce::transport {
namespace {

using namespace testing;

TEST(Qp, TransitionTable) {
  using enum QpState;
  EXPECT_TRUE(transition_allowed(kReset, kInit));
  EXPECT_TRUE(transition_allowed(kInit, kRtr));
  EXPECT_TRUE(transition_allowed(kRtr, kRts));
  EXPECT_TRUE(transition_allowed(kRts, kSqd));
  EXPECT_TRUE(transition_allowed(kSqd, kRts));
  EXPECT_TRUE(transition_allowed(kRts, kErr));
  EXPECT_TRUE(transition_allowed(kErr, kReset));
  // Expect: no skipping states, ERR only leaves through RESET.
  EXPECT_FALSE(transition_allowed(kReset, kRtr));
  EXPECT_FALSE(transition_allowed(kInit, kRts));
  EXPECT_FALSE(transition_allowed(kErr, kRts));
  EXPECT_EQ(to_string(kRts), "RTS");
  EXPECT_EQ(to_ibv(kSqd), IBV_QPS_SQD);
}

TEST(Qp, ModifyRejectsBadStepsAndAttributes) {
  Device d;
  ProtectionDomain* pd = d.alloc_pd();
  CompletionQueue* cq = d.create_cq(16);
  QueuePair* qp = d.create_qp({QpType::kRc, pd, cq, cq, {}, false});
  QpAttr a;
  EXPECT_EQ(qp->modify(QpState::kRtr, a), EINVAL);
  ASSERT_EQ(qp->modify(QpState::kInit, a), 0);
  // Not a path MTU (IBA 9.7.5.1.4: codes 1..5). 0 and 7 are inside the
  // enum's range of values (UBSan: 9 would not be, and loading it is UB).
  for (int code : {0, 7}) {
    a.path_mtu = static_cast<ibv_mtu>(code);
    EXPECT_EQ(qp->modify(QpState::kRtr, a), EINVAL) << code;
  }
  // Expect: posting sends before RTS is refused.
  SendWr w;
  EXPECT_EQ(qp->post_send(w), EINVAL);
}

TEST(Qp, ErrorFlushesEverythingAndLaterPostsFlushAtOnce) {
  QpBench b;
  b.post_recv(1, 0, 64);
  b.post_recv(2, 64, 64);
  ASSERT_EQ(b.post_send(3, IBV_WR_SEND, 0, 8, 0), 0);  // unsignaled
  b.drain();
  ASSERT_EQ(b.qp_->modify(QpState::kErr, {}), 0);
  auto wc = b.poll();
  // Expect: every outstanding WR, signaled or not, completes FLUSH_ERR.
  ASSERT_EQ(wc.size(), 3u);
  for (auto& c : wc) EXPECT_EQ(c.status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_FALSE(b.qp_->has_work(0));
  b.post_recv(4, 0, 64);
  wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 4u);
  EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
  // Expect: packets to a QP in ERR are dropped and counted.
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 500));
  EXPECT_EQ(b.qp_->counters().rx_dropped_bad_state, 1u);
}

TEST(Qp, SqdStopsNewWorkUntilBackToRts) {
  QpBench b;
  ASSERT_EQ(b.qp_->modify(QpState::kSqd, {}), 0);
  ASSERT_EQ(b.post_send(1, IBV_WR_SEND, 0, 8), 0);
  EXPECT_TRUE(b.drain().empty());
  ASSERT_EQ(b.qp_->modify(QpState::kRts, b.qp_->attr()), 0);
  EXPECT_EQ(b.drain().size(), 1u);
}

TEST(Qp, QpnsAre24BitUniqueAndSkipReserved) {
  Device d;
  ProtectionDomain* pd = d.alloc_pd();
  CompletionQueue* cq = d.create_cq(16);
  std::set<uint32_t> seen;
  for (int i = 0; i < 100; ++i) {
    QueuePair* qp = d.create_qp({QpType::kRc, pd, cq, cq, {4, 4}, false});
    ASSERT_NE(qp, nullptr);
    EXPECT_GE(qp->qpn(), kFirstQpn);
    EXPECT_LE(qp->qpn(), kQpnMask);
    EXPECT_TRUE(seen.insert(qp->qpn()).second);
    EXPECT_EQ(d.find_qp(qp->qpn()), qp);
  }
  EXPECT_EQ(d.find_qp(0), nullptr);
  EXPECT_EQ(d.find_qp(1), nullptr);
}

TEST(Qp, PacketOfAnotherPartitionIsDropped) {
  // The QP's P_Key is the default full member 0xFFFF.
  QpBench b;
  b.post_recv(1, 0, 64);
  auto t = req(IBV_OPCODE_RC_SEND_ONLY, 500);
  t.pkey = 0x8001;  // another partition
  b.feed(t);
  t.pkey = 0x0000;  // the invalid key
  b.feed(t);
  EXPECT_EQ(b.qp_->counters().rx_dropped_bad_pkey, 2u);
  EXPECT_EQ(b.qp_->expected_psn(), 500u);
  EXPECT_TRUE(b.poll().empty());
  t.pkey = 0x7FFF;  // a limited member of the QP's partition: accepted
  b.feed(t);
  EXPECT_EQ(b.qp_->counters().rx_dropped_bad_pkey, 2u);
  EXPECT_EQ(b.qp_->expected_psn(), 501u);
  EXPECT_EQ(b.poll().size(), 1u);
}

TEST(Qp, PartitionKeysMatchAsIbaSays) {
  EXPECT_TRUE(wire::pkeys_match(0xFFFF, 0xFFFF));
  EXPECT_TRUE(wire::pkeys_match(0x7FFF, 0xFFFF));   // limited and full
  EXPECT_TRUE(wire::pkeys_match(0x8123, 0x0123));
  EXPECT_FALSE(wire::pkeys_match(0x7FFF, 0x7FFF));  // two limited members
  EXPECT_FALSE(wire::pkeys_match(0x8001, 0x8002));  // other partitions
  EXPECT_FALSE(wire::pkeys_match(0x8000, 0x8000));  // the invalid partition
  EXPECT_FALSE(wire::pkeys_match(0x0000, 0x8000));
}

TEST(Qp, WrongTransportOpcodeIsDropped) {
  QpBench b;
  b.post_recv(1, 0, 64);
  b.feed(req(IBV_OPCODE_UC_SEND_ONLY, 500));
  EXPECT_EQ(b.qp_->counters().rx_dropped_wrong_transport, 1u);
  EXPECT_TRUE(b.poll().empty());
}

TEST(Qp, UcDropsBrokenMessageAndResyncs) {
  QpBench b(QpType::kUc);
  b.post_recv(1, 0, 4096);
  std::vector<uint8_t> data(1024, 7);
  b.feed(req(IBV_OPCODE_UC_SEND_FIRST, 500), data);
  // PSN 501 lost; 502 is the LAST of the broken message -> dropped.
  b.feed(req(IBV_OPCODE_UC_SEND_LAST, 502), {data.data(), 10});
  EXPECT_TRUE(b.poll().empty());
  // Expect: the next ONLY reuses the same receive WQE; no ACKs on UC.
  b.feed(req(IBV_OPCODE_UC_SEND_ONLY, 503), {data.data(), 20});
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].byte_len, 20u);
  EXPECT_TRUE(b.drain().empty());
}

TEST(Qp, UcSendCompletesWhenSent) {
  QpBench b(QpType::kUc);
  ASSERT_EQ(b.post_send(1, IBV_WR_RDMA_WRITE, 0, 2000), 0);
  EXPECT_EQ(b.post_send(2, IBV_WR_RDMA_READ, 0, 8), EINVAL);  // RC only
  auto out = b.drain();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_UC_RDMA_WRITE_FIRST);
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
}

TEST(Qp, UdDatagramWithGrhQkeyAndImm) {
  QpAttr a = QpBench::default_attr();
  a.qkey = 0x11111111;
  QpBench rx(QpType::kUd, a);
  QpBench tx(QpType::kUd, a);
  rx.post_recv(5, 0, 40 + 100);
  // Send from tx to rx's QPN.
  wire::PathSpec path = test_path(1, 2, tx.qp_->qpn(), rx.qp_->qpn());
  Sge s{tx.va(0), 100, tx.mr_->lkey()};
  SendWr w;
  w.wr_id = 9;
  w.opcode = IBV_WR_SEND_WITH_IMM;
  w.send_flags = IBV_SEND_SIGNALED;
  w.imm_data = 77;
  w.sg_list = {&s, 1};
  w.ud_path = &path;
  w.ud_remote_qpn = rx.qp_->qpn();
  w.ud_remote_qkey = 0x11111111;
  ASSERT_EQ(tx.qp_->post_send(w), 0);
  auto out = tx.drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].p.opcode, IBV_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE);
  EXPECT_EQ(out[0].p.deth_src_qp, tx.qp_->qpn());
  ASSERT_EQ(tx.poll().size(), 1u);
  rx.qp_->on_packet(out[0].p, 0);
  auto wc = rx.poll();
  ASSERT_EQ(wc.size(), 1u);
  // Expect: 40-byte GRH (IPv4 header in its last 20 bytes) + payload.
  EXPECT_EQ(wc[0].byte_len, 140u);
  EXPECT_TRUE(wc[0].wc_flags & IBV_WC_GRH);
  EXPECT_EQ(wc[0].imm_data, 77u);
  EXPECT_EQ(wc[0].src_qp, tx.qp_->qpn());
  EXPECT_EQ(rx.mem_[20] >> 4, 4);  // IPv4 version nibble
  EXPECT_EQ(0, std::memcmp(rx.mem_.data() + 40, tx.mem_.data(), 100));
  // Expect: a wrong Q_Key is dropped silently.
  auto t = req(IBV_OPCODE_UD_SEND_ONLY, 1);
  t.deth_qkey = 0x22;
  rx.post_recv(6, 0, 140);
  rx.feed(t);
  EXPECT_EQ(rx.qp_->counters().rx_dropped_ud_qkey, 1u);
}

}  // namespace
}  // namespace droce::transport
