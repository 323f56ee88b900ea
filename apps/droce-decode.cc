// droce-decode: reads a pcap or pcapng capture and prints, one line per
// packet, what droce's own parser (wire::parse) makes of it, including whether
// the ICRC is correct; Wireshark displays the ICRC but never checks it.
//
//   droce-decode [--json] [--strict] CAPTURE
//
// Exit codes: 0 done; 1 --strict and some RoCEv2 packet failed to parse;
// 2 bad usage or an unreadable capture. docs/DECODE.md has the field list.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <pcap/pcap.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>

#include "droce/wire/arp.h"
#include "droce/wire/icmp.h"
#include "droce/wire/icmpv6.h"
#include "droce/wire/packet.h"

namespace droce {
namespace {

using wire::ParseError;
using wire::ParsedPacket;

constexpr int kExitStrictFailure = 1;
constexpr int kExitUsage = 2;

// Which layers of `out` parse() filled before it returned `e`. parse() sets
// each offset only once that layer's header checks have passed, and fills
// the IP fields before the IP length/fragment/checksum checks, so the error
// and the offsets together say what is trustworthy to print.
struct Decoded {
  bool l2 = false;
  bool l3 = false;
  bool l4 = false;
  bool bth = false;
  bool ext = false;
  bool payload = false;
};

Decoded decoded_layers(ParseError e, const ParsedPacket& p) {
  Decoded d;
  d.l2 = e != ParseError::kTruncatedEth;
  d.l3 = d.l2 && e != ParseError::kNotIp && e != ParseError::kTruncatedIp &&
         e != ParseError::kBadIpVersion && e != ParseError::kBadIpHeaderLength;
  d.l4 = d.l3 && p.l4_offset != 0 && e != ParseError::kNotUdp &&
         e != ParseError::kTruncatedUdp;
  d.bth = d.l4 && p.bth_offset != 0;
  d.ext = d.bth && e != ParseError::kBadBthVersion &&
          e != ParseError::kUnsupportedOpcode &&
          e != ParseError::kTruncatedExtHeader;
  d.payload = d.ext && p.frame_length != 0;
  return d;
}

std::string ip_string(const wire::IpAddress& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(a.v6 ? AF_INET6 : AF_INET, a.bytes, buf, sizeof(buf));
  return buf;
}

std::string mac_string(const wire::MacAddress& m) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1],
                     m[2], m[3], m[4], m[5]);
}

std::string_view ecn_name(wire::Ecn e) {
  switch (e) {
    case wire::Ecn::kNotEct: return "Not-ECT";
    case wire::Ecn::kEct1: return "ECT1";
    case wire::Ecn::kEct0: return "ECT0";
    case wire::Ecn::kCe: return "CE";
  }
  return "?";
}

std::string_view aeth_type_name(uint8_t syndrome) {
  switch (wire::aeth_type(syndrome)) {
    case wire::AethType::kAck: return "ACK";
    case wire::AethType::kRnrNak: return "RNR_NAK";
    case wire::AethType::kReserved: return "RESERVED";
    case wire::AethType::kNak: return "NAK";
  }
  return "?";
}

