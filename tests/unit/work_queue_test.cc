// The work queue contract (transport/qp.h, cq.h, srq.h, endpoint/doorbell.h):
// rings shared between posters on other threads and the data path, CQ
// overflow and notification, shared receive queues, inline data, destroy
// and deregistration while traffic flows. The multi-threaded tests also run
// under ThreadSanitizer (scripts/test-tsan).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "droce/endpoint/doorbell.h"
#include "droce/transport/device.h"
#include "transport_link.h"
#include "work_queue_pair.h"

namespace droce::transport {
namespace {

using testing::Loopback;

WorkCompletion wc_with(uint64_t id, bool solicited = false,
                       ibv_wc_status status = IBV_WC_SUCCESS) {
  WorkCompletion wc;
  wc.wr_id = id;
  wc.solicited = solicited;
  wc.status = status;
  return wc;
}

// ---- completion queues

TEST(WorkQueueCq, ArmedCqNotifiesOncePerArming) {
  CompletionQueue cq(8);
  int calls = 0;
  cq.set_notifier([](void* ctx, CompletionQueue&) { ++*static_cast<int*>(ctx); }, &calls);
  ASSERT_TRUE(cq.push(wc_with(1)));
  EXPECT_EQ(calls, 0);  // not armed: no event (IBA 11.4.2.2)
  cq.arm(false);
  ASSERT_TRUE(cq.push(wc_with(2)));
  ASSERT_TRUE(cq.push(wc_with(3)));
  EXPECT_EQ(calls, 1);  // one arm, one event
  cq.arm(true);
  ASSERT_TRUE(cq.push(wc_with(4)));
  EXPECT_EQ(calls, 1);  // solicited only: an unsolicited success is no event
  ASSERT_TRUE(cq.push(wc_with(5, true)));
  EXPECT_EQ(calls, 2);
  cq.arm(true);
  ASSERT_TRUE(cq.push(wc_with(6, false, IBV_WC_REM_ACCESS_ERR)));
  EXPECT_EQ(calls, 3);  // ... but an error is
}

TEST(WorkQueueCq, OverflowPutsTheCqInErrorOnce) {
  CompletionQueue cq(2);
  int errors = 0;
  cq.set_error_notifier([](void* ctx, CompletionQueue&) { ++*static_cast<int*>(ctx); },
                        &errors);
  ASSERT_TRUE(cq.push(wc_with(1)));
  ASSERT_TRUE(cq.push(wc_with(2)));
  EXPECT_FALSE(cq.push(wc_with(3)));
  WorkCompletion out[2];
  ASSERT_EQ(cq.poll(out), 2);
  // Expect: in error, a CQ takes nothing more even with room, and the
  // error is reported once.
  EXPECT_FALSE(cq.push(wc_with(4)));
  EXPECT_EQ(errors, 1);
  EXPECT_EQ(cq.overflow_count(), 2u);
}

TEST(WorkQueueCq, PollersOnSeveralThreadsGetEveryCompletionOnce) {
  CompletionQueue cq(64);
  constexpr uint64_t kN = 200'000;
  std::atomic<uint64_t> got{0};
  std::vector<std::vector<uint64_t>> seen(3);
  std::vector<std::thread> pollers;
  for (int t = 0; t < 3; ++t)
    pollers.emplace_back([&, t] {
      WorkCompletion out[16];
      while (got.load() < kN) {
        const int n = cq.poll(out);
        for (int i = 0; i < n; ++i) seen[t].push_back(out[i].wr_id);
        got += static_cast<uint64_t>(n);
        // Four spinning threads on fewer cores: give the others the core
        // when there is nothing to do, or a preempted lock holder stalls
        // everyone for a time slice (seconds in all on a loaded machine).
        if (n == 0) std::this_thread::yield();
      }
    });
  // The producer never overruns (a full CQ is an error, not back-pressure):
  // it pushes only into room the pollers made.
  for (uint64_t i = 0; i < kN;) {
    if (cq.size() == cq.capacity()) {
      std::this_thread::yield();
      continue;
    }
    ASSERT_TRUE(cq.push(wc_with(i)));
    ++i;
  }
  for (auto& p : pollers) p.join();
  std::vector<uint8_t> count(kN, 0);
  for (auto& s : seen) {
    // Each poller sees its completions in push order.
    EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
    for (uint64_t id : s) ++count[id];
  }
  EXPECT_TRUE(std::all_of(count.begin(), count.end(), [](uint8_t c) { return c == 1; }));
}

// The application's loop with a completion channel (ibv_rc_pingpong -e):
// wait for an event, arm, poll. A completion pushed while the poller arms
// must either be seen by that poll or raise the next event; losing both
// leaves the application waiting forever.
TEST(WorkQueueCq, ACompletionRacingTheArmingIsPolledOrNotified) {
  CompletionQueue cq(4);
  std::atomic<uint64_t> events{0};
  cq.set_notifier(
      [](void* ctx, CompletionQueue&) {
        static_cast<std::atomic<uint64_t>*>(ctx)->fetch_add(1, std::memory_order_release);
      },
      &events);
  constexpr uint64_t kN = 100'000;
  std::atomic<uint64_t> polled{0};
  std::atomic<bool> stuck{false};
  std::thread poller([&] {
    WorkCompletion out[4];
    while (polled.load() < kN) {
      const uint64_t before = events.load(std::memory_order_acquire);
      cq.arm(false);
      const int n = cq.poll(out);
      if (n > 0) {
        polled += static_cast<uint64_t>(n);
        continue;
      }
      // Nothing there: the next completion must raise an event.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (events.load(std::memory_order_acquire) == before) {
        if (std::chrono::steady_clock::now() > deadline) {
          stuck = true;
          polled = kN;
          return;
        }
        std::this_thread::yield();
      }
    }
  });
  for (uint64_t i = 0; i < kN && !stuck.load();) {
    if (cq.size() > 0) continue;  // one in flight, like a ping-pong
    ASSERT_TRUE(cq.push(wc_with(i)));
    ++i;
  }
  poller.join();
  EXPECT_FALSE(stuck.load()) << "a completion was neither polled nor notified";
}
// ---- send and receive queues between two devices (work_queue_pair.h)

TEST(WorkQueueRings, FullSendQueueRefusesAndWrapsManyTimes) {
  Pair p(8);
  Sge sge;
  uint64_t next = 0;
  for (int round = 0; round < 50; ++round) {
    // Expect: exactly the queue's depth fits; the next post is ENOMEM and
    // queues nothing.
    for (int i = 0; i < 8; ++i) {
      SendWr wr = p.write(next, 0, next * 8 % 4096, 8, sge);
      ASSERT_EQ(p.qa->post_send(wr), 0) << round << " " << i;
      ++next;
    }
    SendWr extra = p.write(999999, 0, 0, 8, sge);
    EXPECT_EQ(p.qa->post_send(extra), ENOMEM);
    EXPECT_EQ(p.qa->send_queue_depth(), 8u);
    p.settle();
    auto wcs = p.drain(p.a_cq);
    ASSERT_EQ(wcs.size(), 8u);
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(wcs[i].status, IBV_WC_SUCCESS);
      EXPECT_EQ(wcs[i].wr_id, next - 8 + static_cast<uint64_t>(i));  // none lost, in order
    }
  }
}

