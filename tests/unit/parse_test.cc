// Every ParseError has a test that produces it, and truncating any valid
// frame at any length is rejected without reading past the end.
#include "droce/wire/packet.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "droce/wire/build.h"
#include "wire_samples.h"

namespace droce::wire {
namespace {

using testing::sample_path;
using testing::sample_transport;

constexpr size_t kL3 = kEthSize;  // untagged IPv4 samples

std::vector<uint8_t> frame_for(uint8_t opcode, size_t payload_len = 0,
                               bool ipv6 = false) {
  const PathSpec path = sample_path(ipv6, false);
  std::vector<uint8_t> payload(payload_len, 0xAB);
  std::vector<uint8_t> f(packet_size(path, opcode, payload_len));
  const size_t n = build_packet(path, sample_transport(opcode), payload, f);
  EXPECT_EQ(n, f.size());
  return f;
}

// After editing a frame: make IP and UDP lengths match its size and the IP
// checksum and ICRC valid again, so only the intended defect remains.
void fix_lengths_and_checksums(std::vector<uint8_t>& f, bool ipv6 = false) {
  uint8_t* ip = f.data() + kL3;
  const size_t ip_hdr = ipv6 ? kIpv6Size : kIpv4Size;
  const size_t l4_len = f.size() - kL3 - ip_hdr;
  if (ipv6) {
    store_be16(ip + 4, static_cast<uint16_t>(l4_len));
  } else {
    store_be16(ip + 2, static_cast<uint16_t>(f.size() - kL3));
  }
  store_be16(ip + ip_hdr + 4, static_cast<uint16_t>(l4_len));
  ParsedPacket offsets;
  offsets.l3_offset = kL3;
  offsets.src_ip.v6 = ipv6;
  offsets.frame_length = static_cast<uint32_t>(f.size());
  refresh_checksums(f, offsets);
}

ParseError parse_bytes(const std::vector<uint8_t>& f) {
  ParsedPacket p;
  return parse(f, p);
}

const size_t kBth = kL3 + kIpv4Size + kUdpSize;  // BTH offset, IPv4 untagged

TEST(Parse, NotIpIsNotRoce) {
  auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY);
  store_be16(f.data() + 12, 0x0806);  // ARP
  EXPECT_EQ(parse_bytes(f), ParseError::kNotIp);
  EXPECT_TRUE(is_not_roce(ParseError::kNotIp));
}

TEST(Parse, NotUdpIsNotRoce) {
  auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY);
  f[kL3 + 9] = 6;  // TCP
  fix_lengths_and_checksums(f);
  EXPECT_EQ(parse_bytes(f), ParseError::kNotUdp);
  auto g = frame_for(IBV_OPCODE_RC_SEND_ONLY, 0, true);
  g[kL3 + 6] = 6;
  EXPECT_EQ(parse_bytes(g), ParseError::kNotUdp);
}

TEST(Parse, OtherUdpPortIsNotRoce) {
  auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY);
  store_be16(f.data() + kL3 + kIpv4Size + 2, 4792);
  EXPECT_EQ(parse_bytes(f), ParseError::kNotRoceV2Port);
  EXPECT_TRUE(is_not_roce(ParseError::kNotRoceV2Port));
  EXPECT_FALSE(is_not_roce(ParseError::kBadIcrc));
}

TEST(Parse, TruncatedEthernetAndVlanTag) {
  std::vector<uint8_t> f(13, 0);
  EXPECT_EQ(parse_bytes(f), ParseError::kTruncatedEth);
  std::vector<uint8_t> tagged(16, 0);
  store_be16(tagged.data() + 12, kEtherTypeVlan);
  EXPECT_EQ(parse_bytes(tagged), ParseError::kTruncatedEth);
}

TEST(Parse, TruncatedIpHeader) {
  auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY);
  f.resize(kL3 + kIpv4Size - 1);
  EXPECT_EQ(parse_bytes(f), ParseError::kTruncatedIp);
  auto g = frame_for(IBV_OPCODE_RC_SEND_ONLY, 0, true);
  g.resize(kL3 + kIpv6Size - 1);
  EXPECT_EQ(parse_bytes(g), ParseError::kTruncatedIp);
  // IHL says 60 bytes of header but only 20 arrived.
  auto h = frame_for(IBV_OPCODE_RC_SEND_ONLY);
  h[kL3] = 0x4F;
  h.resize(kL3 + 40);
  EXPECT_EQ(parse_bytes(h), ParseError::kTruncatedIp);
}