// ARP, ICMP echo and ICMPv6 (echo, neighbour discovery): what a port
// exchanges with its neighbours, named instead of "not RoCEv2". Fills a
// line of text and JSON fields; false for any other protocol.
bool describe_neighbour_frame(std::span<const uint8_t> f, std::string& text,
                              nlohmann::ordered_json& j) {
  wire::L2Header l2;
  uint16_t ether_type = 0;
  size_t off = 0;
  if (!wire::read_l2(f, l2, ether_type, off)) return false;
  const std::string vlan = l2.vlan ? fmt::format("vlan={} pcp={} ", l2.vlan_id, l2.pcp) : "";
  if (ether_type == wire::kEtherTypeArp) {
    wire::ArpPacket a;
    const wire::ArpError e = wire::parse_arp(f, l2, a);
    j["protocol"] = "arp";
    if (e != wire::ArpError::kOk) {
      j["error"] = std::string(wire::to_string(e));
      text = vlan + fmt::format("ARP malformed ({})", wire::to_string(e));
      return true;
    }
    const std::string sip = ip_string(wire::IpAddress::v4(a.sender_ip));
    const std::string tip = ip_string(wire::IpAddress::v4(a.target_ip));
    j["arp_op"] = a.op == wire::ArpOp::kRequest ? "request" : "reply";
    j["sender_mac"] = mac_string(a.sender_mac);
    j["sender_ip"] = sip;
    j["target_mac"] = mac_string(a.target_mac);
    j["target_ip"] = tip;
    text = vlan + (a.op == wire::ArpOp::kRequest
                       ? fmt::format("ARP request who-has {} tell {} ({})", tip, sip,
                                     mac_string(a.sender_mac))
                       : fmt::format("ARP reply {} is-at {}", sip, mac_string(a.sender_mac)));
    return true;
  }
  if (ether_type == wire::kEtherTypeIpv4 && f.size() >= off + wire::kIpv4Size &&
      f[off + 9] == wire::kIpProtoIcmp) {
    wire::IcmpEcho e;
    const wire::IcmpError err = wire::parse_icmp_echo(f, e);
    j["protocol"] = "icmp";
    if (err == wire::IcmpError::kOtherType) {
      text = vlan + "ICMP (not an echo)";
      return true;
    }
    if (err != wire::IcmpError::kOk) {
      j["error"] = std::string(wire::to_string(err));
      text = vlan + fmt::format("ICMP malformed ({})", wire::to_string(err));
      return true;
    }
    j["icmp_type"] = e.type == wire::kIcmpEchoRequest ? "echo_request" : "echo_reply";
    j["src_ip"] = ip_string(wire::IpAddress::v4(e.src_ip));
    j["dst_ip"] = ip_string(wire::IpAddress::v4(e.dst_ip));
    j["echo_id"] = e.identifier;
    j["echo_seq"] = e.sequence;
    text = vlan + fmt::format("IPv4 {} > {} ICMP echo {} id=0x{:04x} seq={} len={}",
                              ip_string(wire::IpAddress::v4(e.src_ip)),
                              ip_string(wire::IpAddress::v4(e.dst_ip)),
                              e.type == wire::kIcmpEchoRequest ? "request" : "reply",
                              e.identifier, e.sequence, e.data.size());
    return true;
  }
  if (ether_type == wire::kEtherTypeIpv6 && f.size() >= off + wire::kIpv6Size &&
      f[off + 6] == wire::kIpProtoIcmpv6) {
    wire::Icmpv6Message m;
    const wire::Icmpv6Error err = wire::parse_icmpv6(f, m);
    j["protocol"] = "icmpv6";
    if (err == wire::Icmpv6Error::kOtherType) {
      j["icmpv6_type"] = m.type;
      text = vlan + fmt::format("IPv6 {} > {} ICMPv6 type {}", ip_string(m.src_ip),
                                ip_string(m.dst_ip), m.type);
      return true;
    }
    if (err != wire::Icmpv6Error::kOk) {
      j["error"] = std::string(wire::to_string(err));
      text = vlan + fmt::format("ICMPv6 malformed ({})", wire::to_string(err));
      return true;
    }
    j["src_ip"] = ip_string(m.src_ip);
    j["dst_ip"] = ip_string(m.dst_ip);
    std::string what;
    if (m.type == wire::kIcmpv6NeighbourSolicitation) {
      j["icmpv6_type"] = "neighbour_solicitation";
      j["target"] = ip_string(m.target);
      what = fmt::format("neighbour solicitation who-has {}", ip_string(m.target));
      if (m.has_link_layer) what += fmt::format(" ({})", mac_string(m.link_layer));
    } else if (m.type == wire::kIcmpv6NeighbourAdvertisement) {
      j["icmpv6_type"] = "neighbour_advertisement";
      j["target"] = ip_string(m.target);
      j["solicited"] = m.solicited;
      j["override"] = m.override_flag;
      what = fmt::format("neighbour advertisement {} is-at {}{}{}", ip_string(m.target),
                         m.has_link_layer ? mac_string(m.link_layer) : "?",
                         m.solicited ? " S" : "", m.override_flag ? " O" : "");
    } else {
      const bool req = m.type == wire::kIcmpv6EchoRequest;
      j["icmpv6_type"] = req ? "echo_request" : "echo_reply";
      j["echo_id"] = m.identifier;
      j["echo_seq"] = m.sequence;
      what = fmt::format("echo {} id=0x{:04x} seq={} len={}", req ? "request" : "reply",
                         m.identifier, m.sequence, m.data.size());
    }
    if (m.has_link_layer) j["link_layer"] = mac_string(m.link_layer);
    text = vlan + fmt::format("IPv6 {} > {} ICMPv6 {}", ip_string(m.src_ip), ip_string(m.dst_ip),
                              what);
    return true;
  }
  return false;
}