// A list, as ibv_post_send takes a chain: posted in order up to the first WR
// refused, whose error is returned; nothing from it on is queued.
TEST(WorkQueueRings, AListIsPostedUpToItsFirstRefusedWr) {
  Pair p(8);
  std::vector<Sge> sges(12);
  std::vector<SendWr> wrs;
  for (uint64_t i = 0; i < 5; ++i) wrs.push_back(p.write(i, i * 8, i * 8, 8, sges[i]));
  sges[2].lkey ^= 0x100;  // a key no region has
  size_t n = 99;
  EXPECT_EQ(p.qa->post_send(wrs, &n), EINVAL);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(p.qa->send_queue_depth(), 2u);
  // Ten into the six free slots: six go, the seventh is ENOMEM.
  wrs.clear();
  for (uint64_t i = 0; i < 10; ++i) wrs.push_back(p.write(10 + i, 0, 0, 8, sges[i]));
  EXPECT_EQ(p.qa->post_send(wrs, &n), ENOMEM);
  EXPECT_EQ(n, 6u);
  p.settle();
  const auto wcs = p.drain(p.a_cq);
  const std::vector<uint64_t> want{0, 1, 10, 11, 12, 13, 14, 15};
  ASSERT_EQ(wcs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(wcs[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wcs[i].wr_id, want[i]);
  }
}

// What an application on another thread may do the moment it polls a
// completion: post into the slot that completion freed. The armed CQ's
// notifier runs inside the data path's push, the earliest any poller can
// see the completion, and posts there.
TEST(WorkQueueRings, ACompletedSlotIsFreeBeforeItsCompletionIsSeen) {
  Pair p(4);
  struct Probe {
    QueuePair* qp;
    Sge sge;
    SendWr send_wr;
    RecvWr recv_wr;
    bool recv_side;
    int posted = 0, refused = 0;
  };
  Sge rsge{0, 64, p.b_mr->lkey()};
  RecvWr rwr;
  rwr.sg_list = std::span(&rsge, 1);
  for (uint64_t i = 0; i < 4; ++i) {
    rwr.wr_id = i;
    ASSERT_EQ(p.qb->post_recv(rwr), 0);
  }
  Probe recv_probe{p.qb, {}, {}, rwr, true};
  Probe send_probe{p.qa, {}, {}, {}, false};
  send_probe.send_wr = p.write(100, 0, 0, 8, send_probe.sge);
  auto repost = [](void* ctx, CompletionQueue& cq) {
    auto& pr = *static_cast<Probe*>(ctx);
    const int rc = pr.recv_side ? pr.qp->post_recv(pr.recv_wr) : pr.qp->post_send(pr.send_wr);
    (rc == 0 ? pr.posted : pr.refused) += 1;
    cq.arm(false);
  };
  p.b_cq->set_notifier(repost, &recv_probe);
  p.b_cq->arm(false);
  p.a_cq->set_notifier(repost, &send_probe);
  p.a_cq->arm(false);
  // Both rings full: four SENDs (signaled) fill the sender's, four
  // receives the receiver's.
  Sge ssge{0, 16, p.a_mr->lkey()};
  for (uint64_t i = 0; i < 4; ++i) {
    SendWr wr;
    wr.wr_id = i;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = std::span(&ssge, 1);
    ASSERT_EQ(p.qa->post_send(wr), 0);
  }
  p.net.run([&] { return recv_probe.posted + recv_probe.refused >= 4 &&
                         send_probe.posted + send_probe.refused >= 1; },
            p.net.now() + 50'000'000);
  // Expect: every repost at the instant of its completion found room.
  EXPECT_EQ(recv_probe.refused, 0);
  EXPECT_GE(recv_probe.posted, 4);
  EXPECT_EQ(send_probe.refused, 0);
  EXPECT_GE(send_probe.posted, 1);
  p.a_cq->set_notifier(nullptr, nullptr);
  p.b_cq->set_notifier(nullptr, nullptr);
}

TEST(WorkQueueRings, BadPostsAreRefusedWithTheVerbsCodeAndQueueNothing) {
  Pair p;
  Sge sge;
  SendWr bad_key = p.write(1, 0, 0, 8, sge);
  sge.lkey ^= 0x55;
  EXPECT_EQ(p.qa->post_send(bad_key), EINVAL);
  SendWr out_of_range = p.write(2, p.a_mem.size() - 4, 0, 8, sge);
  EXPECT_EQ(p.qa->post_send(out_of_range), EINVAL);
  std::array<Sge, kMaxSge + 1> many{};
  SendWr too_many = p.write(3, 0, 0, 8, sge);
  too_many.sg_list = many;
  EXPECT_EQ(p.qa->post_send(too_many), EINVAL);
  SendWr inline_too_long = p.write(4, 0, 0, 8, sge);
  inline_too_long.send_flags |= IBV_SEND_INLINE;  // max_inline_data is 0
  sge.addr = reinterpret_cast<uint64_t>(p.a_mem.data());
  EXPECT_EQ(p.qa->post_send(inline_too_long), EINVAL);
  SendWr bad_opcode = p.write(5, 0, 0, 8, sge);
  bad_opcode.opcode = static_cast<ibv_wr_opcode>(77);
  EXPECT_EQ(p.qa->post_send(bad_opcode), EINVAL);
  EXPECT_EQ(p.qa->send_queue_depth(), 0u);
  p.settle();
  EXPECT_TRUE(p.drain(p.a_cq).empty());
  EXPECT_EQ(p.qa->counters().tx_request_packets, 0u);
}

TEST(WorkQueueRings, InlineDataIsCopiedAtPost) {
  Device da, db;
  ProtectionDomain* pa = da.alloc_pd();
  ProtectionDomain* pb = db.alloc_pd();
  CompletionQueue* ca = da.create_cq(64);
  CompletionQueue* cb = db.create_cq(64);
  QpInitAttr init;
  init.pd = pa;
  init.send_cq = init.recv_cq = ca;
  init.caps.max_inline_data = 64;
  QueuePair* qa = da.create_qp(init);
  init.pd = pb;
  init.send_cq = init.recv_cq = cb;
  init.caps.max_inline_data = 0;
  QueuePair* qb = db.create_qp(init);
  std::vector<uint8_t> b_mem(4096, 0);
  MemoryRegion* b_mr = db.reg_mr(pb, b_mem.data(), b_mem.size(),
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0);
  ASSERT_TRUE(testing::connect(*qa, *qb, QpAttr{}, 1, 2));
  // Not registered: inline SGEs are plain addresses (ibv_post_send).
  std::array<uint8_t, 40> payload;
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i + 1);
  Sge sge{reinterpret_cast<uint64_t>(payload.data()), 40, 0};
  SendWr wr;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  wr.sg_list = std::span(&sge, 1);
  wr.remote_addr = 100;
  wr.rkey = b_mr->rkey();
  ASSERT_EQ(qa->post_send(wr), 0);
  // Expect: the caller may reuse its buffer as soon as post returns.
  const auto sent = payload;
  payload.fill(0xEE);
  Loopback net(da, db, 1, {});
  net.run([&] { return ca->size() == 1; }, 10'000'000);
  WorkCompletion wc;
  ASSERT_EQ(ca->poll(std::span(&wc, 1)), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(b_mem.data() + 100, sent.data(), sent.size()), 0);
  // Longer than max_inline_data: refused.
  Sge big{reinterpret_cast<uint64_t>(b_mem.data()), 65, 0};
  wr.sg_list = std::span(&big, 1);
  EXPECT_EQ(qa->post_send(wr), EINVAL);
}

