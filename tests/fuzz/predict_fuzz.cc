// libFuzzer target for the endpoint's header prediction
// (wire/rx_template.h, Endpoint::receive_burst): two endpoints, one with
// prediction and one parsing every frame, each with the same QPs and
// memory, get the same bursts; they must stay identical.
//
// Random bytes almost never match a QP's template, so frames are built:
// RDMA WRITE ONLY requests (or a neighbouring opcode), or the packets of
// multi-packet WRITE messages, to one of four QPs, from fuzzed fields (PSN
// distance from the expected PSN, VA, key, length, DMA length), then fuzzed
// bytes are XOR-ed in anywhere in the frame, with or without the checksums
// made right again. That walks the edge of every check the template and
// QueuePair::try_predicted_write make.
//
// Input: one setup byte (bits 0-1: path MTU 256/1024/2048/4096; bit 2: the
// responder ACKs every 3rd packet), then records until the bytes run out:
//   [ctrl][psn][va hi][va lo][len hi][len lo][dma][n] n x [off hi][off lo][xor]
//   ctrl bits 0-1: QP (RC IPv4, UC IPv4 + VLAN, RC selective repeat IPv6,
//                  RC IPv6 + VLAN); bits 2-3: R_Key (MR A, MR B which is
//                  read-only, a stale key, 0); bit 4: opcode from the psn
//                  byte's top bits instead of WRITE ONLY; bit 5: fix the
//                  IPv4 checksum and ICRC after the XORs; bit 6: end the
//                  burst after this frame; bit 7: +200 ms and timers.
//   psn: bits 0-3 the PSN's distance from the next one, plus 4; bit 4
//        AckReq; bits 5-7 the opcode when ctrl bit 4 asks for one (kOpcodes;
//        7: a packet of a multi-packet message, below).
//   len: payload bytes (mod 4097); dma: DMA length = len + dma - 128.
//
// A message packet is the one at its PSN of the QP's current message (a
// WRITE of FIRST, MIDDLE..., LAST at the path MTU); a PSN outside it starts
// a new one there, of 2 + (len hi & 7) packets, the last carrying
// 4 * (1 + len lo % (MTU / 4)) bytes, at VA as above, all in order. Then
// dma - 128, if not 0, goes wrong on purpose: FIRST's DMA length is off by
// that much, a MIDDLE's or LAST's payload by that many words.
//
// Checks (abort on failure, on top of ASan/UBSan): after every burst the
// answers (frame bytes), both endpoints' counters, every QP's counters and
// expected PSN are equal; the memory of both is equal and nothing outside
// MR A changed.
//
// Built only with -Dfuzz=true (clang, see docs/FUZZING.md).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "droce/cc/registry.h"
#include "droce/endpoint/endpoint.h"
#include "droce/wire/build.h"
#include "droce/wire/packet.h"
#include "fuzz_check.h"

namespace droce::fuzz {
namespace {

using transport::QpState;
using transport::QpType;

constexpr size_t kGuard = 4096, kLenA = 16384, kLenB = 4096;
constexpr uint64_t kIovaA = 0x10000, kIovaB = 0x40000;
constexpr uint32_t kRqPsn = 0xFFFFF8;  // near the wrap
constexpr int kQps = 4;

uint8_t canary(size_t i) { return static_cast<uint8_t>(0x5A ^ (i * 31)); }

wire::PathSpec our_path(int qp) {
  wire::PathSpec p;
  p.src_mac = {2, 0, 0, 0, 0, 1};
  p.dst_mac = {2, 0, 0, 0, 0, 2};
  if (qp >= 2) {
    p.src_ip.v6 = p.dst_ip.v6 = true;
    p.src_ip.bytes[0] = p.dst_ip.bytes[0] = 0xFD;
    p.src_ip.bytes[15] = 1;
    p.dst_ip.bytes[15] = 2;
  } else {
    p.src_ip = wire::IpAddress::v4(0x0A000001);
    p.dst_ip = wire::IpAddress::v4(0x0A000002);
  }
  p.vlan = qp == 1 || qp == 3;
  p.vlan_id = 7;
  return p;
}

struct Side {
  // Both sides get the same frames, keys included: their Devices draw the
  // same MR keys (and every run the same ones).
  transport::Device dev{0x6B657973};
  std::unique_ptr<endpoint::Endpoint> ep;
  std::vector<uint8_t> mem = std::vector<uint8_t>(kGuard + kLenA + kLenB + kGuard);
  transport::MemoryRegion* mr_a = nullptr;
  transport::MemoryRegion* mr_b = nullptr;
  uint32_t stale_key = 0;
  transport::QueuePair* qp[kQps] = {};

