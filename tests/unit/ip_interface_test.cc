// The port's IP interface: answers (checked byte for byte against
// scapy's frames), announcements, resolution, rate limits, VLANs and
// hostile input.
#include "droce/endpoint/ip_interface.h"

#include <gtest/gtest.h>

#include "droce/wire/arp.h"
#include "droce/wire/icmp.h"
#include "droce/wire/icmpv6.h"
#include "neighbour_vectors.h"

namespace droce::endpoint {
namespace {

using namespace wire::vectors;
constexpr uint64_t kS = 1'000'000'000;

InterfaceConfig config_b() {
  InterfaceConfig c;
  c.mac = kB;
  c.addresses = {wire::IpAddress::v4(0x0A000002), v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 2})};
  return c;
}

struct Fixture {
  EndpointCounters counters;
  IpInterface itf;
  explicit Fixture(const InterfaceConfig& c = config_b()) : itf(c, counters) {}
  std::vector<uint8_t> take() {
    std::vector<uint8_t> buf(9216);
    buf.resize(itf.emit(buf));
    return buf;
  }
  size_t drain() {
    size_t n = 0;
    while (itf.has_frames()) n += take().empty() ? 0 : 1;
    return n;
  }
};

TEST(IpInterface, OwnsItsAddressesAndItsLinkLocal) {
  Fixture f;
  EXPECT_TRUE(f.itf.owns(wire::IpAddress::v4(0x0A000002)));
  EXPECT_TRUE(f.itf.owns(wire::link_local_address(kB)));
  EXPECT_FALSE(f.itf.owns(wire::IpAddress::v4(0x0A000001)));
  EXPECT_FALSE(Fixture(InterfaceConfig{}).itf.enabled());
}

TEST(IpInterface, AnswersArpAsScapyExpects) {
  Fixture f;
  ASSERT_TRUE(f.itf.receive(hex(kArpRequest), 0));
  EXPECT_EQ(f.take(), hex(kArpReply));
  EXPECT_EQ(f.counters.arp_requests_in, 1u);
  EXPECT_EQ(f.counters.arp_replies_out, 1u);
  // RFC 826's merge: the asker is now known (stale), no solicitation needed.
  const auto mac = f.itf.lookup(wire::IpAddress::v4(0x0A000001), 0);
  ASSERT_TRUE(mac.has_value());
  EXPECT_EQ(*mac, kA);
}

TEST(IpInterface, AnswersNeighbourSolicitationsAndEcho) {
  Fixture f;
  ASSERT_TRUE(f.itf.receive(hex(kNs), 0));
  EXPECT_EQ(f.take(), hex(kNa));
  ASSERT_TRUE(f.itf.receive(hex(kEchoRequest), 0));
  EXPECT_EQ(f.take(), hex(kEchoReply));
  ASSERT_TRUE(f.itf.receive(hex(kEcho6Request), 0));
  EXPECT_EQ(f.take(), hex(kEcho6Reply));
  EXPECT_EQ(f.counters.nd_solicits_in, 1u);
  EXPECT_EQ(f.counters.nd_adverts_out, 1u);
  EXPECT_EQ(f.counters.icmp_echo_in, 2u);
  EXPECT_EQ(f.counters.icmp_echo_out, 2u);
}

TEST(IpInterface, IgnoresWhatIsNotForIt) {
  Fixture f;
  auto g = hex(kArpRequest);
  g[41] = 9;  // asks for 10.0.0.9
  ASSERT_TRUE(f.itf.receive(g, 0));
  EXPECT_FALSE(f.itf.has_frames());
  EXPECT_EQ(f.counters.arp_other, 1u);
  // Not ARP/ICMP: the caller's.
  std::vector<uint8_t> other(60, 0);
  other[12] = 0x88;
  other[13] = 0xB5;
  EXPECT_FALSE(f.itf.receive(other, 0));
}

TEST(IpInterface, EchoRepliesAreRateLimited) {
  Fixture f;
  const auto req = hex(kEchoRequest);
  for (int i = 0; i < 100; ++i) f.itf.receive(req, 0);
  EXPECT_EQ(f.counters.icmp_echo_out, 50u);  // the burst
  EXPECT_EQ(f.counters.answers_rate_limited, 50u);
  // The queue holds 64 frames: none beyond it.
  EXPECT_EQ(f.drain(), 50u);
  // 1000/s: 10 ms later, 10 more.
  for (int i = 0; i < 20; ++i) f.itf.receive(req, 10'000'000);
  EXPECT_EQ(f.counters.icmp_echo_out, 60u);
}

