#include "droce/pktgen/stream.h"

#include <gtest/gtest.h>
#include <infiniband/opcode.h>

#include <set>

#include "droce/pktgen/probe.h"

namespace droce::pktgen {
namespace {

StreamSpec base_spec(bool v6, bool vlan) {
  StreamSpec s;
  s.path.src_mac = {2, 0, 0, 0, 0, 1};
  s.path.dst_mac = {2, 0, 0, 0, 0, 2};
  s.path.vlan = vlan;
  s.path.vlan_id = 100;
  s.path.pcp = 3;
  s.path.dscp = 26;
  s.path.ecn = wire::Ecn::kEct1;
  if (v6) {
    s.path.src_ip.v6 = s.path.dst_ip.v6 = true;
    s.path.src_ip.bytes[0] = 0xfd;
    s.path.dst_ip.bytes[0] = 0xfd;
  } else {
    s.path.src_ip = wire::IpAddress::v4(0x0A000001);
    s.path.dst_ip = wire::IpAddress::v4(0x0A000002);
  }
  s.transport.opcode = IBV_OPCODE_RC_RDMA_WRITE_ONLY;
  s.transport.dest_qp = 0x11;
  s.transport.reth_va = 0x1000;
  s.transport.reth_rkey = 0x55;
  s.transport.reth_dma_length = 256;
  s.payload_bytes = 256;
  s.probe = true;
  s.stream_id = 9;
  return s;
}

TEST(PktgenStream, FieldRanges) {
  const auto inc = FieldRange::increment(100, 5, 2);
  std::vector<uint64_t> v;
  for (uint64_t n = 0; n < 7; ++n) v.push_back(inc.value(n));
  EXPECT_EQ(v, (std::vector<uint64_t>{100, 102, 104, 101, 103, 100, 102}));
  const auto rnd = FieldRange::random(1000, 10, 77);
  std::set<uint64_t> seen;
  for (uint64_t n = 0; n < 1000; ++n) {
    const uint64_t x = rnd.value(n);
    EXPECT_GE(x, 1000u);
    EXPECT_LE(x, 1009u);
    seen.insert(x);
    EXPECT_EQ(x, rnd.value(n));  // a pure function of n
  }
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_NE(FieldRange::random(0, 1 << 20, 1).value(5), FieldRange::random(0, 1 << 20, 2).value(5));
}

// Every generated packet parses with a valid ICRC and carries the fields
// its ranges say, for IPv4/IPv6, with and without VLAN, several opcodes.
TEST(PktgenStream, EveryPacketParsesWithTheRangedFields) {
  struct Op {
    uint8_t opcode;
    uint32_t payload;
  };
  for (bool v6 : {false, true}) {
    for (bool vlan : {false, true}) {
      for (Op op : {Op{IBV_OPCODE_RC_RDMA_WRITE_ONLY, 256}, Op{IBV_OPCODE_RC_SEND_ONLY_WITH_IMMEDIATE, 61},
                    Op{IBV_OPCODE_UD_SEND_ONLY, 1000}, Op{IBV_OPCODE_RC_RDMA_WRITE_MIDDLE, 1024}}) {
        StreamSpec s = base_spec(v6, vlan);
        s.transport.opcode = op.opcode;
        s.payload_bytes = op.payload;
        s.dest_qp = FieldRange::increment(0x100, 16);
        s.psn = FieldRange::increment(0xFFFFF0, 16);
        s.udp_src_port = FieldRange::random(0xC000, 0x4000, 3);
        s.src_ip = FieldRange::increment(0x0A000001, 4);
        s.dst_ip = FieldRange::random(0x0B000000, 256, 4);
        const PacketStream stream(s);
        std::vector<uint8_t> buf(stream.frame_size() + 16);
        for (uint64_t n = 0; n < 200; ++n) {
          const size_t len = stream.fill(n, buf, 5000 + n);
          ASSERT_EQ(len, stream.frame_size());
          wire::ParsedPacket p;
          ASSERT_EQ(wire::parse({buf.data(), len}, p), wire::ParseError::kOk)
              << "v6=" << v6 << " vlan=" << vlan << " op=" << int(op.opcode) << " n=" << n;
          EXPECT_EQ(p.opcode, op.opcode);
          EXPECT_EQ(p.dest_qp, s.dest_qp.value(n));
          EXPECT_EQ(p.psn, s.psn.value(n));
          EXPECT_EQ(p.udp_src_port, s.udp_src_port.value(n));
          const auto last32 = [&](const wire::IpAddress& a) { return wire::load_be32(a.bytes + (v6 ? 12 : 0)); };
          EXPECT_EQ(last32(p.src_ip), s.src_ip.value(n));
          EXPECT_EQ(last32(p.dst_ip), s.dst_ip.value(n));
          EXPECT_EQ(p.has_vlan, vlan);
          if (vlan) {
            EXPECT_EQ(p.vlan_id, 100);
            EXPECT_EQ(p.pcp, 3);
          }
          EXPECT_EQ(p.dscp, 26);
          EXPECT_EQ(p.ecn, wire::Ecn::kEct1);
          EXPECT_EQ(p.payload_length, op.payload);
          const auto probe = read_probe({p.payload, p.payload_length});
          ASSERT_TRUE(probe);
          EXPECT_EQ(probe->stream_id, 9u);
          EXPECT_EQ(probe->seq, n);
          EXPECT_EQ(probe->tx_ns, 5000 + n);
        }
        EXPECT_EQ(stream.fill(0, std::span<uint8_t>(buf.data(), stream.frame_size() - 1)), 0u);
      }
    }
  }
}

TEST(PktgenStream, RefusesBadSpecs) {
  StreamSpec s = base_spec(false, false);
  s.transport.opcode = 0x40;  // RD
  EXPECT_NE(check_stream(s).find("not a supported"), std::string::npos);
  s = base_spec(false, false);
  s.transport.opcode = IBV_OPCODE_RC_ACKNOWLEDGE;
  EXPECT_NE(check_stream(s).find("carries no payload"), std::string::npos);
  s = base_spec(false, false);
  s.payload_bytes = 8;
  EXPECT_NE(check_stream(s).find("at least 24"), std::string::npos);
  s = base_spec(false, false);
  s.dest_qp = FieldRange::increment(0xFFFFF0, 32);
  EXPECT_NE(check_stream(s).find("QPN range"), std::string::npos);
  EXPECT_THROW(PacketStream{s}, std::invalid_argument);
  s = base_spec(false, false);
  s.transport.opcode = IBV_OPCODE_RC_SEND_FIRST;
  s.payload_bytes = 30;  // first packets cannot be padded
  EXPECT_THROW(PacketStream{s}, std::invalid_argument);
}

TEST(PktgenStream, OpcodeNames) {
  EXPECT_EQ(opcode_from_string("RC_RDMA_WRITE_ONLY"), IBV_OPCODE_RC_RDMA_WRITE_ONLY);
  EXPECT_EQ(opcode_from_string("0x0a"), 0x0a);
  EXPECT_EQ(opcode_from_string("4"), 4);
  EXPECT_FALSE(opcode_from_string("RC_TELEPORT"));
  EXPECT_FALSE(opcode_from_string("0x40"));  // RD: not supported
  EXPECT_FALSE(opcode_from_string("300"));
}

TEST(PktgenStream, Rates) {
  auto r = parse_rate("2.5Mpps");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->unit, Rate::Unit::kPps);
  EXPECT_DOUBLE_EQ(r->value, 2.5e6);
  r = parse_rate("25Gbps");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->unit, Rate::Unit::kBitsPerSecond);
  EXPECT_DOUBLE_EQ(r->value, 25e9);
  r = parse_rate("50%");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->unit, Rate::Unit::kPercentOfLine);
  EXPECT_FALSE(parse_rate("fast"));
  EXPECT_FALSE(parse_rate("10 furlongs"));
  EXPECT_FALSE(parse_rate("-5pps"));
  // 64-byte frames: 60 + FCS = 64, + 20 = 84 wire bytes; 100G -> 148.81 Mpps.
  EXPECT_EQ(wire_bytes(60), 84u);
  EXPECT_EQ(wire_bytes(20), 84u);  // padded to the minimum
  EXPECT_EQ(wire_bytes(1000), 1024u);
  EXPECT_NEAR(rate_pps(Rate{Rate::Unit::kPercentOfLine, 100}, 60, 100e9), 148'809'523.8, 0.1);
  EXPECT_NEAR(rate_pps(Rate{Rate::Unit::kBitsPerSecond, 8192e6}, 1000, 100e9), 1e6, 1e-6);
  EXPECT_EQ(check_rate(Rate{Rate::Unit::kPercentOfLine, 100}, 60, 100e9), "");
  EXPECT_EQ(check_rate(Rate{Rate::Unit::kPps, 148'809'523}, 60, 100e9), "");
  const std::string above = check_rate(Rate{Rate::Unit::kPps, 150e6}, 60, 100e9);
  EXPECT_NE(above.find("above the line rate of 100.000 Gb/s"), std::string::npos) << above;
  EXPECT_NE(check_rate(Rate{Rate::Unit::kPercentOfLine, 101}, 1000, 25e9), "");
  EXPECT_NE(check_rate(Rate{Rate::Unit::kPps, 0}, 1000, 25e9), "");
}

}  // namespace
}  // namespace droce::pktgen
