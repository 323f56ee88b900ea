// Header prediction (wire/rx_template.h, Endpoint::receive_burst): the
// template matches exactly the plain RDMA WRITE frames (ONLY, FIRST, MIDDLE,
// LAST) of its QP's peer, and an endpoint with prediction behaves exactly
// like one that parses every frame (counters, placed bytes, answers,
// completions) over a random mix of frames, messages and QP kinds.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "droce/cc/registry.h"
#include "droce/endpoint/endpoint.h"
#include "droce/wire/build.h"
#include "droce/wire/icrc.h"
#include "droce/wire/packet.h"
#include "droce/wire/rx_template.h"

namespace droce {
namespace {

// Our side of a path (src = us); the peer sends with the addresses swapped.
wire::PathSpec our_path(bool v6, bool vlan) {
  wire::PathSpec p;
  p.src_mac = {2, 0, 0, 0, 0, 1};
  p.dst_mac = {2, 0, 0, 0, 0, 2};
  if (v6) {
    p.src_ip.v6 = p.dst_ip.v6 = true;
    for (int i = 0; i < 16; ++i) {
      p.src_ip.bytes[i] = static_cast<uint8_t>(0x20 + i);
      p.dst_ip.bytes[i] = static_cast<uint8_t>(0x40 + i);
    }
  } else {
    p.src_ip = wire::IpAddress::v4(0x0A000001);
    p.dst_ip = wire::IpAddress::v4(0x0A000002);
  }
  p.vlan = vlan;
  p.vlan_id = 0x123;
  p.pcp = 3;
  return p;
}

wire::PathSpec reversed(const wire::PathSpec& ours) {
  wire::PathSpec p = ours;
  std::swap(p.src_mac, p.dst_mac);
  std::swap(p.src_ip, p.dst_ip);
  p.udp_src_port = 0xC321;
  return p;
}

constexpr uint32_t kQpn = 0x345;

std::vector<uint8_t> write_only(const wire::PathSpec& from, uint8_t opcode, uint32_t psn,
                                uint32_t len, uint16_t pkey = 0xFFFF) {
  wire::TransportSpec t;
  t.opcode = opcode;
  t.dest_qp = kQpn;
  t.psn = psn;
  t.ack_req = psn & 1;
  t.pkey = pkey;
  t.reth_va = 0x1000 + psn;
  t.reth_rkey = 0xABCD;
  t.reth_dma_length = len;
  std::vector<uint8_t> payload(len);
  for (uint32_t i = 0; i < len; ++i) payload[i] = static_cast<uint8_t>(i * 13 + psn);
  std::vector<uint8_t> f(len + 256);
  f.resize(wire::build_packet(from, t, payload, f));
  return f;
}

// The IPv4 header checksum (at `ip`) made right again after a change.
void fix_ipv4_checksum(std::vector<uint8_t>& f, size_t ip) {
  wire::store_be16(f.data() + ip + 10, 0);
  wire::store_be16(f.data() + ip + 10, wire::ipv4_checksum(f.data() + ip, wire::kIpv4Size));
}

struct Layout {
  bool v6, vlan;
};
constexpr Layout kLayouts[] = {{false, false}, {false, true}, {true, false}, {true, true}};

constexpr uint8_t kWriteOps[] = {IBV_OPCODE_RDMA_WRITE_ONLY, IBV_OPCODE_RDMA_WRITE_FIRST,
                                 IBV_OPCODE_RDMA_WRITE_MIDDLE, IBV_OPCODE_RDMA_WRITE_LAST};

TEST(RxTemplate, MatchesTheQpsWritesInEveryLayout) {
  for (const Layout l : kLayouts) {
    for (uint8_t base : {uint8_t{IBV_OPCODE_RC}, uint8_t{IBV_OPCODE_UC}}) {
      const wire::PathSpec ours = our_path(l.v6, l.vlan);
      const wire::RxTemplate t = wire::make_write_template(ours, kQpn, base, 0xFFFF);
      for (const uint8_t op : kWriteOps) {
      for (uint32_t len : {4u, 8u, 64u, 1024u, 4096u}) {
        // Without a RETH, 4 bytes make an IPv4 frame under the 64 bytes the
        // compare reads (OnlyPlainWritesMatch).
        if (len == 4 && !(wire::opcode_info(op).ext & wire::kExtReth)) continue;
        SCOPED_TRACE(::testing::Message() << "v6 " << l.v6 << " vlan " << l.vlan << " base "
                                          << int{base} << " op " << int{op} << " len " << len);
        const auto f = write_only(reversed(ours), static_cast<uint8_t>(base | op), 77 + len, len);
        ASSERT_GT(wire::predicted_bth_offset(f), 0u);
        EXPECT_EQ(wire::load_be24(f.data() + wire::predicted_bth_offset(f) + 5), kQpn);
        wire::PredictedWrite w;
        ASSERT_TRUE(wire::rx_template_match(t, f, w));
        // The fields are those parse() finds.
        wire::ParsedPacket p;
        ASSERT_EQ(wire::parse(f, p), wire::ParseError::kOk);
        EXPECT_EQ(w.psn, p.psn);
        EXPECT_EQ(w.ack_req, p.ack_req);
        EXPECT_EQ(w.va, p.reth_va);
        EXPECT_EQ(w.rkey, p.reth_rkey);
        EXPECT_EQ(w.dma_length, p.reth_dma_length);
        EXPECT_EQ(w.payload, p.payload);
        EXPECT_EQ(w.payload_length, p.payload_length);
        EXPECT_EQ(w.frame_length, p.frame_length);
        bool ok = false;
        const wire::IcrcCheck c = wire::icrc_check(t, f, w);
        wire::icrc_check_many(&c, &ok, 1);
        EXPECT_TRUE(ok);
        // A payload bit flipped: the ICRC check, not the match, catches it.
        auto bad = f;
        bad[bad.size() - 8] ^= 0x10;
        ASSERT_TRUE(wire::rx_template_match(t, bad, w));
        const wire::IcrcCheck cb = wire::icrc_check(t, bad, w);
        wire::icrc_check_many(&cb, &ok, 1);
        EXPECT_FALSE(ok);
        // The opcode, for the QP to judge the message sequence by, and no
        // stale RETH fields where the frame has none.
        ASSERT_TRUE(wire::rx_template_match(t, f, w));
        EXPECT_EQ(w.opcode, base | op);
        if (op == IBV_OPCODE_RDMA_WRITE_MIDDLE || op == IBV_OPCODE_RDMA_WRITE_LAST) {
          EXPECT_EQ(w.va, 0u);
          EXPECT_EQ(w.rkey, 0u);
          EXPECT_EQ(w.dma_length, 0u);
        }
      }
      }
    }
  }
}

// The operations the template leaves to parse(): every opcode of the QP's
// transport but the four RDMA WRITEs without immediate, and a padded LAST
// (pad count 0 is fixed; such a LAST ends a message of odd length, rare)
// or one so short that the frame is under the 64 bytes the compare reads.
TEST(RxTemplate, OnlyPlainWritesMatch) {
  const wire::PathSpec ours = our_path(false, false);
  const wire::RxTemplate t = wire::make_write_template(ours, kQpn, IBV_OPCODE_RC, 0xFFFF);
  wire::PredictedWrite w;
  for (int op = 0; op < 32; ++op) {
    if (!wire::opcode_info(static_cast<uint8_t>(op)).supported) continue;
    const bool plain = op == IBV_OPCODE_RDMA_WRITE_ONLY || op == IBV_OPCODE_RDMA_WRITE_FIRST ||
                       op == IBV_OPCODE_RDMA_WRITE_MIDDLE || op == IBV_OPCODE_RDMA_WRITE_LAST;
    const bool payload = wire::opcode_info(static_cast<uint8_t>(op)).payload;
    const auto f = write_only(reversed(ours), static_cast<uint8_t>(op), 9, payload ? 64 : 0);
    ASSERT_FALSE(f.empty()) << op;
    EXPECT_EQ(wire::rx_template_match(t, f, w), plain) << wire::opcode_info(static_cast<uint8_t>(op)).name;
  }
  EXPECT_FALSE(wire::rx_template_match(
      t, write_only(reversed(ours), IBV_OPCODE_RC_RDMA_WRITE_LAST, 9, 63), w)) << "pad";
  const auto short_last = write_only(reversed(ours), IBV_OPCODE_RC_RDMA_WRITE_LAST, 9, 4);
  ASSERT_LT(short_last.size(), 64u);
  EXPECT_FALSE(wire::rx_template_match(t, short_last, w)) << "under 64 bytes";
  EXPECT_TRUE(wire::rx_template_match(
      t, write_only(reversed(ours), IBV_OPCODE_RC_RDMA_WRITE_LAST, 9, 8), w)) << "64 bytes";
}

// One byte changed in an IPv4 frame (checksums refreshed): what the template
// lets vary and what sends the frame to parse().
TEST(RxTemplate, FieldsThatMayVaryAndFieldsThatMayNot) {
  const wire::PathSpec ours = our_path(false, false);
  const wire::RxTemplate t =
      wire::make_write_template(ours, kQpn, IBV_OPCODE_RC, 0xFFFF);
  const auto good = write_only(reversed(ours), IBV_OPCODE_RC_RDMA_WRITE_ONLY, 5, 64);
  constexpr size_t kIp = 14, kUdp = 34, kBth = 42;
  struct Case {
    const char* what;
    size_t at;
    uint8_t set;  // XOR-ed into the byte
    bool match;
  };
  const Case cases[] = {
      {"destination MAC", 5, 0x10, true},
      {"source MAC", 11, 0x10, true},
      {"DSCP", kIp + 1, 0x80, true},
      {"ECN ECT(0) -> CE", kIp + 1, 0x01, false},
      {"IP ID", kIp + 5, 0x33, true},
      {"DF", kIp + 6, 0x40, true},
      {"MF", kIp + 6, 0x20, false},
      {"fragment offset", kIp + 7, 0x01, false},
      {"TTL", kIp + 8, 0x07, true},
      {"IP protocol", kIp + 9, 0x01, false},
      {"IHL", kIp + 0, 0x01, false},
      {"source IP", kIp + 15, 0x01, false},
      {"destination IP", kIp + 19, 0x01, false},
      {"UDP source port", kUdp + 1, 0x55, true},
      {"UDP destination port", kUdp + 3, 0x01, false},
      {"opcode: WRITE FIRST", kBth, IBV_OPCODE_RDMA_WRITE_ONLY ^ IBV_OPCODE_RDMA_WRITE_FIRST, true},
      {"opcode: WRITE ONLY with immediate", kBth,
       IBV_OPCODE_RDMA_WRITE_ONLY ^ IBV_OPCODE_RDMA_WRITE_ONLY_WITH_IMMEDIATE, false},
      {"opcode: SEND ONLY", kBth, IBV_OPCODE_RDMA_WRITE_ONLY ^ IBV_OPCODE_SEND_ONLY, false},
      {"opcode: READ request", kBth, IBV_OPCODE_RDMA_WRITE_ONLY ^ IBV_OPCODE_RDMA_READ_REQUEST,
       false},
      {"opcode: UC", kBth, IBV_OPCODE_UC, false},
      {"solicited event", kBth + 1, 0x80, true},
      {"MigReq", kBth + 1, 0x40, true},
      {"pad count", kBth + 1, 0x10, false},
      {"TVer", kBth + 1, 0x01, false},
      {"P_Key", kBth + 3, 0x01, false},
      {"FECN", kBth + 4, 0x80, true},
      {"destination QP", kBth + 7, 0x01, false},
      {"AckReq", kBth + 8, 0x80, true},
      {"PSN", kBth + 11, 0x42, true},
  };
  wire::PredictedWrite w;
  ASSERT_TRUE(wire::rx_template_match(t, good, w));
  for (const Case& c : cases) {
    auto f = good;
    f[c.at] ^= c.set;
    if (c.at >= kIp && c.at < kUdp) fix_ipv4_checksum(f, kIp);
    EXPECT_EQ(wire::rx_template_match(t, f, w), c.match) << c.what;
  }
  // Checksum and lengths.
  auto f = good;
  f[kIp + 8] ^= 1;  // TTL without a new checksum
  EXPECT_FALSE(wire::rx_template_match(t, f, w)) << "IPv4 checksum";
  f = good;
  f.resize(f.size() + 10, 0);  // Ethernet padding after the datagram
  ASSERT_TRUE(wire::rx_template_match(t, f, w)) << "trailing padding";
  EXPECT_EQ(w.frame_length, good.size());
  EXPECT_EQ(w.payload_length, 64u);
  f = good;
  f.pop_back();  // the IP length now runs past the frame
  EXPECT_FALSE(wire::rx_template_match(t, f, w)) << "truncated";
  f = good;
  wire::store_be16(f.data() + kUdp + 4, wire::load_be16(f.data() + kUdp + 4) + 4);
  EXPECT_FALSE(wire::rx_template_match(t, f, w)) << "UDP length";
  const auto uc = write_only(reversed(ours), IBV_OPCODE_UC_RDMA_WRITE_ONLY, 5, 64);
  EXPECT_FALSE(wire::rx_template_match(t, uc, w)) << "UC frame, RC template";
  const auto pkey = write_only(reversed(ours), IBV_OPCODE_RC_RDMA_WRITE_ONLY, 5, 64, 0x8001);
  EXPECT_FALSE(wire::rx_template_match(t, pkey, w)) << "another P_Key";
  // A VLAN tag with another VID, or a frame of the other layout.
  const wire::PathSpec tagged = our_path(false, true);
  const wire::RxTemplate tt = wire::make_write_template(tagged, kQpn, IBV_OPCODE_RC, 0xFFFF);
  EXPECT_FALSE(wire::rx_template_match(tt, good, w)) << "untagged frame, tagged template";
  wire::PathSpec other_vid = reversed(tagged);
  other_vid.vlan_id = 0x124;
  EXPECT_FALSE(wire::rx_template_match(
      tt, write_only(other_vid, IBV_OPCODE_RC_RDMA_WRITE_ONLY, 5, 64), w)) << "VID";
  wire::PathSpec other_pcp = reversed(tagged);
  other_pcp.pcp = 5;
  EXPECT_TRUE(wire::rx_template_match(
      tt, write_only(other_pcp, IBV_OPCODE_RC_RDMA_WRITE_ONLY, 5, 64), w)) << "PCP";
  // A template that was never built matches nothing.
  EXPECT_FALSE(wire::rx_template_match(wire::RxTemplate{}, good, w));
}

// ---------------------------------------------------------------------------
// An endpoint with prediction against one without, on the same frames.

using transport::QpAttr;
using transport::QpState;
using transport::QpType;
using transport::Recovery;

struct Responder {
  transport::Device device;
  std::unique_ptr<endpoint::Endpoint> ep;
  transport::ProtectionDomain* pd = nullptr;
  transport::CompletionQueue* cq = nullptr;
  std::vector<uint8_t> memory = std::vector<uint8_t>(64 * 1024);
  transport::MemoryRegion* mr = nullptr;        // remote write + read
  transport::MemoryRegion* read_only = nullptr;  // remote read only
  uint32_t stale_rkey = 0;
  std::vector<transport::QueuePair*> qps;

