// Header prediction (wire/rx_template.h, Endpoint::receive_burst): the
// template matches exactly the plain RDMA WRITE frames (ONLY, FIRST, MIDDLE,
// LAST) of its QP's peer, and an endpoint with prediction behaves exactly
// like one that parses every frame (counters, placed bytes, answers,
// completions) over a random mix of frames, messages and QP kinds.
#include <gtest/gtest.h>

#include <functional>
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

// A template keeps only its bytes; the mask it is compared under is its
// layout's (wire::detail::Layout::kMask). That holds only if which bits a
// template fixes never depends on the path's values: built from paths with
// every value varied, each mask must equal its layout's.
TEST(RxTemplate, WhichBitsAreFixedDependsOnTheLayoutAlone) {
  uint32_t seed = 1;
  auto next = [&seed] { return seed = seed * 1664525u + 1013904223u; };
  for (const Layout l : kLayouts) {
    const auto& want = l.v6 ? (l.vlan ? wire::detail::Layout<true, true>::kMask.bytes
                                      : wire::detail::Layout<true, false>::kMask.bytes)
                            : (l.vlan ? wire::detail::Layout<false, true>::kMask.bytes
                                      : wire::detail::Layout<false, false>::kMask.bytes);
    for (int i = 0; i < 200; ++i) {
      wire::PathSpec p = our_path(l.v6, l.vlan);
      p.vlan_id = static_cast<uint16_t>(next());
      for (uint8_t& b : p.src_ip.bytes) b = static_cast<uint8_t>(next());
      for (uint8_t& b : p.dst_ip.bytes) b = static_cast<uint8_t>(next());
      const uint8_t base = next() % 2 ? uint8_t{IBV_OPCODE_RC} : uint8_t{IBV_OPCODE_UC};
      const auto bytes = wire::detail::write_template_bytes(
          p, next() & 0xFFFFFF, base, static_cast<uint16_t>(next()));
      ASSERT_EQ(bytes.mask, want) << "v6 " << l.v6 << " vlan " << l.vlan << " path " << i;
      // The bytes a template keeps are already under the mask.
      for (size_t k = 0; k < want.size(); ++k)
        ASSERT_EQ(bytes.tmpl.expect[k] & ~want[k], 0) << k;
    }
  }
}

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
        // The position, for the QP to judge the message sequence by, and no
        // stale RETH fields where the frame has none.
        ASSERT_TRUE(wire::rx_template_match(t, f, w));
        EXPECT_EQ(w.position, wire::opcode_info(static_cast<uint8_t>(base | op)).position);
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
// rx_template_match_run over frames in a row gives what
// rx_template_match and icrc_check give frame by frame, whether a frame
// repeats the previous one's headers (same opcode and length: the short
// check) or not, and stops at the first frame the template does not match.
TEST(RxTemplate, MatchRunEqualsFrameByFrame) {
  for (const Layout l : kLayouts) {
    const wire::PathSpec ours = our_path(l.v6, l.vlan);
    const wire::RxTemplate t = wire::make_write_template(ours, kQpn, IBV_OPCODE_RC, 0xFFFF);
    std::vector<std::vector<uint8_t>> frames;
    uint32_t psn = 5;
    for (const uint8_t op : kWriteOps)
      for (uint32_t len : {8u, 8u, 128u, 128u, 128u, 4096u, 8u})
        frames.push_back(write_only(reversed(ours), static_cast<uint8_t>(IBV_OPCODE_RC | op),
                                    psn++, len));
    frames.push_back(write_only(reversed(ours), IBV_OPCODE_RC_SEND_ONLY, psn++, 8));
    frames.push_back(frames[0]);
    std::vector<std::span<const uint8_t>> views(frames.begin(), frames.end());
    std::vector<wire::PredictedWrite> run(frames.size()), portable(frames.size());
    std::vector<wire::IcrcCheck> checks(frames.size()), portable_checks(frames.size());
    const size_t n = wire::rx_template_match_run(t, views, run.data(), checks.data());
    ASSERT_EQ(n, frames.size() - 2) << "stops at the SEND";
    // The loop without AVX-512 (the one CPUs without it run) stops there too.
    ASSERT_EQ(wire::detail::match_run_portable(t, views, portable.data(), portable_checks.data()),
              n);
    // A frame that repeats the one before in all but the destination QP
    // ends the run, in both loops.
    auto other_qp = frames[1];
    other_qp[wire::predicted_bth_offset(other_qp) + 7] ^= 1;
    const std::span<const uint8_t> two[] = {frames[0], other_qp};
    EXPECT_EQ(wire::rx_template_match_run(t, two, run.data(), checks.data()), 1u);
    EXPECT_EQ(wire::detail::match_run_portable(t, two, portable.data(), portable_checks.data()), 1u);
    wire::rx_template_match_run(t, views, run.data(), checks.data());
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(portable[i].psn, run[i].psn);
      EXPECT_EQ(portable[i].va, run[i].va);
      EXPECT_EQ(portable[i].payload_length, run[i].payload_length);
      EXPECT_EQ(portable_checks[i].carried, checks[i].carried);
    }
    for (size_t i = 0; i < n; ++i) {
      SCOPED_TRACE(::testing::Message() << "v6 " << l.v6 << " vlan " << l.vlan << " frame " << i);
      wire::PredictedWrite w;
      ASSERT_TRUE(wire::rx_template_match(t, frames[i], w));
      EXPECT_EQ(run[i].position, w.position);
      EXPECT_EQ(run[i].psn, w.psn);
      EXPECT_EQ(run[i].ack_req, w.ack_req);
      EXPECT_EQ(run[i].va, w.va);
      EXPECT_EQ(run[i].rkey, w.rkey);
      EXPECT_EQ(run[i].dma_length, w.dma_length);
      EXPECT_EQ(run[i].payload, w.payload);
      EXPECT_EQ(run[i].payload_length, w.payload_length);
      EXPECT_EQ(run[i].frame_length, w.frame_length);
      const wire::IcrcCheck c = wire::icrc_check(t, frames[i], w);
      EXPECT_EQ(checks[i].l3, c.l3);
      EXPECT_EQ(checks[i].len_before_icrc, c.len_before_icrc);
      EXPECT_EQ(checks[i].ipv6, c.ipv6);
      EXPECT_EQ(checks[i].carried, c.carried);
    }
  }
}

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

