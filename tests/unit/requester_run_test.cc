// The requester's run (src/transport/requester_run.cc) against the
// requester packet by packet: the same WRs posted to two senders, one whose
// endpoint lets a QP send 16 frames in a row (runs of new requests, built
// from the send template with their ICRCs computed in a batch) and one
// that interleaves frame by frame with every frame through produce_request
// (EndpointConfig::tx_runs off), must put the same frames on the wire,
// byte for byte, in the same order, and leave the same counters and
// completions; under congestion control with a rate and a window too. A
// run must also happen at all.
#include <gtest/gtest.h>
#include <infiniband/opcode.h>

#include <memory>
#include <vector>

#include "droce/cc/registry.h"
#include "droce/endpoint/endpoint.h"
#include "droce/transport/device.h"
#include "droce/wire/packet.h"

namespace droce::endpoint {
namespace {

using transport::QpState;
using transport::QpType;

struct Sender {
  transport::Device device{42};
  std::unique_ptr<Endpoint> ep;
  transport::ProtectionDomain* pd = nullptr;
  transport::CompletionQueue* cq = nullptr;
  std::vector<uint8_t> memory = std::vector<uint8_t>(1 << 20);
  transport::MemoryRegion* mr = nullptr;
  transport::QueuePair* qp = nullptr;

  Sender(uint32_t frames_per_turn, QpType type, const std::string& cc, uint32_t max_inline,
         bool runs = true) {
    EndpointConfig cfg;
    cfg.tx_frames_per_turn = frames_per_turn;
    cfg.tx_runs = runs;
    cfg.tx_run_ahead_ns = 2000;
    ep = std::make_unique<Endpoint>(device, cfg);
    pd = device.alloc_pd();
    cq = device.create_cq(1 << 16);
    for (size_t i = 0; i < memory.size(); ++i) memory[i] = static_cast<uint8_t>(i * 13 + 5);
    mr = device.reg_mr(pd, memory.data(), memory.size(), IBV_ACCESS_LOCAL_WRITE);
    transport::QpInitAttr init;
    init.type = type;
    init.pd = pd;
    init.send_cq = init.recv_cq = cq;
    init.caps.max_send_wr = 4096;
    init.caps.max_send_sge = 3;
    init.caps.max_inline_data = max_inline;
    qp = device.create_qp(init, 0x123);
    transport::QpAttr a;
    a.path.src_mac = {2, 0, 0, 0, 0, 1};
    a.path.dst_mac = {2, 0, 0, 0, 0, 2};
    a.path.src_ip = wire::IpAddress::v4(0x0A000001);
    a.path.dst_ip = wire::IpAddress::v4(0x0A000002);
    a.dest_qpn = 0x456;
    a.path_mtu = IBV_MTU_1024;
    a.sq_psn = 0xFFFFF0;  // the PSN wraps within the test
    a.max_inflight_psns = 1u << 20;
    a.ack_req_every_n = 5;
    for (QpState s : {QpState::kInit, QpState::kRtr, QpState::kRts}) EXPECT_EQ(qp->modify(s, a), 0);
    ep->attach(*qp, cc::make_algorithm(cc, {}, 100'000'000'000ull / 8));
  }

  uint64_t va(uint64_t off) const { return reinterpret_cast<uint64_t>(memory.data()) + off; }
};

// A mix that crosses every case the run covers: one-packet and multi-packet
// SENDs and WRITEs, with immediate data and invalidate, several SGEs,
// inline data, zero-length messages, signaled and not.
std::vector<transport::SendWr> wr_mix(const Sender& s, QpType type, std::vector<transport::Sge>& sges) {
  std::vector<transport::SendWr> wrs;
  sges.clear();
  sges.reserve(4096);
  const uint32_t lkey = s.mr->lkey();
  // Short messages, and every 13th a long one, whose middle packets
  // ask for ACKs only as the policy and the window decide.
  const uint32_t lens[] = {64, 0, 1, 1023, 1024, 1025, 4096, 5000, 3, 16};
  for (uint32_t i = 0; i < 130; ++i) {
    transport::SendWr wr;
    wr.wr_id = i;
    const uint32_t len = i % 13 == 7 ? 30000 + i : lens[i % 10];
    const uint32_t kind = i % 7;
    switch (kind) {
      case 0: wr.opcode = IBV_WR_SEND; break;
      case 1: wr.opcode = IBV_WR_SEND_WITH_IMM; break;
      case 2: wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM; break;
      case 3: wr.opcode = type == QpType::kRc ? IBV_WR_SEND_WITH_INV : IBV_WR_SEND; break;
      default: wr.opcode = IBV_WR_RDMA_WRITE; break;
    }
    wr.imm_data = 0xABC00000 + i;
    wr.invalidate_rkey = 0x7700 + i;
    wr.remote_addr = 0x100000 + uint64_t{i} * 65536;
    wr.rkey = 0x5500;
    wr.send_flags = (i % 3 == 0 ? IBV_SEND_SIGNALED : 0) | (i % 11 == 0 ? IBV_SEND_SOLICITED : 0);
    const size_t first = sges.size();
    if (i % 9 == 4 && len >= 3) {
      // Three SGEs over scattered parts of the region.
      sges.push_back({s.va(1000), len / 3, lkey});
      sges.push_back({s.va(300000), len / 3, lkey});
      sges.push_back({s.va(700001), len - 2 * (len / 3), lkey});
    } else if (i % 13 == 6 && len <= 64) {
      wr.send_flags |= IBV_SEND_INLINE;
      sges.push_back({s.va(4000 + i), len, 0});
    } else if (len > 0) {
      sges.push_back({s.va(uint64_t{i} * 777), len, lkey});
    }
    wr.sg_list = std::span<const transport::Sge>(sges.data() + first, sges.size() - first);
    wrs.push_back(wr);
  }
  return wrs;
}

struct Wire {
  std::vector<std::vector<uint8_t>> frames;
  size_t largest_call = 0;  // most frames one transmit() call made
};

Wire drive(Sender& s, const std::vector<transport::SendWr>& wrs) {
  for (const auto& wr : wrs) EXPECT_EQ(s.qp->post_send(wr), 0) << "wr " << wr.wr_id;
  s.ep->notify(s.qp->qpn());
  Wire w;
  std::vector<std::vector<uint8_t>> store(32, std::vector<uint8_t>(1200));
  std::vector<std::span<uint8_t>> bufs(store.begin(), store.end());
  uint32_t lens[32];
  uint64_t now = 1'000'000;
  for (int call = 0; call < 2000; ++call, now += 10'000) {
    const size_t n = s.ep->transmit(now, bufs, lens);
    w.largest_call = std::max(w.largest_call, n);
    for (size_t i = 0; i < n; ++i) w.frames.emplace_back(store[i].begin(), store[i].begin() + lens[i]);
    if (n == 0 && s.qp->send_queue_depth() == 0) break;
  }
  return w;
}

std::vector<transport::WorkCompletion> completions(Sender& s) {
  std::vector<transport::WorkCompletion> all, got(64);
  int n;
  while ((n = s.cq->poll(got)) > 0) all.insert(all.end(), got.begin(), got.begin() + n);
  return all;
}

class RequesterRun : public testing::TestWithParam<std::tuple<QpType, const char*>> {};

TEST_P(RequesterRun, SendsWhatTheRequesterSendsPacketByPacket) {
  const auto [type, cc] = GetParam();
  Sender runs(16, type, cc, 64), single(1, type, cc, 64, /*runs=*/false);
  std::vector<transport::Sge> sges_a, sges_b;
  const Wire a = drive(runs, wr_mix(runs, type, sges_a));
  const Wire b = drive(single, wr_mix(single, type, sges_b));
  // (With HPCC the window closes, no ACK ever coming back, after ~150.)
  ASSERT_GT(a.frames.size(), 100u);
  ASSERT_EQ(a.frames.size(), b.frames.size());
  for (size_t i = 0; i < a.frames.size(); ++i) {
    ASSERT_EQ(a.frames[i], b.frames[i]) << "frame " << i;
    // And every frame is a valid RoCEv2 frame, ICRC included.
    wire::ParsedPacket p;
    ASSERT_EQ(wire::parse(a.frames[i], p), wire::ParseError::kOk) << "frame " << i;
  }
  // The run was taken: a QP's turn made more than one frame in a row.
  EXPECT_GT(a.largest_call, 1u);
  const auto& ca = runs.qp->counters();
  const auto& cb = single.qp->counters();
  EXPECT_EQ(ca.tx_packets, cb.tx_packets);
  EXPECT_EQ(ca.tx_bytes, cb.tx_bytes);
  EXPECT_EQ(ca.tx_request_packets, cb.tx_request_packets);
  EXPECT_EQ(ca.send_completions, cb.send_completions);
  EXPECT_EQ(runs.qp->next_send_psn(), single.qp->next_send_psn());
  // The retransmission timer was armed when the same packet left.
  EXPECT_EQ(runs.qp->next_deadline(), single.qp->next_deadline());
  const auto wa = completions(runs), wb = completions(single);
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i) {
    EXPECT_EQ(wa[i].wr_id, wb[i].wr_id);
    EXPECT_EQ(wa[i].status, wb[i].status);
  }
}

INSTANTIATE_TEST_SUITE_P(
    TypesAndCc, RequesterRun,
    testing::Combine(testing::Values(QpType::kRc, QpType::kUc),
                     testing::Values("none", "dcqcn", "hpcc", "timely", "swift")),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) == QpType::kRc ? "Rc" : "Uc") + "_" +
             std::get<1>(info.param);
    });

