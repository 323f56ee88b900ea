#include "droce/options/multipath.h"

#include <fmt/format.h>

#include "droce/options/values.h"

namespace droce::options {

using transport::EntropyMode;
using transport::Recovery;

transport::EntropyMode parse_entropy_mode(std::string_view option, std::string_view text) {
  if (text == "fixed") return EntropyMode::kFixed;
  if (text == "spray") return EntropyMode::kSpray;
  if (text == "flowlet") return EntropyMode::kFlowlet;
  if (text == "path_aware") return EntropyMode::kPathAware;
  throw ConfigError(std::string(option),
                    fmt::format("'{}' is not an entropy mode: fixed, spray, flowlet or path_aware",
                                text));
}

transport::Recovery parse_recovery(std::string_view option, std::string_view text) {
  if (text == "gbn" || text == "go_back_n") return Recovery::kGoBackN;
  if (text == "sr" || text == "selective_repeat") return Recovery::kSelectiveRepeat;
  throw ConfigError(std::string(option),
                    fmt::format("'{}' is not a loss recovery: gbn (go-back-N) or sr "
                                "(selective repeat)",
                                text));
}

std::string_view recovery_name(transport::Recovery r) {
  return r == Recovery::kSelectiveRepeat ? "sr" : "gbn";
}

uint32_t parse_entropy_paths(std::string_view option, std::string_view text) {
  const uint64_t v = parse_uint(option, text, transport::kMaxEntropyPaths);
  if (v == 0)
    throw ConfigError(std::string(option),
                      fmt::format("0 is out of range 1..{}", transport::kMaxEntropyPaths));
  return static_cast<uint32_t>(v);
}

uint32_t parse_reorder_tolerance(std::string_view option, std::string_view text) {
  return static_cast<uint32_t>(parse_uint(option, text, kMaxReorderTolerance));
}

MultipathNames MultipathNames::flags() {
  return {"--recovery",          "--entropy",        "--entropy-paths", "--flowlet-gap",
          "--reorder-tolerance", "--reorder-window", "--rto-low",       "--reth-every-packet",
          "--tail-probe",        "--reorder-window-min"};
}

MultipathNames MultipathNames::keys(const std::string& prefix) {
  const std::string p = prefix.empty() ? "" : prefix + ".";
  return {p + "recovery",          p + "entropy",        p + "entropy_paths",
          p + "flowlet_gap",       p + "reorder_tolerance", p + "reorder_window",
          p + "rto_low",           p + "reth_every_packet", p + "tail_probe",
          p + "reorder_window_min"};
}

Multipath parse_multipath(const MultipathText& t, const MultipathNames& n) {
  Multipath m;
  if (t.recovery) m.recovery = parse_recovery(n.recovery, *t.recovery);
  if (t.entropy) m.entropy.mode = parse_entropy_mode(n.entropy, *t.entropy);
  if (t.entropy_paths) m.entropy.paths = parse_entropy_paths(n.entropy_paths, *t.entropy_paths);
  if (t.flowlet_gap)
    m.entropy.flowlet_gap_ns = parse_time_ns(n.flowlet_gap, *t.flowlet_gap, kMaxFlowletGapNs);
  if (t.reorder_tolerance)
    m.reorder_tolerance = parse_reorder_tolerance(n.reorder_tolerance, *t.reorder_tolerance);
  if (t.reorder_window)
    m.reorder_window_ns = parse_time_ns(n.reorder_window, *t.reorder_window, kMaxReorderWindowNs);
  if (t.reorder_window_min)
    m.reorder_window_min_ns =
        parse_time_ns(n.reorder_window_min, *t.reorder_window_min, kMaxReorderWindowNs);
  if (t.rto_low) {
    m.rto_low_ns = parse_time_ns(n.rto_low, *t.rto_low, kMaxRtoLowNs);
    if (*m.rto_low_ns == 0)
      throw ConfigError(n.rto_low, "0 is out of range (a time above 0, up to 1s)");
  }
  m.reth_every_packet = t.reth_every_packet;
  m.tail_probe = t.tail_probe;

  // Go-back-N takes every overtaken packet for a PSN sequence error (IBA
  // 9.7.5.1.2) and resends everything behind it; the transport refuses the
  // pair (QueuePair::modify, EINVAL).
  if (m.entropy.mode != EntropyMode::kFixed && !m.selective_repeat())
    throw ConfigError(n.entropy,
                      fmt::format("{} reorders packets: it needs {} sr (selective repeat)",
                                  transport::to_string(m.entropy.mode), n.recovery));
  if (m.reorder_tolerance && !m.selective_repeat())
    throw ConfigError(n.reorder_tolerance,
                      fmt::format("is selective repeat's: it needs {} sr", n.recovery));
  if (m.reorder_window_ns && !m.selective_repeat())
    throw ConfigError(n.reorder_window,
                      fmt::format("is selective repeat's: it needs {} sr", n.recovery));
  // RFC 8985 7: the probe's answer finds the holes by RACK's rule.
  if (m.tail_probe && !m.reorder_window_ns)
    throw ConfigError(n.tail_probe, fmt::format("is RACK's: it needs {}", n.reorder_window));
  // RFC 8985 6.2.4: the window adapts between the floor and the window.
  if (m.reorder_window_min_ns && !m.reorder_window_ns)
    throw ConfigError(n.reorder_window_min,
                      fmt::format("is the adaptive floor of {}: it needs one", n.reorder_window));
  if (m.reorder_window_min_ns && m.reorder_window_ns &&
      (*m.reorder_window_min_ns == 0 || *m.reorder_window_min_ns > *m.reorder_window_ns))
    throw ConfigError(n.reorder_window_min,
                      fmt::format("{} ns is not within 1 ns..{} ({} ns)", *m.reorder_window_min_ns,
                                  n.reorder_window, *m.reorder_window_ns));
  if (m.rto_low_ns && !m.selective_repeat())
    throw ConfigError(n.rto_low,
                      fmt::format("is selective repeat's: it needs {} sr", n.recovery));
  if (t.entropy_paths && m.entropy.mode == EntropyMode::kFixed)
    throw ConfigError(n.entropy_paths,
                      fmt::format("needs {} spray, flowlet or path_aware (fixed uses one port)",
                                  n.entropy));
  if (t.flowlet_gap && m.entropy.mode != EntropyMode::kFlowlet)
    throw ConfigError(n.flowlet_gap, fmt::format("needs {} flowlet", n.entropy));
  return m;
}

void apply_multipath(const Multipath& m, transport::QpAttr& attr) {
  if (m.recovery) attr.recovery = *m.recovery;
  attr.entropy = m.entropy;
  if (m.reorder_tolerance) attr.sr_reorder_tolerance_pkts = *m.reorder_tolerance;
  if (m.reorder_window_ns) attr.sr_reorder_window_ns = *m.reorder_window_ns;
  if (m.reorder_window_min_ns) attr.sr_reorder_window_min_ns = *m.reorder_window_min_ns;
  if (m.rto_low_ns) attr.sr_rto_low_ns = *m.rto_low_ns;
  if (m.reth_every_packet) attr.write_reth_every_packet = true;
  if (m.tail_probe) attr.sr_tail_probe = true;
}

std::string describe(const Multipath& m) {
  std::string s(recovery_name(m.recovery.value_or(Recovery::kGoBackN)));
  if (m.reorder_tolerance) s += fmt::format(" (reorder tolerance {})", *m.reorder_tolerance);
  if (m.reorder_window_ns) s += fmt::format(" (reorder window {} ns)", *m.reorder_window_ns);
  if (m.reorder_window_min_ns)
    s += fmt::format(" (adapting from {} ns)", *m.reorder_window_min_ns);
  if (m.tail_probe) s += " (tail loss probe)";
  if (m.rto_low_ns) s += fmt::format(" (RTO_low {} ns)", *m.rto_low_ns);
  if (m.reth_every_packet) s += ", a RETH in every WRITE packet";
  switch (m.entropy.mode) {
    case EntropyMode::kFixed: break;
    case EntropyMode::kSpray: s += fmt::format(", spray over {} ports", m.entropy.paths); break;
    case EntropyMode::kPathAware:
      s += fmt::format(", path-aware spray over {} ports", m.entropy.paths);
      break;
    case EntropyMode::kFlowlet:
      s += fmt::format(", flowlets over {} ports (gap {} ns)", m.entropy.paths,
                       m.entropy.flowlet_gap_ns);
      break;
  }
  return s;
}

}  // namespace droce::options
