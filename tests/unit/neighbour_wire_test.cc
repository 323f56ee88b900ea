// ARP, ICMP echo and ICMPv6 (echo, neighbour discovery) frames, checked
// against frames python3-scapy built (an independent implementation of
// RFC 826, RFC 792, RFC 4443 and RFC 4861; the scripts' lines are above
// each vector), and against the validity rules of RFC 4861 7.1.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "droce/wire/arp.h"
#include "droce/wire/bytes.h"
#include "droce/wire/icmp.h"
#include "droce/wire/icmpv6.h"
#include "neighbour_vectors.h"

namespace droce::wire {
namespace {

using namespace vectors;

TEST(Arp, ParsesARequest) {
  const auto f = hex(kArpRequest);
  L2Header l2;
  ArpPacket a;
  ASSERT_EQ(parse_arp(f, l2, a), ArpError::kOk);
  EXPECT_EQ(l2.dst, kBroadcastMac);
  EXPECT_FALSE(l2.vlan);
  EXPECT_EQ(a.op, ArpOp::kRequest);
  EXPECT_EQ(a.sender_mac, kA);
  EXPECT_EQ(a.sender_ip, 0x0A000001u);
  EXPECT_EQ(a.target_ip, 0x0A000002u);
}

TEST(Arp, BuildsTheReplyScapyBuilds) {
  L2Header l2{.dst = kA, .src = kB};
  ArpPacket r{ArpOp::kReply, kB, 0x0A000002, kA, 0x0A000001};
  std::vector<uint8_t> out(128);
  const size_t n = build_arp(l2, r, out);
  out.resize(n);
  EXPECT_EQ(out, hex(kArpReply));
}

TEST(Arp, VlanTaggedRoundTrip) {
  const auto f = hex(kArpRequestVlan);
  L2Header l2;
  ArpPacket a;
  ASSERT_EQ(parse_arp(f, l2, a), ArpError::kOk);
  EXPECT_TRUE(l2.vlan);
  EXPECT_EQ(l2.vlan_id, 100);
  EXPECT_EQ(l2.pcp, 3);
  std::vector<uint8_t> out(128);
  out.resize(build_arp(l2, a, out));
  EXPECT_EQ(out, f);
}

TEST(Arp, RefusesWhatItDoesNotSpeak) {
  L2Header l2;
  ArpPacket a;
  auto f = hex(kArpRequest);
  EXPECT_EQ(parse_arp(std::span(f).first(40), l2, a), ArpError::kTruncated);
  EXPECT_EQ(parse_arp(std::span(f).first(10), l2, a), ArpError::kTruncated);
  auto g = f;
  g[15] = 6;  // hardware type 6 (IEEE 802)
  EXPECT_EQ(parse_arp(g, l2, a), ArpError::kUnsupported);
  g = f;
  g[19] = 16;  // protocol address length
  EXPECT_EQ(parse_arp(g, l2, a), ArpError::kUnsupported);
  g = f;
  g[21] = 3;  // RARP request
  EXPECT_EQ(parse_arp(g, l2, a), ArpError::kBadOp);
  g = f;
  g[12] = 0x08;
  g[13] = 0x00;
  EXPECT_EQ(parse_arp(g, l2, a), ArpError::kNotArp);
}


TEST(Icmp, AnswersAnEchoRequestAsScapyWould) {
  const auto f = hex(kEchoRequest);
  IcmpEcho e;
  ASSERT_EQ(parse_icmp_echo(f, e), IcmpError::kOk);
  EXPECT_EQ(e.type, kIcmpEchoRequest);
  EXPECT_EQ(e.identifier, 0x1234);
  EXPECT_EQ(e.sequence, 5);
  EXPECT_EQ(std::string(e.data.begin(), e.data.end()), "droce-ping-data!");
  std::vector<uint8_t> out(256);
  out.resize(build_icmp_echo_reply(e, kB, out));
  EXPECT_EQ(out, hex(kEchoReply));
  IcmpEcho r;
  ASSERT_EQ(parse_icmp_echo(out, r), IcmpError::kOk);
  EXPECT_EQ(r.type, kIcmpEchoReply);
}

TEST(Icmp, RefusesBrokenFrames) {
  const auto f = hex(kEchoRequest);
  IcmpEcho e;
  auto g = f;
  g[40] ^= 1;  // payload byte: ICMP checksum
  EXPECT_EQ(parse_icmp_echo(g, e), IcmpError::kBadChecksum);
  g = f;
  g[22] = 63;  // TTL without fixing the header checksum
  EXPECT_EQ(parse_icmp_echo(g, e), IcmpError::kBadIpHeader);
  g = f;
  g[17] = 0xFF;  // total length beyond the frame
  EXPECT_EQ(parse_icmp_echo(g, e), IcmpError::kTruncated);
  g = f;
  g[14] = 0x44;  // IHL 4
  EXPECT_EQ(parse_icmp_echo(g, e), IcmpError::kBadIpHeader);
  g = f;
  g[34] = 3;  // destination unreachable
  EXPECT_NE(parse_icmp_echo(g, e), IcmpError::kOk);
  g = f;
  g[23] = 17;
  EXPECT_EQ(parse_icmp_echo(g, e), IcmpError::kNotIcmp);
  // Every length short of the IP datagram (the last two bytes are Ethernet padding).
  for (size_t n = 0; n + 2 < f.size(); ++n)
    EXPECT_NE(parse_icmp_echo(std::span(f).first(n), e), IcmpError::kOk) << n;
}

TEST(Icmp, RefusesAMulticastOrBroadcastSource) {
  // RFC 1122 3.2.1.3; valid frames otherwise (both checksums right).
  const uint8_t data[4] = {1, 2, 3, 4};
  for (const uint32_t src : {0xE0000001u, 0xEFFFFFFFu, 0xFFFFFFFFu, 0x0A000001u}) {
    std::vector<uint8_t> out(128);
    out.resize(build_icmp_echo_request({.dst = kB, .src = kA}, src, 0x0A000002, 7, 1, data, out));
    ASSERT_GT(out.size(), 0u);
    IcmpEcho e;
    EXPECT_EQ(parse_icmp_echo(out, e),
              src == 0x0A000001u ? IcmpError::kOk : IcmpError::kBadIpHeader)
        << std::hex << src;
  }
}


TEST(Icmpv6, Addresses) {
  const IpAddress a = v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 2});
  EXPECT_EQ(solicited_node_address(a), v6({0xff02, 0, 0, 0, 0, 1, 0xff00, 2}));
  EXPECT_EQ(ipv6_multicast_mac(solicited_node_address(a)), (MacAddress{0x33, 0x33, 0xff, 0, 0, 2}));
  // scapy's in6_mactoifaceid(B): fe80::ff:fe00:b.
  EXPECT_EQ(link_local_address(kB), v6({0xfe80, 0, 0, 0, 0, 0xff, 0xfe00, 0xb}));
  EXPECT_TRUE(is_ipv6_link_local(link_local_address(kB)));
  EXPECT_TRUE(is_ipv6_multicast(all_nodes_address()));
  EXPECT_TRUE(is_ipv6_unspecified(v6({})));
}

