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
  QueuePair* qp = d.create_qp({QpType::kRc, pd, cq, cq, nullptr, {}, false});
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

TEST(Qp, ErrorFlushesEverythingAndLaterPostsFlushWhenTaken) {
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
  // Expect: a WR posted in ERR is queued, and flushed when the data path
  // takes it (the work queues are shared rings, qp.h).
  EXPECT_TRUE(b.poll().empty());
  b.qp_->take_posted();
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
    QueuePair* qp = d.create_qp({QpType::kRc, pd, cq, cq, nullptr, {4, 4}, false});
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

// IBA 9.6.1 (header validation; RoCEv2's IP header stands for the GRH,
// annex A17.4): an RC or UC QP takes packets only from its connection, the
// peer's address (its path's destination) to its own (its path's source).
// Requests from elsewhere are dropped and counted, whatever they carry, and
// so are responses on the requester side.
TEST(Qp, ConnectedQpTakesPacketsOnlyFromItsPeerAddress) {
  for (QpType type : {QpType::kRc, QpType::kUc}) {
    SCOPED_TRACE(to_string(type));
    QpBench b(type);
    b.post_recv(1, 0, 64);
    auto w = req(
        type == QpType::kRc ? IBV_OPCODE_RC_RDMA_WRITE_ONLY : IBV_OPCODE_UC_RDMA_WRITE_ONLY, 500);
    w.reth_va = b.va(64);
    w.reth_rkey = b.mr_->rkey();
    w.reth_dma_length = 4;
    const uint8_t data[4] = {0xA1, 0xA2, 0xA3, 0xA4};
    const wire::PathSpec peer = b.peer_path_;
    // Another source (10.0.0.3), then another destination (10.0.0.4): the
    // QP's header template refuses them, and so does the QP.
    for (int i = 0; i < 2; ++i) {
      b.peer_path_ = peer;
      (i == 0 ? b.peer_path_.src_ip : b.peer_path_.dst_ip) = wire::IpAddress::v4(0x0A000003 + i);
      std::vector<uint8_t> frame(256);
      wire::TransportSpec t = w;
      t.dest_qp = b.qp_->qpn();
      frame.resize(wire::build_packet(b.peer_path_, t, data, frame));
      wire::PredictedWrite pw;
      EXPECT_FALSE(wire::rx_template_match(b.qp_->rx_template(), frame, pw));
      b.feed(w, data);
    }
    // Expect: neither executed (nothing placed, PSN not consumed), nothing
    // answered, both counted.
    EXPECT_EQ(b.qp_->counters().rx_dropped_bad_address, 2u);
    EXPECT_EQ(b.qp_->counters().rx_request_packets, 0u);
    EXPECT_EQ(b.qp_->expected_psn(), 500u);
    EXPECT_NE(b.mem_[64], 0xA1);
    EXPECT_TRUE(b.drain().empty());
    // Expect: the same request from the peer is executed.
    b.peer_path_ = peer;
    b.feed(w, data);
    EXPECT_EQ(b.qp_->expected_psn(), 501u);
    EXPECT_EQ(0, std::memcmp(b.mem_.data() + 64, data, 4));
    EXPECT_EQ(b.qp_->counters().rx_dropped_bad_address, 2u);
  }
}

TEST(Qp, RequesterTakesResponsesOnlyFromItsPeerAddress) {
  QpBench b;
  ASSERT_EQ(b.post_send(1, IBV_WR_SEND, 0, 8), 0);
  ASSERT_EQ(b.post_send(2, IBV_WR_RDMA_READ, 64, 16), 0);
  ASSERT_EQ(b.drain().size(), 2u);  // SEND at PSN 100, READ at 101
  const wire::PathSpec peer = b.peer_path_;
  b.peer_path_.src_ip = wire::IpAddress::v4(0x0A000009);
  b.feed(ack(100));
  auto resp = req(IBV_OPCODE_RC_RDMA_READ_RESPONSE_ONLY, 101, false);
  resp.aeth_syndrome = wire::make_syndrome(wire::AethType::kAck, wire::kAethCreditsInvalid);
  const std::vector<uint8_t> data(16, 0x5A);
  b.feed(resp, data);
  // Expect: the ACK and the READ response from another address are dropped:
  // nothing completes, nothing is placed.
  EXPECT_EQ(b.qp_->counters().rx_dropped_bad_address, 2u);
  EXPECT_EQ(b.qp_->counters().acks_received, 0u);
  EXPECT_TRUE(b.poll().empty());
  EXPECT_NE(b.mem_[64], 0x5A);
  // Expect: from the peer, both complete.
  b.peer_path_ = peer;
  b.feed(ack(100));
  b.feed(resp, data);
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[1].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(b.mem_[64], 0x5A);
}

// IBA 9.6.1 over IPv6: the whole 128-bit address (the GID) must match; a
// difference in any byte, first or last, is another host.
TEST(Qp, ConnectedQpComparesWholeIpv6Addresses) {
  QpBench b;
  auto v6 = [](uint8_t host) {
    wire::IpAddress a;
    a.v6 = true;
    const uint8_t prefix[8] = {0xFD, 0x00, 0x0D, 0x0C, 0x00, 0x00, 0x00, 0x01};
    std::memcpy(a.bytes, prefix, 8);
    a.bytes[15] = host;
    return a;
  };
  QpAttr a = b.qp_->attr();
  a.path.src_ip = v6(1);
  a.path.dst_ip = v6(2);
  ASSERT_EQ(b.qp_->modify(QpState::kReset, a), 0);
  ASSERT_EQ(b.qp_->modify(QpState::kInit, a), 0);
  ASSERT_EQ(b.qp_->modify(QpState::kRtr, a), 0);
  b.post_recv(1, 0, 64);
  const uint8_t data[4] = {1, 2, 3, 4};
  const wire::PathSpec peer = b.peer_path_;
  b.peer_path_.src_ip = v6(2);
  b.peer_path_.dst_ip = v6(1);
  const wire::PathSpec peer6 = b.peer_path_;
  // Another source in the last byte, in the first byte; another destination
  // in a middle byte; an IPv4 packet from the same hosts.
  b.peer_path_.src_ip.bytes[15] = 3;
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 500), data);
  b.peer_path_ = peer6;
  b.peer_path_.src_ip.bytes[0] = 0xFE;
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 500), data);
  b.peer_path_ = peer6;
  b.peer_path_.dst_ip.bytes[7] = 0x02;
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 500), data);
  b.peer_path_ = peer;
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 500), data);
  // Expect: all four dropped and counted, nothing received.
  EXPECT_EQ(b.qp_->counters().rx_dropped_bad_address, 4u);
  EXPECT_EQ(b.qp_->expected_psn(), 500u);
  EXPECT_TRUE(b.poll().empty());
  // Expect: from the peer's address the SEND is received.
  b.peer_path_ = peer6;
  b.feed(req(IBV_OPCODE_RC_SEND_ONLY, 500), data);
  EXPECT_EQ(b.qp_->expected_psn(), 501u);
  EXPECT_EQ(b.poll().size(), 1u);
}

