// Switch basics: forwarding, serialization at the port rate, tail drop in
// shared and per-port buffers, no-route drops, links' propagation delay.
#include "droce/fabric/switch.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "droce/fabric/link.h"
#include "droce/wire/arp.h"
#include "fabric_test_util.h"

namespace droce::fabric {
namespace {

using testing::RoceSpec;
using testing::drain;
using testing::roce_packet;
using testing::simple_config;

constexpr uint64_t k10G = 10 * kGbps;
constexpr uint64_t k100G = 100 * kGbps;

TEST(Switch, ForwardsByDestinationUnchanged) {
  Switch sw(simple_config(3, k100G));
  Packet p = roce_packet({.dst_ip = 0x0A000003});
  const fabric::FrameBytes bytes = p.bytes;
  sw.receive(0, std::move(p), 1000);
  auto out = drain(sw);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].port, 2);
  EXPECT_EQ(out[0].start_time, 1000u);
  EXPECT_EQ(out[0].packet.bytes, bytes);
  EXPECT_EQ(out[0].packet.ingress_port, 0);
  EXPECT_EQ(out[0].packet.tc, 3);  // DSCP 26 -> class 3
  EXPECT_EQ(sw.counters(0).rx_packets, 1u);
  EXPECT_EQ(sw.counters(2).tx_packets, 1u);
  EXPECT_EQ(sw.buffer_used(), 0u);
}

TEST(Switch, SerializationAtPortRate) {
  Switch sw(simple_config(2, k10G));
  const size_t n = 100;
  for (size_t i = 0; i < n; ++i) sw.receive(0, roce_packet({}, i), 0);
  auto out = drain(sw);
  ASSERT_EQ(out.size(), n);
  const size_t frame = out[0].packet.size();
  // (frame + preamble/SFD + FCS + IFG) bits at 10 Gb/s.
  const double per = (frame + 24) * 8 / 10.0;
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(out[i].packet.tag, i);  // FIFO
    EXPECT_NEAR(static_cast<double>(out[i].start_time), i * per, 1.0);
    EXPECT_NEAR(static_cast<double>(out[i].time - out[i].start_time), per, 1.0);
    if (i) {
      EXPECT_EQ(out[i].start_time, out[i - 1].time);  // back to back
    }
  }
  // Long-run exact: the remainder is carried, no drift.
  EXPECT_NEAR(static_cast<double>(out.back().time), n * per, 1.0);
  EXPECT_EQ(Switch::serialization_ns(40, k10G), 67u);  // padded to 60: 84 B
}