TEST(Icmpv6, NeighbourSolicitationAndAdvertisementMatchScapy) {
  const auto ns = hex(kNs);
  Icmpv6Message m;
  ASSERT_EQ(parse_icmpv6(ns, m), Icmpv6Error::kOk);
  EXPECT_EQ(m.type, kIcmpv6NeighbourSolicitation);
  EXPECT_EQ(m.target, v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 2}));
  ASSERT_TRUE(m.has_link_layer);
  EXPECT_EQ(m.link_layer, kA);
  // Ours, built the same way.
  std::vector<uint8_t> out(256);
  out.resize(build_neighbour_solicitation(
      {.dst = ipv6_multicast_mac(m.dst_ip), .src = kA}, m.src_ip, m.dst_ip, m.target, out));
  EXPECT_EQ(out, ns);

  const auto na = hex(kNa);
  out.assign(256, 0);
  out.resize(build_neighbour_advertisement({.dst = kA, .src = kB}, m.target, m.src_ip,
                                           m.target, true, true, out));
  EXPECT_EQ(out, na);
  Icmpv6Message a;
  ASSERT_EQ(parse_icmpv6(na, a), Icmpv6Error::kOk);
  EXPECT_TRUE(a.solicited);
  EXPECT_TRUE(a.override_flag);
  EXPECT_FALSE(a.router);
  EXPECT_EQ(a.link_layer, kB);
}

