// Valid sample frames for wire tests: every supported opcode, IPv4 and IPv6,
// with and without a VLAN tag, several payload sizes.
#pragma once

#include <cstdint>
#include <vector>

#include "droce/wire/build.h"

namespace droce::wire::testing {

inline PathSpec sample_path(bool ipv6, bool vlan) {
  PathSpec p;
  p.dst_mac = {0x02, 0, 0, 0, 0, 0x02};
  p.src_mac = {0x02, 0, 0, 0, 0, 0x01};
  p.vlan = vlan;
  p.vlan_id = 100;
  p.pcp = 3;
  p.dscp = 26;
  p.ecn = Ecn::kEct0;
  if (ipv6) {
    p.src_ip.v6 = p.dst_ip.v6 = true;
    p.src_ip.bytes[0] = p.dst_ip.bytes[0] = 0xfd;
    p.src_ip.bytes[15] = 1;
    p.dst_ip.bytes[15] = 2;
    p.flow_label = 0xABCDE;
  } else {
    p.src_ip = IpAddress::v4(0xC0A80001);
    p.dst_ip = IpAddress::v4(0xC0A80002);
  }
  p.udp_src_port = udp_src_port_entropy(0x11, 0x22);
  return p;
}

inline TransportSpec sample_transport(uint8_t opcode) {
  TransportSpec t;
  t.opcode = opcode;
  t.dest_qp = 0x123456;
  t.psn = 0xFFFFFE;
  t.ack_req = true;
  t.reth_va = 0x1122334455667788ull;
  t.reth_rkey = 0xCAFE;
  t.reth_dma_length = 4096;
  t.aeth_syndrome = make_syndrome(AethType::kAck, kAethCreditsInvalid);
  t.aeth_msn = 0x42;
  t.atomic_va = 0x1000;
  t.atomic_rkey = 0xBEEF;
  t.atomic_swap_add = 0x0102030405060708ull;
  t.atomic_compare = 0x1112131415161718ull;
  t.atomic_ack_original = 0x2122232425262728ull;
  t.imm_data = 0xDEADBEEF;
  t.ieth_rkey = 0x5555;
  t.deth_qkey = 0x11111111;
  t.deth_src_qp = 0x654321;
  return t;
}

struct SampleFrame {
  std::vector<uint8_t> bytes;
  uint8_t opcode;
  size_t payload_length;
};

inline std::vector<SampleFrame> all_sample_frames() {
  std::vector<SampleFrame> out;
  for (int op = 0; op < 256; ++op) {
    const auto& info = opcode_info(static_cast<uint8_t>(op));
    if (!info.supported) continue;
    for (bool ipv6 : {false, true}) {
      for (bool vlan : {false, true}) {
        const std::vector<size_t> sizes =
            info.payload ? std::vector<size_t>{0, 1, 3, 4, 255, 1024}
                         : std::vector<size_t>{0};
        for (size_t n : sizes) {
          std::vector<uint8_t> payload(n);
          for (size_t i = 0; i < n; ++i) payload[i] = static_cast<uint8_t>(i * 7 + op);
          const PathSpec path = sample_path(ipv6, vlan);
          const TransportSpec t = sample_transport(static_cast<uint8_t>(op));
          // Only the last/only packet of a message may be padded.
          if (!info.is_last_or_only() && n % 4 != 0) continue;
          std::vector<uint8_t> frame(packet_size(path, t.opcode, n));
          const size_t len = build_packet(path, t, payload, frame);
          if (len == 0) continue;
          frame.resize(len);
          out.push_back({std::move(frame), static_cast<uint8_t>(op), n});
        }
      }
    }
  }
  return out;
}

}  // namespace droce::wire::testing