  Side(bool predict, uint8_t setup) {
    for (size_t i = 0; i < mem.size(); ++i) mem[i] = canary(i);
    endpoint::EndpointConfig cfg;
    cfg.header_prediction = predict;
    ep = std::make_unique<endpoint::Endpoint>(dev, cfg);
    auto* pd = dev.alloc_pd();
    auto* cq = dev.create_cq(4096);
    constexpr uint32_t kAll =
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    transport::MemoryRegion* gone = dev.reg_mr(pd, mem.data() + kGuard, 64, kAll, kIovaA);
    FUZZ_CHECK(gone != nullptr);
    stale_key = gone->rkey();
    FUZZ_CHECK(dev.dereg_mr(gone) == 0);
    mr_a = dev.reg_mr(pd, mem.data() + kGuard, kLenA, kAll, kIovaA);
    mr_b = dev.reg_mr(pd, mem.data() + kGuard + kLenA, kLenB, IBV_ACCESS_REMOTE_READ, kIovaB);
    FUZZ_CHECK(mr_a && mr_b);
    static constexpr ibv_mtu kMtus[4] = {IBV_MTU_256, IBV_MTU_1024, IBV_MTU_2048,
                                         IBV_MTU_4096};
    for (int i = 0; i < kQps; ++i) {
      transport::QpInitAttr init;
      init.type = i == 1 ? QpType::kUc : QpType::kRc;
      init.pd = pd;
      init.send_cq = init.recv_cq = cq;
      init.caps.max_recv_wr = 16;
      qp[i] = dev.create_qp(init);
      FUZZ_CHECK(qp[i] != nullptr);
      transport::QpAttr a;
      a.path = our_path(i);
      a.dest_qpn = 0x123456;
      a.rq_psn = kRqPsn;
      a.path_mtu = kMtus[setup & 3];
      a.ack_every_n = (setup & 4) ? 3 : 0;
      a.max_dest_rd_atomic = 2;
      a.recovery = i == 2 ? transport::Recovery::kSelectiveRepeat
                          : transport::Recovery::kGoBackN;
      a.sack_window = 64;
      FUZZ_CHECK(qp[i]->modify(QpState::kInit, a) == 0);
      FUZZ_CHECK(qp[i]->modify(QpState::kRtr, a) == 0);
      FUZZ_CHECK(qp[i]->modify(QpState::kRts, a) == 0);
      ep->attach(*qp[i], cc::make_algorithm("none", {}, 100'000'000'000ull / 8));
    }
  }

  std::vector<std::vector<uint8_t>> answers(uint64_t now) {
    std::vector<std::vector<uint8_t>> store(16, std::vector<uint8_t>(4400)), out;
    std::vector<std::span<uint8_t>> bufs(store.begin(), store.end());
    uint32_t lens[16];
    for (int rounds = 0; rounds < 64; ++rounds) {
      const size_t n = ep->transmit(now, bufs, lens);
      if (n == 0) break;
      for (size_t i = 0; i < n; ++i) out.emplace_back(store[i].begin(), store[i].begin() + lens[i]);
    }
    return out;
  }

  std::vector<std::pair<std::string, uint64_t>> counters() const {
    std::vector<std::pair<std::string, uint64_t>> c;
    ep->counters().for_each([&](std::string_view k, uint64_t v) { c.emplace_back(k, v); });
    for (const auto* q : qp) {
      q->counters().for_each([&](std::string_view k, uint64_t v) { c.emplace_back(k, v); });
      c.emplace_back("epsn", q->expected_psn());
      c.emplace_back("state", static_cast<uint64_t>(q->state()));
    }
    return c;
  }

  void check_guards() const {
    for (size_t i = 0; i < mem.size(); ++i) {
      if (i == kGuard) i += kLenA;  // MR A may change
      FUZZ_CHECK(mem[i] == canary(i));
    }
  }
};

constexpr uint8_t kOpcodes[7] = {
    IBV_OPCODE_RDMA_WRITE_ONLY, IBV_OPCODE_RDMA_WRITE_FIRST, IBV_OPCODE_RDMA_WRITE_MIDDLE,
    IBV_OPCODE_RDMA_WRITE_LAST, IBV_OPCODE_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
    IBV_OPCODE_SEND_ONLY, IBV_OPCODE_RDMA_READ_REQUEST};
constexpr uint8_t kMessagePacket = 7;

// The multi-packet WRITE message a QP's sender is in (message packets).
struct Message {
  uint32_t first_psn = 0;
  uint32_t packets = 0;  // 0: none yet
  uint32_t last_len = 0;
  uint64_t va = 0;
};

// One record's frame for `s`'s QPs (both sides have the same QPNs, paths
// and expected PSNs, so a frame built from one fits the other).
std::vector<uint8_t> build(const Side& s, const uint8_t* r, const uint8_t* muts, size_t n_mut,
                           uint32_t pending_psn[kQps], Message messages[kQps]) {
  const uint8_t ctrl = r[0];
  const int q = ctrl & 3;
  const transport::QueuePair& qp = *s.qp[q];
  wire::PathSpec from = qp.attr().path;
  std::swap(from.src_mac, from.dst_mac);
  std::swap(from.src_ip, from.dst_ip);
  const uint8_t base = qp.type() == QpType::kUc ? IBV_OPCODE_UC : IBV_OPCODE_RC;
  wire::TransportSpec t;
  const uint8_t op_sel = (ctrl & 0x10) ? r[1] >> 5 : 0;
  t.opcode = static_cast<uint8_t>(base | (op_sel == kMessagePacket ? 0 : kOpcodes[op_sel]));
  t.dest_qp = qp.qpn();
  t.psn = wire::psn_add(pending_psn[q], static_cast<uint32_t>((r[1] & 15) - 4) & wire::kPsnMask);
  t.ack_req = r[1] & 0x10;
  const uint32_t key_sel = (ctrl >> 2) & 3;
  t.reth_rkey = key_sel == 0 ? s.mr_a->rkey() : key_sel == 1 ? s.mr_b->rkey()
                : key_sel == 2 ? s.stale_key : 0;
  const uint64_t iova = key_sel == 1 ? kIovaB : kIovaA;
  t.reth_va = iova + ((uint64_t{r[2]} << 8 | r[3]) % (kLenA + 64));
  uint32_t len = (uint32_t{r[4]} << 8 | r[5]) % 4097;
  t.reth_dma_length = len + r[6] - 128;
  if (op_sel == kMessagePacket) {
    const uint32_t mtu = qp.mtu();
    Message& m = messages[q];
    uint32_t k = wire::psn_distance(m.first_psn, t.psn);
    if (m.packets == 0 || k >= m.packets) {
      m = Message{t.psn, 2 + (r[4] & 7u), 4 * (1 + r[5] % (mtu / 4)), t.reth_va};
      k = 0;
    }
    const bool last = k + 1 == m.packets;
    t.opcode = static_cast<uint8_t>(base | (k == 0  ? IBV_OPCODE_RDMA_WRITE_FIRST
                                            : last ? IBV_OPCODE_RDMA_WRITE_LAST
                                                   : IBV_OPCODE_RDMA_WRITE_MIDDLE));
    t.reth_va = m.va;
    t.reth_dma_length = (m.packets - 1) * mtu + m.last_len;
    len = last ? m.last_len : mtu;
    const int off = r[6] - 128;  // 0: as planned
    if (k == 0)
      t.reth_dma_length += off;
    else
      len = static_cast<uint32_t>(std::max<int>(0, static_cast<int>(len) + 4 * off));
  }
  std::vector<uint8_t> payload(wire::opcode_info(t.opcode).payload ? len : 0);
  for (uint32_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7 + r[1]);
  std::vector<uint8_t> f(payload.size() + 256);
  f.resize(wire::build_packet(from, t, payload, f));
  if (f.empty()) return f;
  if (wire::psn_diff(t.psn, pending_psn[q]) >= 0) pending_psn[q] = wire::psn_add(t.psn, 1);
  for (size_t i = 0; i < n_mut; ++i) {
    const size_t off = (size_t{muts[3 * i]} << 8 | muts[3 * i + 1]) % f.size();
    f[off] ^= muts[3 * i + 2];
  }
  if (ctrl & 0x20) {
    wire::ParsedPacket p;
    if (wire::parse(f, p, {.verify_ip_checksum = false, .verify_icrc = false}) ==
        wire::ParseError::kOk)
      wire::refresh_checksums(f, p);
  }
  return f;
}

void run(const uint8_t* data, size_t size) {
  if (size < 1) return;
  Side a(true, data[0]), b(false, data[0]);
  ++data;
  --size;
  uint64_t now = 1;
  uint32_t pending_psn[kQps];
  Message messages[kQps];
  for (int q = 0; q < kQps; ++q) pending_psn[q] = a.qp[q]->expected_psn();
  std::vector<std::vector<uint8_t>> burst;
  auto flush = [&] {
    std::vector<std::span<const uint8_t>> views(burst.begin(), burst.end());
    a.ep->receive_burst(views, now);
    b.ep->receive_burst(views, now);
    burst.clear();
    FUZZ_CHECK(a.answers(now) == b.answers(now));
    FUZZ_CHECK(a.counters() == b.counters());
    for (int q = 0; q < kQps; ++q) pending_psn[q] = a.qp[q]->expected_psn();
    now += 1000;
  };
  while (size >= 8) {
    const size_t n_mut = std::min<size_t>(data[7], 8);
    const size_t rec = 8 + 3 * n_mut;
    if (size < rec) break;
    std::vector<uint8_t> f = build(a, data, data + 8, n_mut, pending_psn, messages);
    if (!f.empty()) burst.push_back(std::move(f));
    const uint8_t ctrl = data[0];
    if ((ctrl & 0x40) || burst.size() == endpoint::Endpoint::kRxBatch) flush();
    if (ctrl & 0x80) {
      now += 200'000'000;
      FUZZ_CHECK(a.answers(now) == b.answers(now));  // due timers fire in transmit
    }
    data += rec;
    size -= rec;
  }
  if (!burst.empty()) flush();
  FUZZ_CHECK(a.mem == b.mem);
  a.check_guards();
}

}  // namespace
}  // namespace droce::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  droce::fuzz::run(data, size);
  return 0;
}