TEST(Icmpv6, EchoReplyMatchesScapy) {
  const auto f = hex(kEcho6Request);
  Icmpv6Message m;
  ASSERT_EQ(parse_icmpv6(f, m), Icmpv6Error::kOk);
  EXPECT_EQ(m.type, kIcmpv6EchoRequest);
  std::vector<uint8_t> out(256);
  out.resize(build_icmpv6_echo_reply(m, kB, m.dst_ip, out));
  EXPECT_EQ(out, hex(kEcho6Reply));
}

TEST(Icmpv6, DiscardsWhatRfc4861SaysToDiscard) {
  const auto ns = hex(kNs);
  Icmpv6Message m;
  auto g = ns;
  g[21] = 254;  // hop limit: not from the link
  EXPECT_EQ(parse_icmpv6(g, m), Icmpv6Error::kBadNd);
  g = ns;
  g[60] ^= 1;  // checksum
  EXPECT_EQ(parse_icmpv6(g, m), Icmpv6Error::kBadChecksum);
  // An option of length 0 (RFC 4861 4.6: the whole packet is discarded);
  // the checksum adjusted so that only the option is at fault.
  g = ns;
  g[79] = 0;
  g[57] = static_cast<uint8_t>(g[57] + 1);  // the word 1 less, its complement 1 more
  EXPECT_EQ(parse_icmpv6(g, m), Icmpv6Error::kBadNd);
  // A truncated frame, at every length.
  for (size_t n = 0; n < ns.size(); ++n)
    EXPECT_NE(parse_icmpv6(std::span(ns).first(n), m), Icmpv6Error::kOk) << n;
  // Duplicate address detection with a source link-layer option: invalid.
  std::vector<uint8_t> out(256);
  out.resize(build_neighbour_solicitation({.dst = {0x33, 0x33, 0xff, 0, 0, 2}, .src = kA},
                                          v6({}), solicited_node_address(m.target),
                                          v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 2}), out));
  EXPECT_EQ(parse_icmpv6(out, m), Icmpv6Error::kBadNd);
  // A multicast source (RFC 4291 2.7), on a solicitation and on an echo
  // request: an answer would go to the group.
  out.assign(256, 0);
  out.resize(build_neighbour_solicitation({.dst = kB, .src = kA},
                                          v6({0xff02, 0, 0, 0, 0, 0, 0, 1}),
                                          v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 2}),
                                          v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 2}), out));
  EXPECT_EQ(parse_icmpv6(out, m), Icmpv6Error::kBadIpHeader);
  const uint8_t data[4] = {1, 2, 3, 4};
  out.assign(256, 0);
  out.resize(build_icmpv6_echo_request({.dst = kB, .src = kA}, v6({0xff0e, 0, 0, 0, 0, 0, 0, 1}),
                                       v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 2}), 7, 1, data, out));
  EXPECT_EQ(parse_icmpv6(out, m), Icmpv6Error::kBadIpHeader);
  // A multicast target.
  out.assign(256, 0);
  out.resize(build_neighbour_solicitation({.dst = kB, .src = kA},
                                          v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 1}),
                                          v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 2}),
                                          all_nodes_address(), out));
  EXPECT_EQ(parse_icmpv6(out, m), Icmpv6Error::kBadNd);
  // A solicited advertisement to a multicast address.
  out.assign(256, 0);
  out.resize(build_neighbour_advertisement({.dst = {0x33, 0x33, 0, 0, 0, 1}, .src = kB},
                                           v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 2}),
                                           all_nodes_address(),
                                           v6({0x2001, 0xdb8, 0, 0, 0, 0, 0, 2}), true, true, out));
  EXPECT_EQ(parse_icmpv6(out, m), Icmpv6Error::kBadNd);
}

}  // namespace
}  // namespace droce::wire
