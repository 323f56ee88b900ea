// FastFiller (incremental ICRC) writes exactly PacketStream::fill()'s bytes,
// one packet at a time (fill) and per burst (fill_burst).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "droce/pktgen/dpdk_fill.h"
#include "droce/wire/packet.h"

namespace droce::pktgen {
namespace {

StreamSpec base_spec(bool v6, bool vlan, uint8_t opcode, uint32_t payload, bool probe) {
  StreamSpec s;
  s.path.src_mac = {2, 0, 0, 0, 0, 1};
  s.path.dst_mac = {2, 0, 0, 0, 0, 2};
  if (v6) {
    s.path.src_ip.v6 = s.path.dst_ip.v6 = true;
    s.path.src_ip.bytes[0] = s.path.dst_ip.bytes[0] = 0xfd;
    s.path.src_ip.bytes[15] = 1;
    s.path.dst_ip.bytes[15] = 2;
  } else {
    s.path.src_ip = wire::IpAddress::v4(0x0A000001);
    s.path.dst_ip = wire::IpAddress::v4(0x0A000002);
  }
  s.path.vlan = vlan;
  s.path.vlan_id = 5;
  s.path.pcp = 3;
  s.path.dscp = 26;
  s.transport.opcode = opcode;
  s.transport.dest_qp = 0x11;
  s.payload_bytes = payload;
  s.probe = probe;
  s.stream_id = 9;
  return s;
}

TEST(PktgenDpdkFill, SameBytesAsPacketStream) {
  int cases = 0;
  for (bool v6 : {false, true})
    for (bool vlan : {false, true})
      for (uint8_t op : {uint8_t{0x04}, uint8_t{0x0a}, uint8_t{0x05}})
        for (bool ranged : {false, true}) {
          StreamSpec s = base_spec(v6, vlan, op, 100, true);
          s.psn = FieldRange::increment(0, 1 << 24, 0x10001);
          if (ranged) {
            s.dest_qp = FieldRange::random(0x100, 4000, 3);
            s.udp_src_port = FieldRange::increment(0xC000, 1000, 7);
            s.src_ip = FieldRange::random(0x0A000000, 1 << 20, 4);
            s.dst_ip = FieldRange::increment(0x0B000000, 300);
          }
          FastFiller fast(s);
          PacketStream ref(s);
          std::vector<uint8_t> a(ref.frame_size()), b(ref.frame_size());
          for (uint64_t n : {0ull, 1ull, 2ull, 15ull, 16ull, 255ull, 256ull, 65537ull, 123456789ull}) {
            const uint64_t ts = n * 7919 + 0x123456789ull;
            ref.fill(n, b, ts);
            fast.fill(n, a.data(), ts);
            ASSERT_EQ(a, b) << "v6 " << v6 << " vlan " << vlan << " op " << int(op) << " n " << n;
            wire::ParsedPacket p;
            ASSERT_EQ(wire::parse(a, p), wire::ParseError::kOk);
          }
          ++cases;
        }
  EXPECT_EQ(cases, 24);
}

TEST(PktgenDpdkFill, SmallSendWithoutProbe) {
  StreamSpec s = base_spec(false, false, 0x04, 0, false);
  s.psn = FieldRange::increment(0, 1 << 24);
  FastFiller fast(s);
  PacketStream ref(s);
  EXPECT_EQ(fast.frame_size(), 58u);  // 64 bytes on the wire with padding and FCS
  std::vector<uint8_t> a(58), b(58);
  for (uint64_t n = 0; n < 5000; ++n) {
    ref.fill(n, b, 0);
    fast.fill(n, a.data(), 0);
    ASSERT_EQ(a, b) << n;
  }
}

// fill_burst(n0, ...) against PacketStream::fill(n0 + i) for each packet of
// a burst: byte-identical frames that parse with a valid ICRC (wire::parse
// checks it), whether the burst takes the single-counter loop or not.
void expect_burst_matches(const StreamSpec& s, bool single_counter, const char* what) {
  FastFiller fast(s);
  PacketStream ref(s);
  EXPECT_EQ(fast.single_counter(), single_counter) << what;
  const size_t len = ref.frame_size();
  constexpr uint32_t kBurst = 37;  // not a power of two: bursts straddle byte carries
  // Guard bytes after each frame: the fixed-size copies must stay inside it.
  std::vector<std::vector<uint8_t>> bufs(kBurst, std::vector<uint8_t>(len + 64, 0xA5));
  uint8_t* outs[kBurst];
  for (uint32_t i = 0; i < kBurst; ++i) outs[i] = bufs[i].data();
  std::vector<uint8_t> want(len);
  // Bursts across the low byte's and the 24-bit wrap-arounds.
  for (uint64_t n0 : {0ull, 1ull, 250ull, 65520ull, (1ull << 24) - 20, 5ull << 24, 987654321ull}) {
    const uint64_t ts = n0 * 31 + 0xABCDEF;
    fast.fill_burst(n0, outs, kBurst, ts);
    for (uint32_t i = 0; i < kBurst; ++i) {
      ref.fill(n0 + i, want, ts);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), bufs[i].begin()))
          << what << " n " << n0 + i;
      for (size_t j = len; j < len + 64; ++j) ASSERT_EQ(bufs[i][j], 0xA5) << what << " byte " << j;
      wire::ParsedPacket p;
      ASSERT_EQ(wire::parse({bufs[i].data(), len}, p), wire::ParseError::kOk) << what << " n " << n0 + i;
    }
  }
}