// The opcode filter rx_template_match applies first lets through exactly
// the opcodes some template (RC or UC) can match, by the opcode table: no
// opcode a template would take is turned away, and nothing else costs the
// header compare.
TEST(RxTemplate, OpcodeFilterPassesExactlyWhatATemplateCanMatch) {
  for (int op = 0; op < 256; ++op) {
    const wire::OpcodeInfo& info = wire::opcode_info(static_cast<uint8_t>(op));
    const bool rc_or_uc = (op & 0xE0) == IBV_OPCODE_RC || (op & 0xE0) == IBV_OPCODE_UC;
    const bool plain_write = info.supported && info.operation == wire::Operation::kWrite &&
                             !(info.ext & wire::kExtImmDt);
    EXPECT_EQ(wire::predictable_opcode(static_cast<uint8_t>(op)), rc_or_uc && plain_write)
        << op;
  }
  // And the templates agree: a frame of each of the four is matched.
  const wire::PathSpec ours = our_path(false, false);
  wire::PredictedWrite w;
  for (uint8_t base : {uint8_t{IBV_OPCODE_RC}, uint8_t{IBV_OPCODE_UC}}) {
    const wire::RxTemplate t = wire::make_write_template(ours, kQpn, base, 0xFFFF);
    for (uint8_t op : {IBV_OPCODE_RDMA_WRITE_FIRST, IBV_OPCODE_RDMA_WRITE_MIDDLE,
                       IBV_OPCODE_RDMA_WRITE_LAST, IBV_OPCODE_RDMA_WRITE_ONLY}) {
      const uint8_t code = static_cast<uint8_t>(base | op);
      ASSERT_TRUE(wire::predictable_opcode(code)) << int{code};
      EXPECT_TRUE(wire::rx_template_match(t, write_only(reversed(ours), code, 9, 64), w))
          << int{code};
    }
  }
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
  // Both endpoints get the same frames, keys included: their Devices draw
  // the same MR keys.
  transport::Device device{0x6B657973};
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
  // (IPv6), RC without remote write access, RC left in RTR (IPv6, VLAN) that
  // also ACKs every third packet unasked.
  struct Kind {
    QpType type;
    Recovery recovery;
    bool v6, vlan;
    uint32_t access;
    bool rts;
    uint32_t ack_every_n;
  };
  static constexpr Kind kKinds[] = {
      {QpType::kRc, Recovery::kGoBackN, false, false,
       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, true, 0},
      {QpType::kUc, Recovery::kGoBackN, false, true, IBV_ACCESS_REMOTE_WRITE, true, 0},
      {QpType::kRc, Recovery::kSelectiveRepeat, true, false, IBV_ACCESS_REMOTE_WRITE, true, 0},
      {QpType::kRc, Recovery::kGoBackN, false, false, IBV_ACCESS_REMOTE_READ, true, 0},
      {QpType::kRc, Recovery::kGoBackN, true, true, IBV_ACCESS_REMOTE_WRITE, false, 3},
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
    a.ack_every_n = k.ack_every_n;
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

// What a requester sends one QP: RDMA WRITE messages of one packet (ONLY)
// or two to six (FIRST, MIDDLE..., LAST at the QP's MTU), each packet
// planned once by its PSN, so a go-back-N resend repeats it exactly.
struct Planned {
  uint8_t op = 0;  // IBV_OPCODE_RDMA_WRITE_*, without the transport
  uint64_t va = 0;  // the message's RETH
  uint32_t dma_length = 0;
  uint32_t len = 0;  // this packet's payload
};

struct Sender {
  uint32_t next_psn = 1000;
  std::map<uint32_t, Planned> plan;  // PSNs stay far from the wrap here

  // The packet at `psn`; a PSN not planned starts a new message there (what
  // was planned after it is forgotten).
  const Planned& at(std::mt19937& rng, uint32_t psn, uint32_t mtu) {
    if (auto it = plan.find(psn); it != plan.end()) return it->second;
    plan.erase(plan.lower_bound(psn), plan.end());
    auto pick = [&](uint32_t n) { return rng() % n; };
    const uint32_t packets = pick(3) == 0 ? 1 : 2 + pick(5);
    // A one-packet message is small (the template's own case); a last
    // packet is a whole number of words, now and then not (a pad).
    const uint32_t last = packets == 1   ? 4 * (1 + pick(16))
                          : pick(8) == 0 ? 1 + pick(mtu)
                                         : 4 * (1 + pick(mtu / 4));
    const uint32_t total = (packets - 1) * mtu + last;
    const uint64_t va = pick(48 * 1024 - total + 1);
    for (uint32_t k = 0; k < packets; ++k) {
      Planned& p = plan[psn + k];
      p.op = packets == 1    ? IBV_OPCODE_RDMA_WRITE_ONLY
             : k == 0        ? IBV_OPCODE_RDMA_WRITE_FIRST
             : k + 1 < packets ? IBV_OPCODE_RDMA_WRITE_MIDDLE
                               : IBV_OPCODE_RDMA_WRITE_LAST;
      p.va = va;
      p.dma_length = total;
      p.len = k + 1 < packets ? mtu : last;
    }
    return plan[psn];
  }
};

// A random frame for one of the responder's QPs: mostly the next packet of
// the sender's plan, at or near the expected PSN, with every kind of flaw
// the predicted path must hand to parse() or the QP must turn down, inside
// messages too (lost, repeated, reordered packets, wrong lengths, a DMA
// length the packets do not add up to, another opcode cutting in).
std::vector<uint8_t> random_frame(std::mt19937& rng, const Responder& r, size_t qp_index,
                                  Sender& sender) {
  const transport::QueuePair& qp = *r.qps[qp_index];
  const wire::PathSpec from = reversed(qp.attr().path);
  const uint8_t base = qp.type() == QpType::kUc ? IBV_OPCODE_UC : IBV_OPCODE_RC;
  const uint32_t mtu = qp.mtu();
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const int flaw = pick(56);
  uint32_t psn = sender.next_psn;
  if (flaw == 0) psn = wire::psn_add(psn, wire::kPsnMask);  // duplicate
  if (flaw == 1) psn = wire::psn_add(psn, 1 + pick(3));     // gap (reordered or lost)
  if (flaw == 23) psn = sender.next_psn = wire::psn_add(psn, 1);  // one lost on the way
  const Planned p = sender.at(rng, psn, mtu);
  wire::TransportSpec t;
  t.opcode = static_cast<uint8_t>(base | p.op);
  t.dest_qp = qp.qpn();
  t.psn = psn;
  t.ack_req = pick(4) == 0;
  uint32_t len = p.len;
  t.reth_rkey = r.mr->rkey();
  t.reth_va = p.va;
  t.reth_dma_length = p.dma_length;
  switch (flaw) {
    case 2: t.reth_rkey = r.stale_rkey; break;
    case 3: t.reth_rkey = r.read_only->rkey(); break;
    case 4: t.reth_va = 48 * 1024 - 2; break;                        // out of range
    case 5: len = 0; break;
    case 6: len = p.op == IBV_OPCODE_RDMA_WRITE_ONLY ? 2048 : (len + 4) & ~3u; break;  // long
    case 20: len = len > 4 ? (len - 4) & ~3u : len; break;           // short
    case 7:  // another message cuts in
      t.opcode = static_cast<uint8_t>(base | IBV_OPCODE_RDMA_WRITE_FIRST);
      len = mtu;
      t.reth_dma_length = 2 * mtu;
      break;
    case 8: t.opcode = static_cast<uint8_t>(base | IBV_OPCODE_RDMA_WRITE_LAST); break;
    case 22: t.opcode = static_cast<uint8_t>(base | IBV_OPCODE_RDMA_WRITE_MIDDLE); break;
    case 9: t.opcode = static_cast<uint8_t>(base | IBV_OPCODE_SEND_ONLY); break;
    case 10:
      if (base == IBV_OPCODE_RC) {
        t.opcode = IBV_OPCODE_RC_RDMA_READ_REQUEST;
        t.reth_dma_length = 512;
      }
      break;
    case 11:
      t.opcode = static_cast<uint8_t>(
          base | (p.op == IBV_OPCODE_RDMA_WRITE_LAST ? IBV_OPCODE_RDMA_WRITE_LAST_WITH_IMMEDIATE
                                                     : IBV_OPCODE_RDMA_WRITE_ONLY_WITH_IMMEDIATE));
      break;
    case 12: t.reth_dma_length += 4; break;  // the packets fall short of it
    case 21: t.reth_dma_length -= 4; break;  // the packets run past it
    default: break;
  }
  // The frame as built must be one (build_packet pads only a last packet).
  const wire::OpcodeInfo& info = wire::opcode_info(t.opcode);
  if (!info.is_last_or_only()) len &= ~3u;
  std::vector<uint8_t> payload(info.payload ? len : 0);
  for (auto& b : payload) b = static_cast<uint8_t>(rng());
  wire::PathSpec path = from;
  if (flaw == 13) path.ecn = wire::Ecn::kCe;
  if (flaw == 14) path.dscp = 26;
  std::vector<uint8_t> f(payload.size() + 256);
  f.resize(wire::build_packet(path, t, payload, f));
  EXPECT_FALSE(f.empty()) << "flaw " << flaw;
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
  if (flaw >= 23 || flaw == 13 || flaw == 14 || flaw == 17 || pick(3) == 0)
    sender.next_psn = wire::psn_add(sender.next_psn, 1);
  return f;
}

TEST(Endpoint, HeaderPredictionChangesNothingButSpeed) {
  Responder predicted(true), parsed(false);
  std::mt19937 rng(20261129);
  std::vector<Sender> senders(predicted.qps.size());
  uint64_t now = 1;
  int reconnects = 0;
  std::vector<std::vector<uint8_t>> burst;
  for (int round = 0; round < 600; ++round) {
    burst.clear();
    // Each burst starts where the responder expects it (a go-back-N sender
    // that went back at once), so the mix keeps reaching in-order frames.
    for (size_t q = 0; q < senders.size(); ++q)
      senders[q].next_psn = predicted.qps[q]->expected_psn();
    const size_t n = 1 + rng() % endpoint::Endpoint::kRxBatch;
    for (size_t i = 0; i < n; ++i) {
      // Runs of one QP (as bursts mostly are) and mixes.
      const size_t q = rng() % 3 == 0 ? rng() % predicted.qps.size() : round % predicted.qps.size();
      burst.push_back(random_frame(rng, predicted, q, senders[q]));
    }
    // Now and then two neighbours swapped on the way (reordered packets).
    if (n > 1 && rng() % 4 == 0) {
      const size_t i = rng() % (n - 1);
      std::swap(burst[i], burst[i + 1]);
    }
    std::vector<std::span<const uint8_t>> views(burst.begin(), burst.end());
    predicted.ep->receive_burst(views, now);
    parsed.ep->receive_burst(views, now);
    ASSERT_EQ(predicted.answers(now), parsed.answers(now)) << "round " << round;
    now += 10'000;
    for (size_t q = 0; q < predicted.qps.size(); ++q) {
      ASSERT_EQ(predicted.qps[q]->state(), parsed.qps[q]->state());
      if (predicted.qps[q]->state() == QpState::kErr && round < 500) {
        ++reconnects;
        predicted.connect(q, senders[q].next_psn);
        parsed.connect(q, senders[q].next_psn);
        senders[q].plan.clear();  // a new connection starts a new message
      }
    }
    if (round == 500) {
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
  // Requests that reached the QP: taken, or dropped after a fatal error
  // (those count only as rx_dropped_bad_state).
  auto reached = [&](size_t q) {
    return predicted.qps[q]->counters().rx_request_packets +
           predicted.qps[q]->counters().rx_dropped_bad_state;
  };
  EXPECT_GT(reached(1), 500u);  // UC
  EXPECT_GT(reached(2), 500u);  // selective repeat
  EXPECT_GT(reached(4), 500u);  // RTR
  EXPECT_GT(predicted.qps[0]->counters().rx_dropped_bad_state, 50u);  // after iteration 500
  EXPECT_GT(predicted.qps[2]->counters().rx_ooo_accepted, 10u);
}

// ---------------------------------------------------------------------------
// Multi-packet messages, one precondition of try_predicted_write at a time:
// the frames are ones the predicted path would take if that check were
// missing, and must end as the general path ends them.

constexpr uint32_t kMtu = 1024;  // Responder's QPs

// One WRITE packet to QP `q` of `r`: `op` without the transport bits, the
// RETH (FIRST/ONLY) from va/dma_length and `rkey` (0: the writable MR).
struct Packet {
  uint8_t op;
  uint32_t psn;  // from the QP's starting PSN (1000)
  uint32_t len;
  uint64_t va = 0;
  uint32_t dma_length = 0;
  uint8_t fill = 0x11;  // payload bytes: fill + i
  uint32_t rkey = 0;
};

std::vector<uint8_t> packet(const Responder& r, size_t q, const Packet& p) {
  const transport::QueuePair& qp = *r.qps[q];
  const uint8_t base = qp.type() == QpType::kUc ? IBV_OPCODE_UC : IBV_OPCODE_RC;
  wire::TransportSpec t;
  t.opcode = static_cast<uint8_t>(base | p.op);
  t.dest_qp = qp.qpn();
  t.psn = 1000 + p.psn;
  t.ack_req = p.op == IBV_OPCODE_RDMA_WRITE_LAST || p.op == IBV_OPCODE_RDMA_WRITE_ONLY;
  t.reth_va = p.va;
  t.reth_rkey = p.rkey ? p.rkey : r.mr->rkey();
  t.reth_dma_length = p.dma_length;
  std::vector<uint8_t> payload(p.len);
  for (uint32_t i = 0; i < p.len; ++i) payload[i] = static_cast<uint8_t>(p.fill + i);
  std::vector<uint8_t> f(p.len + 256);
  f.resize(wire::build_packet(reversed(qp.attr().path), t, payload, f));
  EXPECT_FALSE(f.empty());
  return f;
}

// Two responders, one predicting and one parsing, fed the same bursts;
// after each burst their answers must be equal, and at any time the rest.
struct Twins {
  Responder predicted{true}, parsed{false};
  uint64_t now = 1;

  void burst(size_t q, const std::vector<Packet>& packets) {
    std::vector<std::vector<uint8_t>> frames;
    for (const Packet& p : packets) frames.push_back(packet(predicted, q, p));
    feed(frames);
  }

  void feed(const std::vector<std::vector<uint8_t>>& frames) {
    std::vector<std::span<const uint8_t>> views(frames.begin(), frames.end());
    predicted.ep->receive_burst(views, now);
    parsed.ep->receive_burst(views, now);
    drain();
  }

  // Every answer out (the pacer spaces them), the same both ways.
  void drain() {
    for (int i = 0; i < 8; ++i, now += 10'000)
      EXPECT_EQ(predicted.answers(now), parsed.answers(now));
  }

  void expect_same() {
    std::vector<std::pair<std::string, uint64_t>> c1, c2;
    auto both = [&](auto&& each) {
      c1.clear();
      c2.clear();
      each(predicted, c1);
      each(parsed, c2);
      EXPECT_EQ(c1, c2);
    };
    both([](Responder& r, auto& c) {
      r.ep->counters().for_each([&](std::string_view k, uint64_t v) { c.emplace_back(k, v); });
      for (auto* qp : r.qps) {
        qp->counters().for_each([&](std::string_view k, uint64_t v) { c.emplace_back(k, v); });
        c.emplace_back("epsn", qp->expected_psn());
        c.emplace_back("msn", qp->msn());
        c.emplace_back("state", static_cast<uint64_t>(qp->state()));
      }
    });
    EXPECT_EQ(predicted.memory, parsed.memory);
  }

  transport::QpCounters counters(size_t q) const { return predicted.qps[q]->counters(); }
};

using W = Packet;
constexpr uint8_t kFirst = IBV_OPCODE_RDMA_WRITE_FIRST, kMiddle = IBV_OPCODE_RDMA_WRITE_MIDDLE,
                  kLast = IBV_OPCODE_RDMA_WRITE_LAST, kOnly = IBV_OPCODE_RDMA_WRITE_ONLY;

// The plain case, RC and UC: messages placed whole and in place, one after
// the other (the MSN moves at each LAST), in one burst and across bursts.
TEST(HeaderPredictionMessages, InOrderMessagesArePlacedInPlace) {
  for (size_t q : {0u, 1u}) {
    Twins t;
    t.burst(q, {W{kFirst, 0, kMtu, 100, 2560, 0x20}, W{kMiddle, 1, kMtu, 0, 0, 0x40},
                W{kLast, 2, 512, 0, 0, 0x60}, W{kOnly, 3, 64, 8000, 64, 0x80},
                W{kFirst, 4, kMtu, 9000, 2048, 0xA0}});
    t.burst(q, {W{kLast, 5, kMtu, 0, 0, 0xC0}});
    t.expect_same();
    const auto& m = t.predicted.memory;
    EXPECT_EQ(m[100], 0x20);
    EXPECT_EQ(m[100 + kMtu], 0x40);
    EXPECT_EQ(m[100 + 2 * kMtu], 0x60);
    EXPECT_EQ(m[100 + 2 * kMtu + 511], static_cast<uint8_t>(0x60 + 511));
    EXPECT_EQ(m[100 + 2 * kMtu + 512], 0);
    EXPECT_EQ(m[8000], 0x80);
    EXPECT_EQ(m[9000 + kMtu], 0xC0);
    EXPECT_EQ(t.predicted.qps[q]->msn(), 3u);
    EXPECT_EQ(t.predicted.qps[q]->expected_psn(), 1006u);
  }
}

// Runs of WRITE ONLY, which the predicted path takes together: each ACK
// of a run carries the PSN and MSN of its own packet, a run ends at a PSN
// gap (one sequence NAK) and the next in-order run re-arms that NAK, so a
// second gap NAKs again (IBA 9.7.5.2.1). RC, UC, and RC ACKing every third
// packet (QP 4).
TEST(HeaderPredictionMessages, RunsOfWriteOnly) {
  for (size_t q : {0u, 1u, 4u}) {
    Twins t;
    std::vector<Packet> run;
    for (uint32_t i = 0; i < 12; ++i)
      run.push_back(W{kOnly, i, 64, 64u * i, 64, static_cast<uint8_t>(i)});
    t.burst(q, run);
    t.expect_same();
    EXPECT_EQ(t.predicted.qps[q]->msn(), 12u);
    t.burst(q, {W{kOnly, 12, 64, 1024, 64}, W{kOnly, 14, 64, 1088, 64}});  // 13 lost
    t.burst(q, {W{kOnly, 13, 64, 1152, 64}, W{kOnly, 14, 64, 1216, 64},
                W{kOnly, 16, 64, 1280, 64}});  // 15 lost
    t.expect_same();
    EXPECT_EQ(t.counters(q).naks_seq_sent, q == 1 ? 0u : 2u);  // UC: no NAKs
    // UC resynchronises at a gap (IBA 9.8.3): it takes 14, then 16.
    EXPECT_EQ(t.predicted.qps[q]->expected_psn(), q == 1 ? 1017u : 1015u);
  }
}

// Opcode sequence (IBA 9.7.5.2.2): a MIDDLE or LAST with no message in
// progress, and a FIRST or ONLY inside one, are invalid requests on RC;
// UC drops the message cut short and starts the new one (IBA 9.8.3).
TEST(HeaderPredictionMessages, OpcodeOutOfSequence) {
  {
    Twins t;  // after a whole message: no message in progress
    t.burst(0, {W{kOnly, 0, 64, 0, 64}, W{kMiddle, 1, kMtu}});
    EXPECT_EQ(t.counters(0).naks_invalid_request_sent, 1u);
    t.expect_same();
  }
  {
    Twins t;
    t.burst(0, {W{kOnly, 0, 64, 0, 64}, W{kLast, 1, 64}});
    EXPECT_EQ(t.counters(0).naks_invalid_request_sent, 1u);
    t.expect_same();
  }
  for (uint8_t cut_in : {kFirst, kOnly}) {
    Twins t;
    t.burst(0, {W{kFirst, 0, kMtu, 0, 3072}, W{cut_in, 1, kMtu, 4096, cut_in == kOnly ? kMtu : 2048}});
    EXPECT_EQ(t.counters(0).naks_invalid_request_sent, 1u);
    t.expect_same();
  }
  for (uint8_t send : {uint8_t{IBV_OPCODE_SEND_MIDDLE}, uint8_t{IBV_OPCODE_SEND_LAST}}) {
    Twins t;  // another operation continuing the WRITE
    t.burst(0, {W{kFirst, 0, kMtu, 0, 2048}, W{send, 1, kMtu}});
    EXPECT_EQ(t.counters(0).naks_invalid_request_sent, 1u);
    t.expect_same();
  }
  {
    Twins t;  // UC: the new message is taken, the old one counted lost
    t.burst(1, {W{kFirst, 0, kMtu, 0, 3072}, W{kFirst, 1, kMtu, 4096, 2048, 0x33},
                W{kLast, 2, kMtu, 0, 0, 0x44}});
    EXPECT_EQ(t.counters(1).rx_dropped_uc, 1u);
    EXPECT_EQ(t.predicted.qps[1]->msn(), 1u);
    EXPECT_EQ(t.predicted.memory[4096 + kMtu], 0x44);
    t.expect_same();
  }
}

// Each case on the RC QP (0: a NAK, invalid request) and on the UC QP (1:
// the message dropped), both ways alike; `also` checks more of each.
void expect_each_rejected(const std::vector<std::vector<Packet>>& cases,
                          const std::function<void(Twins&, size_t)>& also = {}) {
  for (size_t q : {0u, 1u}) {
    for (const auto& c : cases) {
      Twins t;
      t.burst(q, c);
      if (q == 0) {
        EXPECT_EQ(t.counters(q).naks_invalid_request_sent, 1u);
      } else {
        EXPECT_EQ(t.counters(q).rx_dropped_uc, 1u);
      }
      if (also) also(t, q);
      t.expect_same();
    }
  }
}

// Payload lengths (IBA 9.7.5.2): FIRST and MIDDLE carry exactly the MTU,
// LAST 1..MTU; on RC a NAK, on UC the message is dropped.
TEST(HeaderPredictionMessages, WrongPacketLengths) {
  const std::vector<std::vector<Packet>> cases = {
      {W{kFirst, 0, kMtu - 4, 0, 2044}},                                  // short FIRST
      {W{kFirst, 0, kMtu, 0, 3068}, W{kMiddle, 1, kMtu - 4}},            // short MIDDLE
      {W{kFirst, 0, kMtu, 0, 2048 + 4}, W{kLast, 1, kMtu + 4}},          // LAST over the MTU
  };
  expect_each_rejected(cases);
}

// The RETH DMA length against the packets (IBA 9.7.5.2): a MIDDLE or LAST
// running past it, a LAST ending short of it, a FIRST longer than it.
TEST(HeaderPredictionMessages, PacketsDisagreeWithTheDmaLength) {
  const std::vector<std::vector<Packet>> cases = {
      {W{kFirst, 0, kMtu, 0, 1500}, W{kMiddle, 1, kMtu}},               // MIDDLE past it
      {W{kFirst, 0, kMtu, 0, 1500}, W{kLast, 1, 1024}},                 // LAST past it
      {W{kFirst, 0, kMtu, 0, 3072}, W{kMiddle, 1, kMtu}, W{kLast, 2, 512}},  // LAST short
      {W{kFirst, 0, kMtu, 0, 1000}},                                    // FIRST past it
  };
  expect_each_rejected(cases, [](Twins& t, size_t q) {
    EXPECT_EQ(t.predicted.qps[q]->msn(), 0u);  // no message completed
  });
}

// PSNs inside a message: a gap (lost MIDDLE) is a sequence error on RC and
// loses the message on UC; a repeated MIDDLE is acknowledged again and not
// placed again; the resend after the NAK completes the message.
TEST(HeaderPredictionMessages, LostRepeatedAndResentPackets) {
  {
    Twins t;
    t.burst(0, {W{kFirst, 0, kMtu, 0, 3072}, W{kLast, 2, kMtu}});
    EXPECT_EQ(t.counters(0).naks_seq_sent, 1u);
    t.burst(0, {W{kMiddle, 1, kMtu, 0, 0, 0x55}, W{kLast, 2, kMtu, 0, 0, 0x66},
                W{kMiddle, 1, kMtu, 0, 0, 0x77}});  // the resend, then a stray repeat
    EXPECT_EQ(t.counters(0).rx_duplicate_packets, 1u);
    EXPECT_EQ(t.predicted.qps[0]->msn(), 1u);
    EXPECT_EQ(t.predicted.memory[kMtu], 0x55);
    t.expect_same();
  }
  {
    Twins t;  // UC
    t.burst(1, {W{kFirst, 0, kMtu, 0, 3072}, W{kLast, 2, kMtu}, W{kOnly, 3, 64, 8192, 64}});
    EXPECT_EQ(t.counters(1).rx_out_of_sequence, 1u);
    EXPECT_EQ(t.predicted.qps[1]->msn(), 1u);  // the ONLY, not the broken message
    t.expect_same();
  }
}

// After a fatal NAK the responder executes nothing more (IBA 9.9.3), even
// a packet that would be in order in the same burst: here a new message
// at the NAKed PSN (the bad one ended the message in progress).
TEST(HeaderPredictionMessages, NothingAfterAFatalNak) {
  Twins t;
  t.burst(0, {W{kFirst, 0, kMtu, 0, 3072}, W{kMiddle, 1, kMtu - 4},
              W{kOnly, 1, 64, 8192, 64, 0x5A}});
  EXPECT_EQ(t.counters(0).naks_invalid_request_sent, 1u);
  EXPECT_EQ(t.counters(0).rx_dropped_bad_state, 1u);
  EXPECT_EQ(t.predicted.memory[8192], 0);
  t.expect_same();
}

// The message's region is checked for each packet (IBA 10.6.3): a MIDDLE
// after the region went away is a remote access error; a FIRST whose
// R_Key is stale or read-only is one too.
TEST(HeaderPredictionMessages, AccessIsCheckedPerPacket) {
  {
    Twins t;
    t.burst(0, {W{kFirst, 0, kMtu, 0, 3072}});
    for (Responder* r : {&t.predicted, &t.parsed}) {
      ASSERT_EQ(r->device.dereg_mr(r->mr), 0);
      r->mr = nullptr;
    }
    // A MIDDLE by hand: Packet builds with the MR that is gone.
    Responder& p = t.predicted;
    wire::TransportSpec ts;
    ts.opcode = IBV_OPCODE_RC_RDMA_WRITE_MIDDLE;
    ts.dest_qp = p.qps[0]->qpn();
    ts.psn = 1001;
    std::vector<uint8_t> payload(kMtu, 0x99), f(kMtu + 256);
    f.resize(wire::build_packet(reversed(p.qps[0]->attr().path), ts, payload, f));
    const std::span<const uint8_t> view(f);
    t.predicted.ep->receive_burst(std::span(&view, 1), t.now);
    t.parsed.ep->receive_burst(std::span(&view, 1), t.now);
    t.drain();
    EXPECT_EQ(t.counters(0).naks_remote_access_sent, 1u);
    t.expect_same();
  }
  {
    // Invalidated from another QP (SEND with Invalidate, IBA 10.6.7.2)
    // while the WRITE is in progress: the key still names a region, which
    // no longer grants remote access.
    Twins t;
    t.burst(0, {W{kFirst, 0, kMtu, 0, 3072}});
    std::vector<std::vector<uint8_t>> frames;
    for (Responder* r : {&t.predicted, &t.parsed}) {
      const transport::Sge sge{40 * 1024, 64, r->mr->lkey()};
      ASSERT_EQ(r->qps[3]->post_recv({.wr_id = 1, .sg_list = std::span(&sge, 1)}), 0);
    }
    wire::TransportSpec ts;
    ts.opcode = wire::kOpRcSendOnlyWithInvalidate;
    ts.dest_qp = t.predicted.qps[3]->qpn();
    ts.psn = 1000;
    ts.ieth_rkey = t.predicted.mr->rkey();
    std::vector<uint8_t> payload(16, 0x31), f(300);
    f.resize(wire::build_packet(reversed(t.predicted.qps[3]->attr().path), ts, payload, f));
    frames.push_back(f);
    frames.push_back(packet(t.predicted, 0, W{kMiddle, 1, kMtu, 0, 0, 0x77}));
    t.feed(frames);
    EXPECT_FALSE(t.predicted.mr->remote_valid());
    EXPECT_EQ(t.counters(0).naks_remote_access_sent, 1u);
    EXPECT_EQ(t.predicted.memory[kMtu], 0);
    t.expect_same();
  }
  {
    Twins t;  // kind 3: a QP that grants no remote write at all
    t.burst(3, {W{kFirst, 0, kMtu, 0, 2048}, W{kLast, 1, kMtu}});
    EXPECT_EQ(t.counters(3).naks_remote_access_sent, 1u);
    t.expect_same();
  }
  for (bool stale : {true, false}) {
    Twins t;
    const uint32_t key = stale ? t.predicted.stale_rkey : t.predicted.read_only->rkey();
    W first{kFirst, 0, kMtu, stale ? uint64_t{0} : uint64_t{48 * 1024}, 2048};
    first.rkey = key;
    t.burst(0, {first, W{kLast, 1, kMtu}});
    EXPECT_EQ(t.counters(0).naks_remote_access_sent, 1u);
    t.expect_same();
  }
}

// Frames in a row that repeat the previous one's headers take a shorter
// check (rx_template_match_run): a frame to another QP on the same path
// must still go to that QP, and each frame keeps its own lengths and RETH.
// QPs 0 and 3 share a path (IPv4, no VLAN); 3 grants no remote write.
TEST(HeaderPredictionMessages, RepeatedHeadersStillNameTheirQp) {
  Twins t;
  std::vector<std::vector<uint8_t>> frames;
  for (uint32_t i = 0; i < 3; ++i)
    frames.push_back(packet(t.predicted, 0, W{kOnly, i, 128, 128u * i, 128, uint8_t(i)}));
  frames.push_back(packet(t.predicted, 3, W{kOnly, 3, 128, 1024, 128, 0x70}));
  frames.push_back(packet(t.predicted, 0, W{kOnly, 3, 128, 2048, 128, 0x80}));
  ASSERT_EQ(frames[0].size(), frames[3].size());
  t.feed(frames);
  t.expect_same();
  EXPECT_EQ(t.predicted.qps[0]->expected_psn(), 1004u);
  EXPECT_EQ(t.predicted.memory[1024], 0);  // QP 3's write went to QP 3: refused
  EXPECT_EQ(t.predicted.memory[2048 + 127], static_cast<uint8_t>(0x80 + 127));
  EXPECT_EQ(t.predicted.memory[256 + 127], static_cast<uint8_t>(2 + 127));
}

// The range check of a run of WRITE ONLY against a region that does not
// start at I/O address 0: a packet below it, straddling either end, or
// wholly past it ends the run there and is NAKed (RC) or dropped (UC) by
// the rules, after the good packets before it are placed.
TEST(HeaderPredictionMessages, RunsCheckTheRegionsBounds) {
  constexpr uint64_t kIova = 0x100000, kSize = 8 * 1024;
  for (size_t q : {0u, 1u}) {
    for (uint64_t bad : {kIova - 64, kIova - 32, kIova + kSize - 32, kIova + kSize,
                         kIova + kSize + 4096, kIova + (uint64_t{1} << 40)}) {
      Twins t;
      uint32_t rkey = 0;
      for (Responder* r : {&t.predicted, &t.parsed}) {
        auto* mr = r->device.reg_mr(r->pd, r->memory.data() + 40 * 1024, kSize,
                                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, kIova);
        ASSERT_NE(mr, nullptr);
        ASSERT_TRUE(rkey == 0 || rkey == mr->rkey());
        rkey = mr->rkey();
      }
      t.burst(q, {W{kOnly, 0, 64, kIova, 64, 0x10, rkey},
                  W{kOnly, 1, 64, kIova + kSize - 64, 64, 0x20, rkey},
                  W{kOnly, 2, 64, bad, 64, 0x30, rkey}, W{kOnly, 3, 64, kIova + 64, 64, 0x40, rkey}});
      t.expect_same();
      EXPECT_EQ(t.predicted.memory[40 * 1024], 0x10) << bad;
      EXPECT_EQ(t.predicted.memory[40 * 1024 + kSize - 64], 0x20) << bad;
      EXPECT_EQ(t.counters(q).naks_remote_access_sent, q == 0 ? 1u : 0u) << bad;
    }
  }
}

// Selective repeat keeps write contexts for packets placed out of order
// and walks over them after the in-order one (sr_advance): its messages
// are left to execute() (the predicted path is go-back-N only).
TEST(HeaderPredictionMessages, SelectiveRepeatIsLeftToTheRules) {
  Twins t;
  // Kind 2: selective repeat. FIRST in order (a context), MIDDLE 2 ahead
  // of time (placed through the context), MIDDLE 1 in order (walks over 2),
  // LAST.
  t.burst(2, {W{kFirst, 0, kMtu, 0, 4000, 0x10}, W{kMiddle, 2, kMtu, 0, 0, 0x30},
              W{kMiddle, 1, kMtu, 0, 0, 0x20}, W{kLast, 3, 928, 0, 0, 0x40}});
  EXPECT_EQ(t.counters(2).rx_ooo_accepted, 1u);
  EXPECT_EQ(t.predicted.qps[2]->msn(), 1u);
  EXPECT_EQ(t.predicted.memory[2 * kMtu], 0x30);
  t.expect_same();
}

// An empty WRITE ONLY (DMA length 0) is legal and places nothing; the
// predicted path leaves it to execute() (no region to place into).
TEST(HeaderPredictionMessages, EmptyWriteOnly) {
  Twins t;
  t.burst(0, {W{kOnly, 0, 0, 0, 0}, W{kOnly, 1, 64, 0, 64}});
  EXPECT_EQ(t.predicted.qps[0]->msn(), 2u);
  t.expect_same();
}

// A response queue with no room: the predicted WRITE must be dropped
// exactly as execute() drops it (the requester resends it).
// The next burst starts matching from the QP of the last predicted frame:
// once that QP is detached, its frames are for no QP and nothing may read
// the slot that was freed (a use after free before; valgrind or ASan see
// it, and the frame was placed for a QP that was gone).
TEST(Endpoint, HeaderPredictionForgetsADetachedQp) {
  Responder r(true);
  const transport::QueuePair& qp = *r.qps[0];
  const wire::PathSpec from = reversed(qp.attr().path);
  auto write = [&](uint32_t psn, uint8_t fill) {
    wire::TransportSpec t;
    t.opcode = IBV_OPCODE_RC_RDMA_WRITE_ONLY;
    t.dest_qp = qp.qpn();
    t.psn = psn;
    t.reth_rkey = r.mr->rkey();
    t.reth_va = 0;
    t.reth_dma_length = 64;
    std::vector<uint8_t> payload(64, fill), f(300);
    f.resize(wire::build_packet(from, t, payload, f));
    return f;
  };
  const uint32_t psn = qp.expected_psn();
  const auto first = write(psn, 0x11);
  r.ep->receive_burst(std::vector<std::span<const uint8_t>>{first}, 1);
  ASSERT_EQ(r.memory[0], 0x11);
  const uint64_t unknown = r.ep->counters().rx_unknown_qpn;
  r.ep->detach(qp.qpn());
  const auto second = write(psn + 1, 0x22);
  r.ep->receive_burst(std::vector<std::span<const uint8_t>>{second}, 2);
  EXPECT_EQ(r.memory[0], 0x11);  // not placed: its QP is gone
  EXPECT_EQ(r.ep->counters().rx_unknown_qpn, unknown + 1);
}

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

// A run of WRITE ONLY that starts with room for one answer: its first ACK
// takes it, so the next WRITE must be left to the rules, which count a
// full queue and drop it. Queues from nearly empty to full before the run.
TEST(Endpoint, HeaderPredictionRunStopsWhenItsAckFillsTheQueue) {
  bool took_exactly_one = false;
  for (int sends = 20; sends <= 40; ++sends) {
    Responder predicted(true), parsed(false);
    const transport::QueuePair& qp = *predicted.qps[0];
    const wire::PathSpec from = reversed(qp.attr().path);
    const uint32_t psn = qp.expected_psn();
    auto burst = [&](const std::vector<wire::TransportSpec>& ts) {
      std::vector<std::vector<uint8_t>> frames;
      for (const wire::TransportSpec& t : ts) {
        std::vector<uint8_t> payload(64, 0x5A), f(300);
        f.resize(wire::build_packet(from, t, payload, f));
        frames.push_back(f);
      }
      std::vector<std::span<const uint8_t>> views(frames.begin(), frames.end());
      predicted.ep->receive_burst(views, 1);
      parsed.ep->receive_burst(views, 1);
    };
    // SENDs with no receive WQE posted: an RNR NAK each, the PSN not used.
    wire::TransportSpec send;
    send.opcode = IBV_OPCODE_RC_SEND_ONLY;
    send.dest_qp = qp.qpn();
    send.psn = psn;
    burst(std::vector<wire::TransportSpec>(sends, send));
    std::vector<wire::TransportSpec> writes(3);
    for (uint32_t i = 0; i < 3; ++i) {
      writes[i].opcode = IBV_OPCODE_RC_RDMA_WRITE_ONLY;
      writes[i].dest_qp = qp.qpn();
      writes[i].psn = psn + i;
      writes[i].ack_req = true;
      writes[i].reth_rkey = predicted.mr->rkey();
      writes[i].reth_va = 64 * i;
      writes[i].reth_dma_length = 64;
    }
    burst(writes);
    EXPECT_EQ(predicted.answers(1), parsed.answers(1)) << sends;
    EXPECT_EQ(predicted.memory, parsed.memory) << sends;
    std::vector<std::pair<std::string, uint64_t>> q1, q2;
    predicted.qps[0]->counters().for_each([&](std::string_view k, uint64_t v) { q1.emplace_back(k, v); });
    parsed.qps[0]->counters().for_each([&](std::string_view k, uint64_t v) { q2.emplace_back(k, v); });
    EXPECT_EQ(q1, q2) << sends;
    EXPECT_EQ(qp.expected_psn(), parsed.qps[0]->expected_psn()) << sends;
    took_exactly_one = took_exactly_one || qp.expected_psn() == psn + 1;
  }
  EXPECT_TRUE(took_exactly_one);  // some queue left room for the first ACK only
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