TEST(WorkQueueRings, CqOverflowMovesTheQpToError) {
  Device da, db;
  ProtectionDomain* pa = da.alloc_pd();
  ProtectionDomain* pb = db.alloc_pd();
  CompletionQueue* ca = da.create_cq(2);  // smaller than the work
  CompletionQueue* cb = db.create_cq(64);
  QpInitAttr init;
  init.pd = pa;
  init.send_cq = init.recv_cq = ca;
  QueuePair* qa = da.create_qp(init);
  init.pd = pb;
  init.send_cq = init.recv_cq = cb;
  QueuePair* qb = db.create_qp(init);
  std::vector<uint8_t> mem(4096);
  MemoryRegion* amr = da.reg_mr(pa, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE, 0);
  std::vector<uint8_t> bmem(4096);
  MemoryRegion* bmr = db.reg_mr(pb, bmem.data(), bmem.size(),
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0);
  ASSERT_TRUE(testing::connect(*qa, *qb, QpAttr{}, 1, 2));
  Sge sge{0, 8, amr->lkey()};
  for (uint64_t i = 0; i < 4; ++i) {
    SendWr wr;
    wr.wr_id = i;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = std::span(&sge, 1);
    wr.rkey = bmr->rkey();
    ASSERT_EQ(qa->post_send(wr), 0);
  }
  Loopback net(da, db, 1, {});
  net.run([&] { return qa->state() == QpState::kErr; }, 50'000'000);
  // Expect: IBA 11.6.2 — the completion that did not fit is an error of
  // the CQ, and the QP feeding it goes to the error state.
  EXPECT_EQ(qa->state(), QpState::kErr);
  EXPECT_TRUE(ca->overflowed());
  EXPECT_EQ(ca->size(), 2u);
}

