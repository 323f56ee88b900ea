#include "droce/wire/build.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "wire_samples.h"

namespace droce::wire {
namespace {

using testing::all_sample_frames;
using testing::sample_path;
using testing::sample_transport;

TEST(Build, EverySampleRoundTripsThroughParse) {
  const auto frames = all_sample_frames();
  ASSERT_GT(frames.size(), 200u);
  for (const auto& f : frames) {
    ParsedPacket p;
    ASSERT_EQ(parse(f.bytes, p), ParseError::kOk) << opcode_name(f.opcode);
    const TransportSpec t = sample_transport(f.opcode);
    EXPECT_EQ(p.opcode, f.opcode);
    EXPECT_EQ(p.dest_qp, t.dest_qp);
    EXPECT_EQ(p.psn, t.psn);
    EXPECT_TRUE(p.ack_req);
    EXPECT_EQ(p.payload_length, f.payload_length);
    EXPECT_EQ(p.pad_count, (4 - f.payload_length % 4) % 4);
    EXPECT_EQ(p.frame_length, f.bytes.size());
    EXPECT_TRUE(p.icrc_checked);
    for (size_t i = 0; i < f.payload_length; ++i)
      ASSERT_EQ(p.payload[i], static_cast<uint8_t>(i * 7 + f.opcode));
    if (p.has(kExtReth)) {
      EXPECT_EQ(p.reth_va, t.reth_va);
      EXPECT_EQ(p.reth_rkey, t.reth_rkey);
      EXPECT_EQ(p.reth_dma_length, t.reth_dma_length);
    }
    if (p.has(kExtAeth)) {
      EXPECT_EQ(p.aeth_syndrome, t.aeth_syndrome);
      EXPECT_EQ(p.aeth_msn, t.aeth_msn);
    }
    if (p.has(kExtAtomicEth)) {
      EXPECT_EQ(p.atomic_va, t.atomic_va);
      EXPECT_EQ(p.atomic_rkey, t.atomic_rkey);
      EXPECT_EQ(p.atomic_swap_add, t.atomic_swap_add);
      EXPECT_EQ(p.atomic_compare, t.atomic_compare);
    }
    if (p.has(kExtAtomicAckEth)) {
      EXPECT_EQ(p.atomic_ack_original, t.atomic_ack_original);
    }
    if (p.has(kExtImmDt)) {
      EXPECT_EQ(p.imm_data, t.imm_data);
    }
    if (p.has(kExtIeth)) {
      EXPECT_EQ(p.ieth_rkey, t.ieth_rkey);
    }
    if (p.has(kExtDeth)) {
      EXPECT_EQ(p.deth_qkey, t.deth_qkey);
      EXPECT_EQ(p.deth_src_qp, t.deth_src_qp);
    }
  }
}

TEST(Build, PathFieldsReachTheWire) {
  for (bool ipv6 : {false, true}) {
    const PathSpec path = sample_path(ipv6, true);
    std::vector<uint8_t> buf(256);
    const size_t n = build_packet(path, sample_transport(IBV_OPCODE_RC_ACKNOWLEDGE), {}, buf);
    ASSERT_GT(n, 0u);
    ParsedPacket p;
    ASSERT_EQ(parse({buf.data(), n}, p), ParseError::kOk);
    EXPECT_EQ(p.dst_mac, path.dst_mac);
    EXPECT_EQ(p.src_mac, path.src_mac);
    EXPECT_TRUE(p.has_vlan);
    EXPECT_EQ(p.vlan_id, 100);
    EXPECT_EQ(p.pcp, 3);
    EXPECT_EQ(p.dscp, 26);
    EXPECT_EQ(p.ecn, Ecn::kEct0);
    EXPECT_EQ(p.src_ip, path.src_ip);
    EXPECT_EQ(p.dst_ip, path.dst_ip);
    EXPECT_EQ(p.udp_src_port, path.udp_src_port);
    EXPECT_EQ(p.udp_dst_port, kRoceV2Port);
    EXPECT_EQ(p.pkey, 0xFFFF);
    if (ipv6) {
      EXPECT_EQ(p.flow_label, 0xABCDEu);
    }
  }
}

TEST(Build, RefusesWhatItCannotWrite) {
  const PathSpec path = sample_path(false, false);
  std::vector<uint8_t> buf(2048);
  const uint8_t one = 1;
  // Expect: payload on an opcode that takes none is refused.
  EXPECT_EQ(build_packet(path, sample_transport(IBV_OPCODE_RC_ACKNOWLEDGE), {&one, 1}, buf), 0u);
  // Expect: unsupported opcode (RD) is refused.
  EXPECT_EQ(build_packet(path, sample_transport(0x40), {}, buf), 0u);
  // Expect: a buffer one byte short is refused, the exact size accepted.
  const size_t need = packet_size(path, IBV_OPCODE_RC_SEND_ONLY, 100);
  std::vector<uint8_t> payload(100);
  EXPECT_EQ(build_packet(path, sample_transport(IBV_OPCODE_RC_SEND_ONLY), payload,
                         {buf.data(), need - 1}),
            0u);
  EXPECT_EQ(build_packet(path, sample_transport(IBV_OPCODE_RC_SEND_ONLY), payload,
                         {buf.data(), need}),
            need);
  // Expect: a middle packet that would need pad is refused (IBA 9.2.5).
  std::vector<uint8_t> odd(5);
  EXPECT_EQ(build_packet(path, sample_transport(IBV_OPCODE_RC_SEND_MIDDLE), odd, buf), 0u);
  EXPECT_EQ(build_packet(path, sample_transport(IBV_OPCODE_RC_RDMA_WRITE_FIRST), odd, buf), 0u);
  // Expect: mixed IPv4/IPv6 addresses are refused.
  PathSpec mixed = path;
  mixed.dst_ip.v6 = true;
  EXPECT_EQ(build_packet(mixed, sample_transport(IBV_OPCODE_RC_SEND_ONLY), {}, buf), 0u);
}

TEST(Build, PayloadGatheredInPlaceBuildsTheSameFrame) {
  // Expect: payload_offset() is where build_packet puts the payload, and a
  // payload already there (a requester gathers into the frame) gives the
  // same frame as one passed from elsewhere, for IPv4, IPv6 and VLAN paths,
  // with and without extension headers and pad.
  for (int variant = 0; variant < 3; ++variant) {
    const PathSpec path = sample_path(variant == 1, variant == 2);
    for (uint8_t opcode : {uint8_t{IBV_OPCODE_RC_SEND_ONLY}, uint8_t{IBV_OPCODE_RC_RDMA_WRITE_FIRST},
                           uint8_t{IBV_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE}}) {
      const size_t len = opcode == IBV_OPCODE_RC_RDMA_WRITE_FIRST ? 256 : 257;
      std::vector<uint8_t> payload(len);
      for (size_t i = 0; i < len; ++i) payload[i] = static_cast<uint8_t>(i * 13 + 5);
      std::vector<uint8_t> a(1024, 0xEE), b(1024, 0x11);
      const TransportSpec t = sample_transport(opcode);
      const size_t na = build_packet(path, t, payload, a);
      ASSERT_GT(na, 0u);
      const size_t off = payload_offset(path, opcode);
      std::copy(payload.begin(), payload.end(), b.begin() + static_cast<ptrdiff_t>(off));
      const size_t nb = build_packet(path, t, {b.data() + off, len}, b);
      ASSERT_EQ(na, nb);
      EXPECT_TRUE(std::equal(a.begin(), a.begin() + static_cast<ptrdiff_t>(na), b.begin()))
          << "variant " << variant << " opcode " << int{opcode};
    }
  }
}

// An ACK from the template is the frame build_packet writes, for every
// layout and header field a path can set, any PSN, syndrome and MSN (the
// PSN and MSN are 24 bits on the wire: higher bits are dropped alike).
TEST(Build, AckFromTemplateEqualsBuildPacket) {
  std::mt19937 rng(1130);
  for (int i = 0; i < 400; ++i) {
    PathSpec path = sample_path(i % 2 == 1, i % 4 >= 2);
    path.dscp = static_cast<uint8_t>(rng() % 64);
    path.ecn = static_cast<Ecn>(rng() % 4);
    path.ttl = static_cast<uint8_t>(rng());
    path.pcp = static_cast<uint8_t>(rng() % 8);
    path.vlan_id = static_cast<uint16_t>(rng() % 4096);
    path.flow_label = rng() % (1u << 20);
    path.udp_src_port = static_cast<uint16_t>(rng());
    const uint32_t dest_qp = rng() % (1u << 24);
    const uint16_t pkey = static_cast<uint16_t>(rng());
    const AckTemplate tmpl = make_ack_template(path, dest_qp, pkey);
    TransportSpec t;
    t.opcode = 0x11;  // RC ACKNOWLEDGE
    t.dest_qp = dest_qp;
    t.pkey = pkey;
    t.psn = rng();
    t.aeth_syndrome = static_cast<uint8_t>(rng());
    t.aeth_msn = rng();
    std::vector<uint8_t> want(128), got(128, 0xEE);
    want.resize(build_packet(path, t, {}, want));
    ASSERT_FALSE(want.empty());
    got.resize(build_ack(tmpl, t.psn, t.aeth_syndrome, t.aeth_msn, got));
    ASSERT_EQ(got, want) << i;
    std::vector<uint8_t> small(want.size() - 1);
    EXPECT_EQ(build_ack(tmpl, t.psn, t.aeth_syndrome, t.aeth_msn, small), 0u);
  }
  std::vector<uint8_t> room(128);
  EXPECT_EQ(build_ack(AckTemplate{}, 1, 0, 1, room), 0u);
}

TEST(Build, Ipv4ChecksumKnownAnswer) {
  // RFC 1071-style example header (Wikipedia's IPv4 checksum example,
  // checksum 0xB861 when the field is zero).
  uint8_t h[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                   0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  EXPECT_EQ(ipv4_checksum(h, 20), 0xB861);
  h[10] = 0xB8;
  h[11] = 0x61;
  EXPECT_EQ(ipv4_checksum(h, 20), 0);
}

TEST(Build, Ipv4ChecksumMatchesWordByWordSum) {
  // Expect: the native-word sum equals RFC 1071's big-endian 16-bit word
  // sum for every length 0..64 (options, odd tails) and random contents,
  // including all-ones words that exercise the end-around carry.
  auto reference = [](const uint8_t* p, size_t len) {
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < len; i += 2) sum += load_be16(p + i);
    if (len & 1) sum += uint32_t{p[len - 1]} << 8;
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return static_cast<uint16_t>(~sum);
  };
  std::mt19937 rng(7);
  uint8_t h[64];
  for (int round = 0; round < 200; ++round) {
    for (auto& b : h) b = round % 5 == 0 ? 0xFF : static_cast<uint8_t>(rng());
    for (size_t len = 0; len <= sizeof h; ++len)
      ASSERT_EQ(ipv4_checksum(h, len), reference(h, len)) << "len " << len;
  }
}

TEST(Build, UdpSourcePortEntropy) {
  // Expect: always in 0xC000..0xFFFF, deterministic, and spread over QPs.
  std::set<uint16_t> ports;
  for (uint32_t qp = 2; qp < 1002; ++qp) {
    const uint16_t port = udp_src_port_entropy(qp, 0x100);
    EXPECT_EQ(port & 0xC000, 0xC000);
    EXPECT_EQ(port, udp_src_port_entropy(qp, 0x100));
    ports.insert(port);
  }
  EXPECT_GT(ports.size(), 950u);
}

TEST(Build, RefreshChecksumsAfterEcnMark) {
  const PathSpec path = sample_path(false, false);
  std::vector<uint8_t> buf(512);
  const size_t n = build_packet(path, sample_transport(IBV_OPCODE_RC_SEND_ONLY), {}, buf);
  ParsedPacket p;
  ASSERT_EQ(parse({buf.data(), n}, p), ParseError::kOk);
  buf[p.l3_offset + 1] |= 3;  // a switch marks CE
  ParsedPacket q;
  EXPECT_EQ(parse({buf.data(), n}, q), ParseError::kBadIpChecksum);
  refresh_checksums({buf.data(), n}, p);
  ASSERT_EQ(parse({buf.data(), n}, q), ParseError::kOk);
  EXPECT_EQ(q.ecn, Ecn::kCe);
  // Expect: the ICRC masks the TOS byte, so marking does not change it.
  EXPECT_EQ(q.icrc, p.icrc);
}

}  // namespace
}  // namespace droce::wire
