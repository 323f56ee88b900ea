#include "droce/options/values.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstring>

#include "droce/transport/requester.h"

namespace droce::options {

namespace {
[[noreturn]] void bad(std::string_view option, std::string_view text, std::string_view want) {
  throw ConfigError(std::string(option), fmt::format("'{}' is not {}", text, want));
}
}  // namespace

bool try_parse_mac(std::string_view text, wire::MacAddress& out) {
  if (text.size() != 17) return false;
  wire::MacAddress mac{};
  for (size_t i = 0; i < 6; ++i) {
    if (i > 0 && text[i * 3 - 1] != ':' && text[i * 3 - 1] != '-') return false;
    unsigned v = 0;
    const char* b = text.data() + i * 3;
    auto [p, ec] = std::from_chars(b, b + 2, v, 16);
    if (ec != std::errc() || p != b + 2) return false;
    mac[i] = static_cast<uint8_t>(v);
  }
  out = mac;
  return true;
}

bool try_parse_ip(std::string_view text, wire::IpAddress& out) {
  const std::string s(text);
  wire::IpAddress ip;
  in_addr a4{};
  if (inet_pton(AF_INET, s.c_str(), &a4) == 1) {
    std::memcpy(ip.bytes, &a4, 4);
    out = ip;
    return true;
  }
  in6_addr a6{};
  if (inet_pton(AF_INET6, s.c_str(), &a6) == 1) {
    ip.v6 = true;
    std::memcpy(ip.bytes, &a6, 16);
    out = ip;
    return true;
  }
  return false;
}

wire::MacAddress parse_mac(std::string_view option, std::string_view text) {
  wire::MacAddress mac{};
  if (!try_parse_mac(text, mac)) bad(option, text, "a MAC address like 02:00:00:00:00:01");
  return mac;
}

wire::IpAddress parse_ip(std::string_view option, std::string_view text) {
  wire::IpAddress ip;
  if (!try_parse_ip(text, ip)) bad(option, text, "an IPv4 or IPv6 address");
  return ip;
}

ibv_mtu parse_mtu(std::string_view option, uint64_t bytes) {
  if (bytes <= UINT32_MAX)
    if (const auto m = transport::mtu_code(static_cast<uint32_t>(bytes))) return *m;
  bad(option, std::to_string(bytes), "an MTU: 256, 512, 1024, 2048 or 4096");
}

wire::Ecn parse_ecn(std::string_view option, std::string_view text) {
  if (text == "not-ect") return wire::Ecn::kNotEct;
  if (text == "ect0") return wire::Ecn::kEct0;
  if (text == "ect1") return wire::Ecn::kEct1;
  if (text == "ce") return wire::Ecn::kCe;
  bad(option, text, "an ECN codepoint: not-ect, ect0, ect1 or ce");
}

transport::QpType parse_qp_type(std::string_view option, std::string_view text) {
  if (text == "rc") return transport::QpType::kRc;
  if (text == "uc") return transport::QpType::kUc;
  if (text == "ud") return transport::QpType::kUd;
  bad(option, text, "a QP type: rc, uc or ud");
}

uint64_t parse_uint(std::string_view option, std::string_view text, uint64_t max) {
  int base = 10;
  std::string_view t = text;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    base = 16;
    t.remove_prefix(2);
  }
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v, base);
  if (ec != std::errc() || p != t.data() + t.size() || t.empty())
    bad(option, text, "an unsigned integer (decimal or 0x-hex)");
  if (v > max)
    throw ConfigError(std::string(option),
                      fmt::format("{} is out of range 0..{:#x}", text, max));
  return v;
}

uint64_t parse_time_ns(std::string_view option, std::string_view text, uint64_t max_ns) {
  constexpr std::string_view kWant = "a time like 8us, 1.5us, 500ns, 2ms or 1s";
  size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  const std::string_view num = text.substr(0, i);
  const std::string_view unit = text.substr(i);
  double scale = 0;
  if (unit.empty() || unit == "ns") scale = 1;
  else if (unit == "us") scale = 1e3;
  else if (unit == "ms") scale = 1e6;
  else if (unit == "s") scale = 1e9;
  if (num.empty() || scale == 0 || (unit.empty() && num.find('.') != std::string_view::npos))
    bad(option, text, kWant);
  double v = 0;
  auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
  if (ec != std::errc() || p != num.data() + num.size()) bad(option, text, kWant);
  const double ns = v * scale;
  if (!(ns <= static_cast<double>(max_ns)))
    throw ConfigError(std::string(option),
                      fmt::format("{} is out of range 0..{} ns", text, max_ns));
  return static_cast<uint64_t>(std::llround(ns));
}

void apply_marks(const PacketMarks& m, wire::PathSpec& path, const std::string& ecn_option) {
  path.dscp = static_cast<uint8_t>(m.dscp);
  path.ecn = parse_ecn(ecn_option, m.ecn);
  path.pcp = static_cast<uint8_t>(m.pcp);
  if (m.vlan || m.pcp != 0) {
    path.vlan = true;
    path.vlan_id = static_cast<uint16_t>(m.vlan.value_or(0));
  }
}

std::string format_mac(const wire::MacAddress& m) {
  return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3],
                     m[4], m[5]);
}

std::string format_ip(const wire::IpAddress& ip) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(ip.v6 ? AF_INET6 : AF_INET, ip.bytes, buf, sizeof buf);
  return buf;
}

}  // namespace droce::options
