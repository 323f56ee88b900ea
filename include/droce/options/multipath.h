// A QP's multipath settings as users give them, one way for every app:
// droce-perf's --recovery, --entropy, --entropy-paths, --flowlet-gap,
// --reorder-tolerance, --reorder-window, --tail-probe, --rto-low and
// --reth-every-packet, droce-endpoint's [[qp]] keys recovery, entropy,
// entropy_paths, flowlet_gap, reorder_tolerance, reorder_window,
// tail_probe, rto_low and reth_every_packet,
// droce-pktgen's DPDK collective. The names are droce-sim's scenario keys' (docs/MULTIPATH.md):
// entropy "fixed", "spray", "flowlet", "path_aware"; recovery "gbn" (or "go_back_n"),
// "sr" (or "selective_repeat").
//
// Anything but a fixed entropy reorders packets on a multipath fabric, and
// go-back-N takes every overtaken packet for a loss (IBA 9.7.5.1.2), so
// parse_multipath refuses it without selective repeat, as QueuePair::modify
// would (EINVAL), but naming the option.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "droce/config_error.h"
#include "droce/transport/entropy.h"
#include "droce/transport/qp.h"

namespace droce::options {

// "fixed", "spray", "flowlet", "path_aware".
transport::EntropyMode parse_entropy_mode(std::string_view option, std::string_view text);
// "gbn", "go_back_n", "sr", "selective_repeat".
transport::Recovery parse_recovery(std::string_view option, std::string_view text);
// "gbn" or "sr": what parse_recovery reads back (out-of-band messages).
std::string_view recovery_name(transport::Recovery r);
// 1..transport::kMaxEntropyPaths.
uint32_t parse_entropy_paths(std::string_view option, std::string_view text);
// Packets, 0..kMaxReorderTolerance.
uint32_t parse_reorder_tolerance(std::string_view option, std::string_view text);

constexpr uint32_t kMaxReorderTolerance = 1u << 16;  // as droce-sim's reorder_tolerance
constexpr uint64_t kMaxFlowletGapNs = 1'000'000'000;  // 1 s, as droce-sim's flowlet_gap
constexpr uint64_t kMaxReorderWindowNs = 1'000'000'000;  // as droce-sim's reorder_window
constexpr uint64_t kMaxRtoLowNs = 1'000'000'000;  // as droce-sim's rto_low

// The text of each setting, unset when not given.
struct MultipathText {
  std::optional<std::string> recovery;
  std::optional<std::string> entropy;
  std::optional<std::string> entropy_paths;
  std::optional<std::string> flowlet_gap;
  std::optional<std::string> reorder_tolerance;
  std::optional<std::string> reorder_window;
  std::optional<std::string> reorder_window_min;
  std::optional<std::string> rto_low;
  bool reth_every_packet = false;
  bool tail_probe = false;
};

// What errors call each setting: command-line flags or a config file's keys.
struct MultipathNames {
  std::string recovery, entropy, entropy_paths, flowlet_gap, reorder_tolerance, reorder_window,
      rto_low, reth_every_packet, tail_probe, reorder_window_min;
  static MultipathNames flags();                          // --recovery, --entropy, ...
  static MultipathNames keys(const std::string& prefix);  // prefix.recovery, ...
};

// The settings; unset ones keep QpAttr's defaults.
struct Multipath {
  std::optional<transport::Recovery> recovery;
  transport::EntropyConfig entropy;
  std::optional<uint32_t> reorder_tolerance;
  std::optional<uint64_t> reorder_window_ns;  // QpAttr::sr_reorder_window_ns
  std::optional<uint64_t> reorder_window_min_ns;  // QpAttr::sr_reorder_window_min_ns
  std::optional<uint64_t> rto_low_ns;         // QpAttr::sr_rto_low_ns
  bool reth_every_packet = false;             // QpAttr::write_reth_every_packet
  bool tail_probe = false;                    // QpAttr::sr_tail_probe
  bool selective_repeat() const {
    return recovery == transport::Recovery::kSelectiveRepeat;
  }
};

// Parses and checks the combination: entropy other than fixed, a reorder
// tolerance, a reorder window and RTO_low need selective repeat, the tail
// loss probe and an adaptive window's floor a reorder window (the floor no
// larger);
// entropy_paths needs a mode but fixed, flowlet_gap needs flowlet. Throws
// ConfigError naming the setting.
Multipath parse_multipath(const MultipathText& text, const MultipathNames& names);

// Sets recovery, entropy, sr_reorder_tolerance_pkts, sr_reorder_window_ns,
// sr_reorder_window_min_ns, sr_tail_probe, sr_rto_low_ns and write_reth_every_packet of `attr` (unset
// ones untouched).
void apply_multipath(const Multipath& m, transport::QpAttr& attr);

// "sr, spray over 8 paths", "gbn", ... for a program's header lines.
std::string describe(const Multipath& m);

}  // namespace droce::options