TEST(Parse, TruncatedUdpBthAndExtHeaders) {
  // The IP datagram itself ends early; lengths stay consistent.
  auto udp = frame_for(IBV_OPCODE_RC_SEND_ONLY);
  udp.resize(kL3 + kIpv4Size + 4);
  fix_lengths_and_checksums(udp);
  EXPECT_EQ(parse_bytes(udp), ParseError::kTruncatedUdp);

  auto bth = frame_for(IBV_OPCODE_RC_SEND_ONLY);
  bth.resize(kBth + 8);
  store_be16(bth.data() + kL3 + 2, static_cast<uint16_t>(bth.size() - kL3));
  store_be16(bth.data() + kL3 + kIpv4Size + 4, static_cast<uint16_t>(bth.size() - kL3 - kIpv4Size));
  store_be16(bth.data() + kL3 + 10, 0);
  store_be16(bth.data() + kL3 + 10, ipv4_checksum(bth.data() + kL3, kIpv4Size));
  EXPECT_EQ(parse_bytes(bth), ParseError::kTruncatedBth);

  auto ext = frame_for(IBV_OPCODE_RC_RDMA_WRITE_ONLY, 0);
  ext.resize(kBth + kBthSize + 8);  // RETH needs 16
  store_be16(ext.data() + kL3 + 2, static_cast<uint16_t>(ext.size() - kL3));
  store_be16(ext.data() + kL3 + kIpv4Size + 4, static_cast<uint16_t>(ext.size() - kL3 - kIpv4Size));
  store_be16(ext.data() + kL3 + 10, 0);
  store_be16(ext.data() + kL3 + 10, ipv4_checksum(ext.data() + kL3, kIpv4Size));
  EXPECT_EQ(parse_bytes(ext), ParseError::kTruncatedExtHeader);
}

TEST(Parse, TruncatedPayloadWhenFrameShorterThanIpLength) {
  auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY, 64);
  f.resize(f.size() - 1);
  EXPECT_EQ(parse_bytes(f), ParseError::kTruncatedPayload);
  auto g = frame_for(IBV_OPCODE_RC_SEND_ONLY, 64, true);
  g.resize(g.size() - 1);
  EXPECT_EQ(parse_bytes(g), ParseError::kTruncatedPayload);
}

TEST(Parse, EthernetPaddingAfterDatagramIsIgnored) {
  // A 58-byte ACK frame is padded to the 60-byte Ethernet minimum on the wire.
  auto f = frame_for(IBV_OPCODE_RC_ACKNOWLEDGE);
  const size_t real = f.size();
  f.resize(std::max<size_t>(60, real + 2), 0);
  ParsedPacket p;
  ASSERT_EQ(parse(f, p), ParseError::kOk);
  EXPECT_EQ(p.frame_length, real);
}

TEST(Parse, BadIpVersionAndHeaderLength) {
  auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY);
  f[kL3] = 0x65;  // version 6 under EtherType IPv4
  EXPECT_EQ(parse_bytes(f), ParseError::kBadIpVersion);
  auto g = frame_for(IBV_OPCODE_RC_SEND_ONLY, 0, true);
  g[kL3] = 0x40 | (g[kL3] & 0x0F);
  EXPECT_EQ(parse_bytes(g), ParseError::kBadIpVersion);
  auto h = frame_for(IBV_OPCODE_RC_SEND_ONLY);
  h[kL3] = 0x44;  // IHL 16 bytes < minimum
  EXPECT_EQ(parse_bytes(h), ParseError::kBadIpHeaderLength);
  auto k = frame_for(IBV_OPCODE_RC_SEND_ONLY);
  store_be16(k.data() + kL3 + 2, 12);  // total length shorter than the header
  EXPECT_EQ(parse_bytes(k), ParseError::kBadIpHeaderLength);
}

TEST(Parse, IpFragmentsAreRefused) {
  auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY);
  store_be16(f.data() + kL3 + 6, 0x2000);  // more fragments
  fix_lengths_and_checksums(f);
  EXPECT_EQ(parse_bytes(f), ParseError::kIpFragment);
}

TEST(Parse, BadIpChecksum) {
  auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY);
  f[kL3 + 10] ^= 1;
  EXPECT_EQ(parse_bytes(f), ParseError::kBadIpChecksum);
  ParsedPacket p;
  ParseOptions no_check;
  no_check.verify_ip_checksum = false;
  EXPECT_EQ(parse(f, p, no_check), ParseError::kOk);
}

TEST(Parse, BadUdpLength) {
  auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY, 8);
  store_be16(f.data() + kL3 + kIpv4Size + 4, static_cast<uint16_t>(load_be16(f.data() + kL3 + kIpv4Size + 4) - 4));
  EXPECT_EQ(parse_bytes(f), ParseError::kBadUdpLength);
}

TEST(Parse, BadBthVersion) {
  auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY);
  f[kBth + 1] |= 0x01;  // TVer 1 (IBA 9.2.6: must be 0)
  fix_lengths_and_checksums(f);
  EXPECT_EQ(parse_bytes(f), ParseError::kBadBthVersion);
}

TEST(Parse, UnsupportedOpcodes) {
  for (uint8_t op : {uint8_t{0x15}, uint8_t{0x40}, uint8_t{0x2c}, uint8_t{0x80}, uint8_t{0xFF}}) {
    auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY);
    f[kBth] = op;
    fix_lengths_and_checksums(f);
    ParsedPacket p;
    EXPECT_EQ(parse(f, p), ParseError::kUnsupportedOpcode) << int{op};
    EXPECT_EQ(p.opcode, op);  // decoded up to the failure, for reports
  }
}