TEST(WorkQueueRings, DestroyFlushesOutstandingWorkAndFreesItsObjects) {
  Pair p(64);
  Sge sge;
  for (uint64_t i = 0; i < 20; ++i) {
    SendWr wr = p.write(i, 0, 0, 4096, sge);
    ASSERT_EQ(p.qa->post_send(wr), 0);
  }
  RecvWr r;
  r.wr_id = 77;
  Sge rs{0, 64, p.a_mr->lkey()};
  r.sg_list = std::span(&rs, 1);
  ASSERT_EQ(p.qa->post_recv(r), 0);
  // A few packets go, then it is destroyed with traffic in flight.
  p.net.run([&] { return p.qa->counters().tx_request_packets >= 3; }, 1'000'000);
  // Expect: its CQ and PD cannot go while it uses them.
  EXPECT_EQ(p.da.destroy_cq(p.a_cq), EBUSY);
  EXPECT_EQ(p.da.dealloc_pd(p.pa), EBUSY);
  const uint32_t qpn = p.qa->qpn();
  ASSERT_EQ(p.da.destroy_qp(p.qa), 0);
  auto wcs = p.drain(p.a_cq);
  size_t flushed = 0;
  bool recv_flushed = false;
  for (auto& wc : wcs) {
    if (wc.status == IBV_WC_WR_FLUSH_ERR) ++flushed;
    if (wc.wr_id == 77) recv_flushed = wc.status == IBV_WC_WR_FLUSH_ERR;
  }
  // Every WR is accounted for: completed before, or flushed now.
  EXPECT_EQ(wcs.size(), 21u);
  EXPECT_GE(flushed, 2u);
  EXPECT_TRUE(recv_flushed);
  EXPECT_EQ(p.da.find_qp(qpn), nullptr);
  ASSERT_EQ(p.da.dereg_mr(p.a_mr), 0);
  EXPECT_EQ(p.da.destroy_cq(p.a_cq), 0);
  EXPECT_EQ(p.da.dealloc_pd(p.pa), 0);
  // Frames still on the wire for it find no QP.
  p.settle();
}

