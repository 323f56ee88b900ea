// INT-MD over UDP hop records: push, read back, strip to a frame whose ICRC
// verifies, echo insertion, the hop budget, and IPv6/VLAN framing.
#include "droce/wire/int.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "droce/wire/build.h"
#include "droce/wire/packet.h"

#include "fabric_test_util.h"

namespace droce::wire {
namespace {

using fabric::testing::RoceSpec;
using fabric::testing::roce_bytes;

IntHop hop(uint32_t i) {
  IntHop h;
  h.node_id = 100 + i;
  h.ingress_port = static_cast<uint16_t>(i);
  h.egress_port = static_cast<uint16_t>(i + 1);
  h.timestamp_ns = 1'000'000'000'000ull + i * 1000;
  h.tx_bytes = 0x1'0000'0000ull + i;
  h.qlen_bytes = 4096 * i;
  h.rate_mbps = 100'000;
  return h;
}

TEST(Int, PushReadStripRestoresOriginal) {
  const std::vector<uint8_t> orig = roce_bytes({});
  std::vector<uint8_t> buf(orig.size() + 512);
  std::copy(orig.begin(), orig.end(), buf.begin());
  size_t len = orig.size();
  for (uint32_t i = 0; i < 3; ++i) ASSERT_EQ(int_push_hop(buf, len, hop(i)), IntError::kOk);
  EXPECT_EQ(len, orig.size() + kIntHeaderSize + 3 * kIntHopSize);

  // A RoCE receiver that does not know INT must not take it for RoCEv2.
  ParsedPacket pp;
  EXPECT_EQ(parse(std::span(buf.data(), len), pp), ParseError::kNotRoceV2Port);
  EXPECT_EQ(pp.udp_dst_port, kIntUdpPort);

  IntLocation loc;
  ASSERT_EQ(int_locate(std::span(buf.data(), len), loc), IntError::kOk);
  EXPECT_TRUE(loc.has_int);
  EXPECT_EQ(loc.hop_count, 3);
  EXPECT_EQ(loc.remaining_hops, kIntDefaultMaxHops - 3);
  EXPECT_EQ(loc.original_dst_port, kRoceV2Port);
  EXPECT_FALSE(loc.echo);
  EXPECT_EQ(buf[loc.bth_offset()], IBV_OPCODE_RC_SEND_ONLY);

  IntHop hops[8];
  size_t n = 0;
  ASSERT_EQ(int_read_hops(std::span(buf.data(), len), hops, n), IntError::kOk);
  ASSERT_EQ(n, 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(hops[i], hop(i)) << "hop " << i;
  IntHop small[2];
  EXPECT_EQ(int_read_hops(std::span(buf.data(), len), small, n), IntError::kTooManyHops);

  ASSERT_EQ(int_strip(buf, len), IntError::kOk);
  ASSERT_EQ(len, orig.size());
  EXPECT_TRUE(std::equal(orig.begin(), orig.end(), buf.begin()));
  EXPECT_EQ(parse(std::span(buf.data(), len), pp), ParseError::kOk);
  EXPECT_TRUE(pp.icrc_checked);
}

// A frame whose payload is unheld (icrc.h: carried as a length, its bytes
// unspecified): pushing hops and stripping them moves everything but that
// payload, so the frame comes back the same outside it, and its ICRC, over
// zeros there, still verifies.
TEST(Int, UnheldPayloadIsNotMoved) {
  const size_t payload = 1000;
  std::vector<uint8_t> orig = roce_bytes({.payload = payload});
  const UnheldPayload unheld{static_cast<uint16_t>(payload), 0};
  const auto [first, last] = unheld_range(orig.size(), unheld);
  ASSERT_EQ(last, orig.size() - kIcrcSize);
  std::fill(orig.begin() + first, orig.begin() + last, 0);
  ParsedPacket pp;
  ASSERT_EQ(parse(orig, pp, {.verify_icrc = false}), ParseError::kOk);
  refresh_checksums(orig, pp);  // the ICRC of zeros
  std::fill(orig.begin() + first, orig.begin() + last, 0xEE);
  ASSERT_EQ(parse(orig, pp, {.unheld = unheld}), ParseError::kOk);

  // Marked bytes past the frame: had the unheld payload moved along, its
  // 0xEE would fill the end of the grown frame's payload area; unmoved,
  // that area holds what was past the old frame (marks, old ICRCs).
  std::vector<uint8_t> buf(orig.size() + 512, 0x11);
  std::copy(orig.begin(), orig.end(), buf.begin());
  size_t len = orig.size();
  for (uint32_t i = 0; i < 3; ++i)
    ASSERT_EQ(int_push_hop(buf, len, hop(i), kIntDefaultMaxHops, unheld), IntError::kOk);
  const size_t grown = kIntHeaderSize + 3 * kIntHopSize;
  ASSERT_EQ(len, orig.size() + grown);
  // Headers and the ICRC moved; the unheld payload did not.
  EXPECT_TRUE(std::equal(orig.begin() + last, orig.end(), buf.begin() + last + grown));
  EXPECT_TRUE(std::none_of(buf.begin() + last, buf.begin() + last + grown,
                           [](uint8_t b) { return b == 0xEE; }));
  EXPECT_EQ(buf[len - kIcrcSize - payload - 1], orig[first - 1]);  // the RETH/BTH end
  IntHop hops[8];
  size_t n = 0;
  ASSERT_EQ(int_read_hops(std::span(buf.data(), len), hops, n), IntError::kOk);
  EXPECT_EQ(n, 3u);

  ASSERT_EQ(int_strip(buf, len, unheld), IntError::kOk);
  ASSERT_EQ(len, orig.size());
  EXPECT_TRUE(std::equal(orig.begin(), orig.begin() + first, buf.begin()));
  EXPECT_TRUE(std::equal(orig.begin() + last, orig.end(), buf.begin() + last));
  EXPECT_EQ(parse(std::span(buf.data(), len), pp, {.unheld = unheld}), ParseError::kOk);
}

TEST(Int, IpHeaderStaysValidWithInt) {
  std::vector<uint8_t> buf = roce_bytes({});
  size_t len = buf.size();
  buf.resize(len + 64);
  ASSERT_EQ(int_push_hop(buf, len, hop(0)), IntError::kOk);
  EXPECT_EQ(ipv4_checksum(buf.data() + kEthSize, kIpv4Size), 0);
  EXPECT_EQ(load_be16(buf.data() + kEthSize + 2), len - kEthSize);
  EXPECT_EQ(load_be16(buf.data() + kEthSize + kIpv4Size + 4), len - kEthSize - kIpv4Size);
}

TEST(Int, HopBudgetSetsExceededBit) {
  std::vector<uint8_t> buf = roce_bytes({.payload = 64});
  size_t len = buf.size();
  buf.resize(len + 512);
  ASSERT_EQ(int_push_hop(buf, len, hop(0), 2), IntError::kOk);
  ASSERT_EQ(int_push_hop(buf, len, hop(1), 2), IntError::kOk);
  const size_t full = len;
  EXPECT_EQ(int_push_hop(buf, len, hop(2), 2), IntError::kStackFull);
  EXPECT_EQ(len, full);
  IntLocation loc;
  ASSERT_EQ(int_locate(std::span(buf.data(), len), loc), IntError::kOk);
  EXPECT_TRUE(loc.exceeded);
  EXPECT_EQ(loc.hop_count, 2);
  EXPECT_EQ(loc.remaining_hops, 0);
}

TEST(Int, NoRoomLeavesFrameAlone) {
  std::vector<uint8_t> buf = roce_bytes({});
  const std::vector<uint8_t> orig = buf;
  size_t len = buf.size();
  EXPECT_EQ(int_push_hop(buf, len, hop(0)), IntError::kNoRoom);
  EXPECT_EQ(len, orig.size());
  EXPECT_EQ(buf, orig);
}

TEST(Int, EchoOnAckRoundTrips) {
  const std::vector<uint8_t> ack = roce_bytes({.opcode = IBV_OPCODE_RC_ACKNOWLEDGE});
  std::vector<uint8_t> buf(ack.size() + 512);
  std::copy(ack.begin(), ack.end(), buf.begin());
  size_t len = ack.size();
  const IntHop path[3] = {hop(0), hop(1), hop(2)};
  ASSERT_EQ(int_insert_echo(buf, len, path), IntError::kOk);
  IntLocation loc;
  ASSERT_EQ(int_locate(std::span(buf.data(), len), loc), IntError::kOk);
  EXPECT_TRUE(loc.echo);
  EXPECT_EQ(loc.hop_count, 3);
  // Switches on the way back must not add to an echoed stack.
  EXPECT_EQ(int_push_hop(buf, len, hop(9)), IntError::kEcho);
  EXPECT_EQ(int_insert_echo(buf, len, path), IntError::kAlreadyInt);
  IntHop got[8];
  size_t n = 0;
  ASSERT_EQ(int_read_hops(std::span(buf.data(), len), got, n), IntError::kOk);
  ASSERT_EQ(n, 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got[i], path[i]);
  ASSERT_EQ(int_strip(buf, len), IntError::kOk);
  EXPECT_TRUE(std::equal(ack.begin(), ack.end(), buf.begin()));
  ParsedPacket pp;
  EXPECT_EQ(parse(std::span(buf.data(), len), pp), ParseError::kOk);
}

TEST(Int, Ipv6AndVlan) {
  for (bool v6 : {false, true}) {
    const std::vector<uint8_t> orig = roce_bytes({.ipv6 = v6, .vlan = true, .pcp = 3});
    std::vector<uint8_t> buf(orig.size() + 512);
    std::copy(orig.begin(), orig.end(), buf.begin());
    size_t len = orig.size();
    ASSERT_EQ(int_push_hop(buf, len, hop(0)), IntError::kOk);
    ASSERT_EQ(int_push_hop(buf, len, hop(1)), IntError::kOk);
    IntHop got[8];
    size_t n = 0;
    ASSERT_EQ(int_read_hops(std::span(buf.data(), len), got, n), IntError::kOk);
    EXPECT_EQ(n, 2u);
    EXPECT_EQ(got[1], hop(1));
    ASSERT_EQ(int_strip(buf, len), IntError::kOk);
    ASSERT_EQ(len, orig.size());
    EXPECT_TRUE(std::equal(orig.begin(), orig.end(), buf.begin())) << "v6=" << v6;
    ParsedPacket pp;
    EXPECT_EQ(parse(std::span(buf.data(), len), pp), ParseError::kOk) << "v6=" << v6;
  }
}

TEST(Int, RejectsNonRoceAndMalformed) {
  std::vector<uint8_t> buf = roce_bytes({});
  size_t len = buf.size();
  IntLocation loc;
  EXPECT_EQ(int_strip(buf, len), IntError::kNoInt);
  std::vector<uint8_t> other = buf;
  store_be16(other.data() + kEthSize + kIpv4Size + 2, 53);  // DNS
  EXPECT_EQ(int_locate(other, loc), IntError::kNotRoce);
  buf.resize(len + 64);
  ASSERT_EQ(int_push_hop(buf, len, hop(0)), IntError::kOk);
  buf[kEthSize + kIpv4Size + kUdpSize] = 0x20;  // shim type 2
  EXPECT_EQ(int_locate(std::span(buf.data(), len), loc), IntError::kBadHeader);
  EXPECT_EQ(int_locate(std::span(buf.data(), 30), loc), IntError::kTruncated);
}

}  // namespace
}  // namespace droce::wire
