// The values users give on command lines, in config files and in
// environment variables, parsed and formatted one way for every app and
// library. The parsers throw ConfigError naming `option` and the accepted
// form; the try_ forms only say whether the text is one (for values a peer
// sent, which are not the user's mistake).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "droce/config_error.h"
#include "droce/transport/qp.h"
#include "droce/wire/build.h"
#include "droce/wire/headers.h"
#include "droce/wire/packet.h"

namespace droce::options {

// "02:00:00:00:00:01" (':' or '-', two hex digits per byte).
bool try_parse_mac(std::string_view text, wire::MacAddress& out);
// Dotted IPv4 or IPv6 text (inet_pton).
bool try_parse_ip(std::string_view text, wire::IpAddress& out);

wire::MacAddress parse_mac(std::string_view option, std::string_view text);
// Dotted IPv4 or IPv6 text (inet_pton).
wire::IpAddress parse_ip(std::string_view option, std::string_view text);
// 256, 512, 1024, 2048 or 4096 bytes.
ibv_mtu parse_mtu(std::string_view option, uint64_t bytes);
// "not-ect", "ect0", "ect1", "ce".
wire::Ecn parse_ecn(std::string_view option, std::string_view text);
// "rc", "uc", "ud".
transport::QpType parse_qp_type(std::string_view option, std::string_view text);
// An unsigned integer, decimal or 0x-hex, at most `max`.
uint64_t parse_uint(std::string_view option, std::string_view text, uint64_t max);
// A time in nanoseconds, at most `max_ns`: a decimal number with a unit,
// "8us", "1.5us", "500ns", "2ms", "1s" (the units of droce-sim's scenario
// files); a bare integer is nanoseconds.
uint64_t parse_time_ns(std::string_view option, std::string_view text, uint64_t max_ns);

// What a QP's packets carry, from --dscp, --ecn, --vlan and --pcp
// (droce-endpoint's QPs, droce-perf's): the IP DSCP (IPv6: the
// traffic class's upper six bits), the ECN codepoint, an 802.1Q tag.
struct PacketMarks {
  explicit PacketMarks(uint32_t default_dscp = 0) : dscp(default_dscp) {}
  uint32_t dscp;
  std::string ecn = "ect0";
  std::optional<uint32_t> vlan;
  uint32_t pcp = 0;
};

// Sets the marks on `path`: a PCP alone travels in a priority tag (VLAN
// 0). Throws droce::ConfigError(ecn_option) for an unknown codepoint
// (droce-endpoint's config file names its key there).
void apply_marks(const PacketMarks& m, wire::PathSpec& path,
                 const std::string& ecn_option = "--ecn");

std::string format_mac(const wire::MacAddress& mac);
std::string format_ip(const wire::IpAddress& ip);

}  // namespace droce::options
