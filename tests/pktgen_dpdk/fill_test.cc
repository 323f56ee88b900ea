// FastFiller (incremental ICRC) writes exactly PacketStream::fill()'s bytes.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace droce::pktgen
