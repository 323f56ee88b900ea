// Two endpoints joined by an in-memory wire with a fixed propagation delay,
// stepped in virtual time: dispatch by QPN, pacing by CC rate and by the
// port's link rate, round robin between QPs, and accounting of bad input.
#include "droce/endpoint/endpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <optional>

#include "droce/cc/registry.h"
#include "droce/wire/build.h"
#include "droce/wire/bytes.h"
#include "droce/wire/checksum.h"
#include "droce/wire/int.h"
#include "droce/wire/pfc.h"

namespace droce::endpoint {
namespace {

using transport::QpAttr;
using transport::QpState;

constexpr uint64_t kDelayNs = 1000;

struct Host {
  transport::Device device;
  std::unique_ptr<Endpoint> ep;
  transport::ProtectionDomain* pd = nullptr;
  transport::CompletionQueue* cq = nullptr;
  std::vector<uint8_t> memory;
  transport::MemoryRegion* mr = nullptr;

  Host(const EndpointConfig& cfg, size_t bytes) : memory(bytes) {
    ep = std::make_unique<Endpoint>(device, cfg);
    pd = device.alloc_pd();
    cq = device.create_cq(4096);
    mr = device.reg_mr(pd, memory.data(), memory.size(),
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  }
  transport::QueuePair* make_qp() {
    transport::QpInitAttr init;
    init.pd = pd;
    init.send_cq = init.recv_cq = cq;
    init.caps.max_send_wr = 1024;
    return device.create_qp(init);
  }
};

wire::PathSpec path_between(int from, int to) {
  wire::PathSpec p;
  p.src_mac = {2, 0, 0, 0, 0, static_cast<uint8_t>(from)};
  p.dst_mac = {2, 0, 0, 0, 0, static_cast<uint8_t>(to)};
  p.src_ip = wire::IpAddress::v4(0x0A000000u + static_cast<uint32_t>(from));
  p.dst_ip = wire::IpAddress::v4(0x0A000000u + static_cast<uint32_t>(to));
  return p;
}

void connect(transport::QueuePair& a, int a_id, transport::QueuePair& b, int b_id) {
  for (auto [qp, peer, me, them] : {std::tuple{&a, &b, a_id, b_id}, std::tuple{&b, &a, b_id, a_id}}) {
    QpAttr attr;
    attr.path = path_between(me, them);
    attr.path.udp_src_port = wire::udp_src_port_entropy(qp->qpn(), peer->qpn());
    attr.dest_qpn = peer->qpn();
    attr.path_mtu = IBV_MTU_4096;
    ASSERT_EQ(qp->modify(QpState::kInit, attr), 0);
    ASSERT_EQ(qp->modify(QpState::kRtr, attr), 0);
    ASSERT_EQ(qp->modify(QpState::kRts, attr), 0);
  }
}

// Steps both hosts in virtual time until nothing is left to do or
// `limit_ns` is reached; frames arrive kDelayNs after they are sent.
struct Harness {
  Host* hosts[2] = {nullptr, nullptr};
  std::multimap<uint64_t, std::pair<int, std::vector<uint8_t>>> in_flight;
  uint64_t now = 0;
  // Called on every frame as it leaves host `from` (a switch's work).
  std::function<void(int from, std::vector<uint8_t>& frame)> on_wire;