TEST(Switch, IdleLinkStartsOnArrival) {
  Switch sw(simple_config(2, k100G));
  sw.receive(0, roce_packet({}), 100);
  drain(sw);
  sw.receive(0, roce_packet({}), 50'000);
  EXPECT_EQ(sw.next_event_time(), 50'000u);
  auto out = drain(sw);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].start_time, 50'000u);
}

TEST(Switch, SharedBufferTailDrop) {
  auto cfg = simple_config(3, k10G);
  cfg.buffer_mode = BufferMode::kShared;
  const size_t frame = testing::roce_bytes({}).size();
  cfg.shared_buffer_bytes = 10 * frame;
  Switch sw(cfg);
  // Two output ports share the 10 frames.
  for (int i = 0; i < 8; ++i) sw.receive(0, roce_packet({.dst_ip = 0x0A000002}), 0);
  for (int i = 0; i < 8; ++i) sw.receive(0, roce_packet({.dst_ip = 0x0A000003}), 0);
  // At t=0 the first packet of each port is on the wire already (dequeued).
  const auto& q1 = sw.counters(1).queues[3];
  const auto& q2 = sw.counters(2).queues[3];
  // Accepted: one on each wire plus ten queued.
  EXPECT_EQ(q1.drops + q2.drops, 16u - 12u);
  EXPECT_LE(sw.buffer_used(), cfg.shared_buffer_bytes);
  EXPECT_EQ(q2.drops, 4u);  // port 2 came second and found the buffer full
  auto out = drain(sw);
  EXPECT_EQ(out.size(), 12u);
}

TEST(Switch, PerPortBufferIsolatesPorts) {
  auto cfg = simple_config(3, k10G);
  cfg.buffer_mode = BufferMode::kPerPort;
  const size_t frame = testing::roce_bytes({}).size();
  for (auto& p : cfg.ports) p.buffer_bytes = 5 * frame;
  Switch sw(cfg);
  for (int i = 0; i < 8; ++i) sw.receive(0, roce_packet({.dst_ip = 0x0A000002}), 0);
  for (int i = 0; i < 8; ++i) sw.receive(0, roce_packet({.dst_ip = 0x0A000003}), 0);
  // Each port: one on the wire, five queued, two dropped.
  EXPECT_EQ(sw.counters(1).queues[3].drops, 2u);
  EXPECT_EQ(sw.counters(2).queues[3].drops, 2u);
  EXPECT_EQ(sw.port_queue_bytes(1), 5 * frame);
  EXPECT_EQ(sw.counters(1).queues[3].drop_bytes, 2 * frame);
  EXPECT_EQ(drain(sw).size(), 12u);
}

TEST(Switch, DropsUnroutableAndNonIp) {
  Switch sw(simple_config(2, k100G));
  sw.receive(0, roce_packet({.dst_ip = 0x0B000001}), 0);
  Packet junk;
  junk.bytes.assign(60, 0);
  sw.receive(0, std::move(junk), 0);
  Packet runt;
  runt.bytes.assign(10, 0);
  sw.receive(0, std::move(runt), 0);
  EXPECT_EQ(sw.counters(0).no_route, 2u);
  EXPECT_EQ(sw.counters(0).rx_bad, 1u);
  EXPECT_TRUE(drain(sw).empty());
}

TEST(Switch, PortDownDropsAndFlushes) {
  Switch sw(simple_config(2, k10G));
  for (int i = 0; i < 4; ++i) sw.receive(0, roce_packet({}), 0);
  sw.set_port_up(1, false, 10);
  EXPECT_FALSE(sw.port_up(1));
  EXPECT_TRUE(sw.port_up(0));
  EXPECT_EQ(sw.counters(1).down_drops, 3u);  // one was already on the wire
  sw.receive(0, roce_packet({}), 20);
  EXPECT_EQ(sw.counters(0).no_route, 1u);  // the only route is down
  sw.set_port_up(1, true, 30);
  EXPECT_TRUE(sw.port_up(1));
  sw.receive(0, roce_packet({}), 40);
  auto out = drain(sw);
  EXPECT_EQ(out.size(), 2u);
  EXPECT_EQ(sw.buffer_used(), 0u);
}

// Classifier::kPcp: the class comes from the VLAN tag's PCP through
// pcp_to_tc, whatever the DSCP says (every frame here carries DSCP 26, class
// 3 to the DSCP classifier); untagged frames go to class 0.
TEST(Switch, PcpClassifierMapsTagsToClasses) {
  auto cfg = simple_config(2, k100G);
  cfg.classifier = Classifier::kPcp;
  cfg.pcp_to_tc = {0, 1, 2, 3, 4, 5, 6, 7};
  cfg.pcp_to_tc[5] = 2;  // a remapped priority
  Switch sw(cfg);
  for (uint8_t pcp = 0; pcp < 8; ++pcp)
    sw.receive(0, roce_packet({.dscp = 26, .vlan = true, .pcp = pcp}, pcp), 0);
  sw.receive(0, roce_packet({.dscp = 26}, 100), 0);  // untagged
  std::array<uint64_t, kNumClasses> want{};
  for (uint8_t pcp = 0; pcp < 8; ++pcp) ++want[cfg.pcp_to_tc[pcp]];
  ++want[0];
  for (uint8_t c = 0; c < kNumClasses; ++c)
    EXPECT_EQ(sw.counters(1).queues[c].enq_packets, want[c]) << "class " << int{c};
  auto out = drain(sw);
  ASSERT_EQ(out.size(), 9u);
  for (const Departure& d : out) {
    const uint8_t want_tc = d.packet.tag == 100 ? 0 : cfg.pcp_to_tc[d.packet.tag];
    EXPECT_EQ(d.packet.tc, want_tc) << "tag " << d.packet.tag;
  }
  // The same frames through the DSCP classifier all land in class 3.
  Switch dscp(simple_config(2, k100G));
  for (uint8_t pcp = 0; pcp < 8; ++pcp)
    dscp.receive(0, roce_packet({.dscp = 26, .vlan = true, .pcp = pcp}), 0);
  EXPECT_EQ(dscp.counters(1).queues[3].enq_packets, 8u);
}

// Strict priority then acts on the PCP classes: with the port backlogged,
// PCP 6 frames all leave before PCP 1 frames with the same DSCP.
TEST(Switch, PcpClassesGetStrictPriority) {
  auto cfg = simple_config(2, 25 * kGbps);
  cfg.classifier = Classifier::kPcp;
  Switch sw(cfg);
  for (int i = 0; i < 20; ++i) {
    sw.receive(0, roce_packet({.dscp = 26, .vlan = true, .pcp = 1}, 1), 0);
    sw.receive(0, roce_packet({.dscp = 26, .vlan = true, .pcp = 6}, 6), 0);
  }
  auto out = drain(sw);
  ASSERT_EQ(out.size(), 40u);
  EXPECT_EQ(out[0].packet.tag, 1u);  // already on the wire
  for (int i = 1; i <= 20; ++i) EXPECT_EQ(out[i].packet.tag, 6u) << i;
  for (int i = 21; i < 40; ++i) EXPECT_EQ(out[i].packet.tag, 1u) << i;
}

TEST(Switch, LinkAddsPropagation) {
  Switch sw(simple_config(2, k100G));
  Link link(LinkConfig{.propagation_ns = 2500});
  sw.receive(0, roce_packet({}), 0);
  for (auto& d : drain(sw)) link.send(std::move(d.packet), d.time);
  const uint64_t ser = Switch::serialization_ns(testing::roce_bytes({}).size(), k100G);
  EXPECT_EQ(link.next_event_time(), ser + 2500);
  std::vector<uint64_t> arrivals;
  link.advance(kNever - 1, [&](Packet&&, uint64_t t) { arrivals.push_back(t); });
  ASSERT_EQ(arrivals.size(), 1u);
  EXPECT_EQ(arrivals[0], ser + 2500);
}

TEST(Switch, RejectsBadConfig) {
  SwitchConfig empty;
  EXPECT_THROW(Switch{empty}, std::invalid_argument);
  auto cfg = simple_config(2, k100G);
  cfg.pfc.xon_bytes = cfg.pfc.xoff_bytes + 1;
  EXPECT_THROW(Switch{cfg}, std::invalid_argument);
  cfg = simple_config(2, 0);
  EXPECT_THROW(Switch{cfg}, std::invalid_argument);
}


// --- L2: flooding and MAC learning for neighbour discovery ---

wire::MacAddress host_mac(uint8_t i) { return {0x02, 0x11, 0, 0, 0, i}; }

Packet arp_frame(wire::ArpOp op, uint8_t from, uint8_t to) {
  wire::L2Header l2;
  l2.src = host_mac(from);
  l2.dst = op == wire::ArpOp::kRequest ? wire::MacAddress{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}
                                       : host_mac(to);
  wire::ArpPacket a;
  a.op = op;
  a.sender_mac = host_mac(from);
  a.sender_ip = 0x0A000001u + from;
  a.target_mac = op == wire::ArpOp::kRequest ? wire::MacAddress{} : host_mac(to);
  a.target_ip = 0x0A000001u + to;
  Packet p;
  p.bytes.resize(64);
  p.bytes.resize(wire::build_arp(l2, a, {p.bytes.data(), p.bytes.size()}));
  return p;
}

SwitchConfig flood_config(size_t nports, size_t flood_ports) {
  SwitchConfig cfg = simple_config(nports, k100G);
  for (size_t i = 0; i < flood_ports; ++i) cfg.ports[i].flood = true;
  return cfg;
}

std::vector<uint16_t> out_ports(const std::vector<Departure>& out) {
  std::vector<uint16_t> ports;
  for (const Departure& d : out) ports.push_back(d.port);
  std::sort(ports.begin(), ports.end());
  return ports;
}

TEST(SwitchL2, BroadcastFloodsToEveryFloodPortButIngress) {
  Switch sw(flood_config(4, 4));
  Packet p = arp_frame(wire::ArpOp::kRequest, 1, 2);
  const FrameBytes bytes = p.bytes;
  sw.receive(1, std::move(p), 0);
  const auto out = drain(sw);
  EXPECT_EQ(out_ports(out), (std::vector<uint16_t>{0, 2, 3}));
  for (const Departure& d : out) {
    EXPECT_EQ(d.packet.bytes, bytes);
    EXPECT_EQ(d.packet.tc, 0);
  }
  EXPECT_EQ(sw.counters(1).flooded, 1u);
  EXPECT_EQ(sw.counters(1).no_route, 0u);
  EXPECT_EQ(sw.buffer_used(), 0u);
}

TEST(SwitchL2, MulticastFloodsIpv6SolicitedNodeToo) {
  Switch sw(flood_config(3, 3));
  // An IP frame to a group MAC (33:33:ff:00:00:02) is flooded, not routed.
  Packet p = roce_packet({.dst_ip = 0x0A000003});
  const uint8_t group[6] = {0x33, 0x33, 0xFF, 0, 0, 2};
  std::copy(group, group + 6, p.bytes.begin());
  sw.receive(0, std::move(p), 0);
  EXPECT_EQ(out_ports(drain(sw)), (std::vector<uint16_t>{1, 2}));
  EXPECT_EQ(sw.counters(0).flooded, 1u);
}

TEST(SwitchL2, NoFloodOutOfOrFromNonFloodPorts) {
  Switch sw(flood_config(4, 2));  // ports 2 and 3 are not flood ports
  sw.receive(0, arp_frame(wire::ArpOp::kRequest, 0, 1), 0);
  EXPECT_EQ(out_ports(drain(sw)), (std::vector<uint16_t>{1}));
  // A group frame arriving on a non-flood port is not relayed or learned.
  sw.receive(3, arp_frame(wire::ArpOp::kRequest, 3, 1), 100);
  EXPECT_TRUE(drain(sw).empty());
  EXPECT_EQ(sw.counters(3).no_route, 1u);
  EXPECT_EQ(sw.learned_port(host_mac(3)), -1);
  EXPECT_EQ(sw.counters(2).tx_packets + sw.counters(3).tx_packets, 0u);
}

TEST(SwitchL2, LearnsSourcesAndForwardsUnicastReplyByTable) {
  Switch sw(flood_config(4, 4));
  sw.receive(2, arp_frame(wire::ArpOp::kRequest, 2, 0), 0);  // 2 asks for 0
  EXPECT_EQ(drain(sw).size(), 3u);
  EXPECT_EQ(sw.learned_port(host_mac(2)), 2);
  EXPECT_EQ(sw.mac_table_entries(), 1u);
  sw.receive(0, arp_frame(wire::ArpOp::kReply, 0, 2), 1000);  // 0 answers
  const auto out = drain(sw);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].port, 2);
  EXPECT_EQ(sw.counters(0).l2_forwarded, 1u);
  EXPECT_EQ(sw.counters(0).flooded, 0u);
  EXPECT_EQ(sw.learned_port(host_mac(0)), 0);
  EXPECT_EQ(sw.mac_table_entries(), 2u);
}