TEST(WorkQueueRings, NothingIsWrittenAfterDeregistrationReturns) {
  Pair p(256);
  Sge sge;
  std::memset(p.a_mem.data(), 0xAB, 4096);
  // A stream of WRITEs aimed at B's region; B deregisters it midway.
  for (uint64_t i = 0; i < 200; ++i) {
    SendWr wr = p.write(i, 0, (i % 64) * 1024, 1024, sge);
    ASSERT_EQ(p.qa->post_send(wr), 0);
  }
  p.net.run([&] { return p.qb->counters().rx_request_packets >= 50; }, 100'000'000);
  ASSERT_EQ(p.db.dereg_mr(p.b_mr), 0);
  // The memory is the application's again: it clears it, and nothing the
  // peer still sends may land there.
  std::fill(p.b_mem.begin(), p.b_mem.end(), 0);
  p.settle();
  EXPECT_TRUE(std::all_of(p.b_mem.begin(), p.b_mem.end(), [](uint8_t b) { return b == 0; }));
  // The requester learns it by a NAK (remote access error, IBA 9.7.5.2.4).
  bool access_error = false;
  for (auto& wc : p.drain(p.a_cq)) access_error |= wc.status == IBV_WC_REM_ACCESS_ERR;
  EXPECT_TRUE(access_error);
}

// ---- shared receive queues

struct SrqSetup {
  Device dr, ds;  // receiver with the SRQ, sender with two QPs
  ProtectionDomain* pr = dr.alloc_pd();
  ProtectionDomain* ps = ds.alloc_pd();
  CompletionQueue* cr = dr.create_cq(256);
  CompletionQueue* cs = ds.create_cq(256);
  SharedReceiveQueue* srq = dr.create_srq(pr, 16);
  std::vector<uint8_t> rmem = std::vector<uint8_t>(1 << 16);
  std::vector<uint8_t> smem = std::vector<uint8_t>(1 << 16);
  MemoryRegion* rmr = dr.reg_mr(pr, rmem.data(), rmem.size(), IBV_ACCESS_LOCAL_WRITE, 0);
  MemoryRegion* smr = ds.reg_mr(ps, smem.data(), smem.size(), IBV_ACCESS_LOCAL_WRITE, 0);
  QueuePair* r[2] = {};
  QueuePair* s[2] = {};

  SrqSetup() {
    QpInitAttr init;
    init.pd = pr;
    init.send_cq = init.recv_cq = cr;
    init.srq = srq;
    for (auto& q : r) q = dr.create_qp(init);
    init.pd = ps;
    init.send_cq = init.recv_cq = cs;
    init.srq = nullptr;
    for (auto& q : s) q = ds.create_qp(init);
    QpAttr attr;
    attr.min_rnr_timer = 1;
    for (int i = 0; i < 2; ++i) {
      QpAttr ra = attr, sa = attr;
      ra.path = testing::test_path(1, 2, r[i]->qpn(), s[i]->qpn());
      ra.dest_qpn = s[i]->qpn();
      sa.path = testing::test_path(2, 1, s[i]->qpn(), r[i]->qpn());
      sa.dest_qpn = r[i]->qpn();
      for (QpState st : {QpState::kInit, QpState::kRtr, QpState::kRts}) {
        EXPECT_EQ(r[i]->modify(st, ra), 0);
        EXPECT_EQ(s[i]->modify(st, sa), 0);
      }
    }
  }
  int post_recv(uint64_t id) {
    Sge sge{id * 256, 256, rmr->lkey()};
    RecvWr wr;
    wr.wr_id = id;
    wr.sg_list = std::span(&sge, 1);
    return srq->post(wr);
  }
  int send(int i, uint64_t id, uint32_t len) {
    Sge sge{0, len, smr->lkey()};
    SendWr wr;
    wr.wr_id = id;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = std::span(&sge, 1);
    return s[i]->post_send(wr);
  }
};