  explicit Responder(bool predict) {
    endpoint::EndpointConfig cfg;
    cfg.header_prediction = predict;
    ep = std::make_unique<endpoint::Endpoint>(device, cfg);
    pd = device.alloc_pd();
    cq = device.create_cq(1 << 16);
    auto* gone = device.reg_mr(pd, memory.data(), 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    stale_rkey = gone->rkey();
    device.dereg_mr(gone);
    mr = device.reg_mr(pd, memory.data(), 48 * 1024,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
                       0);
    read_only = device.reg_mr(pd, memory.data() + 48 * 1024, 16 * 1024,
                              IBV_ACCESS_REMOTE_READ, 48 * 1024);
    for (const Kind& k : kKinds) {
      transport::QpInitAttr init;
      init.type = k.type;
      init.pd = pd;
      init.send_cq = init.recv_cq = cq;
      init.caps.max_recv_wr = 64;
      auto* qp = device.create_qp(init);
      ep->attach(*qp, cc::make_algorithm("none", {}, 100'000'000'000ull / 8));
      qps.push_back(qp);
      connect(qps.size() - 1, 1000);
    }
  }

  // RC go-back-N (IPv4), UC (IPv4 with a VLAN tag), RC selective repeat
  // (IPv6), RC without remote write access, RC left in RTR (IPv6, VLAN).
  struct Kind {
    QpType type;
    Recovery recovery;
    bool v6, vlan;
    uint32_t access;
    bool rts;
  };
  static constexpr Kind kKinds[] = {
      {QpType::kRc, Recovery::kGoBackN, false, false,
       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, true},
      {QpType::kUc, Recovery::kGoBackN, false, true, IBV_ACCESS_REMOTE_WRITE, true},
      {QpType::kRc, Recovery::kSelectiveRepeat, true, false, IBV_ACCESS_REMOTE_WRITE, true},
      {QpType::kRc, Recovery::kGoBackN, false, false, IBV_ACCESS_REMOTE_READ, true},
      {QpType::kRc, Recovery::kGoBackN, true, true, IBV_ACCESS_REMOTE_WRITE, false},
  };

  // RESET -> INIT -> RTR (-> RTS) expecting `psn`; again after a fatal NAK
  // put the QP in the error state, so the mix keeps reaching the responder.
  void connect(size_t q, uint32_t psn) {
    const Kind& k = kKinds[q];
    transport::QueuePair& qp = *qps[q];
    QpAttr a;
    a.qp_access_flags = k.access;
    a.path = our_path(k.v6, k.vlan);
    a.dest_qpn = 0x99;
    a.rq_psn = psn;
    a.path_mtu = IBV_MTU_1024;
    a.recovery = k.recovery;
    a.max_dest_rd_atomic = 4;
    if (qp.state() != QpState::kReset) {
      EXPECT_EQ(qp.modify(QpState::kReset, a), 0);
    }
    EXPECT_EQ(qp.modify(QpState::kInit, a), 0);
    EXPECT_EQ(qp.modify(QpState::kRtr, a), 0);
    if (k.rts) {
      EXPECT_EQ(qp.modify(QpState::kRts, a), 0);
    }
    ep->notify(qp.qpn());
  }

  std::vector<std::vector<uint8_t>> answers(uint64_t now) {
    std::vector<std::vector<uint8_t>> storage(32, std::vector<uint8_t>(2048)), out;
    std::vector<std::span<uint8_t>> bufs(storage.begin(), storage.end());
    std::vector<uint32_t> lens(bufs.size());
    for (size_t n; (n = ep->transmit(now, bufs, lens)) > 0;)
      for (size_t i = 0; i < n; ++i) out.emplace_back(bufs[i].begin(), bufs[i].begin() + lens[i]);
    return out;
  }
};

// A random frame for one of the responder's QPs: mostly the WRITE ONLY the
// template predicts, at or near the expected PSN, with every kind of flaw
// the predicted path must hand to parse() or the QP must turn down.
std::vector<uint8_t> random_frame(std::mt19937& rng, const Responder& r, size_t qp_index,
                                  uint32_t& next_psn) {
  const transport::QueuePair& qp = *r.qps[qp_index];
  const wire::PathSpec from = reversed(qp.attr().path);
  const uint8_t base = qp.type() == QpType::kUc ? IBV_OPCODE_UC : IBV_OPCODE_RC;
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  wire::TransportSpec t;
  t.opcode = static_cast<uint8_t>(base | IBV_OPCODE_RDMA_WRITE_ONLY);
  t.dest_qp = qp.qpn();
  t.psn = next_psn;
  t.ack_req = pick(4) == 0;
  uint32_t len = 4u * static_cast<uint32_t>(1 + pick(16));
  t.reth_rkey = r.mr->rkey();
  t.reth_va = static_cast<uint64_t>(pick(47 * 1024));
  const int flaw = pick(40);
  switch (flaw) {
    case 0: t.psn = wire::psn_add(next_psn, wire::kPsnMask); break;  // duplicate
    case 1: t.psn = wire::psn_add(next_psn, 3); break;               // gap
    case 2: t.reth_rkey = r.stale_rkey; break;
    case 3: t.reth_rkey = r.read_only->rkey(); break;
    case 4: t.reth_va = 48 * 1024 - 2; break;                        // out of range
    case 5: len = 0; break;
    case 6: len = 2048; break;                                       // over the MTU
    case 7: t.opcode = static_cast<uint8_t>(base | IBV_OPCODE_RDMA_WRITE_FIRST); len = 1024; break;
    case 8: t.opcode = static_cast<uint8_t>(base | IBV_OPCODE_RDMA_WRITE_LAST); break;
    case 9: t.opcode = static_cast<uint8_t>(base | IBV_OPCODE_SEND_ONLY); break;
    case 10:
      if (base == IBV_OPCODE_RC) {
        t.opcode = IBV_OPCODE_RC_RDMA_READ_REQUEST;
        t.reth_dma_length = 512;
      }
      break;
    case 11: t.opcode = static_cast<uint8_t>(base | IBV_OPCODE_RDMA_WRITE_ONLY_WITH_IMMEDIATE); break;
    default: break;
  }
  if (t.opcode != IBV_OPCODE_RC_RDMA_READ_REQUEST) t.reth_dma_length = len;
  if (flaw == 12) t.reth_dma_length = len + 4;
  std::vector<uint8_t> payload(t.opcode == IBV_OPCODE_RC_RDMA_READ_REQUEST ? 0 : len);
  for (auto& b : payload) b = static_cast<uint8_t>(rng());
  wire::PathSpec path = from;
  if (flaw == 13) path.ecn = wire::Ecn::kCe;
  if (flaw == 14) path.dscp = 26;
  std::vector<uint8_t> f(payload.size() + 256);
  f.resize(wire::build_packet(path, t, payload, f));
  const size_t l3 = path.vlan ? 18 : 14;
  switch (flaw) {
    case 15: f[f.size() - 1] ^= 0x01; break;                // ICRC
    case 16: if (!path.src_ip.v6) f[l3 + 10] ^= 0x01; break;  // IPv4 checksum
    case 17: f.resize(f.size() + 6, 0); break;              // Ethernet padding
    case 18: f.resize(f.size() - 3); break;                 // truncated
    default: break;
  }
  // The sender's next PSN: on after a frame the responder takes, and
  // sometimes after one it refuses (the frames after it then arrive out of
  // order, as after a loss).
  if (flaw >= 19 || flaw == 13 || flaw == 14 || flaw == 17 || pick(3) == 0)
    next_psn = wire::psn_add(next_psn, 1);
  return f;
}

TEST(Endpoint, HeaderPredictionChangesNothingButSpeed) {
  Responder predicted(true), parsed(false);
  std::mt19937 rng(20261129);
  std::vector<uint32_t> next_psn(predicted.qps.size(), 1000);
  uint64_t now = 1;
  int reconnects = 0;
  std::vector<std::vector<uint8_t>> burst;
  for (int round = 0; round < 400; ++round) {
    burst.clear();
    // Each burst starts where the responder expects it (a go-back-N sender
    // that went back at once), so the mix keeps reaching in-order frames.
    for (size_t q = 0; q < next_psn.size(); ++q) next_psn[q] = predicted.qps[q]->expected_psn();
    const size_t n = 1 + rng() % endpoint::Endpoint::kRxBatch;
    for (size_t i = 0; i < n; ++i) {
      // Runs of one QP (as bursts mostly are) and mixes.
      const size_t q = rng() % 3 == 0 ? rng() % predicted.qps.size() : round % predicted.qps.size();
      burst.push_back(random_frame(rng, predicted, q, next_psn[q]));
    }
    std::vector<std::span<const uint8_t>> views(burst.begin(), burst.end());
    predicted.ep->receive_burst(views, now);
    parsed.ep->receive_burst(views, now);
    ASSERT_EQ(predicted.answers(now), parsed.answers(now)) << "round " << round;
    now += 10'000;
    for (size_t q = 0; q < predicted.qps.size(); ++q) {
      ASSERT_EQ(predicted.qps[q]->state(), parsed.qps[q]->state());
      if (predicted.qps[q]->state() == QpState::kErr && round < 300) {
        ++reconnects;
        predicted.connect(q, next_psn[q]);
        parsed.connect(q, next_psn[q]);
      }
    }
    if (round == 300) {
      // A QP that errs from here on: neither way may touch its memory.
      ASSERT_EQ(predicted.qps[0]->modify(QpState::kErr, {}), 0);
      ASSERT_EQ(parsed.qps[0]->modify(QpState::kErr, {}), 0);
    }
  }
  std::vector<std::pair<std::string, uint64_t>> c1, c2;
  predicted.ep->counters().for_each([&](std::string_view k, uint64_t v) { c1.emplace_back(k, v); });
  parsed.ep->counters().for_each([&](std::string_view k, uint64_t v) { c2.emplace_back(k, v); });
  EXPECT_EQ(c1, c2);
  for (size_t q = 0; q < predicted.qps.size(); ++q) {
    std::vector<std::pair<std::string, uint64_t>> q1, q2;
    predicted.qps[q]->counters().for_each([&](std::string_view k, uint64_t v) { q1.emplace_back(k, v); });
    parsed.qps[q]->counters().for_each([&](std::string_view k, uint64_t v) { q2.emplace_back(k, v); });
    EXPECT_EQ(q1, q2) << "QP " << q;
    EXPECT_EQ(predicted.qps[q]->expected_psn(), parsed.qps[q]->expected_psn()) << "QP " << q;
    EXPECT_EQ(predicted.qps[q]->msn(), parsed.qps[q]->msn()) << "QP " << q;
    EXPECT_EQ(predicted.qps[q]->debug_state(), parsed.qps[q]->debug_state()) << "QP " << q;
  }
  EXPECT_EQ(predicted.memory, parsed.memory);
  std::vector<transport::WorkCompletion> w1(1 << 16), w2(1 << 16);
  const int n1 = predicted.cq->poll(w1), n2 = parsed.cq->poll(w2);
  ASSERT_EQ(n1, n2);
  for (int i = 0; i < n1; ++i) {
    EXPECT_EQ(w1[i].status, w2[i].status);
    EXPECT_EQ(w1[i].opcode, w2[i].opcode);
    EXPECT_EQ(w1[i].qp_num, w2[i].qp_num);
  }
  // The mix reached what it is meant to: many frames delivered (the plain
  // ones predicted; that the fast path ran is shown by taking any of its
  // checks out, which fails this test), and every kind of refusal.
  const auto& c = predicted.ep->counters();
  EXPECT_GT(c.rx_delivered, 3000u);
  EXPECT_GT(c.rx_malformed, 100u);
  uint64_t seq_naks = 0, fatal_naks = 0;
  for (auto* qp : predicted.qps) {
    seq_naks += qp->counters().naks_seq_sent;
    fatal_naks += qp->counters().naks_invalid_request_sent + qp->counters().naks_remote_access_sent;
  }
  EXPECT_GT(seq_naks, 10u);
  EXPECT_GT(fatal_naks, 10u);
  EXPECT_GT(reconnects, 10);
  EXPECT_GT(predicted.qps[1]->counters().rx_request_packets, 500u);  // UC
  EXPECT_GT(predicted.qps[2]->counters().rx_request_packets, 500u);  // selective repeat
  EXPECT_GT(predicted.qps[4]->counters().rx_request_packets, 500u);  // RTR
  EXPECT_GT(predicted.qps[0]->counters().rx_dropped_bad_state, 50u);  // after round 300
  EXPECT_GT(predicted.qps[2]->counters().rx_ooo_accepted, 10u);
}

// A response queue with no room: the predicted WRITE must be dropped
// exactly as execute() drops it (the requester resends it).
TEST(Endpoint, HeaderPredictionLeavesAFullResponseQueueToTheRules) {
  Responder predicted(true), parsed(false);
  const transport::QueuePair& qp = *predicted.qps[0];
  const wire::PathSpec from = reversed(qp.attr().path);
  std::vector<std::vector<uint8_t>> frames;
  const uint32_t psn = qp.expected_psn();
  // SENDs with no receive WQE posted: an RNR NAK each, the PSN not used.
  for (int i = 0; i < 40; ++i) {
    wire::TransportSpec t;
    t.opcode = IBV_OPCODE_RC_SEND_ONLY;
    t.dest_qp = qp.qpn();
    t.psn = psn;
    std::vector<uint8_t> payload(16, 1), f(300);
    f.resize(wire::build_packet(from, t, payload, f));
    frames.push_back(f);
  }
  for (uint32_t i = 0; i < 3; ++i) {
    wire::TransportSpec t;
    t.opcode = IBV_OPCODE_RC_RDMA_WRITE_ONLY;
    t.dest_qp = qp.qpn();
    t.psn = psn + i;
    t.reth_rkey = predicted.mr->rkey();
    t.reth_va = 64 * i;
    t.reth_dma_length = 64;
    std::vector<uint8_t> payload(64, static_cast<uint8_t>(0x70 + i)), f(300);
    f.resize(wire::build_packet(from, t, payload, f));
    frames.push_back(f);
  }
  std::vector<std::span<const uint8_t>> views(frames.begin(), frames.end());
  predicted.ep->receive_burst(views, 1);
  parsed.ep->receive_burst(views, 1);
  EXPECT_GT(qp.counters().rx_response_queue_full, 0u);
  EXPECT_EQ(predicted.answers(1), parsed.answers(1));
  EXPECT_EQ(predicted.memory, parsed.memory);
  std::vector<std::pair<std::string, uint64_t>> q1, q2;
  predicted.qps[0]->counters().for_each([&](std::string_view k, uint64_t v) { q1.emplace_back(k, v); });
  parsed.qps[0]->counters().for_each([&](std::string_view k, uint64_t v) { q2.emplace_back(k, v); });
  EXPECT_EQ(q1, q2);
  EXPECT_EQ(predicted.qps[0]->expected_psn(), parsed.qps[0]->expected_psn());
}

// States that take no requests: a predicted WRITE is dropped as on_packet()
// drops it (IBA 10.3.1), and nothing is placed.
TEST(Endpoint, HeaderPredictionTakesNothingInTheErrorState) {
  Responder r(true);
  transport::QueuePair& qp = *r.qps[0];
  ASSERT_EQ(qp.modify(QpState::kErr, {}), 0);
  wire::TransportSpec t;
  t.opcode = IBV_OPCODE_RC_RDMA_WRITE_ONLY;
  t.dest_qp = qp.qpn();
  t.psn = qp.expected_psn();
  t.reth_rkey = r.mr->rkey();
  t.reth_dma_length = 64;
  std::vector<uint8_t> payload(64, 0xEE), f(300);
  f.resize(wire::build_packet(reversed(qp.attr().path), t, payload, f));
  const std::span<const uint8_t> view(f);
  r.ep->receive_burst(std::span(&view, 1), 1);
  EXPECT_EQ(qp.counters().rx_dropped_bad_state, 1u);
  EXPECT_EQ(r.memory[0], 0);
}

}  // namespace
}  // namespace droce