// The result of decoding one captured frame.
struct Record {
  uint64_t index = 0;  // 1-based, like Wireshark's frame numbers
  double time = 0;
  uint32_t captured_length = 0;
  uint32_t wire_length = 0;
  ParseError error = ParseError::kOk;
  ParsedPacket p;
  Decoded d;
  // Only meaningful once the ICRC was reached: kOk or kBadIcrc.
  std::optional<bool> icrc_ok;
  // Not RoCEv2, but ARP, ICMP or ICMPv6 (describe_neighbour_frame).
  bool neighbour = false;
  std::string neighbour_text;
  nlohmann::ordered_json neighbour_json;
};

Record decode(uint64_t index, const pcap_pkthdr& hdr, const uint8_t* data) {
  Record r;
  r.index = index;
  r.time = static_cast<double>(hdr.ts.tv_sec) + hdr.ts.tv_usec * 1e-6;
  r.captured_length = hdr.caplen;
  r.wire_length = hdr.len;
  wire::ParseOptions opt;
  opt.verify_ip_checksum = true;
  opt.verify_icrc = true;
  r.error = wire::parse(std::span<const uint8_t>(data, hdr.caplen), r.p, opt);
  r.d = decoded_layers(r.error, r.p);
  // parse() verifies the ICRC last: on kBadIcrc everything else is filled.
  if (r.error == ParseError::kOk) r.icrc_ok = true;
  if (r.error == ParseError::kBadIcrc) r.icrc_ok = false;
  if (wire::is_not_roce(r.error))
    r.neighbour = describe_neighbour_frame(std::span<const uint8_t>(data, hdr.caplen),
                                           r.neighbour_text, r.neighbour_json);
  return r;
}

