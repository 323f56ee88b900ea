// Two devices, one RC QP each, joined by lossy in-memory links in virtual
// time: random opcodes and sizes must complete byte-exact, in order, with the
// right completions, under loss / duplication / reordering / corruption,
// with go-back-N
// and selective repeat, across the 2^24 PSN wrap, in bounded virtual time.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <tuple>

#include "droce/transport/device.h"
#include "transport_link.h"

namespace droce::transport {
namespace {

using testing::Impairment;
using testing::Loopback;

enum class Op { kSend, kSendImm, kWrite, kWriteImm, kRead, kCas, kFaa };

struct Planned {
  Op op;
  uint32_t len;
  uint64_t local_off;   // in A's memory
  uint64_t remote_off;  // in B's memory
  uint32_t imm;
  uint64_t compare, swap_add, initial;
  bool uses_recv;
  uint64_t recv_off;    // in B's memory
};

constexpr uint32_t kRecvSlot = 24 * 1024;

struct Result {
  bool finished = false;
  uint64_t corrupted = 0;     // frames the links flipped a bit in
  uint64_t parse_errors = 0;  // frames the receivers refused
  std::vector<WorkCompletion> send_wcs, recv_wcs;
  QpCounters a_counters, b_counters;
};

Result run_workload(double loss, Recovery recovery, uint64_t seed, int nops,
                    uint32_t start_psn, bool check_data = true) {
  std::mt19937_64 rng(seed);
  testing::TwoEnds ends(1024, 1024);
  auto& [da, db, pa, pb, a_cq, b_cq, qa, qb] = ends;
  QpAttr attr;
  attr.path_mtu = IBV_MTU_1024;
  attr.timeout = 8;  // ~1 ms
  attr.retry_cnt = 7;
  attr.rnr_retry = 7;
  attr.min_rnr_timer = 1;
  attr.recovery = recovery;
  attr.ack_every_n = 8;
  attr.ack_req_every_n = 16;
  attr.max_inflight_psns = 256;
  attr.sack_window = 256;
  EXPECT_TRUE(testing::connect(*qa, *qb, attr, start_psn, wire::psn_add(start_psn, 77)));

  // Plan.
  std::vector<Planned> plan;
  uint64_t a_off = 0, b_off = 0, recv_off = 0;
  auto pick_len = [&]() -> uint32_t {
    switch (rng() % 6) {
      case 0: return 0;
      case 1: return static_cast<uint32_t>(rng() % 16 + 1);
      case 2: return 1024;
      case 3: return 1023 + static_cast<uint32_t>(rng() % 3);
      default: return static_cast<uint32_t>(rng() % 20000);
    }
  };
  for (int i = 0; i < nops; ++i) {
    Planned p{};
    p.op = static_cast<Op>(rng() % 7);
    p.len = (p.op == Op::kCas || p.op == Op::kFaa) ? 8 : pick_len();
    a_off = (a_off + 7) & ~uint64_t{7};
    b_off = (b_off + 7) & ~uint64_t{7};
    p.local_off = a_off;
    p.remote_off = b_off;
    a_off += p.len + 8;
    b_off += p.len + 8;
    p.imm = static_cast<uint32_t>(rng());
    p.compare = rng() % 2 ? 1000 + i : 5;
    p.swap_add = rng();
    p.initial = 1000 + i;
    p.uses_recv = p.op == Op::kSend || p.op == Op::kSendImm || p.op == Op::kWriteImm;
    if (p.uses_recv) {
      p.recv_off = recv_off;
      recv_off += kRecvSlot;
    }
    plan.push_back(p);
  }
  std::vector<uint8_t> amem(a_off + 64), bmem(b_off + 64), brecv(recv_off + 64, 0xEE);
  for (auto& b : amem) b = static_cast<uint8_t>(rng());
  for (auto& b : bmem) b = static_cast<uint8_t>(rng());
  const std::vector<uint8_t> a_orig = amem, b_orig = bmem;
  const uint32_t rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  MemoryRegion* amr = da.reg_mr(pa, amem.data(), amem.size(), IBV_ACCESS_LOCAL_WRITE);
  MemoryRegion* bmr = db.reg_mr(pb, bmem.data(), bmem.size(), rw);
  MemoryRegion* rmr = db.reg_mr(pb, brecv.data(), brecv.size(), IBV_ACCESS_LOCAL_WRITE);
  const uint64_t abase = amr->iova(), bbase = bmr->iova();
  for (auto& p : plan) {
    if (p.op == Op::kCas || p.op == Op::kFaa) std::memcpy(&bmem[p.remote_off], &p.initial, 8);
  }
  std::vector<uint8_t> b_before = bmem;

  // Post receives (some with two SGEs), then sends.
  for (size_t i = 0; i < plan.size(); ++i) {
    const Planned& p = plan[i];
    if (!p.uses_recv) continue;
    Sge sg[2] = {{rmr->iova() + p.recv_off, kRecvSlot / 2, rmr->lkey()},
                 {rmr->iova() + p.recv_off + kRecvSlot / 2, kRecvSlot / 2, rmr->lkey()}};
    RecvWr r;
    r.wr_id = i;
    r.sg_list = sg;
    EXPECT_EQ(qb->post_recv(r), 0);
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    const Planned& p = plan[i];
    SendWr w;
    w.wr_id = i;
    w.send_flags = IBV_SEND_SIGNALED;
    Sge sg[3];
    // Split the local buffer into up to three SGEs.
    const uint32_t cut1 = p.len ? static_cast<uint32_t>(rng() % (p.len + 1)) : 0;
    const uint32_t cut2 = cut1 + (p.len - cut1) / 2;
    const bool split = p.len > 16 && p.op != Op::kCas && p.op != Op::kFaa && rng() % 3 == 0;
    if (split) {
      sg[0] = {abase + p.local_off, cut1, amr->lkey()};
      sg[1] = {abase + p.local_off + cut1, cut2 - cut1, amr->lkey()};
      sg[2] = {abase + p.local_off + cut2, p.len - cut2, amr->lkey()};
      w.sg_list = {sg, 3};
    } else {
      sg[0] = {abase + p.local_off, p.len, amr->lkey()};
      w.sg_list = {sg, 1};
    }
    w.remote_addr = bbase + p.remote_off;
    w.rkey = bmr->rkey();
    w.imm_data = p.imm;
    switch (p.op) {
      case Op::kSend: w.opcode = IBV_WR_SEND; break;
      case Op::kSendImm: w.opcode = IBV_WR_SEND_WITH_IMM; break;
      case Op::kWrite: w.opcode = IBV_WR_RDMA_WRITE; break;
      case Op::kWriteImm: w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM; break;
      case Op::kRead: w.opcode = IBV_WR_RDMA_READ; break;
      case Op::kCas:
        w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
        w.compare_add = p.compare;
        w.swap = p.swap_add;
        break;
      case Op::kFaa:
        w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        w.compare_add = p.swap_add;
        break;
    }
    EXPECT_EQ(qa->post_send(w), 0) << i;
  }
  size_t expected_recv = 0;
  for (auto& p : plan) expected_recv += p.uses_recv;

  Impairment imp;
  imp.loss = loss;
  if (loss > 0) {
    imp.duplicate = 0.01;
    imp.reorder = 0.01;
    imp.corrupt = 0.01;
  }
  Loopback net(da, db, seed * 7 + 1, imp);
  net.set_trace(std::getenv("DROCE_TRACE") != nullptr);
  Result res;
  WorkCompletion wcs[64];
  bool error = false;
  auto done = [&] {
    for (int n; (n = a_cq->poll(wcs)) > 0;)
      for (int i = 0; i < n; ++i) {
        (wcs[i].qp_num == qa->qpn() ? res.send_wcs : res.recv_wcs).push_back(wcs[i]);
        error |= wcs[i].status != IBV_WC_SUCCESS;
      }
    for (int n; (n = b_cq->poll(wcs)) > 0;)
      for (int i = 0; i < n; ++i) {
        res.recv_wcs.push_back(wcs[i]);
        error |= wcs[i].status != IBV_WC_SUCCESS;
      }
    return error || (res.send_wcs.size() == plan.size() && res.recv_wcs.size() == expected_recv);
  };
  res.finished = net.run(done, 30'000'000'000ull) && !error;
  if (!res.finished && std::getenv("DROCE_TRACE"))
    std::printf("%s\n%s\n", qa->debug_state().c_str(), qb->debug_state().c_str());
  res.a_counters = qa->counters();
  res.b_counters = qb->counters();
  res.corrupted = net.ab().corrupted() + net.ba().corrupted();
  res.parse_errors = net.parse_errors();
  // Expect: receivers refuse only frames the links corrupted; a flip in a
  // field the ICRC masks and nobody reads may still parse.
  EXPECT_LE(res.parse_errors, res.corrupted);
  if (!res.finished || !check_data) return res;

  // Completions: in posting order, right opcode and length.
  size_t ri = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const Planned& p = plan[i];
    const WorkCompletion& wc = res.send_wcs[i];
    EXPECT_EQ(wc.wr_id, i);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    switch (p.op) {
      case Op::kSend:
      case Op::kSendImm: EXPECT_EQ(wc.opcode, IBV_WC_SEND); break;
      case Op::kWrite:
      case Op::kWriteImm: EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE); break;
      case Op::kRead:
        EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
        EXPECT_EQ(wc.byte_len, p.len);
        break;
      case Op::kCas: EXPECT_EQ(wc.opcode, IBV_WC_COMP_SWAP); break;
      case Op::kFaa: EXPECT_EQ(wc.opcode, IBV_WC_FETCH_ADD); break;
    }
    if (p.uses_recv) {
      const WorkCompletion& rc = res.recv_wcs[ri++];
      EXPECT_EQ(rc.wr_id, i);
      EXPECT_EQ(rc.byte_len, p.len) << i;
      const bool imm = p.op != Op::kSend;
      EXPECT_EQ(!!(rc.wc_flags & IBV_WC_WITH_IMM), imm);
      if (imm) {
        EXPECT_EQ(rc.imm_data, p.imm);
      }
      EXPECT_EQ(rc.opcode, p.op == Op::kWriteImm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV);
    }
    // Data.
    switch (p.op) {
      case Op::kSend:
      case Op::kSendImm:
        EXPECT_EQ(0, std::memcmp(&brecv[p.recv_off], &a_orig[p.local_off], p.len)) << i;
        break;
      case Op::kWrite:
      case Op::kWriteImm:
        EXPECT_EQ(0, std::memcmp(&bmem[p.remote_off], &a_orig[p.local_off], p.len)) << i;
        break;
      case Op::kRead:
        EXPECT_EQ(0, std::memcmp(&amem[p.local_off], &b_before[p.remote_off], p.len)) << i;
        break;
      case Op::kCas: {
        uint64_t got, now_val;
        std::memcpy(&got, &amem[p.local_off], 8);
        std::memcpy(&now_val, &bmem[p.remote_off], 8);
        EXPECT_EQ(got, p.initial) << i;
        EXPECT_EQ(now_val, p.compare == p.initial ? p.swap_add : p.initial) << i;
        break;
      }
      case Op::kFaa: {
        uint64_t got, now_val;
        std::memcpy(&got, &amem[p.local_off], 8);
        std::memcpy(&now_val, &bmem[p.remote_off], 8);
        EXPECT_EQ(got, p.initial) << i;
        EXPECT_EQ(now_val, p.initial + p.swap_add) << i;  // executed exactly once
        break;
      }
    }
  }
  return res;
}

class LoopbackTest : public ::testing::TestWithParam<std::tuple<double, Recovery, uint64_t>> {};

TEST_P(LoopbackTest, RandomWorkloadCompletesByteExact) {
  const auto [loss, recovery, seed] = GetParam();
  // Start 40 PSNs before the 2^24 wrap so every run crosses it.
  const Result r = run_workload(loss, recovery, seed, 120, wire::kPsnMask - 40);
  // Expect: every WR completes successfully, data and completions exact.
  EXPECT_TRUE(r.finished) << "send " << r.send_wcs.size() << " recv " << r.recv_wcs.size();
  if (!r.finished) {
    for (const auto* v : {&r.send_wcs, &r.recv_wcs})
      for (const auto& wc : *v)
        if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR)
          std::printf("qp %u wr %llu status %d\n", wc.qp_num,
                      static_cast<unsigned long long>(wc.wr_id), static_cast<int>(wc.status));
    r.a_counters.for_each([](std::string_view n, uint64_t v) {
      if (v) std::printf("  A %.*s=%llu\n", static_cast<int>(n.size()), n.data(),
                         static_cast<unsigned long long>(v));
    });
    r.b_counters.for_each([](std::string_view n, uint64_t v) {
      if (v) std::printf("  B %.*s=%llu\n", static_cast<int>(n.size()), n.data(),
                         static_cast<unsigned long long>(v));
    });
  }
  if (loss >= 0.01) {
    // Expect: 1% of frames corrupted, nearly all refused (ICRC, IP checksum).
    EXPECT_GT(r.corrupted, 0u);
    EXPECT_GE(r.parse_errors * 10, r.corrupted * 8);
  }
  if (loss == 0) {
    // Expect: a clean link needs no retransmission at all.
    EXPECT_EQ(r.a_counters.tx_retransmit_packets, 0u);
    EXPECT_EQ(r.a_counters.retransmit_timeouts, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    LossAndRecovery, LoopbackTest,
    ::testing::Combine(::testing::Values(0.0, 0.001, 0.01, 0.05),
                       ::testing::Values(Recovery::kGoBackN, Recovery::kSelectiveRepeat),
                       ::testing::Values(1u, 2u, 3u)));

TEST(Loopback, SelectiveRepeatResendsFewerPacketsThanGoBackN) {
  // Expect: at 5% loss, selective repeat retransmits fewer request packets
  // (only holes) than go-back-N on the same workload and link seeds.
  uint64_t gbn = 0, sr = 0;
  for (uint64_t seed = 10; seed < 14; ++seed) {
    gbn += run_workload(0.05, Recovery::kGoBackN, seed, 120, 0, false).a_counters.tx_retransmit_packets;
    sr += run_workload(0.05, Recovery::kSelectiveRepeat, seed, 120, 0, false)
              .a_counters.tx_retransmit_packets;
  }
  EXPECT_LT(sr, gbn);
  std::printf("retransmitted packets at 5%% loss: go-back-N %llu, selective repeat %llu\n",
              static_cast<unsigned long long>(gbn), static_cast<unsigned long long>(sr));
}

// IBA 9.7.5.2.8 end to end: RDMA WRITE WITH IMMEDIATE that finds no
// receive WQE is RNR NAKed (at its ONLY, or at the LAST of a longer
// message), the requester waits and resends from the NAKed PSN, and once a
// receive is posted the message completes: RNR leaves no state behind.
TEST(Loopback, WriteWithImmediateCompletesAfterRnr) {
  testing::TwoEnds ends(16, 16);
  auto& [da, db, pa, pb, a_cq, b_cq, qa, qb] = ends;
  QpAttr attr;
  attr.path_mtu = IBV_MTU_1024;
  attr.min_rnr_timer = 1;  // 0.01 ms
  attr.rnr_retry = 7;      // infinite
  ASSERT_TRUE(testing::connect(*qa, *qb, attr, 100, 900));
  std::vector<uint8_t> amem(4096), bmem(8192, 0), brecv(64);
  for (size_t i = 0; i < amem.size(); ++i) amem[i] = static_cast<uint8_t>(i * 7 + 3);
  MemoryRegion* amr = da.reg_mr(pa, amem.data(), amem.size(), IBV_ACCESS_LOCAL_WRITE);
  MemoryRegion* bmr =
      db.reg_mr(pb, bmem.data(), bmem.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  MemoryRegion* rmr = db.reg_mr(pb, brecv.data(), brecv.size(), IBV_ACCESS_LOCAL_WRITE);
  auto post_recv = [&](uint64_t id) {
    Sge s{rmr->iova(), 64, rmr->lkey()};
    RecvWr r;
    r.wr_id = id;
    r.sg_list = {&s, 1};
    ASSERT_EQ(qb->post_recv(r), 0);
  };
  // Message 0: 16 bytes (ONLY WITH IMMEDIATE); messages 1 and 2: 2500 bytes
  // (FIRST, MIDDLE, LAST WITH IMMEDIATE). One receive for message 1 only
  // after the first RNR, one for message 2 after the next.
  const uint32_t lens[3] = {16, 2500, 2500};
  const uint64_t at[3] = {0, 1024, 4096};
  for (uint32_t i = 0; i < 3; ++i) {
    Sge s{amr->iova(), lens[i], amr->lkey()};
    SendWr w;
    w.wr_id = i;
    w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    w.send_flags = IBV_SEND_SIGNALED;
    w.sg_list = {&s, 1};
    w.remote_addr = bmr->iova() + at[i];
    w.rkey = bmr->rkey();
    w.imm_data = 0x100 + i;
    ASSERT_EQ(qa->post_send(w), 0);
  }
  testing::Loopback net(da, db, 1, {});
  std::vector<WorkCompletion> sends, recvs;
  // Polls both CQs; true once `r` receives and `s` sends have completed.
  auto completed = [&](size_t r, size_t s) {
    WorkCompletion wcs[16];
    for (int n; (n = a_cq->poll(wcs)) > 0;) sends.insert(sends.end(), wcs, wcs + n);
    for (int n; (n = b_cq->poll(wcs)) > 0;) recvs.insert(recvs.end(), wcs, wcs + n);
    return recvs.size() >= r && sends.size() >= s;
  };
  for (uint64_t id = 0; id < 3; ++id) {
    const uint64_t rnrs = qb->counters().rnr_naks_sent;
    net.run([&] { return qb->counters().rnr_naks_sent > rnrs; }, net.now() + 10'000'000);
    ASSERT_GT(qb->counters().rnr_naks_sent, rnrs) << id;
    post_recv(id);
    net.run([&] { return completed(id + 1, 0); }, net.now() + 10'000'000);
  }
  net.run([&] { return completed(3, 3); }, net.now() + 10'000'000);
  // Expect: every message completes on both sides, in order, byte-exact;
  // the responder never saw an invalid request and is still in RTS.
  ASSERT_EQ(sends.size(), 3u);
  ASSERT_EQ(recvs.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(sends[i].wr_id, i);
    EXPECT_EQ(sends[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(recvs[i].wr_id, i);
    EXPECT_EQ(recvs[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(recvs[i].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_EQ(recvs[i].byte_len, lens[i]);
    EXPECT_EQ(recvs[i].imm_data, 0x100 + i);
    EXPECT_EQ(0, std::memcmp(bmem.data() + at[i], amem.data(), lens[i])) << i;
  }
  EXPECT_EQ(qb->counters().naks_invalid_request_sent, 0u);
  EXPECT_EQ(qa->counters().fatal_naks_received, 0u);
  EXPECT_EQ(qb->state(), QpState::kRts);
}

}  // namespace
}  // namespace droce::transport
