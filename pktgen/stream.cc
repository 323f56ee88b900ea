#include "droce/pktgen/stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <stdexcept>

#include "droce/pktgen/probe.h"
#include "droce/pktgen/rng.h"
#include "droce/wire/bytes.h"

namespace droce::pktgen {
namespace {

std::string check_range(const FieldRange& r, std::string_view name, uint64_t max) {
  if (r.mode == FieldRange::Mode::kKeep) return {};
  if (r.count == 0) return fmt::format("{} range: count must be at least 1", name);
  if (r.start > max || r.count - 1 > max - r.start) {
    return fmt::format("{} range {}..{} does not fit in {} (max {})", name, r.start,
                       r.start + r.count - 1, name, max);
  }
  return {};
}

}  // namespace

uint64_t FieldRange::value(uint64_t n) const {
  switch (mode) {
    case Mode::kKeep:
      return start;
    case Mode::kIncrement:
      return start + static_cast<uint64_t>((static_cast<unsigned __int128>(n) * step) % count);
    case Mode::kRandom:
      return start + hash64(seed, n) % count;
  }
  return start;
}

std::string check_stream(const StreamSpec& spec) {
  const auto& info = wire::opcode_info(spec.transport.opcode);
  if (!info.supported) {
    return fmt::format("opcode 0x{:02x} is not a supported RoCEv2 opcode", spec.transport.opcode);
  }
  if (!info.payload && spec.payload_bytes > 0) {
    return fmt::format("opcode {} carries no payload (got {} bytes)", info.name, spec.payload_bytes);
  }
  if (spec.probe && spec.payload_bytes < kProbeSize) {
    return fmt::format("a latency probe needs a payload of at least {} bytes (got {})", kProbeSize,
                       spec.payload_bytes);
  }
  if (spec.path.src_ip.v6 != spec.path.dst_ip.v6) return "source and destination IP families differ";
  for (auto msg : {check_range(spec.dest_qp, "QPN", 0xFFFFFF), check_range(spec.psn, "PSN", 0xFFFFFF),
                   check_range(spec.udp_src_port, "UDP source port", 0xFFFF),
                   check_range(spec.src_ip, "source IP", 0xFFFFFFFF),
                   check_range(spec.dst_ip, "destination IP", 0xFFFFFFFF)}) {
    if (!msg.empty()) return msg;
  }
  const size_t size = wire::packet_size(spec.path, spec.transport.opcode, spec.payload_bytes);
  if (size > 9216) return fmt::format("frame of {} bytes is larger than a 9216-byte jumbo frame", size);
  return {};
}

PacketStream::PacketStream(const StreamSpec& spec) : spec_(spec) {
  if (auto err = check_stream(spec); !err.empty()) throw std::invalid_argument(err);
  std::vector<uint8_t> payload(spec.payload_bytes, spec.payload_fill);
  base_.resize(wire::packet_size(spec.path, spec.transport.opcode, spec.payload_bytes));
  const size_t len = wire::build_packet(spec.path, spec.transport, payload, base_);
  if (len == 0) {
    throw std::invalid_argument(fmt::format(
        "cannot build opcode {} with {} payload bytes (first/middle packets need a multiple of 4)",
        wire::opcode_name(spec.transport.opcode), spec.payload_bytes));
  }
  base_.resize(len);
  const auto err = wire::parse(base_, parsed_);
  if (err != wire::ParseError::kOk) {
    throw std::logic_error(fmt::format("template does not parse: {}", wire::to_string(err)));
  }
}

size_t PacketStream::fill(uint64_t n, std::span<uint8_t> out, uint64_t tx_ns) const {
  const size_t len = base_.size();
  if (out.size() < len) return 0;
  uint8_t* f = out.data();
  std::memcpy(f, base_.data(), len);
  uint8_t* bth = f + parsed_.bth_offset;
  if (spec_.dest_qp.mode != FieldRange::Mode::kKeep) {
    wire::store_be24(bth + 5, static_cast<uint32_t>(spec_.dest_qp.value(n)));
  }
  if (spec_.psn.mode != FieldRange::Mode::kKeep) {
    wire::store_be24(bth + 9, static_cast<uint32_t>(spec_.psn.value(n)));
  }
  if (spec_.udp_src_port.mode != FieldRange::Mode::kKeep) {
    wire::store_be16(f + parsed_.l4_offset, static_cast<uint16_t>(spec_.udp_src_port.value(n)));
  }
  // Offsets of the addresses' last 32 bits.
  const size_t src_off = parsed_.ipv6() ? 8 + 12 : 12;
  const size_t dst_off = parsed_.ipv6() ? 24 + 12 : 16;
  if (spec_.src_ip.mode != FieldRange::Mode::kKeep) {
    wire::store_be32(f + parsed_.l3_offset + src_off, static_cast<uint32_t>(spec_.src_ip.value(n)));
  }
  if (spec_.dst_ip.mode != FieldRange::Mode::kKeep) {
    wire::store_be32(f + parsed_.l3_offset + dst_off, static_cast<uint32_t>(spec_.dst_ip.value(n)));
  }
  if (spec_.probe) {
    write_probe({f + parsed_.payload_offset, kProbeSize}, Probe{spec_.stream_id, n, tx_ns});
  }
  wire::refresh_checksums(out.first(len), parsed_);
  return len;
}

std::optional<uint8_t> opcode_from_string(std::string_view name) {
  unsigned value = 0;
  const char* b = name.data();
  const char* e = name.data() + name.size();
  std::from_chars_result r{};
  if (name.size() > 2 && name[0] == '0' && (name[1] == 'x' || name[1] == 'X')) {
    r = std::from_chars(b + 2, e, value, 16);
  } else if (!name.empty() && name[0] >= '0' && name[0] <= '9') {
    r = std::from_chars(b, e, value, 10);
  } else {
    for (unsigned op = 0; op < 256; ++op) {
      const auto& info = wire::opcode_info(static_cast<uint8_t>(op));
      if (info.supported && info.name == name) return static_cast<uint8_t>(op);
    }
    return std::nullopt;
  }
  if (r.ec != std::errc{} || r.ptr != e || value > 255) return std::nullopt;
  if (!wire::opcode_info(static_cast<uint8_t>(value)).supported) return std::nullopt;
  return static_cast<uint8_t>(value);
}

std::optional<Rate> parse_rate(std::string_view text) {
  double value = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), value);
  if (r.ec != std::errc{} || r.ptr == text.data()) return std::nullopt;
  std::string unit(r.ptr, text.data() + text.size());
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  struct UnitName {
    std::string_view name;
    Rate::Unit unit;
    double scale;
  };
  static constexpr UnitName kUnits[] = {
      {"pps", Rate::Unit::kPps, 1},          {"kpps", Rate::Unit::kPps, 1e3},
      {"mpps", Rate::Unit::kPps, 1e6},       {"gpps", Rate::Unit::kPps, 1e9},
      {"bps", Rate::Unit::kBitsPerSecond, 1}, {"kbps", Rate::Unit::kBitsPerSecond, 1e3},
      {"mbps", Rate::Unit::kBitsPerSecond, 1e6}, {"gbps", Rate::Unit::kBitsPerSecond, 1e9},
      {"tbps", Rate::Unit::kBitsPerSecond, 1e12}, {"%", Rate::Unit::kPercentOfLine, 1},
  };
  for (const auto& u : kUnits) {
    if (unit == u.name) {
      if (!(value >= 0)) return std::nullopt;
      return Rate{u.unit, value * u.scale};
    }
  }
  return std::nullopt;
}