TEST(RequesterRunDirect, BuildsManyPacketsAtOnceAndStopsAtWhatIsNotItsOwn) {
  Sender s(16, QpType::kRc, "none", 0);
  transport::Sge sge{s.va(0), 64, s.mr->lkey()};
  for (uint64_t i = 0; i < 10; ++i) {
    transport::SendWr wr;
    wr.wr_id = i;
    wr.opcode = i == 5 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
    wr.sg_list = std::span(&sge, 1);
    wr.remote_addr = 0x1000;
    wr.rkey = 7;
    ASSERT_EQ(s.qp->post_send(wr), 0);
  }
  std::vector<std::vector<uint8_t>> store(16, std::vector<uint8_t>(256));
  std::vector<std::span<uint8_t>> bufs(store.begin(), store.end());
  uint32_t lens[16];
  wire::IcrcBatch icrc;
  s.qp->begin_burst(&icrc);
  // Five WRITEs, then the READ is produce_request's.
  EXPECT_EQ(s.qp->produce_run(1000, bufs, lens), 5u);
  EXPECT_EQ(icrc.pending(), 5u);
  EXPECT_EQ(s.qp->produce_run(1000, bufs, lens), 0u);
  EXPECT_NE(s.qp->produce_in_burst(1000, bufs[0]), 0u);  // the READ request
  EXPECT_EQ(s.qp->produce_run(1000, std::span(bufs).first(2), lens), 2u);
  s.qp->end_burst();
  icrc.flush();
  wire::ParsedPacket p;
  ASSERT_EQ(wire::parse(std::span<const uint8_t>(store[1].data(), lens[1]), p),
            wire::ParseError::kOk);
  EXPECT_EQ(p.info->operation, wire::Operation::kWrite);
}

}  // namespace
}  // namespace droce::endpoint
