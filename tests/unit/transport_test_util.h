// Test bench for one QP talking to a scripted peer: craft request/response
// frames with wire::build_packet, feed them through parse + on_packet, and
// collect what the QP produces (parsed, with the frame kept alive).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "droce/transport/device.h"
#include "droce/wire/build.h"
#include "droce/wire/packet.h"
#include "transport_link.h"

namespace droce::transport::testing {

constexpr uint32_t kPeerQpn = 0x123456;

struct Frame {
  std::vector<uint8_t> bytes;
  wire::ParsedPacket p;
};

class QpBench {
 public:
  explicit QpBench(QpType type = QpType::kRc, QpAttr attr = default_attr(),
                   uint32_t sq_psn = 100, uint32_t rq_psn = 500) {
    pd_ = dev_.alloc_pd();
    cq_ = dev_.create_cq(1024);
    QpInitAttr init;
    init.type = type;
    init.pd = pd_;
    init.send_cq = init.recv_cq = cq_;
    init.caps.max_send_wr = 64;
    init.caps.max_recv_wr = 64;
    qp_ = dev_.create_qp(init);
    attr.path = test_path(1, 2, qp_->qpn(), kPeerQpn);
    attr.dest_qpn = kPeerQpn;
    attr.sq_psn = sq_psn;
    attr.rq_psn = rq_psn;
    peer_path_ = test_path(2, 1, kPeerQpn, qp_->qpn());
    EXPECT_EQ(qp_->modify(QpState::kInit, attr), 0);
    EXPECT_EQ(qp_->modify(QpState::kRtr, attr), 0);
    EXPECT_EQ(qp_->modify(QpState::kRts, attr), 0);
    mem_.assign(1 << 16, 0);
    for (size_t i = 0; i < mem_.size(); ++i) mem_[i] = static_cast<uint8_t>(i * 13 + 1);
    mr_ = dev_.reg_mr(pd_, mem_.data(), mem_.size(),
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                          IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
                      uint64_t{0x10000});  // offset-based VA: 0x10000 + offset
  }
  static QpAttr default_attr() {
    QpAttr a;
    a.path_mtu = IBV_MTU_1024;
    a.timeout = 10;  // 4.19 ms
    a.retry_cnt = 2;
    a.rnr_retry = 2;
    a.min_rnr_timer = 5;  // 0.06 ms
    return a;
  }

  // Feeds a frame from the peer.
  void feed(wire::TransportSpec t, std::span<const uint8_t> payload = {}, uint64_t now = 0,
            wire::Ecn ecn = wire::Ecn::kEct0) {
    t.dest_qp = qp_->qpn();
    wire::PathSpec path = peer_path_;
    path.ecn = ecn;
    std::vector<uint8_t> buf(9000);
    const size_t n = wire::build_packet(path, t, payload, buf);
    ASSERT_GT(n, 0u);
    wire::ParsedPacket p;
    ASSERT_EQ(wire::parse({buf.data(), n}, p), wire::ParseError::kOk);
    qp_->on_packet(p, now);
  }
  // Everything the QP wants to send now.
  std::vector<Frame> drain(uint64_t now = 0) {
    std::vector<Frame> out;
    while (qp_->has_work(now)) {
      Frame f;
      f.bytes.resize(9000);
      const size_t n = qp_->produce(now, f.bytes);
      if (!n) break;
      f.bytes.resize(n);
      out.push_back(std::move(f));
    }
    for (Frame& f : out) EXPECT_EQ(wire::parse(f.bytes, f.p), wire::ParseError::kOk);
    return out;
  }
  std::vector<WorkCompletion> poll() {
    std::vector<WorkCompletion> v(256);
    v.resize(static_cast<size_t>(cq_->poll(v)));
    return v;
  }
  void post_recv(uint64_t wr_id, uint64_t off, uint32_t len) {
    Sge s{va(off), len, mr_->lkey()};
    RecvWr r;
    r.wr_id = wr_id;
    r.sg_list = {&s, 1};
    ASSERT_EQ(qp_->post_recv(r), 0);
  }
  int post_send(uint64_t wr_id, ibv_wr_opcode op, uint64_t off, uint32_t len,
                unsigned flags = IBV_SEND_SIGNALED) {
    Sge s{va(off), len, mr_->lkey()};
    SendWr w;
    w.wr_id = wr_id;
    w.opcode = op;
    w.send_flags = flags;
    w.sg_list = {&s, 1};
    w.remote_addr = 0x5000;
    w.rkey = 0x777;
    w.compare_add = 1;
    return qp_->post_send(w);
  }
  uint64_t va(uint64_t off) const { return mr_->iova() + off; }

  Device dev_;
  ProtectionDomain* pd_;
  CompletionQueue* cq_;
  QueuePair* qp_;
  MemoryRegion* mr_;
  std::vector<uint8_t> mem_;
  wire::PathSpec peer_path_;
};

inline wire::TransportSpec req(uint8_t opcode, uint32_t psn, bool ack_req = true) {
  wire::TransportSpec t;
  t.opcode = opcode;
  t.psn = psn;
  t.ack_req = ack_req;
  return t;
}
inline wire::TransportSpec ack(uint32_t psn, uint8_t syndrome = wire::make_syndrome(
                                                 wire::AethType::kAck, wire::kAethCreditsInvalid)) {
  wire::TransportSpec t;
  t.opcode = IBV_OPCODE_RC_ACKNOWLEDGE;
  t.psn = psn;
  t.aeth_syndrome = syndrome;
  return t;
}
inline uint8_t nak(wire::NakCode c) {
  return wire::make_syndrome(wire::AethType::kNak, static_cast<uint8_t>(c));
}

// A congestion window of `bytes` over the hooks' account of what is in
// flight: new packets add, resends replace a copy given up on, and each
// PSN leaves once, at its first SACK or at the cumulative ACK. Hand
// hooks() and the window to QueuePair::set_cc_hooks.
struct PipeWindow {
  uint64_t bytes = 0;
  uint64_t inflight = 0;
  CcHooks hooks() const {
    CcHooks h;
    h.may_send = [](void* ctx, uint32_t, uint32_t bytes, uint64_t) {
      auto* w = static_cast<PipeWindow*>(ctx);
      return w->inflight + bytes <= w->bytes;
    };
    h.fills_window = [](void* ctx, uint32_t bytes, uint32_t next) {
      auto* w = static_cast<PipeWindow*>(ctx);
      return w->inflight + bytes + next > w->bytes;
    };
    h.on_send = [](void* ctx, uint32_t, uint32_t bytes, bool retransmit, uint64_t) {
      if (!retransmit) static_cast<PipeWindow*>(ctx)->inflight += bytes;
    };
    h.on_delivered = [](void* ctx, uint64_t bytes) {
      auto* w = static_cast<PipeWindow*>(ctx);
      EXPECT_LE(bytes, w->inflight);  // never more leaves than went out
      w->inflight -= std::min(w->inflight, bytes);
    };
    return h;
  }
};

}  // namespace droce::transport::testing
