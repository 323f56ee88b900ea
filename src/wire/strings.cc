#include "droce/wire/packet.h"

namespace droce::wire {

std::string_view to_string(ParseError e) {
  switch (e) {
    case ParseError::kOk: return "ok";
    case ParseError::kNotIp: return "not_ip";
    case ParseError::kNotUdp: return "not_udp";
    case ParseError::kNotRoceV2Port: return "not_rocev2_port";
    case ParseError::kTruncatedEth: return "truncated_eth";
    case ParseError::kTruncatedIp: return "truncated_ip";
    case ParseError::kTruncatedUdp: return "truncated_udp";
    case ParseError::kTruncatedBth: return "truncated_bth";
    case ParseError::kTruncatedExtHeader: return "truncated_ext_header";
    case ParseError::kTruncatedPayload: return "truncated_payload";
    case ParseError::kBadIpVersion: return "bad_ip_version";
    case ParseError::kBadIpHeaderLength: return "bad_ip_header_length";
    case ParseError::kIpFragment: return "ip_fragment";
    case ParseError::kBadIpChecksum: return "bad_ip_checksum";
    case ParseError::kBadUdpLength: return "bad_udp_length";
    case ParseError::kBadBthVersion: return "bad_bth_version";
    case ParseError::kUnsupportedOpcode: return "unsupported_opcode";
    case ParseError::kLengthMismatch: return "length_mismatch";
    case ParseError::kBadPad: return "bad_pad";
    case ParseError::kBadIcrc: return "bad_icrc";
    case ParseError::kCount: break;
  }
  return "unknown";
}

}  // namespace droce::wire
