// libFuzzer target for the port's IP interface: the ARP, ICMP and ICMPv6
// parsers and IpInterface::receive on any bytes. The input is a sequence
// of frames, each a 2-byte big-endian length and that many bytes, fed to
// one interface 1 ms apart. Each parser that accepts a frame must build
// the same frame back (ARP) or a valid answer (echo); the interface must
// keep its neighbour cache and its queue within their bounds, and every
// frame it sends must parse as the ARP, ICMP or ICMPv6 frame it meant.
//
// Built only with -Dfuzz=true (clang, see docs/FUZZING.md).
#include <cstdint>
#include <vector>

#include "droce/endpoint/ip_interface.h"
#include "droce/wire/arp.h"
#include "droce/wire/bytes.h"
#include "droce/wire/icmp.h"
#include "droce/wire/icmpv6.h"
#include "fuzz_check.h"

namespace droce {
namespace {

void check_parsers(std::span<const uint8_t> f) {
  wire::L2Header l2;
  wire::ArpPacket arp;
  if (wire::parse_arp(f, l2, arp) == wire::ArpError::kOk) {
    std::vector<uint8_t> out(128);
    out.resize(wire::build_arp(l2, arp, out));
    wire::L2Header l2b;
    wire::ArpPacket again;
    FUZZ_CHECK(wire::parse_arp(out, l2b, again) == wire::ArpError::kOk);
    FUZZ_CHECK(l2b == l2 && again.sender_ip == arp.sender_ip && again.target_ip == arp.target_ip &&
               again.sender_mac == arp.sender_mac && again.op == arp.op);
  }
  wire::IcmpEcho echo;
  if (wire::parse_icmp_echo(f, echo) == wire::IcmpError::kOk) {
    FUZZ_CHECK(echo.data.data() >= f.data() && echo.data.data() + echo.data.size() <= f.data() + f.size());
    std::vector<uint8_t> out(f.size() + 64);
    out.resize(wire::build_icmp_echo_reply(echo, {2, 0, 0, 0, 0, 1}, out));
    wire::IcmpEcho reply;
    FUZZ_CHECK(wire::parse_icmp_echo(out, reply) == wire::IcmpError::kOk);
    FUZZ_CHECK(reply.sequence == echo.sequence && reply.src_ip == echo.dst_ip &&
               reply.data.size() == echo.data.size());
  }
  wire::Icmpv6Message m;
  if (wire::parse_icmpv6(f, m) == wire::Icmpv6Error::kOk) {
    if (m.type == wire::kIcmpv6NeighbourSolicitation || m.type == wire::kIcmpv6NeighbourAdvertisement) {
      FUZZ_CHECK(m.hop_limit == wire::kNdHopLimit && !wire::is_ipv6_multicast(m.target));
    }
  }
}

bool sent_frame_parses(std::span<const uint8_t> f) {
  wire::L2Header l2;
  wire::ArpPacket arp;
  wire::IcmpEcho echo;
  wire::Icmpv6Message m;
  return wire::parse_arp(f, l2, arp) == wire::ArpError::kOk ||
         wire::parse_icmp_echo(f, echo) == wire::IcmpError::kOk ||
         wire::parse_icmpv6(f, m) == wire::Icmpv6Error::kOk;
}

}  // namespace
}  // namespace droce

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace droce;
  endpoint::EndpointCounters counters;
  endpoint::InterfaceConfig cfg;
  cfg.mac = {2, 0, 0, 0, 0, 0x0b};
  // The addresses the seeds use.
  cfg.addresses = {wire::IpAddress::v4(0x0A000002)};
  wire::IpAddress v6;
  v6.v6 = true;
  v6.bytes[0] = 0x20;
  v6.bytes[1] = 0x01;
  v6.bytes[2] = 0x0d;
  v6.bytes[3] = 0xb8;
  v6.bytes[15] = 2;
  cfg.addresses.push_back(v6);
  cfg.timers.max_entries = 16;
  cfg.tx_queue_frames = 8;
  endpoint::IpInterface itf(cfg, counters);
  // Something to resolve, so that answers have an entry to fill.
  itf.resolve(wire::IpAddress::v4(0x0A000001), 0);
  uint64_t now = 0;
  std::vector<uint8_t> buf(9216);
  for (size_t off = 0; off + 2 <= size;) {
    const size_t len = std::min<size_t>(wire::load_be16(data + off), size - off - 2);
    const std::span<const uint8_t> frame(data + off + 2, len);
    off += 2 + len;
    check_parsers(frame);
    itf.receive(frame, now);
    now += 1'000'000;
    itf.tick(now);
    FUZZ_CHECK(itf.neighbours().size() <= cfg.timers.max_entries);
    while (itf.has_frames()) {
      const size_t n = itf.emit(buf);
      FUZZ_CHECK(n > 0 && sent_frame_parses(std::span(buf.data(), n)));
    }
  }
  return 0;
}