TEST(SwitchL2, UnknownUnicastNonIpIsFlooded) {
  Switch sw(flood_config(3, 3));
  sw.receive(0, arp_frame(wire::ArpOp::kReply, 0, 2), 0);
  EXPECT_EQ(out_ports(drain(sw)), (std::vector<uint16_t>{1, 2}));
  EXPECT_EQ(sw.counters(0).flooded, 1u);
}

TEST(SwitchL2, ReplyToTheIngressSideIsFiltered) {
  Switch sw(flood_config(3, 3));
  sw.receive(1, arp_frame(wire::ArpOp::kRequest, 1, 0), 0);
  drain(sw);
  sw.receive(1, arp_frame(wire::ArpOp::kReply, 4, 1), 1000);  // 1 is behind port 1
  EXPECT_TRUE(drain(sw).empty());
}

TEST(SwitchL2, MacTableIsBounded) {
  SwitchConfig cfg = flood_config(3, 3);
  cfg.mac_table_size = 2;
  Switch sw(std::move(cfg));
  for (uint8_t h = 0; h < 4; ++h)
    sw.receive(h % 3, arp_frame(wire::ArpOp::kRequest, h, 9), h * 1000);
  drain(sw);
  EXPECT_EQ(sw.mac_table_entries(), 2u);
  EXPECT_EQ(sw.mac_table_full(), 2u);
  EXPECT_EQ(sw.learned_port(host_mac(0)), 0);
  EXPECT_EQ(sw.learned_port(host_mac(3)), -1);
}

TEST(SwitchL2, IpUnicastStillRoutedAndNonIpWithoutFloodDropped) {
  Switch sw(simple_config(3, k100G));  // no flood ports: pure L3 as before
  sw.receive(0, arp_frame(wire::ArpOp::kRequest, 0, 1), 0);
  EXPECT_TRUE(drain(sw).empty());
  EXPECT_EQ(sw.counters(0).no_route, 1u);
  // IP to a group MAC is still routed where no port floods.
  Packet m = roce_packet({.dst_ip = 0x0A000002});
  m.bytes[0] = 0x33;
  sw.receive(0, std::move(m), 1000);
  const auto routed = drain(sw);
  ASSERT_EQ(routed.size(), 1u);
  EXPECT_EQ(routed[0].port, 1);
  Switch l2(flood_config(3, 3));
  l2.receive(0, roce_packet({.dst_ip = 0x0A000003}), 0);
  const auto out = drain(l2);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].port, 2);
  EXPECT_EQ(l2.mac_table_entries(), 0u);  // IP unicast does not teach
}

}  // namespace
}  // namespace droce::fabric
