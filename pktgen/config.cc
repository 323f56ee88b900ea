#include "droce/pktgen/config.h"

#include <fmt/format.h>

#include "droce/pktgen/probe.h"

namespace droce::pktgen {
namespace {

void check_collective(const CollectiveConfig& c, std::vector<ValidationError>& errors) {
  const auto add = [&](std::string option, std::string message) {
    errors.push_back({std::move(option), std::move(message)});
  };
  const auto pattern = pattern_from_string(c.pattern);
  if (!pattern) add("--pattern", fmt::format("unknown pattern '{}' (accepted: {})", c.pattern, pattern_names()));
  if (c.ranks < 2 || c.ranks > kMaxRanks) {
    add("--ranks", fmt::format("must be 2..{} (got {})", kMaxRanks, c.ranks));
  }
  if (c.min_bytes == 0) add("-b/--minbytes", "must be at least 4 bytes (one float32)");
  if (c.max_bytes < c.min_bytes) {
    add("-e/--maxbytes", fmt::format("{} is below -b/--minbytes {}", c.max_bytes, c.min_bytes));
  }
  if (c.step_factor <= 1 && c.step_bytes == 0 && c.max_bytes > c.min_bytes) {
    add("-f/--stepfactor", "the sweep does not advance: give -f > 1 or -i/--stepbytes > 0");
  }
  if (pattern && c.ranks >= 2 && c.ranks <= kMaxRanks) {
    const uint64_t align = size_alignment(*pattern, c.ranks);
    const std::string rule =
        align == 4 ? std::string("4 bytes (float32)")
                   : fmt::format("4 x ranks = {} bytes ({} gives every rank an equal share of float32)",
                                 align, c.pattern);
    if (c.min_bytes != 0 && c.min_bytes % align != 0) {
      add("-b/--minbytes", fmt::format("{} is not a multiple of {}", c.min_bytes, rule));
    }
    if (c.step_factor <= 1 && c.step_bytes % align != 0) {
      add("-i/--stepbytes", fmt::format("{} is not a multiple of {}", c.step_bytes, rule));
    }
    if (c.chunk_bytes % 4 != 0) {
      add("--chunk", fmt::format("{} is not a multiple of 4 bytes (float32)", c.chunk_bytes));
    }
    if (*pattern == Pattern::kIncast && c.root >= c.ranks) {
      add("--root", fmt::format("{} is not a rank (0..{})", c.root, c.ranks - 1));
    }
    if (c.window != 0 && *pattern != Pattern::kAllToAll) {
      add("--window", fmt::format("only for --pattern all_to_all (got {})", c.pattern));
    } else if (c.window >= c.ranks) {
      add("--window", fmt::format("must be 0..{} (below --ranks; got {})", c.ranks - 1, c.window));
    }
  }
  if (c.iters == 0) add("-n/--iters", "must be at least 1");
  if (c.channels < 1 || c.channels > kMaxChannels) {
    add("--channels", fmt::format("must be 1..{} (got {})", kMaxChannels, c.channels));
  }
}

void check_stream_config(const StreamConfig& s, std::vector<ValidationError>& errors) {
  const auto add = [&](std::string option, std::string message) {
    errors.push_back({std::move(option), std::move(message)});
  };
  const auto opcode = opcode_from_string(s.opcode);
  if (!opcode) {
    add("--opcode", fmt::format("unknown or unsupported opcode '{}' (accepted: a name from the IBA "
                                "opcode table such as RC_RDMA_WRITE_ONLY, RC_SEND_ONLY, "
                                "UD_SEND_ONLY, or its number, e.g. 0x0a)",
                                s.opcode));
  }
  if (s.vlan < -1 || s.vlan > 4094) add("--vlan", fmt::format("must be 0..4094 (got {})", s.vlan));
  if (s.pcp > 7) add("--pcp", fmt::format("must be 0..7 (got {})", s.pcp));
  if (s.dscp > 63) add("--dscp", fmt::format("must be 0..63 (got {})", s.dscp));
  if (s.ecn > 3) add("--ecn", fmt::format("must be 0..3 (0 not-ECT, 1 ECT(1), 2 ECT(0), 3 CE; got {})", s.ecn));
  FieldRange::Mode m;
  const std::string modes = "accepted: fixed, inc, random";
  if (!parse_field_mode(s.qpn_mode, &m)) add("--qpn-mode", fmt::format("unknown mode '{}' ({})", s.qpn_mode, modes));
  if (!parse_field_mode(s.psn_mode, &m)) add("--psn-mode", fmt::format("unknown mode '{}' ({})", s.psn_mode, modes));
  if (!parse_field_mode(s.udp_sport_mode, &m)) {
    add("--sport-mode", fmt::format("unknown mode '{}' ({})", s.udp_sport_mode, modes));
  }
  if (!parse_field_mode(s.ip_mode, &m)) add("--ip-mode", fmt::format("unknown mode '{}' ({})", s.ip_mode, modes));
  if (s.qpn_count < 1 || s.qpn_count > 0xFFFFFF) add("--qpn-count", "must be 1..16777215");
  if (s.udp_sport_count < 1 || s.udp_sport_count > 0x4000) {
    add("--sport-count", "must be 1..16384 (the 0xC000 | 14-bit entropy range)");
  }
  if (s.ip_count < 1) add("--ip-count", "must be at least 1");
  if (opcode) {
    const auto& info = wire::opcode_info(*opcode);
    if (!info.payload && s.payload_bytes > 0) {
      add("--payload", fmt::format("opcode {} carries no payload (got {} bytes; use 0)", info.name, s.payload_bytes));
    } else if (s.probe && s.payload_bytes < kProbeSize) {
      add("--payload", fmt::format("latency probes need at least {} payload bytes (got {}; or --no-probe)",
                                   kProbeSize, s.payload_bytes));
    }
  }
  if (!(s.line_rate_gbps > 0)) {
    add("--line-rate", fmt::format("must be a positive rate in Gb/s (got {})", s.line_rate_gbps));
  }
  const auto rate = parse_rate(s.rate);
  if (!rate) {
    add("--rate", fmt::format("cannot read '{}' (accepted: <n>pps, <n>kpps, <n>Mpps, <n>Mbps, "
                              "<n>Gbps, <n>Tbps, <n>% of --line-rate)",
                              s.rate));
  } else if (opcode && s.line_rate_gbps > 0) {
    wire::PathSpec path;
    path.vlan = s.vlan >= 0;
    path.src_ip.v6 = path.dst_ip.v6 = s.ipv6;
    const size_t frame = wire::packet_size(path, *opcode, s.payload_bytes);
    if (auto msg = check_rate(*rate, frame, s.line_rate_gbps * 1e9); !msg.empty()) add("--rate", msg);
  }
}

}  // namespace

bool parse_size(const std::string& s, uint64_t& out) {
  size_t digits = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') ++digits;
  if (digits == 0 || digits > 19) return false;
  const std::string unit = s.substr(digits);
  unsigned shift = 0;
  if (unit.empty()) shift = 0;
  else if (unit == "K" || unit == "k" || unit == "KiB") shift = 10;
  else if (unit == "M" || unit == "m" || unit == "MiB") shift = 20;
  else if (unit == "G" || unit == "g" || unit == "GiB") shift = 30;
  else return false;
  const uint64_t v = std::stoull(s.substr(0, digits));
  if (v > (UINT64_MAX >> shift)) return false;
  out = v << shift;
  return true;
}

bool parse_field_mode(const std::string& mode, FieldRange::Mode* out) {
  if (mode == "fixed") {
    *out = FieldRange::Mode::kKeep;
  } else if (mode == "inc") {
    *out = FieldRange::Mode::kIncrement;
  } else if (mode == "random") {
    *out = FieldRange::Mode::kRandom;
  } else {
    return false;
  }
  return true;
}

std::vector<ValidationError> validate(const PktgenConfig& config) {
  std::vector<ValidationError> errors;
  if (config.mode == Mode::kCollective) {
    check_collective(config.collective, errors);
  } else {
    check_stream_config(config.stream, errors);
  }
  return errors;
}

ScheduleParams schedule_params(const CollectiveConfig& c, uint64_t bytes) {
  ScheduleParams p;
  p.pattern = pattern_from_string(c.pattern).value();
  p.ranks = c.ranks;
  p.bytes = bytes;
  p.channels = c.channels;
  p.chunk_bytes = c.chunk_bytes;
  p.root = c.root;
  p.seed = c.seed;
  p.window = c.window;
  return p;
}

std::vector<uint64_t> sweep_sizes(const CollectiveConfig& c) {
  return size_sweep({c.min_bytes, c.max_bytes, c.step_factor, c.step_bytes});
}

}  // namespace droce::pktgen