TEST(Parse, LengthMismatch) {
  // An ACK carries no payload: 4 extra bytes are a length error.
  auto f = frame_for(IBV_OPCODE_RC_ACKNOWLEDGE);
  f.insert(f.end() - kIcrcSize, 4, 0);
  fix_lengths_and_checksums(f);
  EXPECT_EQ(parse_bytes(f), ParseError::kLengthMismatch);
  // No room for the ICRC after the extension headers.
  auto g = frame_for(IBV_OPCODE_RC_ACKNOWLEDGE);
  g.resize(g.size() - 2);
  fix_lengths_and_checksums(g);
  EXPECT_EQ(parse_bytes(g), ParseError::kLengthMismatch);
}

TEST(Parse, BadPad) {
  // Padded payload not a multiple of 4.
  auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY, 8);
  f.insert(f.end() - kIcrcSize, 2, 0);
  fix_lengths_and_checksums(f);
  EXPECT_EQ(parse_bytes(f), ParseError::kBadPad);
  // Pad count larger than the padded payload.
  auto g = frame_for(IBV_OPCODE_RC_SEND_ONLY, 0);
  g[kBth + 1] |= 3 << 4;
  fix_lengths_and_checksums(g);
  EXPECT_EQ(parse_bytes(g), ParseError::kBadPad);
  // Pad on a middle packet (IBA 9.2.5: only the last packet is padded).
  auto h = frame_for(IBV_OPCODE_RC_SEND_MIDDLE, 8);
  h[kBth + 1] |= 1 << 4;
  fix_lengths_and_checksums(h);
  EXPECT_EQ(parse_bytes(h), ParseError::kBadPad);
}

TEST(Parse, BadIcrc) {
  for (bool ipv6 : {false, true}) {
    auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY, 32, ipv6);
    f[f.size() - 10] ^= 0x10;  // a payload bit
    ParsedPacket p;
    EXPECT_EQ(parse(f, p), ParseError::kBadIcrc);
    // Fields are decoded even when the ICRC is wrong (for reports).
    EXPECT_EQ(p.dest_qp, 0x123456u);
    ParseOptions no_icrc;
    no_icrc.verify_icrc = false;
    EXPECT_EQ(parse(f, p, no_icrc), ParseError::kOk);
    EXPECT_FALSE(p.icrc_checked);
  }
}

TEST(Parse, VariantFieldsDoNotAffectIcrc) {
  // Routers may rewrite TTL, DSCP/ECN and FECN/BECN; the ICRC masks them.
  auto f = frame_for(IBV_OPCODE_RC_SEND_ONLY, 16);
  f[kL3 + 8] = 3;           // TTL
  f[kL3 + 1] = 0xFF;        // DSCP 63, CE
  f[kBth + 4] |= 0xC0;      // FECN + BECN
  fix_lengths_and_checksums(f);  // only the IP checksum changes here
  ParsedPacket p;
  ASSERT_EQ(parse(f, p), ParseError::kOk);
  EXPECT_TRUE(p.fecn);
  EXPECT_TRUE(p.becn);
  EXPECT_EQ(p.ecn, Ecn::kCe);
  EXPECT_EQ(p.ttl, 3);
}

TEST(Parse, EveryErrorHasAName) {
  for (int e = 0; e < static_cast<int>(ParseError::kCount); ++e)
    EXPECT_NE(to_string(static_cast<ParseError>(e)), "unknown") << e;
}

TEST(Parse, EveryTruncationOfEveryValidFrameIsRejected) {
  // Copy each prefix into an exactly-sized heap buffer so ASan/valgrind would
  // catch any read past `len`.
  for (const auto& s : testing::all_sample_frames()) {
    for (size_t len = 0; len < s.bytes.size(); ++len) {
      std::vector<uint8_t> prefix(s.bytes.begin(), s.bytes.begin() + len);
      ParsedPacket p;
      const ParseError e = parse(prefix, p);
      ASSERT_NE(e, ParseError::kOk) << opcode_name(s.opcode) << " len " << len;
      ASSERT_FALSE(is_not_roce(e)) << opcode_name(s.opcode) << " len " << len;
    }
  }
}

TEST(Parse, RandomBitFlipsNeverCrashAndAreCaught) {
  std::mt19937 rng(1234);
  const auto frames = testing::all_sample_frames();
  int caught = 0, total = 0;
  for (const auto& s : frames) {
    for (int k = 0; k < 8; ++k) {
      auto f = s.bytes;
      const size_t pos = kL3 + rng() % (f.size() - kL3);
      f[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
      ParsedPacket p;
      const ParseError e = parse(f, p);
      ++total;
      if (e != ParseError::kOk) ++caught;
    }
  }
  // Flips of masked fields (TTL/TOS on IPv6, FECN/BECN/reserved, UDP
  // checksum, flow label) are by design not caught; everything else is.
  EXPECT_GT(caught, total * 9 / 10);
}

}  // namespace
}  // namespace droce::wire