TEST(IpInterface, AFloodOfRequestsIsBounded) {
  InterfaceConfig c = config_b();
  c.timers.max_entries = 64;
  Fixture f(c);
  auto g = hex(kArpRequest);
  for (uint32_t i = 0; i < 100'000; ++i) {
    g[28] = static_cast<uint8_t>(i >> 8);  // sender 10.x.y.1 and a MAC of its own
    g[29] = static_cast<uint8_t>(i);
    g[27] = static_cast<uint8_t>(i);
    f.itf.receive(g, i * 1000);
  }
  EXPECT_LE(f.itf.neighbours().size(), 64u);
  EXPECT_LE(f.drain(), 64u);
  EXPECT_GT(f.counters.ctl_tx_queue_full + f.counters.answers_rate_limited, 0u);
}

TEST(IpInterface, SpoofedAnswersAddNothing) {
  Fixture f;
  // A reply to us for 10.0.0.1, which we never asked for.
  auto g = hex(kArpReply);
  // scapy's reply is from B to A; make it from A (10.0.0.1) to B (us).
  wire::L2Header l2{.dst = kB, .src = kA};
  wire::ArpPacket a{wire::ArpOp::kReply, kA, 0x0A000001, kB, 0x0A000002};
  std::vector<uint8_t> reply(64);
  reply.resize(wire::build_arp(l2, a, reply));
  ASSERT_TRUE(f.itf.receive(reply, 0));
  EXPECT_EQ(f.counters.spoofed_answers, 1u);
  EXPECT_EQ(f.itf.neighbours().size(), 0u);
  // A neighbour advertisement nobody solicited, likewise.
  std::vector<uint8_t> na(128);
  na.resize(wire::build_neighbour_advertisement({.dst = kB, .src = kA},
                                                v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 1}),
                                                v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 2}),
                                                v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 1}), true,
                                                true, na));
  ASSERT_TRUE(f.itf.receive(na, 0));
  EXPECT_EQ(f.counters.spoofed_answers, 2u);
  EXPECT_EQ(f.itf.neighbours().size(), 0u);
  (void)g;
}

TEST(IpInterface, ResolvesByArpAndByNeighbourDiscovery) {
  Fixture f;
  const wire::IpAddress peer4 = wire::IpAddress::v4(0x0A000001);
  f.itf.resolve(peer4, 0);
  const auto req = f.take();
  wire::L2Header l2;
  wire::ArpPacket a;
  ASSERT_EQ(wire::parse_arp(req, l2, a), wire::ArpError::kOk);
  EXPECT_EQ(l2.dst, wire::kBroadcastMac);
  EXPECT_EQ(a.op, wire::ArpOp::kRequest);
  EXPECT_EQ(a.sender_ip, 0x0A000002u);
  EXPECT_EQ(a.target_ip, 0x0A000001u);
  // The peer answers.
  wire::ArpPacket r{wire::ArpOp::kReply, kA, 0x0A000001, kB, 0x0A000002};
  std::vector<uint8_t> reply(64);
  reply.resize(wire::build_arp({.dst = kB, .src = kA}, r, reply));
  f.itf.receive(reply, 1000);
  std::vector<IpInterface::Event> ev;
  f.itf.take_events(ev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, IpInterface::Event::Kind::kResolved);
  EXPECT_EQ(ev[0].mac, kA);

  // IPv6: a solicitation to the solicited-node group, from our address.
  const wire::IpAddress peer6 = v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 1});
  f.itf.resolve(peer6, 0);
  const auto ns = f.take();
  wire::Icmpv6Message m;
  ASSERT_EQ(wire::parse_icmpv6(ns, m), wire::Icmpv6Error::kOk);
  EXPECT_EQ(m.type, wire::kIcmpv6NeighbourSolicitation);
  EXPECT_EQ(m.dst_ip, wire::solicited_node_address(peer6));
  EXPECT_EQ(m.l2.dst, wire::ipv6_multicast_mac(m.dst_ip));
  EXPECT_EQ(m.src_ip, v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 2}));
  EXPECT_EQ(m.link_layer, kB);
}

TEST(IpInterface, UnansweredResolutionFailsAfterThreeSolicitations) {
  Fixture f;
  const wire::IpAddress peer = wire::IpAddress::v4(0x0A000009);
  f.itf.resolve(peer, 0);
  for (uint64_t t = 1; t <= 3; ++t) f.itf.tick(t * kS);
  EXPECT_EQ(f.counters.arp_requests_out, 3u);
  std::vector<IpInterface::Event> ev;
  f.itf.take_events(ev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, IpInterface::Event::Kind::kFailed);
  EXPECT_EQ(f.counters.neigh_failed, 1u);
}