nlohmann::ordered_json to_json(const Record& r) {
  const ParsedPacket& p = r.p;
  nlohmann::ordered_json j;
  j["index"] = r.index;
  j["time"] = r.time;
  j["captured_length"] = r.captured_length;
  j["wire_length"] = r.wire_length;
  j["ok"] = r.error == ParseError::kOk;
  // Malformed frames count as RoCE (they fail --strict); only the "some
  // other protocol" errors make a packet not RoCE.
  j["roce"] = !wire::is_not_roce(r.error);
  if (r.error == ParseError::kOk) {
    j["error"] = nullptr;
  } else {
    j["error"] = std::string(wire::to_string(r.error));
  }
  j["icrc_ok"] = r.icrc_ok ? nlohmann::ordered_json(*r.icrc_ok) : nullptr;
  if (r.neighbour) {
    for (const auto& [k, v] : r.neighbour_json.items()) j[k == "error" ? "protocol_error" : k] = v;
    return j;
  }
  if (r.d.l2) {
    j["dst_mac"] = mac_string(p.dst_mac);
    j["src_mac"] = mac_string(p.src_mac);
    if (p.has_vlan) {
      j["vlan_id"] = p.vlan_id;
      j["pcp"] = p.pcp;
    }
  }
  if (r.d.l3) {
    j["ip_version"] = p.ipv6() ? 6 : 4;
    j["src_ip"] = ip_string(p.src_ip);
    j["dst_ip"] = ip_string(p.dst_ip);
    j["dscp"] = p.dscp;
    j["ecn"] = static_cast<int>(p.ecn);
    j["ttl"] = p.ttl;
    if (p.ipv6()) j["flow_label"] = p.flow_label;
  }
  if (r.d.l4) {
    j["udp_src_port"] = p.udp_src_port;
    j["udp_dst_port"] = p.udp_dst_port;
  }
  if (r.d.bth) {
    j["opcode"] = p.opcode;
    j["opcode_name"] = std::string(wire::opcode_name(p.opcode));
    j["solicited"] = p.solicited;
    j["mig_req"] = p.mig_req;
    j["pad_count"] = p.pad_count;
    j["pkey"] = p.pkey;
    j["fecn"] = p.fecn;
    j["becn"] = p.becn;
    j["dest_qp"] = p.dest_qp;
    j["ack_req"] = p.ack_req;
    j["psn"] = p.psn;
  }
  if (r.d.ext) {
    if (p.has(wire::kExtDeth)) {
      j["deth_qkey"] = p.deth_qkey;
      j["deth_src_qp"] = p.deth_src_qp;
    }
    if (p.has(wire::kExtReth)) {
      j["reth_va"] = p.reth_va;
      j["reth_rkey"] = p.reth_rkey;
      j["reth_dma_length"] = p.reth_dma_length;
    }
    if (p.has(wire::kExtAtomicEth)) {
      j["atomic_va"] = p.atomic_va;
      j["atomic_rkey"] = p.atomic_rkey;
      j["atomic_swap_add"] = p.atomic_swap_add;
      j["atomic_compare"] = p.atomic_compare;
    }
    if (p.has(wire::kExtAeth)) {
      j["aeth_syndrome"] = p.aeth_syndrome;
      j["aeth_type"] = std::string(aeth_type_name(p.aeth_syndrome));
      j["aeth_value"] = wire::aeth_value(p.aeth_syndrome);
      j["aeth_msn"] = p.aeth_msn;
    }
    if (p.has(wire::kExtAtomicAckEth))
      j["atomic_ack_original"] = p.atomic_ack_original;
    if (p.has(wire::kExtImmDt)) j["imm_data"] = p.imm_data;
    if (p.has(wire::kExtIeth)) j["ieth_rkey"] = p.ieth_rkey;
  }
  if (r.d.payload) {
    j["payload_length"] = p.payload_length;
    j["icrc"] = p.icrc;
  }
  return j;
}

