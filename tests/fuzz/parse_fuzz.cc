// libFuzzer target for wire::parse. Any byte string is a frame: parse it with
// and without the ICRC check and hold the two results to each other; when it
// parses, check that everything parse() reports lies inside the frame, then
// rebuild the packet from the parsed fields with build_packet, parse that
// again and demand the same fields back. A switch-style in-place edit
// (FECN, ECN) followed by refresh_checksums must also keep the packet valid.
//
// Built only with -Dfuzz=true (clang, see docs/FUZZING.md).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "droce/wire/build.h"
#include "droce/wire/packet.h"
#include "droce/wire/psn.h"
#include "fuzz_check.h"

namespace droce::wire {
namespace {

PathSpec path_from(const ParsedPacket& p) {
  PathSpec s;
  s.dst_mac = p.dst_mac;
  s.src_mac = p.src_mac;
  s.vlan = p.has_vlan;
  s.vlan_id = p.vlan_id;
  s.pcp = p.pcp;
  s.src_ip = p.src_ip;
  s.dst_ip = p.dst_ip;
  s.dscp = p.dscp;
  s.ecn = p.ecn;
  s.ttl = p.ttl;
  s.flow_label = p.flow_label;
  s.udp_src_port = p.udp_src_port;
  return s;
}

TransportSpec transport_from(const ParsedPacket& p) {
  TransportSpec t;
  t.opcode = p.opcode;
  t.solicited = p.solicited;
  t.mig_req = p.mig_req;
  t.pkey = p.pkey;
  t.fecn = p.fecn;
  t.becn = p.becn;
  t.dest_qp = p.dest_qp;
  t.ack_req = p.ack_req;
  t.psn = p.psn;
  t.reth_va = p.reth_va;
  t.reth_rkey = p.reth_rkey;
  t.reth_dma_length = p.reth_dma_length;
  t.aeth_syndrome = p.aeth_syndrome;
  t.aeth_msn = p.aeth_msn;
  t.atomic_va = p.atomic_va;
  t.atomic_rkey = p.atomic_rkey;
  t.atomic_swap_add = p.atomic_swap_add;
  t.atomic_compare = p.atomic_compare;
  t.atomic_ack_original = p.atomic_ack_original;
  t.imm_data = p.imm_data;
  t.ieth_rkey = p.ieth_rkey;
  t.deth_qkey = p.deth_qkey;
  t.deth_src_qp = p.deth_src_qp;
  return t;
}

// The fields build_packet takes from the specs must come back unchanged.
void check_same_fields(const ParsedPacket& a, const ParsedPacket& b) {
  FUZZ_CHECK(a.dst_mac == b.dst_mac && a.src_mac == b.src_mac);
  FUZZ_CHECK(a.has_vlan == b.has_vlan && a.vlan_id == b.vlan_id && a.pcp == b.pcp);
  FUZZ_CHECK(a.src_ip == b.src_ip && a.dst_ip == b.dst_ip);
  FUZZ_CHECK(a.dscp == b.dscp && a.ecn == b.ecn && a.ttl == b.ttl);
  FUZZ_CHECK(a.flow_label == b.flow_label);
  FUZZ_CHECK(a.udp_src_port == b.udp_src_port && a.udp_dst_port == b.udp_dst_port);
  FUZZ_CHECK(a.opcode == b.opcode && a.info == b.info);
  FUZZ_CHECK(a.solicited == b.solicited && a.mig_req == b.mig_req);
  FUZZ_CHECK(a.pad_count == b.pad_count && a.pkey == b.pkey);
  FUZZ_CHECK(a.fecn == b.fecn && a.becn == b.becn);
  FUZZ_CHECK(a.dest_qp == b.dest_qp && a.ack_req == b.ack_req && a.psn == b.psn);
  FUZZ_CHECK(a.reth_va == b.reth_va && a.reth_rkey == b.reth_rkey &&
             a.reth_dma_length == b.reth_dma_length);
  FUZZ_CHECK(a.aeth_syndrome == b.aeth_syndrome && a.aeth_msn == b.aeth_msn);
  FUZZ_CHECK(a.atomic_va == b.atomic_va && a.atomic_rkey == b.atomic_rkey &&
             a.atomic_swap_add == b.atomic_swap_add &&
             a.atomic_compare == b.atomic_compare);
  FUZZ_CHECK(a.atomic_ack_original == b.atomic_ack_original);
  FUZZ_CHECK(a.imm_data == b.imm_data && a.ieth_rkey == b.ieth_rkey);
  FUZZ_CHECK(a.deth_qkey == b.deth_qkey && a.deth_src_qp == b.deth_src_qp);
  FUZZ_CHECK(a.payload_length == b.payload_length);
  FUZZ_CHECK(a.payload_length == 0 ||
             std::memcmp(a.payload, b.payload, a.payload_length) == 0);
}

// What parse() says about a packet it accepted must fit in the frame.
void check_in_frame(std::span<const uint8_t> f, const ParsedPacket& p) {
  FUZZ_CHECK(p.info != nullptr && p.info->supported);
  FUZZ_CHECK(p.info == &opcode_info(p.opcode));
  FUZZ_CHECK(p.frame_length <= f.size());
  FUZZ_CHECK(p.l3_offset < p.l4_offset && p.l4_offset < p.bth_offset &&
             p.bth_offset < p.payload_offset);
  FUZZ_CHECK(p.bth_offset + kBthSize + p.info->ext_length() == p.payload_offset);
  FUZZ_CHECK(size_t{p.payload_offset} + p.payload_length + p.pad_count +
                 kIcrcSize == p.frame_length);
  FUZZ_CHECK(p.payload == f.data() + p.payload_offset);
  FUZZ_CHECK(p.info->payload || (p.payload_length == 0 && p.pad_count == 0));
  FUZZ_CHECK((p.payload_length + p.pad_count) % 4 == 0);
  FUZZ_CHECK(p.pad_count == 0 || p.info->is_last_or_only());
  FUZZ_CHECK(p.psn <= kPsnMask && p.dest_qp <= kPsnMask);
  FUZZ_CHECK(p.udp_dst_port == kRoceV2Port);
  FUZZ_CHECK(p.src_ip.v6 == p.dst_ip.v6);
}

void fuzz_one(std::span<const uint8_t> f) {
  ParsedPacket full, no_icrc;
  ParseOptions skip_icrc;
  skip_icrc.verify_icrc = false;
  const ParseError e_full = parse(f, full);
  const ParseError e_no_icrc = parse(f, no_icrc, skip_icrc);
  FUZZ_CHECK(e_full < ParseError::kCount && e_no_icrc < ParseError::kCount);
  FUZZ_CHECK(!to_string(e_full).empty() && to_string(e_full) != "unknown");
  // The ICRC is the last check: skipping it can only turn kBadIcrc into kOk.
  FUZZ_CHECK(e_no_icrc != ParseError::kBadIcrc);
  if (e_full == ParseError::kBadIcrc) {
    FUZZ_CHECK(e_no_icrc == ParseError::kOk);
    // On kBadIcrc everything but the ICRC verdict is filled in.
    check_in_frame(f, full);
    check_same_fields(full, no_icrc);
  } else {
    FUZZ_CHECK(e_full == e_no_icrc);
  }
  if (e_full != ParseError::kOk) return;
  FUZZ_CHECK(full.icrc_checked && !no_icrc.icrc_checked);
  check_in_frame(f, full);
  check_same_fields(full, no_icrc);

  // Rebuild from the parsed fields and parse again.
  const PathSpec path = path_from(full);
  const TransportSpec transport = transport_from(full);
  const std::span<const uint8_t> payload(full.payload, full.payload_length);
  std::vector<uint8_t> out(packet_size(path, full.opcode, payload.size()));
  const size_t n = build_packet(path, transport, payload, out);
  FUZZ_CHECK(n == out.size());
  ParsedPacket again;
  FUZZ_CHECK(parse(out, again) == ParseError::kOk);
  check_same_fields(full, again);

  // A switch marks CE and sets FECN in place, then fixes the checksums.
  std::vector<uint8_t> marked(f.begin(), f.begin() + full.frame_length);
  uint8_t* l3 = marked.data() + full.l3_offset;
  if (full.ipv6()) {
    l3[1] |= 0x30;  // ECN = CE (low 2 bits of the traffic class)
  } else {
    l3[1] |= 0x03;
  }
  marked[full.bth_offset + 4] |= 0x80;  // FECN
  refresh_checksums(marked, full);
  ParsedPacket after_mark;
  FUZZ_CHECK(parse(marked, after_mark) == ParseError::kOk);
  FUZZ_CHECK(after_mark.ecn == Ecn::kCe && after_mark.fecn);
  FUZZ_CHECK(after_mark.psn == full.psn && after_mark.payload_length ==
                                               full.payload_length);
}

}  // namespace
}  // namespace droce::wire

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  droce::wire::fuzz_one(std::span<const uint8_t>(data, size));
  return 0;
}