uint64_t wire_bytes(size_t frame_size) {
  return std::max<uint64_t>(frame_size + 4, 64) + 8 + 12;
}

double rate_pps(const Rate& rate, size_t frame_size, double line_rate_bps) {
  const double bits = static_cast<double>(wire_bytes(frame_size)) * 8;
  switch (rate.unit) {
    case Rate::Unit::kPps: return rate.value;
    case Rate::Unit::kBitsPerSecond: return rate.value / bits;
    case Rate::Unit::kPercentOfLine: return rate.value / 100 * line_rate_bps / bits;
  }
  return 0;
}

std::string check_rate(const Rate& rate, size_t frame_size, double line_rate_bps) {
  const double pps = rate_pps(rate, frame_size, line_rate_bps);
  if (!(pps > 0)) return "rate must be positive";
  const double bps = pps * static_cast<double>(wire_bytes(frame_size)) * 8;
  // A relative tolerance so that "100%" is never refused for rounding.
  if (bps > line_rate_bps * (1 + 1e-9)) {
    return fmt::format(
        "rate {:.3f} Gb/s ({:.0f} pps of {}-byte frames, {} bytes on the wire) is above the line "
        "rate of {:.3f} Gb/s",
        bps / 1e9, pps, frame_size, wire_bytes(frame_size), line_rate_bps / 1e9);
  }
  return {};
}

}  // namespace droce::pktgen