std::string to_text(const Record& r) {
  const ParsedPacket& p = r.p;
  std::string s = fmt::format("{:>6} ", r.index);
  if (r.neighbour) return s + r.neighbour_text;
  if (!r.d.l3) {
    s += wire::is_not_roce(r.error) ? "not RoCEv2" : "malformed";
    return s + fmt::format(" ({}) len={}", wire::to_string(r.error),
                           r.captured_length);
  }
  if (p.has_vlan) s += fmt::format("vlan={} pcp={} ", p.vlan_id, p.pcp);
  s += fmt::format("{} {} > {}", p.ipv6() ? "IPv6" : "IPv4",
                   ip_string(p.src_ip), ip_string(p.dst_ip));
  s += fmt::format(" dscp={} ecn={}", p.dscp, ecn_name(p.ecn));
  if (r.d.l4) s += fmt::format(" udp {} > {}", p.udp_src_port, p.udp_dst_port);
  if (wire::is_not_roce(r.error))
    return s + fmt::format(" not RoCEv2 ({})", wire::to_string(r.error));
  if (r.d.bth) {
    s += fmt::format(" {}(0x{:02x}) dqp=0x{:06x} psn={}", wire::opcode_name(p.opcode),
                     p.opcode, p.dest_qp, p.psn);
    if (p.ack_req) s += " A";
    if (p.solicited) s += " SE";
    if (p.fecn) s += " FECN";
    if (p.becn) s += " BECN";
    if (p.pkey != 0xFFFF) s += fmt::format(" pkey=0x{:04x}", p.pkey);
  }
  if (r.d.ext) {
    if (p.has(wire::kExtDeth))
      s += fmt::format(" DETH[qkey=0x{:08x} sqp=0x{:06x}]", p.deth_qkey,
                       p.deth_src_qp);
    if (p.has(wire::kExtReth))
      s += fmt::format(" RETH[va=0x{:x} rkey=0x{:08x} len={}]", p.reth_va,
                       p.reth_rkey, p.reth_dma_length);
    if (p.has(wire::kExtAtomicEth))
      s += fmt::format(" AtomicETH[va=0x{:x} rkey=0x{:08x} swap_add=0x{:x} cmp=0x{:x}]",
                       p.atomic_va, p.atomic_rkey, p.atomic_swap_add,
                       p.atomic_compare);
    if (p.has(wire::kExtAeth))
      s += fmt::format(" AETH[{} 0x{:02x} msn={}]", aeth_type_name(p.aeth_syndrome),
                       p.aeth_syndrome, p.aeth_msn);
    if (p.has(wire::kExtAtomicAckEth))
      s += fmt::format(" AtomicAckETH[orig=0x{:x}]", p.atomic_ack_original);
    if (p.has(wire::kExtImmDt)) s += fmt::format(" ImmDt[0x{:08x}]", p.imm_data);
    if (p.has(wire::kExtIeth)) s += fmt::format(" IETH[rkey=0x{:08x}]", p.ieth_rkey);
  }
  if (r.d.payload) s += fmt::format(" payload={} pad={}", p.payload_length, p.pad_count);
  if (r.icrc_ok) s += *r.icrc_ok ? " icrc=ok" : " icrc=BAD";
  if (r.error != ParseError::kOk && r.error != ParseError::kBadIcrc)
    s += fmt::format(" ERROR {}", wire::to_string(r.error));
  return s;
}

int run(const std::string& path, bool json, bool strict) {
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  pcap_t* pcap = pcap_open_offline(path.c_str(), errbuf);
  if (pcap == nullptr) {
    fmt::print(stderr, "droce-decode: cannot read capture '{}': {}\n", path, errbuf);
    return kExitUsage;
  }
  const int link = pcap_datalink(pcap);
  if (link != DLT_EN10MB) {
    const char* name = pcap_datalink_val_to_name(link);
    fmt::print(stderr,
               "droce-decode: capture '{}' has link type {} ({}); only Ethernet "
               "(EN10MB) is supported\n",
               path, link, name ? name : "unknown");
    pcap_close(pcap);
    return kExitUsage;
  }
  uint64_t index = 0;
  uint64_t failed = 0;
  int status = 0;
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  int rc;
  while ((rc = pcap_next_ex(pcap, &hdr, &data)) == 1) {
    const Record r = decode(++index, *hdr, data);
    if (r.error != ParseError::kOk && !wire::is_not_roce(r.error)) ++failed;
    if (json) {
      fmt::print("{}\n", to_json(r).dump());
    } else {
      fmt::print("{}\n", to_text(r));
    }
  }
  if (rc == PCAP_ERROR) {
    fmt::print(stderr, "droce-decode: error reading capture '{}' after {} packets: {}\n",
               path, index, pcap_geterr(pcap));
    status = kExitUsage;
  }
  pcap_close(pcap);
  std::fflush(stdout);
  if (status == 0 && strict && failed > 0) {
    fmt::print(stderr, "droce-decode: {} of {} packets failed to parse\n", failed,
               index);
    status = kExitStrictFailure;
  }
  return status;
}

}  // namespace
}  // namespace droce

int main(int argc, char** argv) {
  CLI::App app{
      "Decode RoCEv2 packets in a pcap/pcapng capture with droce's parser and "
      "check their ICRC."};
  std::string path;
  bool json = false;
  bool strict = false;
  app.add_option("capture", path, "pcap or pcapng file ('-' for stdin)")->required();
  app.add_flag("--json", json, "one JSON object per packet");
  app.add_flag("--strict", strict,
               "exit 1 if any RoCEv2 packet fails to parse (bad ICRC included)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints CLI11's message, which names the option
    return droce::kExitUsage;
  }
  return droce::run(path, json, strict);
}