TEST(IpInterface, AnnouncesEachAddress) {
  Fixture f;
  f.itf.announce(0);
  // A gratuitous ARP, and an advertisement for the global and the
  // link-local IPv6 address.
  const auto garp = f.take();
  wire::L2Header l2;
  wire::ArpPacket a;
  ASSERT_EQ(wire::parse_arp(garp, l2, a), wire::ArpError::kOk);
  EXPECT_EQ(a.sender_ip, a.target_ip);
  EXPECT_EQ(l2.dst, wire::kBroadcastMac);
  for (int i = 0; i < 2; ++i) {
    wire::Icmpv6Message m;
    ASSERT_EQ(wire::parse_icmpv6(f.take(), m), wire::Icmpv6Error::kOk);
    EXPECT_EQ(m.type, wire::kIcmpv6NeighbourAdvertisement);
    EXPECT_FALSE(m.solicited);
    EXPECT_TRUE(m.override_flag);
    EXPECT_EQ(m.dst_ip, wire::all_nodes_address());
  }
  EXPECT_FALSE(f.itf.has_frames());
}

TEST(IpInterface, OnAVlanOnlyItsVlan) {
  InterfaceConfig c = config_b();
  c.vlan = true;
  c.vlan_id = 100;
  c.pcp = 3;
  Fixture f(c);
  f.itf.receive(hex(kArpRequest), 0);  // untagged
  EXPECT_FALSE(f.itf.has_frames());
  EXPECT_EQ(f.counters.wrong_vlan, 1u);
  f.itf.receive(hex(kArpRequestVlan), 0);
  const auto reply = f.take();
  wire::L2Header l2;
  wire::ArpPacket a;
  ASSERT_EQ(wire::parse_arp(reply, l2, a), wire::ArpError::kOk);
  EXPECT_TRUE(l2.vlan);
  EXPECT_EQ(l2.vlan_id, 100);
  EXPECT_EQ(l2.pcp, 3);
  EXPECT_EQ(a.op, wire::ArpOp::kReply);
}

TEST(IpInterface, MalformedFramesAreCountedNeverAnswered) {
  Fixture f;
  for (const char* v : {kArpRequest, kNs, kEchoRequest, kEcho6Request}) {
    const auto g = hex(v);
    for (size_t n = 0; n < g.size(); ++n) f.itf.receive(std::span(g).first(n), 0);
    auto h = g;
    for (size_t i = 14; i < h.size(); ++i) {
      h[i] ^= 0x5A;
      f.itf.receive(h, 0);
      h[i] ^= 0x5A;
    }
  }
  EXPECT_GT(f.counters.arp_bad + f.counters.nd_bad + f.counters.icmp_bad, 0u);
}

}  // namespace
}  // namespace droce::endpoint

namespace droce::endpoint {
namespace {

TEST(IpInterface, PingResolvesThenSendsAndTimesTheReply) {
  Fixture f;
  const wire::IpAddress peer = wire::IpAddress::v4(0x0A000001);
  f.itf.ping(peer, 1, 1000);
  // Unknown: an ARP request first, the echo request waits for the answer.
  wire::L2Header l2;
  wire::ArpPacket a;
  ASSERT_EQ(wire::parse_arp(f.take(), l2, a), wire::ArpError::kOk);
  EXPECT_FALSE(f.itf.has_frames());
  wire::ArpPacket r{wire::ArpOp::kReply, kA, 0x0A000001, kB, 0x0A000002};
  std::vector<uint8_t> reply(64);
  reply.resize(wire::build_arp({.dst = kB, .src = kA}, r, reply));
  f.itf.receive(reply, 2000);
  const auto req = f.take();
  wire::IcmpEcho e;
  ASSERT_EQ(wire::parse_icmp_echo(req, e), wire::IcmpError::kOk);
  EXPECT_EQ(e.type, wire::kIcmpEchoRequest);
  EXPECT_EQ(e.l2.dst, kA);
  EXPECT_EQ(e.sequence, 1);
  EXPECT_EQ(e.identifier, IpInterface::kPingIdentifier);
  // The peer answers 5 us later.
  std::vector<uint8_t> echo_reply(256);
  echo_reply.resize(wire::build_icmp_echo_reply(e, kA, echo_reply));
  f.itf.receive(echo_reply, 7000);
  std::vector<IpInterface::PingReply> got;
  f.itf.take_ping_replies(got);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].from, peer);
  EXPECT_EQ(got[0].sequence, 1);
  EXPECT_EQ(got[0].rtt_ns, 5000u);
  EXPECT_EQ(f.counters.icmp_pings_out, 1u);
  EXPECT_EQ(f.counters.icmp_ping_replies_in, 1u);
}

TEST(IpInterface, PingToAnAddressThatNeverAnswersIsDropped) {
  Fixture f;
  const wire::IpAddress peer = v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 9});
  f.itf.ping(peer, 1, 0);
  for (uint64_t t = 1; t <= 3; ++t) f.itf.tick(t * kS);
  EXPECT_EQ(f.counters.nd_solicits_out, 3u);
  EXPECT_EQ(f.counters.icmp_pings_out, 0u);
  EXPECT_EQ(f.counters.neigh_failed, 1u);
}

}  // namespace
}  // namespace droce::endpoint
