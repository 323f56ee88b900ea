// RoCEv2 ICRC (icrc.h) against independently computed vectors, and the
// masking rules: fields a router may rewrite do not change the ICRC,
// everything else does.
#include "droce/wire/icrc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "droce/wire/bytes.h"
#include "droce/wire/crc32.h"
#include "droce/wire/build.h"
#include "droce/wire/headers.h"
#include "droce/wire/packet.h"

namespace droce::wire {
namespace {

// Both frames: Ethernet / IP / UDP(sport 0xC123, dport 4791, checksum 0) /
// BTH(RC SEND_ONLY, M=1, pkey 0xFFFF, dest QP 0x123, AckReq, PSN 0xABCD) /
// 32 bytes of payload (i * 7 + 3) & 0xFF / ICRC (least significant byte
// first), produced with scapy 2.5.0 (Debian's python3-scapy):
//
// /usr/bin/python3 -c '
// from scapy.all import Ether, IP, IPv6, UDP, raw
// from scapy.contrib.roce import BTH, opcode
// pl = bytes((i * 7 + 3) & 0xFF for i in range(32))
// eth = Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
// bth = BTH(opcode=opcode("RC", "SEND_ONLY")[0], migreq=1, dqpn=0x123,
//           ackreq=1, psn=0xABCD)
// print(raw(eth / IP(src="10.0.0.1", dst="10.0.0.2", ttl=64, tos=0x02,
//                    id=0x1234, flags="DF") /
//           UDP(sport=0xC123, dport=4791, chksum=0) / bth / pl).hex())'
//
// The IPv4 ICRC is scapy's own (BTH.compute_icrc: zlib.crc32 over 8 x 0xFF
// plus the masked IP/UDP/BTH and payload). scapy 2.5 computes no ICRC for
// IPv6 (it warns and writes 0), so the IPv6 frame was built the same way with
// IPv6(src="fd00::1", dst="fd00::2", hlim=64, tc=0x02, fl=0x12345) and
// BTH(..., icrc=0), and its ICRC computed in the same script with Python's
// zlib.crc32 over b"\xff" * 8 + the IPv6 header with byte 0 |= 0x0F and
// bytes 1-3 and 7 set to 0xFF, the UDP checksum and BTH byte 4 set to 0xFF
// (that helper reproduces scapy's value for the IPv4 frame).
constexpr uint8_t kIpv4Frame[] = {
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00,
    0x45, 0x02, 0x00, 0x4c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x14, 0x69, 0x0a, 0x00,
    0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0xc1, 0x23, 0x12, 0xb7, 0x00, 0x38, 0x00, 0x00,
    0x04, 0x40, 0xff, 0xff, 0x00, 0x00, 0x01, 0x23, 0x80, 0x00, 0xab, 0xcd, 0x03, 0x0a,
    0x11, 0x18, 0x1f, 0x26, 0x2d, 0x34, 0x3b, 0x42, 0x49, 0x50, 0x57, 0x5e, 0x65, 0x6c,
    0x73, 0x7a, 0x81, 0x88, 0x8f, 0x96, 0x9d, 0xa4, 0xab, 0xb2, 0xb9, 0xc0, 0xc7, 0xce,
    0xd5, 0xdc, 0xd1, 0x29, 0x4b, 0x5d};
constexpr uint32_t kIpv4Icrc = 0x5D4B29D1u;  // scapy shows icrc=0xd1294b5d (bytes as BE)

constexpr uint8_t kIpv6Frame[] = {
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd,
    0x60, 0x21, 0x23, 0x45, 0x00, 0x38, 0x11, 0x40, 0xfd, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfd, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xc1, 0x23,
    0x12, 0xb7, 0x00, 0x38, 0x00, 0x00, 0x04, 0x40, 0xff, 0xff, 0x00, 0x00, 0x01, 0x23,
    0x80, 0x00, 0xab, 0xcd, 0x03, 0x0a, 0x11, 0x18, 0x1f, 0x26, 0x2d, 0x34, 0x3b, 0x42,
    0x49, 0x50, 0x57, 0x5e, 0x65, 0x6c, 0x73, 0x7a, 0x81, 0x88, 0x8f, 0x96, 0x9d, 0xa4,
    0xab, 0xb2, 0xb9, 0xc0, 0xc7, 0xce, 0xd5, 0xdc, 0xe2, 0xed, 0x7d, 0xef};
constexpr uint32_t kIpv6Icrc = 0xEF7DEDE2u;

static_assert(sizeof(kIpv4Frame) == kEthSize + kIpv4Size + kUdpSize + kBthSize + 32 + kIcrcSize);
static_assert(sizeof(kIpv6Frame) == kEthSize + kIpv6Size + kUdpSize + kBthSize + 32 + kIcrcSize);

uint32_t icrc_of(const std::vector<uint8_t>& frame, bool ipv6) {
  return icrc_compute(frame.data() + kEthSize, frame.size() - kEthSize - kIcrcSize, ipv6);
}

std::vector<uint8_t> v4() { return {std::begin(kIpv4Frame), std::end(kIpv4Frame)}; }
std::vector<uint8_t> v6() { return {std::begin(kIpv6Frame), std::end(kIpv6Frame)}; }

// Offsets within the frames above.
constexpr size_t kL3 = kEthSize;
constexpr size_t kUdp4 = kL3 + kIpv4Size;
constexpr size_t kUdp6 = kL3 + kIpv6Size;
constexpr size_t kBth4 = kUdp4 + kUdpSize;
constexpr size_t kBth6 = kUdp6 + kUdpSize;

TEST(Icrc, ScapyIpv4Vector) {
  const auto f = v4();
  EXPECT_EQ(icrc_of(f, false), kIpv4Icrc);
  EXPECT_EQ(load_le32(f.data() + f.size() - kIcrcSize), kIpv4Icrc);
}

TEST(Icrc, Ipv6Vector) {
  const auto f = v6();
  EXPECT_EQ(icrc_of(f, true), kIpv6Icrc);
  EXPECT_EQ(load_le32(f.data() + f.size() - kIcrcSize), kIpv6Icrc);
}

TEST(Icrc, Ipv4VariantFieldsAreMasked) {
  struct Change {
    const char* what;
    size_t offset;
    uint8_t xor_mask;
  };
  const Change changes[] = {
      {"TOS/DSCP", kL3 + 1, 0xFC},     {"ECN (CE)", kL3 + 1, 0x03},
      {"TTL", kL3 + 8, 0x3F},          {"IP checksum hi", kL3 + 10, 0xA5},
      {"IP checksum lo", kL3 + 11, 0x5A}, {"UDP checksum hi", kUdp4 + 6, 0xFF},
      {"UDP checksum lo", kUdp4 + 7, 0x42}, {"BTH FECN", kBth4 + 4, 0x80},
      {"BTH BECN", kBth4 + 4, 0x40},   {"BTH reserved", kBth4 + 4, 0x3F},
  };
  for (const auto& c : changes) {
    auto f = v4();
    f[c.offset] ^= c.xor_mask;
    EXPECT_EQ(icrc_of(f, false), kIpv4Icrc) << c.what;
  }
}

TEST(Icrc, Ipv6VariantFieldsAreMasked) {
  struct Change {
    const char* what;
    size_t offset;
    uint8_t xor_mask;
  };
  const Change changes[] = {
      {"traffic class hi", kL3 + 0, 0x0F}, {"traffic class lo / flow label", kL3 + 1, 0xFF},
      {"flow label", kL3 + 2, 0xFF},       {"flow label lo", kL3 + 3, 0x81},
      {"hop limit", kL3 + 7, 0x3F},        {"UDP checksum", kUdp6 + 6, 0x12},
      {"BTH FECN/BECN", kBth6 + 4, 0xC0},
  };
  for (const auto& c : changes) {
    auto f = v6();
    f[c.offset] ^= c.xor_mask;
    EXPECT_EQ(icrc_of(f, true), kIpv6Icrc) << c.what;
  }
}

TEST(Icrc, InvariantFieldsAndPayloadAreCovered) {
  struct Change {
    const char* what;
    size_t offset;
  };
  // IPv4: total length, id, source address, UDP ports, opcode, dest QP, PSN,
  // first and last payload byte.
  for (const Change& c : {Change{"IP length", kL3 + 3}, Change{"IP id", kL3 + 5},
                          Change{"IP src", kL3 + 15}, Change{"UDP sport", kUdp4 + 1},
                          Change{"opcode", kBth4}, Change{"dest QP", kBth4 + 7},
                          Change{"PSN", kBth4 + 11}, Change{"payload[0]", kBth4 + kBthSize},
                          Change{"payload[31]", kBth4 + kBthSize + 31}}) {
    auto f = v4();
    f[c.offset] ^= 0x01;
    EXPECT_NE(icrc_of(f, false), kIpv4Icrc) << c.what;
  }
  // IPv6: version nibble, payload length, next header, addresses, payload.
  for (const Change& c : {Change{"IP version", kL3 + 0}, Change{"payload length", kL3 + 5},
                          Change{"next header", kL3 + 6}, Change{"dst", kL3 + 39},
                          Change{"payload[5]", kBth6 + kBthSize + 5}}) {
    auto f = v6();
    f[c.offset] ^= (c.offset == kL3 ? 0x10 : 0x01);
    EXPECT_NE(icrc_of(f, true), kIpv6Icrc) << c.what;
  }
}

// Long payloads go through the folding paths: compare with the spec's
// procedure written out here (masked copy, then the bitwise CRC).
uint32_t reference_icrc(const uint8_t* l3, size_t len, bool ipv6) {
  std::vector<uint8_t> m(8 + len, 0xFF);
  std::memcpy(m.data() + 8, l3, len);
  uint8_t* ip = m.data() + 8;
  size_t ip_len = kIpv6Size;
  if (ipv6) {
    ip[0] |= 0x0F;
    ip[1] = ip[2] = ip[3] = 0xFF;
    ip[7] = 0xFF;
  } else {
    ip_len = static_cast<size_t>(ip[0] & 0x0F) * 4;
    ip[1] = ip[8] = ip[10] = ip[11] = 0xFF;
  }
  ip[ip_len + 6] = ip[ip_len + 7] = 0xFF;
  ip[ip_len + kUdpSize + 4] = 0xFF;
  return crc32_finish(crc32_update_with(Crc32Impl::kBitwise, kCrc32Init, m.data(), m.size()));
}

TEST(Icrc, LongPayloadsMatchReference) {
  std::mt19937 rng(11);
  for (bool ipv6 : {false, true}) {
    auto base = ipv6 ? v6() : v4();
    const size_t headers = (ipv6 ? kBth6 : kBth4) + kBthSize - kL3;
    // Around 64 bytes of IP datagram (the in-place path starts there) and
    // 256 (whole-copy limit), then long ones.
    for (size_t payload : {0u, 4u, 20u, 24u, 28u, 60u, 64u, 196u, 200u, 204u, 212u, 216u,
                           220u, 252u, 1024u, 4096u, 4100u, 9000u}) {
      // 3 bytes in front so the payload is not 16-byte aligned in memory.
      constexpr size_t kSkew = 3;
      std::vector<uint8_t> buf(kSkew + headers + payload);
      uint8_t* l3 = buf.data() + kSkew;
      std::copy_n(base.data() + kL3, headers, l3);
      for (size_t i = 0; i < payload; ++i) l3[headers + i] = static_cast<uint8_t>(rng());
      EXPECT_EQ(icrc_compute(l3, headers + payload, ipv6),
                reference_icrc(l3, headers + payload, ipv6))
          << (ipv6 ? "v6 " : "v4 ") << payload;
    }
  }
}

TEST(Icrc, RandomHeaderBytesMatchReference) {
  // Every header byte random (the masked fields too), IPv4 with and
  // without options and IPv6, lengths across every path.
  std::mt19937 rng(23);
  for (int round = 0; round < 3000; ++round) {
    const bool ipv6 = round % 3 == 0;
    const size_t ihl = ipv6 ? 10 : (round % 3 == 1 ? 5 : 5 + rng() % 11);
    const size_t headers = ihl * 4 + kUdpSize + kBthSize;
    const size_t len = headers + rng() % 400;
    std::vector<uint8_t> buf(len + 1);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    uint8_t* l3 = buf.data() + 1;
    l3[0] = static_cast<uint8_t>(ipv6 ? (0x60 | (l3[0] & 0x0F)) : (0x40 | ihl));
    EXPECT_EQ(icrc_compute(l3, len, ipv6), reference_icrc(l3, len, ipv6))
        << (ipv6 ? "v6" : "v4") << " ihl " << ihl << " len " << len;
  }
}

// icrc_compute's answer for any datagram: 0 when the headers do not fit
// in it, else the reference.
uint32_t expected_icrc(const uint8_t* l3, size_t len, bool ipv6) {
  const size_t ip_len = ipv6 ? kIpv6Size : static_cast<size_t>(l3[0] & 0x0F) * 4;
  if (ip_len + kUdpSize + kBthSize > len) return 0;
  return reference_icrc(l3, len, ipv6);
}

// A random datagram of `len` bytes at `l3` whose first byte says IPv6 or
// IPv4 with header length `ihl` words.
void fill_random_datagram(std::mt19937& rng, uint8_t* l3, size_t len, bool ipv6, size_t ihl) {
  for (size_t i = 0; i < len; ++i) l3[i] = static_cast<uint8_t>(rng());
  l3[0] = static_cast<uint8_t>(ipv6 ? (0x60 | (l3[0] & 0x0F)) : (0x40 | ihl));
}

TEST(Icrc, ShortDatagramsOfEveryLayoutMatchReference) {
  // Expect: every length from the headers' up to 130 (an ACK is 44 bytes
  // of IPv4, a READ request or a CNP 56, a 64-byte WRITE ONLY 116), IPv4
  // with every header length and IPv6, random bytes (the masked fields
  // too), at every alignment within a cache line, equal the reference.
  std::mt19937 rng(29);
  for (bool ipv6 : {false, true}) {
    for (size_t ihl = 5; ihl <= (ipv6 ? 5u : 15u); ++ihl) {
      const size_t headers = (ipv6 ? kIpv6Size : ihl * 4) + kUdpSize + kBthSize;
      for (size_t len = headers; len <= 130; ++len) {
        const size_t align = rng() % 64;
        std::vector<uint8_t> buf(align + len);
        uint8_t* l3 = buf.data() + align;
        fill_random_datagram(rng, l3, len, ipv6, ihl);
        ASSERT_EQ(icrc_compute(l3, len, ipv6), reference_icrc(l3, len, ipv6))
            << (ipv6 ? "v6" : "v4") << " ihl " << ihl << " len " << len;
      }
    }
  }
}

TEST(Icrc, CheckManyMatchesReferenceOnRandomBursts) {
  // icrc_check_many takes fours of in-place 64..127-byte datagrams through
  // one path and every other check alone. Expect: bursts of 1..40 checks
  // mixing every kind (IPv4 without options, with options, with a version
  // other than 4, IPv6; under 64 bytes, 64..127, longer; headers longer
  // than the datagram), each with its own data and alignment and a right
  // or wrong carried ICRC, give ok[i] exactly when the carried ICRC is
  // icrc_compute's (the reference's).
  std::mt19937 rng(31);
  for (int round = 0; round < 400; ++round) {
    const size_t n = 1 + rng() % 40;
    std::vector<std::vector<uint8_t>> bufs(n);
    std::vector<IcrcCheck> checks(n);
    std::vector<bool> want(n);
    for (size_t i = 0; i < n; ++i) {
      const unsigned kind = rng() % 8;
      const bool ipv6 = kind == 0;
      const size_t ihl = kind == 1 ? 6 + rng() % 10 : 5;
      size_t len = 64 + rng() % 64;
      if (rng() % 4 == 0) len = 24 + rng() % 40;
      if (rng() % 8 == 0) len = 128 + rng() % 300;
      const size_t align = rng() % 64;
      bufs[i].resize(align + len);
      uint8_t* l3 = bufs[i].data() + align;
      fill_random_datagram(rng, l3, len, ipv6, ihl);
      if (kind == 2) l3[0] = static_cast<uint8_t>(0x05 | (rng() % 16) << 4);  // any version
      const uint32_t icrc = expected_icrc(l3, len, ipv6);
      const bool right = rng() % 4 != 0;
      checks[i] = {l3, static_cast<uint32_t>(len), ipv6, right ? icrc : icrc ^ (1u << rng() % 32)};
      want[i] = right;
    }
    bool ok[40];
    icrc_check_many(checks.data(), ok, n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(ok[i], want[i]) << "round " << round << " check " << i << " of " << n
                                << " len " << checks[i].len_before_icrc << " ipv6 "
                                << checks[i].ipv6 << " byte 0 " << int{checks[i].l3[0]};
    }
  }
}

}  // namespace
TEST(Icrc, CheckManyEqualsIcrcCompute) {
  // Every kind of datagram icrc_compute handles: IPv4 with and without
  // options, IPv6, short (an ACK) and long; more of them than one chunk.
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < 40; ++i) {
    PathSpec p;
    if (i % 2) {
      p.src_ip.v6 = p.dst_ip.v6 = true;
      p.src_ip.bytes[15] = 1;
      p.dst_ip.bytes[15] = 2;
    } else {
      p.src_ip = IpAddress::v4(0x0A000001);
      p.dst_ip = IpAddress::v4(0x0A000002);
    }
    p.vlan = i % 3 == 0;
    TransportSpec t;
    t.opcode = i % 5 == 0 ? uint8_t{IBV_OPCODE_RC_ACKNOWLEDGE} : uint8_t{IBV_OPCODE_RC_SEND_ONLY};
    t.dest_qp = 0x345;
    t.psn = static_cast<uint32_t>(i);
    std::vector<uint8_t> payload(t.opcode == IBV_OPCODE_RC_ACKNOWLEDGE ? 0 : i * 97 % 4097);
    std::vector<uint8_t> f(payload.size() + 256);
    f.resize(build_packet(p, t, payload, f));
    frames.push_back(std::move(f));
  }
  std::vector<IcrcCheck> checks;
  std::vector<bool> want;
  for (size_t i = 0; i < frames.size(); ++i) {
    ParsedPacket p;
    ASSERT_EQ(parse(frames[i], p), ParseError::kOk);
    IcrcCheck c = icrc_check(frames[i], p);
    if (i % 7 == 3) c.carried ^= 0x100;  // some wrong
    checks.push_back(c);
    want.push_back(icrc_compute(c.l3, c.len_before_icrc, c.ipv6) == c.carried);
  }
  // IPv4 with options: icrc_compute's copying path.
  std::vector<uint8_t> opt(120, 0);
  opt[0] = 0x46;
  store_be16(opt.data() + 2, 116);
  checks.push_back({opt.data(), 116, false, icrc_compute(opt.data(), 116, false)});
  want.push_back(true);
  bool ok[64];
  icrc_check_many(checks.data(), ok, checks.size());
  for (size_t i = 0; i < checks.size(); ++i) EXPECT_EQ(ok[i], want[i]) << i;
  EXPECT_EQ(std::count(want.begin(), want.end(), false), 6);
}

}  // namespace droce::wire