TEST(PktgenDpdkFill, BurstSameBytesAsPacketStream) {
  // droce-pktgen-dpdk's default stream: PSN +1 over 2^24, nothing else.
  StreamSpec s = base_spec(false, false, 0x04, 0, false);
  s.psn = FieldRange::increment(0, 1 << 24);
  expect_burst_matches(s, true, "psn only, 58 B");
  // The same with a payload (65..128-byte and larger frames), IPv6, VLAN.
  for (uint32_t payload : {8u, 64u, 1024u}) {
    StreamSpec p = base_spec(true, true, 0x0a, payload, false);
    p.psn = FieldRange::increment(0, 1 << 24);
    expect_burst_matches(p, true, "psn only, payload");
  }
  // Destination QPN alone, a power-of-two count, a start and a step.
  StreamSpec q = base_spec(false, true, 0x04, 0, false);
  q.dest_qp = FieldRange::increment(0x100, 16, 3);
  expect_burst_matches(q, true, "qpn only");
  // A stride over a power of two: still the mask, as FieldRange::value.
  StreamSpec st = base_spec(false, false, 0x04, 0, false);
  st.psn = FieldRange::increment(0x10, 1 << 20, 0x10001);
  expect_burst_matches(st, true, "psn stride");
  // Not single-counter: a count that is not a power of two, random, two
  // fields, addresses (IPv4 checksum), a probe.
  StreamSpec a = base_spec(false, false, 0x04, 0, false);
  a.psn = FieldRange::increment(0, 1000);
  expect_burst_matches(a, false, "psn count 1000");
  StreamSpec b = base_spec(false, false, 0x04, 0, false);
  b.psn = FieldRange::random(0, 1 << 24, 7);
  expect_burst_matches(b, false, "psn random");
  StreamSpec c = base_spec(false, false, 0x04, 0, false);
  c.psn = FieldRange::increment(0, 1 << 24);
  c.udp_src_port = FieldRange::increment(0xC000, 64);
  expect_burst_matches(c, false, "psn and sport");
  StreamSpec d = base_spec(false, false, 0x04, 0, false);
  d.psn = FieldRange::increment(0, 1 << 24);
  d.dst_ip = FieldRange::increment(0x0A000002, 256);
  expect_burst_matches(d, false, "psn and dst ip");
  StreamSpec e = base_spec(true, false, 0x0a, 100, true);
  e.psn = FieldRange::increment(0, 1 << 24);
  expect_burst_matches(e, false, "psn and probe");
  StreamSpec f = base_spec(false, false, 0x04, 0, false);
  expect_burst_matches(f, false, "nothing changes");
}

}  // namespace
}  // namespace droce::pktgen