// UD takes datagrams from any address (IBA 9.6.1 leaves the source to the
// Q_Key check, 10.2.5), but only those sent to the QP's own address.
TEST(Qp, UdTakesDatagramsFromAnyoneToItsOwnAddress) {
  QpAttr a = QpBench::default_attr();
  a.qkey = 0x77;
  QpBench b(QpType::kUd, a);  // its own address: 10.0.0.1
  b.post_recv(1, 0, 40 + 64);
  b.post_recv(2, 128, 40 + 64);
  auto t = req(IBV_OPCODE_UD_SEND_ONLY, 1);
  t.deth_qkey = 0x77;
  t.deth_src_qp = 0x42;
  const uint8_t data[4] = {9, 8, 7, 6};
  b.peer_path_.src_ip = wire::IpAddress::v4(0xC0A80007);  // anyone
  b.feed(t, data);
  b.peer_path_.dst_ip = wire::IpAddress::v4(0x0A000002);  // another host's
  b.feed(t, data);
  // Expect: the first is received, the second dropped and counted.
  auto wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].src_qp, 0x42u);
  EXPECT_EQ(b.qp_->counters().rx_dropped_bad_address, 1u);
  // Expect: a UD QP without an address of its own (0.0.0.0 in its path)
  // takes datagrams sent to any address.
  a.path = b.qp_->attr().path;
  a.path.src_ip = wire::IpAddress::v4(0);
  ASSERT_EQ(b.qp_->modify(QpState::kReset, a), 0);
  ASSERT_EQ(b.qp_->modify(QpState::kInit, a), 0);
  ASSERT_EQ(b.qp_->modify(QpState::kRtr, a), 0);
  b.post_recv(3, 256, 40 + 64);
  b.feed(t, data);
  wc = b.poll();
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 3u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(b.qp_->counters().rx_dropped_bad_address, 1u);
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
  // Send from tx to rx's QPN. Both benches are host 1 (10.0.0.1): the
  // datagram goes to that address, the receiving QP's own.
  wire::PathSpec path = test_path(1, 1, tx.qp_->qpn(), rx.qp_->qpn());
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
  // Expect: the completion says the datagram came over RoCEv2 on IPv4
  // (ibv_wc.sl as RoCE NICs report it), where the destination IP lies.
  EXPECT_EQ(wc[0].sl, kWcSlRoceV2Ipv4);
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