TEST(WorkQueueSrq, QpsDrawFromOneQueueInPostingOrder) {
  SrqSetup t;
  for (uint64_t id = 0; id < 6; ++id) ASSERT_EQ(t.post_recv(id), 0);
  // Expect: a QP with an SRQ refuses receives of its own.
  RecvWr own;
  EXPECT_EQ(t.r[0]->post_recv(own), EINVAL);
  ASSERT_EQ(t.send(0, 100, 64), 0);
  ASSERT_EQ(t.send(1, 101, 64), 0);
  ASSERT_EQ(t.send(0, 102, 64), 0);
  Loopback net(t.ds, t.dr, 3, {});
  net.run([&] { return t.cr->size() == 3; }, 50'000'000);
  WorkCompletion wc[3];
  ASSERT_EQ(t.cr->poll(wc), 3);
  std::vector<uint64_t> ids;
  for (auto& c : wc) {
    EXPECT_EQ(c.status, IBV_WC_SUCCESS);
    EXPECT_EQ(c.byte_len, 64u);
    ids.push_back(c.wr_id);
  }
  // Whichever QP a message came to, it took the oldest WQE left.
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(t.srq->size(), 3u);
  EXPECT_EQ(t.dr.destroy_srq(t.srq), EBUSY);  // QPs are attached
}

TEST(WorkQueueSrq, LimitEventFiresOnceWhenBelowTheLimit) {
  SrqSetup t;
  int events = 0;
  t.srq->set_limit_notifier([](void* c, SharedReceiveQueue&) { ++*static_cast<int*>(c); },
                            &events);
  for (uint64_t id = 0; id < 5; ++id) ASSERT_EQ(t.post_recv(id), 0);
  EXPECT_EQ(t.srq->arm_limit(17), EINVAL);  // beyond its depth
  ASSERT_EQ(t.srq->arm_limit(3), 0);
  Loopback net(t.ds, t.dr, 3, {});
  ASSERT_EQ(t.send(0, 1, 8), 0);
  ASSERT_EQ(t.send(0, 2, 8), 0);
  net.run([&] { return t.cr->size() == 2; }, 50'000'000);
  // 5 -> 3 left: not below 3 yet.
  EXPECT_EQ(events, 0);
  ASSERT_EQ(t.send(1, 3, 8), 0);
  ASSERT_EQ(t.send(1, 4, 8), 0);
  net.run([&] { return t.cr->size() == 4; }, 50'000'000);
  // Expect: IBA 11.2.3.3 — one event when 2 were left, then disarmed.
  EXPECT_EQ(events, 1);
  EXPECT_EQ(t.srq->limit(), 0u);
}

