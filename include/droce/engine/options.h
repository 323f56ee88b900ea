// Parsers for the values apps take on the command line and in config
// files. Each throws ConfigError naming `option` and the accepted form.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "droce/engine/engine.h"
#include "droce/wire/headers.h"
#include "droce/wire/packet.h"

namespace droce::engine {

// "02:00:00:00:00:01" (':' or '-').
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

std::string format_mac(const wire::MacAddress& mac);
std::string format_ip(const wire::IpAddress& ip);

}  // namespace droce::engine