  void run(uint64_t limit_ns) {
    std::vector<std::vector<uint8_t>> storage(32, std::vector<uint8_t>(4200));
    std::vector<std::span<uint8_t>> bufs(storage.begin(), storage.end());
    std::vector<uint32_t> lens(bufs.size());
    while (now <= limit_ns) {
      while (!in_flight.empty() && in_flight.begin()->first <= now) {
        auto node = in_flight.extract(in_flight.begin());
        hosts[node.mapped().first]->ep->receive(node.mapped().second, now);
      }
      for (int h = 0; h < 2; ++h) {
        const size_t n = hosts[h]->ep->transmit(now, bufs, lens);
        for (size_t i = 0; i < n; ++i) {
          std::vector<uint8_t> frame(bufs[i].begin(), bufs[i].begin() + lens[i]);
          if (on_wire) on_wire(h, frame);
          in_flight.emplace(now + kDelayNs, std::pair{1 - h, std::move(frame)});
        }
      }
      uint64_t next = UINT64_MAX;
      if (!in_flight.empty()) next = in_flight.begin()->first;
      for (Host* h : hosts) next = std::min(next, h->ep->next_deadline());
      // Never step past the limit: the caller polls completions between
      // runs, and a stale timer far ahead must not hide when they arrived.
      if (next > limit_ns) {
        now = limit_ns;
        return;
      }
      now = std::max(now + 1, next);
    }
  }
};

std::unique_ptr<cc::Algorithm> fixed_rate(uint64_t bytes_per_sec) {
  return cc::make_algorithm("none", {}, bytes_per_sec);
}

// Posts an RDMA WRITE of `bytes` bytes from `offset` in a's memory to the
// same offset in b's (the SGE is copied into the send queue).
int post_write(Host& a, transport::QueuePair& qa, Host& b, size_t offset, size_t bytes,
               uint64_t wr_id = 0, unsigned send_flags = 0) {
  transport::Sge sge{reinterpret_cast<uint64_t>(a.memory.data() + offset),
                     static_cast<uint32_t>(bytes), a.mr->lkey()};
  transport::SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = send_flags;
  wr.sg_list = {&sge, 1};
  wr.remote_addr = reinterpret_cast<uint64_t>(b.memory.data() + offset);
  wr.rkey = b.mr->rkey();
  return a.ep->post_send(qa, wr);
}

uint64_t write_and_measure(uint64_t port_rate, uint64_t cc_rate, size_t bytes) {
  EndpointConfig cfg;
  cfg.port_rate_bytes_per_sec = port_rate;
  Host a(cfg, bytes), b(cfg, bytes);
  auto* qa = a.make_qp();
  auto* qb = b.make_qp();
  connect(*qa, 1, *qb, 2);
  a.ep->attach(*qa, fixed_rate(cc_rate));
  b.ep->attach(*qb, fixed_rate(cc_rate));
  std::iota(a.memory.begin(), a.memory.end(), 0);
  EXPECT_EQ(post_write(a, *qa, b, 0, bytes, 7, IBV_SEND_SIGNALED), 0);
  Harness h;
  h.hosts[0] = &a;
  h.hosts[1] = &b;
  uint64_t done_at = 0;
  while (done_at == 0 && h.now < 1'000'000'000) {
    h.run(h.now + 1'000);
    transport::WorkCompletion wc;
    if (a.cq->poll({&wc, 1}) == 1) {
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
      EXPECT_EQ(wc.wr_id, 7u);
      done_at = h.now;
    }
  }
  EXPECT_NE(done_at, 0u) << "transfer did not complete";
  // Expect: a clean link needs no retransmission.
  EXPECT_EQ(qa->counters().tx_retransmit_packets, 0u);
  EXPECT_EQ(a.memory, b.memory);
  EXPECT_EQ(a.ep->counters().rx_malformed + b.ep->counters().rx_malformed, 0u);
  return done_at;
}

TEST(Endpoint, WriteCompletesByteExactAtPortRate) {
  // 1 MiB over a 10 Gb/s port: 256 frames of 4 KiB payload + headers. The
  // transfer can not finish before the link serialises those bytes, and
  // should finish within a few RTTs after that.
  const size_t bytes = 1 << 20;
  const uint64_t rate = 10'000'000'000ull / 8;
  const uint64_t t = write_and_measure(rate, rate, bytes);
  const uint64_t serialise_ns = bytes * 1'000'000'000ull / rate;
  EXPECT_GE(t, serialise_ns);
  EXPECT_LE(t, serialise_ns * 11 / 10 + 10 * kDelayNs);
}

TEST(Endpoint, CcRateBelowPortRatePacesTheQp) {
  // Expect: a QP whose CC allows 1 Gb/s on a 100 Gb/s port takes ~8.4 ms.
  const size_t bytes = 1 << 20;
  const uint64_t cc_rate = 1'000'000'000ull / 8;
  const uint64_t t = write_and_measure(100'000'000'000ull / 8, cc_rate, bytes);
  const uint64_t paced_ns = bytes * 1'000'000'000ull / cc_rate;
  EXPECT_GE(t, paced_ns * 95 / 100);
  EXPECT_LE(t, paced_ns * 11 / 10);
}

std::vector<uint8_t> pfc_frame(uint8_t priority, uint16_t quanta);  // below

// A real-time poll loop at a 100 Gb/s port: the test moves its clock and
// calls step(now) as the loop would; a's frames reach b at once, b's ACKs
// come back at once. a's QP writes 4 KiB frames (path MTU 4096).
struct PolledLink {
  static constexpr uint64_t kRate = 100'000'000'000ull / 8;
  static constexpr size_t kBytes = 1 << 20;
  static constexpr uint64_t kFrameWireNs = (4096 + 58 + 24) * 1'000'000'000ull / kRate;
  EndpointConfig cfg;
  Host a, b;
  transport::QueuePair* qa;
  transport::QueuePair* qb;
  std::vector<std::vector<uint8_t>> storage{64, std::vector<uint8_t>(4200)};
  std::vector<std::span<uint8_t>> bufs{storage.begin(), storage.end()};
  std::vector<uint32_t> lens = std::vector<uint32_t>(64);
  size_t sent = 0;  // a's data frames so far

  static EndpointConfig config(uint64_t run_ahead_ns, uint64_t catch_up_ns) {
    EndpointConfig c;
    c.port_rate_bytes_per_sec = kRate;
    c.tx_run_ahead_ns = run_ahead_ns;
    c.tx_catch_up_ns = catch_up_ns;
    return c;
  }
  PolledLink(uint64_t run_ahead_ns, uint64_t catch_up_ns)
      : cfg(config(run_ahead_ns, catch_up_ns)), a(cfg, kBytes), b(cfg, kBytes) {
    qa = a.make_qp();
    qb = b.make_qp();
    connect(*qa, 1, *qb, 2);
    a.ep->attach(*qa, fixed_rate(kRate));
    b.ep->attach(*qb, fixed_rate(kRate));
  }
  void write(size_t bytes) { EXPECT_EQ(post_write(a, *qa, b, 0, bytes), 0); }
  // One loop iteration at `now`: the frames a sent.
  size_t step(uint64_t now) {
    const size_t n = a.ep->transmit(now, bufs, lens);
    for (size_t i = 0; i < n; ++i) b.ep->receive({bufs[i].data(), lens[i]}, now);
    const size_t acks = b.ep->transmit(now, bufs, lens);
    for (size_t i = 0; i < acks; ++i) a.ep->receive({bufs[i].data(), lens[i]}, now);
    sent += n;
    return n;
  }
};

// A loop whose clock moves in 1 us steps sends a 1 MiB WRITE; every
// `stall_every` us it is descheduled for `stall_us` (0: never). Returns the
// most frames one call produced and the clock reading at which the last
// frame left. Checks at every step that the port never ran ahead of the
// link rate by more than the run-ahead (and one frame).
std::pair<size_t, uint64_t> coarse_clock_send(uint64_t run_ahead_ns, uint64_t catch_up_ns = 0,
                                              uint64_t stall_every = 0, uint64_t stall_us = 0) {
  PolledLink l(run_ahead_ns, catch_up_ns);
  l.write(PolledLink::kBytes);
  size_t most = 0;
  uint64_t last = 0;
  const size_t frames = PolledLink::kBytes / 4096;
  for (uint64_t us = 1; l.sent < frames && us < 10'000; ++us) {
    if (stall_every && us % stall_every == 0) us += stall_us;
    const uint64_t now = us * 1000;
    const size_t n = l.step(now);
    most = std::max(most, n);
    if (n) last = now;
    EXPECT_LE((l.sent - 1) * PolledLink::kFrameWireNs, now - 1000 + run_ahead_ns) << now;
  }
  EXPECT_EQ(l.sent, frames);
  return {most, last};
}

TEST(Endpoint, RunAheadLetsOneClockReadingSendABurstAtTheLinkRate) {
  // Booked exactly, a loop whose clock moves in 1 us steps sends one frame
  // per step: 256 frames take 256 us where the link needs 85 us.
  const auto [most_exact, last_exact] = coarse_clock_send(0);
  EXPECT_EQ(most_exact, 1u);
  EXPECT_GE(last_exact, 256'000u);
  // With 2 us of run-ahead, each step sends what the link carries in it
  // (about 3 frames of 4 KiB at 100 G; one burst of 2 us extra at the
  // start), and the WRITE leaves at the link rate, not faster.
  const auto [most, last] = coarse_clock_send(2000);
  EXPECT_GE(most, 3u);
  EXPECT_LE(most, 10u);
  const uint64_t wire_ns = 256 * PolledLink::kFrameWireNs;
  EXPECT_GE(last + 2000 + 1000, wire_ns);
  EXPECT_LE(last, wire_ns + 2000);
}

TEST(Endpoint, CatchUpMakesUpLinkTimeALateLoopLost) {
  // Every 10 us the loop is descheduled for 20 us. Without catch-up the
  // link idles through each stall: the WRITE takes about three times the
  // wire time. With it, the port and the QP's pacer book from where the
  // link could have been, so the WRITE leaves about when the link rate
  // says (the check in coarse_clock_send holds: never ahead of the rate).
  const uint64_t wire_ns = 256 * PolledLink::kFrameWireNs;
  const auto [most_lost, last_lost] = coarse_clock_send(2000, 0, 10, 20);
  EXPECT_GE(last_lost, 2 * wire_ns);
  EXPECT_LE(most_lost, 10u);
  const auto [most, last] = coarse_clock_send(2000, 100'000, 10, 20);
  EXPECT_LE(last, wire_ns + 20'000 + 2000);  // at most one stall late
  EXPECT_GE(most, 50u);                      // a stall's worth in one call
  EXPECT_LE(most, 64u);
}

TEST(Endpoint, CatchUpDoesNotMakeUpIdleTimeOrPauses) {
  PolledLink l(2000, 100'000);
  // 64 KiB, then 500 us of nothing to send, then 1 MiB: the first call
  // after the idle gap sends a run-ahead's worth (<= 7 frames), no burst.
  l.write(64 << 10);
  uint64_t us = 1;
  for (; l.sent < 16 && us < 1000; ++us) l.step(us * 1000);
  ASSERT_EQ(l.sent, 16u);
  us += 500;
  l.write(PolledLink::kBytes);
  EXPECT_LE(l.step(us * 1000), 7u);
  // Backlogged, the QP's priority (untagged: DSCP >> 3) is paused for
  // 5120 ns (1000 quanta at 100 G); after it, again no burst.
  for (int i = 0; i < 5; ++i) l.step(++us * 1000);
  const auto prio = static_cast<uint8_t>(l.qa->attr().path.dscp >> 3);
  l.a.ep->receive(pfc_frame(prio, 1000), ++us * 1000);
  const uint64_t resume = us * 1000 + 5120;
  for (; us * 1000 < resume; ++us) EXPECT_EQ(l.step(us * 1000), 0u);
  EXPECT_LE(l.step(us * 1000), 7u);
}

TEST(Endpoint, BadInputIsCountedAndDropped) {
  EndpointConfig cfg;
  Host a(cfg, 4096);
  auto* qa = a.make_qp();
  a.ep->attach(*qa, fixed_rate(1'000'000'000));
  wire::TransportSpec t;
  t.opcode = IBV_OPCODE_RC_SEND_ONLY;
  t.dest_qp = qa->qpn();
  std::vector<uint8_t> frame(256);
  const size_t n = wire::build_packet(path_between(2, 1), t, {}, frame);
  frame.resize(n);

  auto bad_icrc = frame;
  bad_icrc[n - 1] ^= 1;
  a.ep->receive(bad_icrc, 0);
  auto unknown = frame;
  t.dest_qp = 0x777;
  wire::build_packet(path_between(2, 1), t, {}, unknown);
  a.ep->receive(unknown, 0);
  std::vector<uint8_t> arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  a.ep->receive(arp, 0);
  a.ep->receive({frame.data(), 20}, 0);

  const auto& c = a.ep->counters();
  EXPECT_EQ(c.rx_frames, 4u);
  EXPECT_EQ(c.rx_parse_errors[static_cast<size_t>(wire::ParseError::kBadIcrc)], 1u);
  EXPECT_EQ(c.rx_parse_errors[static_cast<size_t>(wire::ParseError::kTruncatedIp)], 1u);
  EXPECT_EQ(c.rx_malformed, 2u);
  EXPECT_EQ(c.rx_unknown_qpn, 1u);
  EXPECT_EQ(c.rx_not_roce, 1u);
  EXPECT_EQ(c.rx_delivered, 0u);
}

std::vector<uint8_t> pfc_frame(uint8_t priority, uint16_t quanta) {
  wire::PfcFrame f;
  f.enable = static_cast<uint8_t>(1u << priority);
  f.quanta[priority] = quanta;
  std::vector<uint8_t> out(wire::kPfcFrameSize);
  out.resize(wire::build_pfc(f, out));
  return out;
}

// Every frame received is counted once among the fates
// rx_frames_accounted() sums, and every packet handed to a QP once among
// those rx_packets_accounted() sums, whether the frames come one at a time
// or in a burst: a valid WRITE, one with a bad ICRC, a truncated one, an
// unknown QPN, ARP, ICMP, PFC, 802.3x PAUSE, a broken INT header, the
// wrong source address, another partition, a UC opcode on RC, a CNP, an
// ACK for nothing sent, a request with a bad R_Key (a fatal NAK) and the
// requests after it, an unsupported opcode.
std::vector<std::vector<uint8_t>> frames_of_every_fate(uint32_t qpn, uint64_t va, uint32_t rkey) {
  std::vector<std::vector<uint8_t>> out;
  auto make = [&](uint8_t opcode, uint32_t psn, const wire::PathSpec& path, uint16_t pkey = 0xFFFF,
                  std::optional<uint32_t> key = std::nullopt, uint32_t len = 0,
                  uint32_t dest_qp = 0) {
    wire::TransportSpec t;
    t.opcode = opcode;
    t.dest_qp = dest_qp ? dest_qp : qpn;
    t.psn = psn;
    t.pkey = pkey;
    t.reth_va = va;
    t.reth_rkey = key.value_or(rkey);
    t.reth_dma_length = len;
    std::vector<uint8_t> payload(len, 0x5A);
    std::vector<uint8_t> f(len + 256);
    f.resize(wire::build_packet(path, t, payload, f));
    return f;
  };
  constexpr std::nullopt_t own_key = std::nullopt;  // the region's rkey
  const wire::PathSpec peer = path_between(2, 1), stranger = path_between(3, 1);
  out.push_back(make(IBV_OPCODE_RC_RDMA_WRITE_ONLY, 0, peer, 0xFFFF, own_key, 64));  // taken
  out.push_back(make(IBV_OPCODE_RC_RDMA_WRITE_ONLY, 1, peer, 0xFFFF, own_key, 64));  // taken
  auto bad_icrc = make(IBV_OPCODE_RC_RDMA_WRITE_ONLY, 2, peer, 0xFFFF, own_key, 64);
  bad_icrc.back() ^= 1;
  out.push_back(bad_icrc);
  out.push_back({bad_icrc.begin(), bad_icrc.begin() + 30});                     // truncated
  // No such QP.
  out.push_back(make(IBV_OPCODE_RC_SEND_ONLY, 2, peer, 0xFFFF, own_key, 0, qpn + 0x100));
  std::vector<uint8_t> arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  out.push_back(arp);
  auto icmp = make(IBV_OPCODE_RC_SEND_ONLY, 2, peer);
  icmp[14 + 9] = 1;  // IPv4 protocol ICMP, the header checksum fixed
  icmp[14 + 10] = icmp[14 + 11] = 0;
  wire::store_be16(icmp.data() + 14 + 10,
                   wire::checksum_fold(wire::checksum_add(0, icmp.data() + 14, 20)));
  out.push_back(icmp);
  out.push_back(pfc_frame(3, 10));
  std::vector<uint8_t> pause(60, 0);
  pause[0] = 0x01, pause[1] = 0x80, pause[2] = 0xC2, pause[5] = 0x01;
  pause[12] = 0x88, pause[13] = 0x08, pause[15] = 0x01;  // 802.3x PAUSE
  out.push_back(pause);
  auto int_bad = make(IBV_OPCODE_RC_SEND_ONLY, 2, peer);
  wire::store_be16(int_bad.data() + 14 + 20 + 2, wire::kIntUdpPort);  // no INT shim in it
  out.push_back(int_bad);
  out.push_back(make(IBV_OPCODE_RC_SEND_ONLY, 2, stranger));                   // bad address
  out.push_back(make(IBV_OPCODE_RC_SEND_ONLY, 2, peer, 0x8001));               // bad P_Key
  out.push_back(make(IBV_OPCODE_UC_SEND_ONLY, 2, peer));                       // wrong transport
  out.push_back(make(wire::kOpCnp, 0, peer));                                  // CNP
  out.push_back(make(IBV_OPCODE_ACKNOWLEDGE, 5, peer));                        // response
  // Fatal. The key may come out 0 (rkey 0xFF): still not the region's.
  out.push_back(make(IBV_OPCODE_RC_RDMA_WRITE_ONLY, 2, peer, 0xFFFF, rkey ^ 0xFF, 64));
  out.push_back(make(IBV_OPCODE_RC_RDMA_WRITE_ONLY, 3, peer, 0xFFFF, own_key, 64));  // after it
  out.push_back(make(IBV_OPCODE_RC_RDMA_READ_REQUEST, 4, peer, 0xFFFF, own_key, 0));  // after it
  auto rd = make(IBV_OPCODE_RC_SEND_ONLY, 2, peer);
  rd[14 + 20 + 8] = 0x40;  // an RD opcode: unsupported (ICRC now wrong too)
  out.push_back(rd);
  return out;
}

void expect_every_frame_accounted(bool burst) {
  EndpointConfig cfg;
  Host a(cfg, 4096), b(cfg, 64);
  auto* qa = a.make_qp();
  auto* qb = b.make_qp();
  connect(*qa, 1, *qb, 2);
  a.ep->attach(*qa, fixed_rate(1'000'000'000));
  const auto frames = frames_of_every_fate(qa->qpn(), reinterpret_cast<uint64_t>(a.memory.data()),
                                           a.mr->rkey());
  if (burst) {
    std::vector<std::span<const uint8_t>> views(frames.begin(), frames.end());
    a.ep->receive_burst(views, 0);
  } else {
    for (const auto& f : frames) a.ep->receive(f, 0);
  }
  const EndpointCounters& c = a.ep->counters();
  const transport::QpCounters& q = qa->counters();
  EXPECT_EQ(c.rx_frames, frames.size());
  EXPECT_EQ(rx_frames_accounted(c), c.rx_frames);
  EXPECT_EQ(transport::rx_packets_accounted(q), c.rx_delivered);
  // Expect: each fate was reached (the list above is what it says).
  EXPECT_EQ(c.rx_malformed, 3u);  // bad ICRC, truncated, RD opcode
  EXPECT_EQ(c.rx_unknown_qpn, 1u);
  // ARP and ICMP: the IP interface's, or another protocol's without one.
  EXPECT_EQ(rx_frames_accounted(c) - c.rx_delivered - c.rx_malformed - c.rx_unknown_qpn -
                c.rx_mac_control_other - c.rx_pfc_frames - c.rx_int_bad,
            2u);
  EXPECT_EQ(c.rx_mac_control_other, 1u);
  EXPECT_EQ(c.rx_pfc_frames, 1u);
  EXPECT_EQ(c.rx_int_bad, 1u);
  EXPECT_EQ(c.rx_delivered, 10u);
  EXPECT_EQ(q.rx_request_packets, 3u);  // two WRITEs and the one with the bad R_Key
  EXPECT_EQ(q.rx_dropped_bad_state, 2u);  // the two requests after the fatal one
  EXPECT_EQ(q.rx_dropped_bad_address, 1u);
  EXPECT_EQ(q.rx_dropped_bad_pkey, 1u);
  EXPECT_EQ(q.rx_dropped_wrong_transport, 1u);
  EXPECT_EQ(q.cnps_received, 1u);
  EXPECT_EQ(q.rx_response_packets, 1u);
}

TEST(Endpoint, EveryFrameIsCountedOnceByItsFate) { expect_every_frame_accounted(false); }
TEST(Endpoint, EveryFrameOfABurstIsCountedOnceByItsFate) { expect_every_frame_accounted(true); }

// One responder fed the same frames either one receive() at a time or in
// a single receive_burst(): every counter, the placed bytes and the frames
// it answers with must be the same (the burst path only reorders work
// inside the burst, never its effects).
// Payloads of 64 B (bursts of 32 frames) and 4 KiB (groups bounded by
// kRxBatchBytes). With `many_qps`, the responder has hundreds of other QPs
// attached, over several pages of its QPN table, and the unknown QPN is
// one just detached (its page is there, its item not), not one no page
// covers.
void expect_burst_matches_frame_by_frame(uint32_t payload_len, bool many_qps) {
  struct Side {
    uint32_t payload_len;
    EndpointConfig cfg;
    Host resp{cfg, 512 * 4096};
    Host peer{cfg, 64};
    transport::QueuePair* qp = nullptr;
    uint32_t unknown_qpn = 0x777;
    Side(uint32_t p, bool many_qps) : payload_len(p) {
      qp = resp.make_qp();
      auto* q = peer.make_qp();
      connect(*qp, 1, *q, 2);
      resp.ep->attach(*qp, fixed_rate(1'000'000'000));
      for (int i = 0; many_qps && i < 300; ++i) {
        transport::QueuePair* idle = resp.make_qp();
        resp.ep->attach(*idle, fixed_rate(1'000'000'000));
        unknown_qpn = idle->qpn();
      }
      if (many_qps) resp.ep->detach(unknown_qpn);
    }
    // 80 frames (more than one kRxBatch): in-order WRITEs with every 4th
    // asking for an ACK, and among them each kind of frame the fast path
    // leaves to receive().
    std::vector<std::vector<uint8_t>> frames() const {
      std::vector<std::vector<uint8_t>> out;
      const wire::PathSpec path = path_between(2, 1);
      auto write = [&](uint32_t psn, uint32_t qpn) {
        wire::TransportSpec t;
        t.opcode = IBV_OPCODE_RC_RDMA_WRITE_ONLY;
        t.dest_qp = qpn;
        t.psn = psn;
        t.ack_req = psn % 4 == 3;
        t.reth_va = reinterpret_cast<uint64_t>(resp.memory.data()) + (psn % 512) * payload_len;
        t.reth_rkey = resp.mr->rkey();
        t.reth_dma_length = payload_len;
        std::vector<uint8_t> payload(payload_len, static_cast<uint8_t>(psn * 7 + 1));
        std::vector<uint8_t> f(payload_len + 256);
        f.resize(wire::build_packet(path, t, payload, f));
        return f;
      };
      uint32_t psn = 0;
      for (int i = 0; i < 80; ++i) {
        switch (i) {
          case 5: { auto f = write(psn, qp->qpn()); f.back() ^= 1; out.push_back(f); break; }
          case 9: out.push_back(write(psn, unknown_qpn)); break;      // unknown QPN
          case 17: out.push_back(pfc_frame(3, 100)); break;
          case 30: { std::vector<uint8_t> arp(60, 0); arp[12] = 0x08; arp[13] = 0x06;
                     out.push_back(arp); break; }
          case 31: { auto f = write(psn, qp->qpn()); f.resize(30); out.push_back(f); break; }
          case 40: out.push_back(write(psn - 3, qp->qpn())); break;   // duplicate
          case 50: out.push_back(write(psn + 5, qp->qpn())); break;   // PSN gap: NAK
          default: out.push_back(write(psn++, qp->qpn()));
        }
      }
      return out;
    }
    std::vector<std::vector<uint8_t>> answers() {
      std::vector<std::vector<uint8_t>> storage(32, std::vector<uint8_t>(4200)), out;
      std::vector<std::span<uint8_t>> bufs(storage.begin(), storage.end());
      std::vector<uint32_t> lens(bufs.size());
      for (size_t n; (n = resp.ep->transmit(0, bufs, lens)) > 0;)
        for (size_t i = 0; i < n; ++i) out.emplace_back(bufs[i].begin(), bufs[i].begin() + lens[i]);
      return out;
    }
  };
  Side one(payload_len, many_qps), burst(payload_len, many_qps);
  for (const auto& f : one.frames()) one.resp.ep->receive(f, 0);
  const auto frames = burst.frames();
  std::vector<std::span<const uint8_t>> views(frames.begin(), frames.end());
  burst.resp.ep->receive_burst(views, 0);

  std::vector<std::pair<std::string, uint64_t>> c1, c2;
  one.resp.ep->counters().for_each([&](std::string_view k, uint64_t v) { c1.emplace_back(k, v); });
  burst.resp.ep->counters().for_each([&](std::string_view k, uint64_t v) { c2.emplace_back(k, v); });
  EXPECT_EQ(c1, c2);
  const auto& c = burst.resp.ep->counters();
  // Expect: the case list above really reached every path.
  EXPECT_EQ(c.rx_frames, 80u);
  EXPECT_EQ(c.rx_parse_errors[static_cast<size_t>(wire::ParseError::kBadIcrc)], 1u);
  EXPECT_EQ(c.rx_parse_errors[static_cast<size_t>(wire::ParseError::kTruncatedIp)], 1u);
  EXPECT_EQ(c.rx_unknown_qpn, 1u);
  EXPECT_EQ(c.rx_not_roce, 1u);
  EXPECT_EQ(c.rx_pfc_frames, 1u);
  EXPECT_EQ(c.rx_delivered, 75u);
  EXPECT_TRUE(burst.resp.ep->paused(3, 0));
  EXPECT_EQ(one.qp->expected_psn(), burst.qp->expected_psn());
  EXPECT_EQ(burst.qp->expected_psn(), 73u);
  EXPECT_EQ(one.resp.memory, burst.resp.memory);
  const auto a1 = one.answers(), a2 = burst.answers();
  EXPECT_FALSE(a2.empty());
  EXPECT_EQ(a1, a2);
}

TEST(Endpoint, ReceiveBurstMatchesFrameByFrame) {
  expect_burst_matches_frame_by_frame(64, false);
  expect_burst_matches_frame_by_frame(4096, false);
}

TEST(Endpoint, ReceiveBurstMatchesFrameByFrameWithManyQpsAttached) {
  expect_burst_matches_frame_by_frame(64, true);
  expect_burst_matches_frame_by_frame(4096, true);
}

// Hundreds of QPs over several pages of the endpoints' QPN tables, each
// with a WRITE in flight, every frame received in bursts on both sides:
// every byte placed, every WR completed once.
TEST(Endpoint, ManyQpsWriteByteExactWithBurstsBothWays) {
  EndpointConfig cfg;
  cfg.port_rate_bytes_per_sec = 0;
  constexpr size_t kQps = 300, kBytes = 64;
  Host a(cfg, kQps * kBytes), b(cfg, kQps * kBytes);
  for (size_t i = 0; i < a.memory.size(); ++i) a.memory[i] = static_cast<uint8_t>(i * 13 + 5);
  for (size_t i = 0; i < kQps; ++i) {
    auto* qa = a.make_qp();
    auto* qb = b.make_qp();
    connect(*qa, 1, *qb, 2);
    a.ep->attach(*qa, fixed_rate(1'000'000'000));
    b.ep->attach(*qb, fixed_rate(1'000'000'000));
    ASSERT_EQ(post_write(a, *qa, b, i * kBytes, kBytes, i, IBV_SEND_SIGNALED), 0);
  }
  std::vector<std::vector<uint8_t>> storage(32, std::vector<uint8_t>(4200));
  std::vector<std::span<uint8_t>> bufs(storage.begin(), storage.end());
  std::vector<uint32_t> lens(bufs.size());
  auto deliver = [&](Endpoint& from, Endpoint& to, uint64_t now) {
    const size_t n = from.transmit(now, bufs, lens);
    std::vector<std::span<const uint8_t>> in;
    for (size_t i = 0; i < n; ++i) in.emplace_back(bufs[i].data(), lens[i]);
    to.receive_burst(in, now);
    return n;
  };
  std::vector<bool> completed(kQps);
  size_t completions = 0;
  for (uint64_t now = 0; now < 1000 && completions < kQps; ++now) {
    deliver(*a.ep, *b.ep, now);
    deliver(*b.ep, *a.ep, now);
    transport::WorkCompletion wcs[32];
    for (int n; (n = a.cq->poll(wcs)) > 0;) {
      for (int k = 0; k < n; ++k) {
        ASSERT_EQ(wcs[k].status, IBV_WC_SUCCESS);
        ASSERT_LT(wcs[k].wr_id, kQps);
        ASSERT_FALSE(completed[wcs[k].wr_id]) << "completed twice: " << wcs[k].wr_id;
        completed[wcs[k].wr_id] = true;
        ++completions;
      }
    }
  }
  EXPECT_EQ(completions, kQps);
  EXPECT_EQ(a.memory, b.memory);
  EXPECT_EQ(b.ep->counters().rx_delivered, kQps);
  EXPECT_EQ(b.ep->counters().rx_unknown_qpn, 0u);
}

// A received request that queues no answer (no AckReq: the ACK is
// coalesced) must not wake the endpoint: before, the QP joined the round
// robin anyway and next_deadline() asked for a wake-up that sent nothing,
// one per data packet at an incast's receiver. The request that does ask
// for an ACK wakes it, and the ACK goes out.
TEST(Endpoint, OnlyARequestThatQueuesAnAnswerWakesTheResponder) {
  EndpointConfig cfg;
  Host a(cfg, 4 * 4096), b(cfg, 4 * 4096);
  auto* qa = a.make_qp();
  auto* qb = b.make_qp();
  connect(*qa, 1, *qb, 2);
  a.ep->attach(*qa, fixed_rate(100'000'000'000));
  b.ep->attach(*qb, fixed_rate(100'000'000'000));
  ASSERT_EQ(post_write(a, *qa, b, 0, 4 * 4096), 0);
  std::vector<std::vector<uint8_t>> storage(8, std::vector<uint8_t>(4200));
  std::vector<std::span<uint8_t>> bufs(storage.begin(), storage.end());
  std::vector<uint32_t> lens(bufs.size());
  // FIRST, MIDDLE, MIDDLE, LAST (only LAST has AckReq), as A's pacing allows.
  std::vector<std::vector<uint8_t>> frames;
  uint64_t t = 0;
  for (; frames.size() < 4 && t < 1'000'000; t = std::max(t + 1, a.ep->next_deadline())) {
    const size_t n = a.ep->transmit(t, bufs, lens);
    for (size_t i = 0; i < n; ++i) frames.emplace_back(bufs[i].begin(), bufs[i].begin() + lens[i]);
  }
  ASSERT_EQ(frames.size(), 4u);
  const uint64_t at = t + kDelayNs;  // all four arrive together
  // b has nothing of its own to send (attach() lets a QP look once): after
  // one look, nothing is due until a packet comes.
  ASSERT_EQ(b.ep->transmit(0, bufs, lens), 0u);
  ASSERT_GT(b.ep->next_deadline(), at);
  for (size_t i = 0; i < 3; ++i) {
    b.ep->receive(frames[i], at);
    EXPECT_GT(b.ep->next_deadline(), at) << "woken by packet " << i;
  }
  b.ep->receive(frames[3], at);
  EXPECT_LE(b.ep->next_deadline(), at);
  ASSERT_EQ(b.ep->transmit(at, bufs, lens), 1u);
  EXPECT_EQ(qb->counters().rx_request_packets, 4u);
  EXPECT_EQ(std::memcmp(a.memory.data(), b.memory.data(), 4 * 4096), 0);
}

// The doorbell as a poster on another thread uses it (post, then ring): a
// QP the data path has in hand takes new work without its doorbell being
// queued; once the QP has run out of work and parked, a ring queues it.
TEST(Endpoint, APostToAQpInHandQueuesNoDoorbellAndAParkedQpIsRungAgain) {
  EndpointConfig cfg;
  Host a(cfg, 4096), b(cfg, 4096);
  transport::QpInitAttr init;
  init.type = transport::QpType::kUc;  // no ACKs: a sent WR is done
  init.pd = a.pd;
  init.send_cq = init.recv_cq = a.cq;
  init.caps.max_send_wr = 64;
  auto* qa = a.device.create_qp(init);
  auto* qb = b.make_qp();
  connect(*qa, 1, *qb, 2);
  a.ep->attach(*qa, fixed_rate(uint64_t{100} << 30));
  DoorbellNode node;
  node.qpn = qa->qpn();
  std::vector<std::vector<uint8_t>> storage(8, std::vector<uint8_t>(4200));
  std::vector<std::span<uint8_t>> bufs(storage.begin(), storage.end());
  std::vector<uint32_t> lens(bufs.size());
  uint64_t now = 0;
  auto post = [&] {
    transport::Sge sge{reinterpret_cast<uint64_t>(a.memory.data()), 64, a.mr->lkey()};
    transport::SendWr wr;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = {&sge, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(b.memory.data());
    wr.rkey = b.mr->rkey();
    ASSERT_EQ(qa->post_send(wr), 0);
    a.ep->ring(node);
  };
  auto transmit = [&] { return a.ep->transmit(now += 1'000'000, bufs, lens); };
  post();
  EXPECT_TRUE(a.ep->doorbells_pending());
  EXPECT_EQ(transmit(), 1u);
  post();  // the QP is in hand: the ring queues nothing ...
  EXPECT_FALSE(a.ep->doorbells_pending());
  EXPECT_EQ(transmit(), 1u);  // ... and the WR goes all the same
  EXPECT_EQ(transmit(), 0u);  // nothing left: the QP parks
  post();                     // so this ring queues it
  EXPECT_TRUE(a.ep->doorbells_pending());
  EXPECT_EQ(transmit(), 1u);
  // A QP destroyed while it holds its doorbell gives the node back (the
  // engine keeps one node per QPN for the next QP with it).
  post();
  a.ep->detach(qa->qpn());
  EXPECT_FALSE(node.rung.load());
}

TEST(Endpoint, RoundRobinSharesThePortBetweenQps) {
  // Two QPs on host A each write 512 KiB at the same time over one 10 Gb/s
  // port: both finish at about the same time, near the time for 1 MiB.
  EndpointConfig cfg;
  cfg.port_rate_bytes_per_sec = 10'000'000'000ull / 8;
  const size_t half = 512 << 10;
  Host a(cfg, 2 * half), b(cfg, 2 * half);
  std::iota(a.memory.begin(), a.memory.end(), 3);
  transport::QueuePair* qa[2] = {a.make_qp(), a.make_qp()};
  transport::QueuePair* qb[2] = {b.make_qp(), b.make_qp()};
  for (int i = 0; i < 2; ++i) {
    connect(*qa[i], 1, *qb[i], 2);
    a.ep->attach(*qa[i], fixed_rate(cfg.port_rate_bytes_per_sec));
    b.ep->attach(*qb[i], fixed_rate(cfg.port_rate_bytes_per_sec));
    ASSERT_EQ(post_write(a, *qa[i], b, i * half, half, static_cast<uint64_t>(i),
                         IBV_SEND_SIGNALED),
              0);
  }
  Harness h;
  h.hosts[0] = &a;
  h.hosts[1] = &b;
  uint64_t done[2] = {0, 0};
  while ((done[0] == 0 || done[1] == 0) && h.now < 100'000'000) {
    h.run(h.now + 1'000);
    transport::WorkCompletion wc;
    while (a.cq->poll({&wc, 1}) == 1) {
      ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
      done[wc.wr_id] = h.now;
    }
  }
  ASSERT_NE(done[0], 0u);
  ASSERT_NE(done[1], 0u);
  EXPECT_EQ(a.memory, b.memory);
  const uint64_t total_ns = 2 * half * 1'000'000'000ull / cfg.port_rate_bytes_per_sec;
  // Expect: neither finishes before ~90% of the time for both halves.
  EXPECT_GE(std::min(done[0], done[1]), total_ns * 9 / 10);
}

// A CC algorithm that records what it is told and allows line rate.
class RecordingCc : public cc::Algorithm {
 public:
  explicit RecordingCc(uint64_t rate) : cc::Algorithm(rate) {}
  std::string_view name() const override { return "recording"; }
  void on_ack(uint64_t, const cc::AckEvent& ack) override {
    ++acks;
    if (ack.int_hops.n_hops > 0) last_int = ack.int_hops;
  }
  uint64_t rate_bytes_per_sec() const override { return line_rate_bytes_per_sec(); }
  int acks = 0;
  cc::IntRecord last_int;
};

struct SenderAndReceiver {
  Host a, b;
  transport::QueuePair* qa;
  transport::QueuePair* qb;
  transport::Sge sge;
  SenderAndReceiver(const EndpointConfig& cfg, size_t bytes, uint8_t dscp,
                    std::unique_ptr<cc::Algorithm> cc_a)
      : a(cfg, bytes), b(cfg, bytes) {
    qa = a.make_qp();
    qb = b.make_qp();
    connect_with_dscp(dscp);
    a.ep->attach(*qa, std::move(cc_a));
    b.ep->attach(*qb, fixed_rate(cfg.port_rate_bytes_per_sec));
    std::iota(a.memory.begin(), a.memory.end(), 1);
    sge = {reinterpret_cast<uint64_t>(a.memory.data()), static_cast<uint32_t>(bytes),
           a.mr->lkey()};
  }
  void connect_with_dscp(uint8_t dscp) {
    for (auto [qp, peer, me, them] : {std::tuple{qa, qb, 1, 2}, std::tuple{qb, qa, 2, 1}}) {
      QpAttr attr;
      attr.path = path_between(me, them);
      attr.path.dscp = dscp;
      attr.dest_qpn = peer->qpn();
      attr.path_mtu = IBV_MTU_4096;
      attr.ack_every_n = 1;  // an ACK per packet, as HPCC wants
      ASSERT_EQ(qp->modify(QpState::kInit, attr), 0);
      ASSERT_EQ(qp->modify(QpState::kRtr, attr), 0);
      ASSERT_EQ(qp->modify(QpState::kRts, attr), 0);
    }
  }
  void post_write() {
    transport::SendWr wr;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = {&sge, 1};
    wr.remote_addr = reinterpret_cast<uint64_t>(b.memory.data());
    wr.rkey = b.mr->rkey();
    ASSERT_EQ(a.ep->post_send(*qa, wr), 0);
  }
};

// The only frame of one direction of a small WRITE exchange is lost on the
// wire: nothing else will ever arrive, so only the requester's timer (IBA
// 9.7.6.1, default timeout 14 = 67 ms) can bring the retransmission, and
// for a lost ACK the responder must re-ACK the duplicate (IBA 9.7.5.1.1).
void expect_recovery_after_loss(int lossy_side) {
  EndpointConfig cfg;
  SenderAndReceiver t(cfg, 1024, 26, fixed_rate(cfg.port_rate_bytes_per_sec));
  t.post_write();
  Harness h;
  h.hosts[0] = &t.a;
  h.hosts[1] = &t.b;
  int frames = 0;
  h.on_wire = [&](int from, std::vector<uint8_t>& frame) {
    if (from == lossy_side && frames++ == 0) frame.resize(10);  // mangled: dropped
  };
  transport::WorkCompletion wc;
  while (t.a.cq->poll({&wc, 1}) == 0 && h.now < 1'000'000'000) h.run(h.now + 1'000'000);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(t.a.memory, t.b.memory);
  // Expect: completion after one timeout (67.1 ms), not before, not much later.
  EXPECT_GE(h.now, 67'108'864u);
  EXPECT_LE(h.now, 70'000'000u);
  EXPECT_EQ(t.a.ep->counters().timers_fired, 1u);
  EXPECT_EQ(t.qa->counters().retransmit_timeouts, 1u);
}

TEST(Endpoint, LostDataFrameIsRecoveredByTheRetransmitTimer) { expect_recovery_after_loss(0); }
TEST(Endpoint, LostAckIsRecoveredByTheRetransmitTimer) { expect_recovery_after_loss(1); }

// An application that closes its QPs once their WRITEs completed (a
// connection per transfer) leaves their retransmit timers behind, filed
// 67 ms out: the endpoint drops them once the closed QPs are as many as
// the open ones (64 at least), instead of keeping and scanning them.
TEST(Endpoint, DetachedQpsLeaveNoTimersBehind) {
  EndpointConfig cfg;
  Host a(cfg, 64 << 10), b(cfg, 64 << 10);
  std::vector<std::pair<transport::QueuePair*, transport::QueuePair*>> pairs;
  for (int i = 0; i < 65; ++i) {
    auto* qa = a.make_qp();
    auto* qb = b.make_qp();
    connect(*qa, 1, *qb, 2);
    a.ep->attach(*qa, fixed_rate(cfg.port_rate_bytes_per_sec));
    b.ep->attach(*qb, fixed_rate(cfg.port_rate_bytes_per_sec));
    ASSERT_EQ(post_write(a, *qa, b, 0, 1024, i, IBV_SEND_SIGNALED), 0);
    pairs.emplace_back(qa, qb);
  }
  Harness h;
  h.hosts[0] = &a;
  h.hosts[1] = &b;
  h.run(100'000);
  transport::WorkCompletion wcs[65];
  ASSERT_EQ(a.cq->poll(wcs), 65);
  ASSERT_LT(a.ep->next_deadline(), UINT64_MAX) << "the retransmit timers are still filed";
  for (size_t i = 0; i < pairs.size(); ++i) {
    a.ep->detach(pairs[i].first->qpn());
    ASSERT_EQ(a.device.destroy_qp(pairs[i].first), 0);
    b.ep->detach(pairs[i].second->qpn());
    ASSERT_EQ(b.device.destroy_qp(pairs[i].second), 0);
    if (i + 1 < pairs.size()) {
      EXPECT_LT(a.ep->next_deadline(), UINT64_MAX) << i;
    }
  }
  EXPECT_EQ(a.ep->next_deadline(), UINT64_MAX);
  EXPECT_EQ(b.ep->next_deadline(), UINT64_MAX);
  // A QP made after the sweep still gets its timer.
  auto* qa = a.make_qp();
  auto* qb = b.make_qp();
  connect(*qa, 1, *qb, 2);
  a.ep->attach(*qa, fixed_rate(cfg.port_rate_bytes_per_sec));
  b.ep->attach(*qb, fixed_rate(cfg.port_rate_bytes_per_sec));
  ASSERT_EQ(post_write(a, *qa, b, 0, 1024, 99, IBV_SEND_SIGNALED), 0);
  std::vector<uint8_t> frame(4200);
  std::span<uint8_t> buf{frame};
  uint32_t len = 0;
  ASSERT_EQ(a.ep->transmit(h.now + 1, {&buf, 1}, {&len, 1}), 1u);
  EXPECT_LT(a.ep->next_deadline(), UINT64_MAX) << "the new QP's retransmit timer";
}

// A 64 KiB WRITE from a 100 Gb/s port with DSCP 26 (PFC priority 3),
// taken one frame per transmit() call.
struct OneFrameAtATime {
  static EndpointConfig config() {
    EndpointConfig c;
    c.port_rate_bytes_per_sec = 100'000'000'000ull / 8;
    return c;
  }
  EndpointConfig cfg = config();
  SenderAndReceiver t{cfg, 64 << 10, /*dscp=*/26, fixed_rate(cfg.port_rate_bytes_per_sec)};
  Endpoint& ep = *t.a.ep;
  std::vector<uint8_t> storage = std::vector<uint8_t>(4200);
  std::vector<std::span<uint8_t>> bufs{storage};
  std::vector<uint32_t> lens = std::vector<uint32_t>(1);

  OneFrameAtATime() { t.post_write(); }
  size_t transmit(uint64_t now) { return ep.transmit(now, bufs, lens); }
};

TEST(Endpoint, PfcPausesOnlyThePausedPriorityForItsQuanta) {
  OneFrameAtATime s;
  // Expect: a pause of another priority (5) changes nothing.
  s.ep.receive(pfc_frame(5, 0xFFFF), 0);
  EXPECT_EQ(s.transmit(0), 1u);
  // Expect: XOFF for priority 3 (DSCP 26 >> 3) with 1000 quanta holds the
  // QP for 1000 * 512 bits / 100 Gb/s = 5120 ns.
  s.ep.receive(pfc_frame(3, 1000), 1000);
  EXPECT_TRUE(s.ep.paused(3, 1000));
  EXPECT_EQ(s.transmit(1000), 0u);
  EXPECT_EQ(s.transmit(6119), 0u);
  EXPECT_EQ(s.ep.next_deadline(), 6120u);
  EXPECT_EQ(s.transmit(6120), 1u);
  EXPECT_GE(s.ep.counters().tx_pfc_held, 1u);
  // Expect: XON (quanta 0) ends a long pause at once.
  s.ep.receive(pfc_frame(3, 0xFFFF), 7000);
  EXPECT_EQ(s.transmit(7000), 0u);
  s.ep.receive(pfc_frame(3, 0), 8000);
  EXPECT_EQ(s.transmit(8000), 1u);
  EXPECT_EQ(s.ep.counters().rx_pfc_frames, 4u);
}

// A link that goes down takes its PFC state with it: the held QP sends at
// the next transmit(), the pause's account stops at the link-down time, and
// priorities that were not paused stay as they were.
TEST(Endpoint, LinkDownEndsEveryPfcPause) {
  OneFrameAtATime s;
  Endpoint& ep = s.ep;
  ep.receive(pfc_frame(3, 0xFFFF), 1000);  // 335 us at 100 Gb/s
  EXPECT_EQ(s.transmit(1000), 0u);
  ep.link_down(4000);
  EXPECT_FALSE(ep.paused(3, 4000));
  EXPECT_LE(ep.next_deadline(), 4000u);
  EXPECT_EQ(s.transmit(4000), 1u);
  EXPECT_EQ(ep.paused_ns(3, 1'000'000), 3000u);
  EXPECT_EQ(ep.paused_ns(5, 1'000'000), 0u);
  // A pause after the link is back works as before.
  ep.receive(pfc_frame(3, 1000), 10'000);
  EXPECT_TRUE(ep.paused(3, 10'000));
  EXPECT_EQ(ep.paused_ns(3, 1'000'000), 3000u + 5120u);
}

TEST(Endpoint, PfcPauseTimeIsAccountedPerPriority) {
  EndpointConfig cfg;
  cfg.port_rate_bytes_per_sec = 100'000'000'000ull / 8;
  Host h(cfg, 4096);
  Endpoint& ep = *h.ep;
  // 1000 quanta at 100 Gb/s: 5120 ns, counted while it runs and after.
  ep.receive(pfc_frame(3, 1000), 1000);
  EXPECT_EQ(ep.paused_ns(3, 1000), 0u);
  EXPECT_EQ(ep.paused_ns(3, 3000), 2000u);
  EXPECT_EQ(ep.paused_ns(3, 50'000), 5120u);
  // XOFF, a refresh with a shorter pause, then XON: one interval, 7000 to
  // 10000, whatever the quanta in between said.
  ep.receive(pfc_frame(3, 0xFFFF), 7000);
  ep.receive(pfc_frame(3, 1000), 8000);
  ep.receive(pfc_frame(3, 0), 10'000);
  EXPECT_EQ(ep.paused_ns(3, 10'000), 5120u + 3000u);
  EXPECT_EQ(ep.paused_ns(3, 1'000'000), 5120u + 3000u);
  // An XON that finds the priority running adds nothing.
  ep.receive(pfc_frame(3, 0), 20'000);
  EXPECT_EQ(ep.paused_ns(3, 1'000'000), 5120u + 3000u);
  // A pause that expires on its own, refreshed before it does: 100 quanta
  // (512 ns) at 30000, again at 30400: paused 30000 to 30912.
  ep.receive(pfc_frame(3, 100), 30'000);
  ep.receive(pfc_frame(3, 100), 30'400);
  EXPECT_EQ(ep.paused_ns(3, 1'000'000), 5120u + 3000u + 912u);
  // Other priorities kept their own (zero) account.
  for (uint8_t p = 0; p < 8; ++p) {
    if (p == 3) continue;
    EXPECT_EQ(ep.paused_ns(p, 1'000'000), 0u) << int{p};
  }
  ep.receive(pfc_frame(5, 100), 40'000);
  EXPECT_EQ(ep.paused_ns(5, 1'000'000), 512u);

  // An endpoint that does not honour PFC is never paused.
  cfg.honour_pfc = false;
  Host deaf(cfg, 4096);
  deaf.ep->receive(pfc_frame(3, 1000), 1000);
  EXPECT_EQ(deaf.ep->paused_ns(3, 1'000'000), 0u);
}

TEST(Endpoint, PfcIgnoredWhenNotHonoured) {
  EndpointConfig cfg;
  cfg.honour_pfc = false;
  SenderAndReceiver t(cfg, 64 << 10, 26, fixed_rate(cfg.port_rate_bytes_per_sec));
  t.post_write();
  std::vector<uint8_t> storage(4200);
  std::vector<std::span<uint8_t>> bufs{storage};
  std::vector<uint32_t> lens(1);
  t.a.ep->receive(pfc_frame(3, 0xFFFF), 0);
  EXPECT_EQ(t.a.ep->transmit(0, bufs, lens), 1u);
  EXPECT_EQ(t.a.ep->counters().rx_pfc_frames, 1u);
}

TEST(Endpoint, IntHopsAreStrippedEchoedAndReachTheSendersCc) {
  EndpointConfig cfg;
  cfg.port_rate_bytes_per_sec = 100'000'000'000ull / 8;
  auto cc = std::make_unique<RecordingCc>(cfg.port_rate_bytes_per_sec);
  RecordingCc* recorder = cc.get();
  SenderAndReceiver t(cfg, 256 << 10, 26, std::move(cc));
  t.post_write();
  Harness h;
  h.hosts[0] = &t.a;
  h.hosts[1] = &t.b;
  // A one-switch path: stamp one hop on every data frame from A, with the
  // send time as timestamp, as a switch's egress would.
  uint64_t stamped = 0;
  h.on_wire = [&](int from, std::vector<uint8_t>& frame) {
    if (from != 0) return;
    wire::IntHop hop;
    hop.node_id = 9;
    hop.timestamp_ns = h.now;
    hop.tx_bytes = stamped * 1000;
    hop.qlen_bytes = 4096;
    hop.rate_mbps = 100'000;
    size_t len = frame.size();
    frame.resize(len + 512);
    ASSERT_EQ(wire::int_push_hop(frame, len, hop), wire::IntError::kOk);
    frame.resize(len);
    ++stamped;
  };
  transport::WorkCompletion wc;
  while (t.a.cq->poll({&wc, 1}) == 0 && h.now < 10'000'000) h.run(h.now + 1'000);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(t.a.memory, t.b.memory);
  const auto& rx = t.b.ep->counters();
  const auto& tx = t.a.ep->counters();
  // Expect: every stamped data frame was stripped and delivered, ACKs carried
  // the hops back, and the sender's CC saw them on its ACK events.
  EXPECT_EQ(rx.rx_int_stripped, stamped);
  EXPECT_EQ(rx.rx_malformed, 0u);
  EXPECT_GT(rx.tx_int_echoed, 0u);
  EXPECT_EQ(tx.rx_int_echoes, rx.tx_int_echoed);
  EXPECT_EQ(tx.rx_malformed, 0u);
  ASSERT_GT(recorder->acks, 0);
  ASSERT_EQ(recorder->last_int.n_hops, 1);
  EXPECT_EQ(recorder->last_int.hops[0].qlen_bytes, 4096u);
  EXPECT_EQ(recorder->last_int.hops[0].link_rate_bytes_per_sec, 100'000'000'000ull / 8);
  EXPECT_GT(recorder->last_int.hops[0].ts_ns, 0u);
}

TEST(Endpoint, WindowLimitedQpAsksForAcksAndFinishesWithoutTimeouts) {
  // A 1 MiB WRITE under HPCC (window = line rate x base RTT = 100 KB) with
  // ACKs only when asked for (ack_every_n = 0, AckReq every 64 packets):
  // each window's last packet asks for its ACK, so the transfer never waits
  // for the retransmission timer. No switch stamps INT here, and the
  // endpoint says so in a counter.
  EndpointConfig cfg;
  cfg.port_rate_bytes_per_sec = 100'000'000'000ull / 8;
  Host a(cfg, 1 << 20), b(cfg, 1 << 20);
  auto* qa = a.make_qp();
  auto* qb = b.make_qp();
  connect(*qa, 1, *qb, 2);
  a.ep->attach(*qa, cc::make_algorithm("hpcc", {}, cfg.port_rate_bytes_per_sec));
  b.ep->attach(*qb, fixed_rate(cfg.port_rate_bytes_per_sec));
  std::iota(a.memory.begin(), a.memory.end(), 3);
  ASSERT_EQ(post_write(a, *qa, b, 0, a.memory.size(), 1, IBV_SEND_SIGNALED), 0);
  Harness h;
  h.hosts[0] = &a;
  h.hosts[1] = &b;
  transport::WorkCompletion wc;
  while (a.cq->poll({&wc, 1}) == 0 && h.now < 100'000'000) h.run(h.now + 1'000);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(a.memory, b.memory);
  // Expect: no timeouts, well under one 67 ms local ACK timeout in all.
  EXPECT_EQ(qa->counters().retransmit_timeouts, 0u);
  EXPECT_LT(h.now, 1'000'000u);
  // Expect: more ACKs than the message's 256 / 64 AckReqs: one per window.
  EXPECT_GT(qb->counters().acks_sent, 8u);
  EXPECT_EQ(a.ep->counters().cc_acks_without_int, qb->counters().acks_sent);
  EXPECT_EQ(b.ep->counters().cc_acks_without_int, 0u);  // its CC does not need INT
}

}  // namespace
}  // namespace droce::endpoint

namespace droce::endpoint {
namespace {

// Hosts that know their own addresses: a QP given only its peer's IP
// address resolves the MAC (ARP, or neighbour discovery for IPv6) before
// its first frame.
EndpointConfig with_interface(int id, bool v6) {
  EndpointConfig cfg;
  cfg.interface.mac = {2, 0, 0, 0, 0, static_cast<uint8_t>(id)};
  cfg.interface.addresses = {v6 ? path_between(id, id).src_ip : wire::IpAddress::v4(0x0A000000u + static_cast<uint32_t>(id))};
  if (v6) {
    cfg.interface.addresses[0].v6 = true;
    cfg.interface.addresses[0].bytes[0] = 0x20;
    cfg.interface.addresses[0].bytes[1] = 0x01;
    cfg.interface.addresses[0].bytes[15] = static_cast<uint8_t>(id);
  }
  return cfg;
}

void connect_by_address(transport::QueuePair& a, transport::QueuePair& b, const EndpointConfig& ca,
                        const EndpointConfig& cb) {
  for (auto [qp, peer, me, them] : {std::tuple{&a, &b, &ca, &cb}, std::tuple{&b, &a, &cb, &ca}}) {
    QpAttr attr;
    attr.path.src_mac = me->interface.mac;  // dst_mac left zero: resolve it
    attr.path.src_ip = me->interface.addresses[0];
    attr.path.dst_ip = them->interface.addresses[0];
    attr.dest_qpn = peer->qpn();
    attr.path_mtu = IBV_MTU_4096;
    ASSERT_EQ(qp->modify(QpState::kInit, attr), 0);
    ASSERT_EQ(qp->modify(QpState::kRtr, attr), 0);
    ASSERT_EQ(qp->modify(QpState::kRts, attr), 0);
  }
}

void expect_resolved_write(bool v6) {
  const EndpointConfig ca = with_interface(1, v6), cb = with_interface(2, v6);
  Host a(ca, 64 * 1024), b(cb, 64 * 1024);
  auto* qa = a.make_qp();
  auto* qb = b.make_qp();
  connect_by_address(*qa, *qb, ca, cb);
  a.ep->attach(*qa, fixed_rate(1'000'000'000));
  b.ep->attach(*qb, fixed_rate(1'000'000'000));
  std::iota(a.memory.begin(), a.memory.end(), 3);
  ASSERT_EQ(post_write(a, *qa, b, 0, a.memory.size(), 9, IBV_SEND_SIGNALED), 0);
  Harness h;
  h.hosts[0] = &a;
  h.hosts[1] = &b;
  h.run(10'000'000);
  transport::WorkCompletion wc;
  ASSERT_EQ(a.cq->poll({&wc, 1}), 1u);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(a.memory, b.memory);
  EXPECT_EQ(qa->attr().path.dst_mac, cb.interface.mac);
  // b learnt a's MAC from the request (RFC 826 merge / RFC 4861 7.2.3): it
  // needed no solicitation of its own to answer.
  EXPECT_EQ(qb->attr().path.dst_mac, ca.interface.mac);
  const auto& ac = a.ep->counters();
  const auto& bc = b.ep->counters();
  EXPECT_EQ(v6 ? ac.nd_solicits_out : ac.arp_requests_out, 1u);
  EXPECT_EQ(v6 ? bc.nd_adverts_out : bc.arp_replies_out, 1u);
  EXPECT_EQ(v6 ? bc.nd_solicits_out : bc.arp_requests_out, 0u);
  EXPECT_EQ(ac.neigh_resolved, 1u);
  EXPECT_EQ(ac.rx_not_roce + bc.rx_not_roce, 0u);
}

TEST(EndpointResolution, QpWithOnlyAnIpv4AddressResolvesAndWrites) { expect_resolved_write(false); }
TEST(EndpointResolution, QpWithOnlyAnIpv6AddressResolvesAndWrites) { expect_resolved_write(true); }

TEST(EndpointResolution, PeerThatNeverAnswersFailsTheWrWithRetryExceeded) {
  const EndpointConfig ca = with_interface(1, false);
  EndpointConfig cb = with_interface(2, false);
  Host a(ca, 4096);
  EndpointConfig silent = cb;
  silent.interface.addresses.clear();  // b answers no ARP
  Host b(silent, 4096);
  auto* qa = a.make_qp();
  auto* qb = b.make_qp();
  connect_by_address(*qa, *qb, ca, cb);
  a.ep->attach(*qa, fixed_rate(1'000'000'000));
  b.ep->attach(*qb, fixed_rate(1'000'000'000));
  ASSERT_EQ(post_write(a, *qa, b, 0, 1024, 1, IBV_SEND_SIGNALED), 0);
  ASSERT_EQ(post_write(a, *qa, b, 0, 1024, 2, IBV_SEND_SIGNALED), 0);
  Harness h;
  h.hosts[0] = &a;
  h.hosts[1] = &b;
  h.run(2'900'000'000);
  transport::WorkCompletion wc[2];
  EXPECT_EQ(a.cq->poll(wc), 0u);  // still resolving: three solicitations, 1 s apart
  h.run(3'100'000'000);
  ASSERT_EQ(a.cq->poll(wc), 2u);
  EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(qa->state(), QpState::kErr);
  EXPECT_EQ(a.ep->counters().arp_requests_out, 3u);
  EXPECT_EQ(a.ep->counters().unresolved_qps_failed, 1u);
  // Not one RoCE frame left a: none could be addressed.
  EXPECT_EQ(b.ep->counters().rx_delivered, 0u);
}

// Virtual payload (transport::MemoryRegion::virtual_payload, the
// simulator's): the plain transmit(), which the DPDK engine calls, gives
// frames whose ICRC covers the bytes they hold; the overload that reports
// unheld payload gives the ICRC of zeros there, says where, and the
// receiver given that length takes the frame.
TEST(Endpoint, VirtualPayloadIsUnheldOnlyForACallerThatCarriesIt) {
  EndpointConfig cfg;
  Host a(cfg, 1 << 16), b(cfg, 1 << 16);
  auto* qa = a.make_qp();
  auto* qb = b.make_qp();
  connect(*qa, 1, *qb, 2);
  a.ep->attach(*qa, fixed_rate(100'000'000'000ull / 8));
  b.ep->attach(*qb, fixed_rate(100'000'000'000ull / 8));
  a.mr->set_virtual_payload(true);
  b.mr->set_virtual_payload(true);
  std::vector<std::vector<uint8_t>> storage(4, std::vector<uint8_t>(4200));
  std::vector<std::span<uint8_t>> bufs(storage.begin(), storage.end());
  std::vector<uint32_t> lens(bufs.size());
  std::vector<wire::UnheldPayload> unheld(bufs.size(), {1, 1});
  uint64_t now = 0;
  for (bool carried : {false, true}) {
    ASSERT_EQ(post_write(a, *qa, b, 0, 4096 + 1000), 0);
    // The QP's pacing sends one frame per call at first: call until both.
    for (size_t sent = 0; sent < 2; now += 1000) {
      ASSERT_LT(now, 100'000u) << "the two frames were not sent";
      for (auto& f : storage) std::fill(f.begin(), f.end(), 0xA5);  // leftovers
      const size_t n = carried ? a.ep->transmit(now, bufs, lens, unheld)
                               : a.ep->transmit(now, bufs, lens);
      for (size_t i = 0; i < n; ++i, ++sent) {
        const std::span<const uint8_t> frame(bufs[i].data(), lens[i]);
        wire::ParsedPacket p;
        if (!carried) {
          EXPECT_EQ(wire::parse(frame, p), wire::ParseError::kOk) << sent;
          b.ep->receive(frame, now);
          continue;
        }
        const uint32_t len = sent == 0 ? 4096 : 1000;
        EXPECT_EQ(unheld[i], (wire::UnheldPayload{static_cast<uint16_t>(len), 0})) << sent;
        EXPECT_EQ(wire::parse(frame, p), wire::ParseError::kBadIcrc) << sent;
        EXPECT_EQ(wire::parse(frame, p, {.unheld = unheld[i]}), wire::ParseError::kOk) << sent;
        b.ep->receive(frame, now, unheld[i]);
      }
    }
  }
  EXPECT_EQ(b.ep->counters().rx_delivered, 4u);
  EXPECT_EQ(b.ep->counters().rx_malformed, 0u);
  EXPECT_EQ(qb->counters().rx_request_packets, 4u);  // all in order, none refused
}

}  // namespace
}  // namespace droce::endpoint