TEST(WorkQueueSrq, EmptySrqAnswersRnrUntilAReceiveIsPosted) {
  SrqSetup t;
  ASSERT_EQ(t.send(0, 1, 8), 0);
  Loopback net(t.ds, t.dr, 3, {});
  net.run([&] { return t.s[0]->counters().rnr_naks_received > 0; }, 50'000'000);
  EXPECT_GT(t.r[0]->counters().rnr_naks_sent, 0u);
  ASSERT_EQ(t.post_recv(9), 0);
  net.run([&] { return t.cr->size() == 1; }, 100'000'000);
  WorkCompletion wc;
  ASSERT_EQ(t.cr->poll(std::span(&wc, 1)), 1);
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

// ---- several threads

TEST(WorkQueueThreads, PostersOnSeveralThreadsAndOneDataPath) {
  // Four QPs; a poster thread each, plus two threads sharing the fifth QP
  // (serialised by a lock of the caller's, as the engine's QP lock does);
  // one data-path thread steps both devices. Every WRITE lands byte-exact
  // and every completion comes back once, in posting order per QP.
  constexpr int kQps = 5;
  constexpr uint64_t kPerThread = 3000;
  Device da, db;
  ProtectionDomain* pa = da.alloc_pd();
  ProtectionDomain* pb = db.alloc_pd();
  std::vector<uint8_t> amem(1 << 16), bmem(kQps * 2 * 64 * 1024);
  for (size_t i = 0; i < amem.size(); ++i) amem[i] = static_cast<uint8_t>(i * 7);
  MemoryRegion* amr = da.reg_mr(pa, amem.data(), amem.size(), IBV_ACCESS_LOCAL_WRITE, 0);
  MemoryRegion* bmr = db.reg_mr(pb, bmem.data(), bmem.size(),
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0);
  std::vector<CompletionQueue*> cqs;
  std::vector<QueuePair*> qa, qb;
  CompletionQueue* bcq = db.create_cq(64);
  for (int i = 0; i < kQps; ++i) {
    QpInitAttr init;
    init.caps.max_send_wr = 64;
    init.pd = pa;
    // A completed WR's slot is free again before its completion is polled,
    // so a CQ that only the main thread drains must hold every completion
    // the shared QP's two posters can produce while that thread is not
    // scheduled.
    cqs.push_back(da.create_cq(i == kQps - 1 ? 2 * kPerThread : 4096));
    init.send_cq = init.recv_cq = cqs.back();
    qa.push_back(da.create_qp(init));
    init.pd = pb;
    init.send_cq = init.recv_cq = bcq;
    qb.push_back(db.create_qp(init));
    QpAttr attr;
    attr.ack_every_n = 4;
    ASSERT_TRUE(testing::connect(*qa[i], *qb[i], attr, 5, 6));
  }
  std::atomic<uint64_t> completed{0};
  const uint64_t total = kPerThread * (kQps + 1);
  std::atomic<bool> failed{false};
  std::mutex shared_qp_lock;
  auto poster = [&](int q, uint64_t first_id, std::mutex* lock) {
    std::vector<uint64_t> seen;
    uint64_t next = first_id;
    const uint64_t end = first_id + kPerThread;
    WorkCompletion out[32];
    while (next < end && !failed) {
      const uint32_t len = 1 + static_cast<uint32_t>(next % 1500);
      Sge sge{next % 4096, len, amr->lkey()};
      SendWr wr;
      wr.wr_id = next;
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.sg_list = std::span(&sge, 1);
      wr.remote_addr = static_cast<uint64_t>(q) * 128 * 1024 + (first_id ? 64 * 1024 : 0);
      wr.rkey = bmr->rkey();
      int rc;
      if (lock) {
        std::lock_guard g(*lock);
        rc = qa[q]->post_send(wr);
      } else {
        rc = qa[q]->post_send(wr);
      }
      if (rc == 0) ++next;
      else if (rc != ENOMEM) failed = true;
      if (!lock) {
        const int n = cqs[q]->poll(out);
        for (int i = 0; i < n; ++i) {
          if (out[i].status != IBV_WC_SUCCESS) failed = true;
          seen.push_back(out[i].wr_id);
        }
        completed += static_cast<uint64_t>(n);
      }
      if (rc == ENOMEM) std::this_thread::yield();
    }
    if (!lock) {
      while (seen.size() < kPerThread && !failed) {
        const int n = cqs[q]->poll(out);
        for (int i = 0; i < n; ++i) seen.push_back(out[i].wr_id);
        completed += static_cast<uint64_t>(n);
        std::this_thread::yield();
      }
      for (uint64_t i = 0; i < seen.size(); ++i)
        if (seen[i] != first_id + i) failed = true;
    }
  };
  std::atomic<bool> stop{false};
  std::thread data_path([&] {
    Loopback net(da, db, 11, {});
    while (!stop) net.run([&] { return stop.load(); }, net.now() + 1'000'000);
  });
  std::vector<std::thread> threads;
  for (int q = 0; q < kQps - 1; ++q) threads.emplace_back(poster, q, 0, nullptr);
  // The shared QP: two posters, completions polled here.
  const int sq = kQps - 1;
  threads.emplace_back(poster, sq, 1'000'000, &shared_qp_lock);
  threads.emplace_back(poster, sq, 2'000'000, &shared_qp_lock);
  std::vector<uint64_t> shared_seen;
  WorkCompletion out[32];
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (shared_seen.size() < 2 * kPerThread && !failed) {
    if (std::chrono::steady_clock::now() > give_up) {
      ADD_FAILURE() << "no progress: " << shared_seen.size() << " of the shared QP's completions";
      failed = true;
    }
    const int n = cqs[sq]->poll(out);
    for (int i = 0; i < n; ++i) {
      if (out[i].status != IBV_WC_SUCCESS) failed = true;
      shared_seen.push_back(out[i].wr_id);
    }
    std::this_thread::yield();
  }
  for (auto& t : threads) t.join();
  stop = true;
  data_path.join();
  if (failed)
    for (int q = 0; q < kQps; ++q)
      ADD_FAILURE() << qa[q]->debug_state() << "\n" << qb[q]->debug_state();
  EXPECT_FALSE(failed);
  // Each of the two posters' WRs completed once, in that poster's order.
  std::vector<uint64_t> a, b;
  for (uint64_t id : shared_seen) (id < 2'000'000 ? a : b).push_back(id);
  ASSERT_EQ(a.size(), kPerThread);
  ASSERT_EQ(b.size(), kPerThread);
  for (uint64_t i = 0; i < kPerThread; ++i) {
    EXPECT_EQ(a[i], 1'000'000 + i);
    EXPECT_EQ(b[i], 2'000'000 + i);
  }
  EXPECT_EQ(completed.load() + 2 * kPerThread, total);
  // The last WRITE of each poster is in place, byte-exact.
  for (int q = 0; q < kQps - 1; ++q) {
    const uint64_t id = kPerThread - 1;
    const uint32_t len = 1 + static_cast<uint32_t>(id % 1500);
    EXPECT_EQ(std::memcmp(bmem.data() + q * 128 * 1024, amem.data() + id % 4096, len), 0) << q;
  }
}

// ---- the doorbell

// The data path's discipline (Endpoint::take_doorbells, park): a drained
// node is held for a while, during which rings queue nothing, then re-armed
// and the work looked at once more.
TEST(WorkQueueDoorbell, EveryRingIsSeenAndNoNodeIsQueuedTwice) {
  constexpr int kNodes = 64, kThreads = 3, kRings = 20000;
  std::vector<endpoint::DoorbellNode> nodes(kNodes);
  for (int i = 0; i < kNodes; ++i) nodes[i].qpn = static_cast<uint32_t>(i);
  endpoint::DoorbellQueue q;
  // posted[i]: work published for node i (before its ring); taken[i]: work
  // the consumer saw when it last looked at node i. The contract: after the
  // last drain and re-arming, the consumer has seen every piece of work.
  std::vector<std::atomic<uint64_t>> posted(kNodes);
  std::vector<uint64_t> taken(kNodes, 0);
  std::vector<int> held;  // drained, not re-armed: each at most once
  std::vector<int> times_held(kNodes, 0);
  std::atomic<int> running{kThreads};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      uint32_t x = 12345u + static_cast<uint32_t>(t);
      for (int k = 0; k < kRings; ++k) {
        x = x * 1664525u + 1013904223u;
        const int i = static_cast<int>((x >> 8) % kNodes);
        posted[i].fetch_add(1, std::memory_order_release);
        q.ring(nodes[i]);
      }
      --running;
    });
  uint64_t deliveries = 0;
  bool queued_twice = false;
  auto take = [&](bool release_all) {
    deliveries += q.drain([&](endpoint::DoorbellNode& n) {
      const int i = static_cast<int>(n.qpn);
      queued_twice |= times_held[i]++ > 0;  // a held node came out again
      taken[i] = posted[i].load(std::memory_order_acquire);
      held.push_back(i);
    });
    // Release the older half (all at the end), as QPs run out of work.
    const size_t keep = release_all ? 0 : held.size() / 2;
    for (size_t k = 0; k + keep < held.size(); ++k) {
      const int i = held[k];
      --times_held[i];
      endpoint::DoorbellQueue::rearm(nodes[i]);
      taken[i] = posted[i].load(std::memory_order_acquire);
    }
    held.erase(held.begin(), held.end() - static_cast<std::ptrdiff_t>(keep));
  };
  while (running > 0) take(false);
  for (auto& t : ts) t.join();
  take(true);
  take(true);  // what rang between the last drain and its re-arming
  EXPECT_FALSE(queued_twice);
  for (int i = 0; i < kNodes; ++i) EXPECT_EQ(taken[i], posted[i].load()) << i;
  EXPECT_LE(deliveries, uint64_t{kThreads} * kRings);
  EXPECT_FALSE(q.maybe_pending());
}

}  // namespace
}  // namespace droce::transport
