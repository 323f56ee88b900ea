// Priority-based Flow Control frames (IEEE 802.1Qbb clause 36, carried as a
// MAC Control frame, IEEE 802.3 annex 31D). Layout after the Ethernet header:
//
//   EtherType 0x8808 | opcode 0x0101 (2) | priority-enable vector (2)
//   | time[0..7] (8 x 2, pause quanta) | zero pad to the 60-byte minimum frame
//
// The destination is the reserved group address 01:80:C2:00:00:01, which
// bridges never forward. One quantum is 512 bit times at the link speed, so
// the same value pauses a 400 G link 16x shorter than a 25 G link.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "droce/wire/headers.h"

namespace droce::wire {

constexpr MacAddress kPfcDstMac = {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01};
constexpr uint16_t kMacControlOpcodePause = 0x0001;  // IEEE 802.3x, all priorities
constexpr uint16_t kMacControlOpcodePfc = 0x0101;    // IEEE 802.1Qbb
constexpr size_t kPfcPriorities = 8;
// Ethernet header + opcode + enable vector + 8 quanta.
constexpr size_t kPfcPayloadEnd = kEthSize + 2 + 2 + 2 * kPfcPriorities;
// Minimum Ethernet frame without the FCS (IEEE 802.3 clause 4.4.2).
constexpr size_t kPfcFrameSize = 60;
constexpr uint32_t kPauseQuantumBits = 512;

struct PfcFrame {
  MacAddress src_mac{};
  // Bit i set: time[i] is valid for priority i (a zero time means XON).
  uint8_t enable = 0;
  std::array<uint16_t, kPfcPriorities> quanta{};

  bool enabled(unsigned priority) const { return (enable >> priority) & 1; }
  bool operator==(const PfcFrame&) const = default;
};

enum class PfcParseError : uint8_t {
  kOk = 0,
  kTruncated,        // shorter than the PFC fields
  kNotMacControl,    // EtherType is not 0x8808 (VLAN-tagged frames included)
  kNotPfc,           // MAC Control, but another opcode (e.g. 802.3x PAUSE)
  kBadDestination,   // not 01:80:C2:00:00:01
  kReservedBits,     // high byte of the enable vector must be zero
};
std::string_view to_string(PfcParseError e);

// Writes a 60-byte PFC frame into `out`; returns 60, or 0 if `out` is too
// small.
size_t build_pfc(const PfcFrame& frame, std::span<uint8_t> out);

// Decodes a PFC frame (no FCS). Longer frames are accepted (padding).
PfcParseError parse_pfc(std::span<const uint8_t> frame, PfcFrame& out);

// Cheap test for dispatch: MAC Control EtherType and the PFC opcode.
bool is_pfc(std::span<const uint8_t> frame);

// How long `quanta` pause a link of `rate_bps`, rounded up to whole
// nanoseconds (a pause never ends early).
constexpr uint64_t pfc_quanta_to_ns(uint16_t quanta, uint64_t rate_bps) {
  if (rate_bps == 0) return 0;
  const uint64_t bits = uint64_t{quanta} * kPauseQuantumBits;
  return (bits * 1'000'000'000ull + rate_bps - 1) / rate_bps;
}

// One priority's pause on the receiving side of a link (IEEE 802.1Qbb
// 36.1.3.2: a PFC frame starts a timer, a new frame restarts it, quanta 0
// ends it), with the time paused so far for counters. The switch model's
// egress queues and the endpoint's priorities both keep one per priority.
struct PauseTimer {
  uint64_t until = 0;  // paused while now < until
  uint64_t start = 0;  // the current (or last) pause began here
  uint64_t total = 0;  // earlier pauses, ns

  bool paused(uint64_t now) const { return until > now; }
  // XOFF: paused until `end`. A frame that finds the priority running opens
  // a new pause (the last one ended at `until`); one that finds it paused
  // moves the end of the current one.
  void pause(uint64_t now, uint64_t end) {
    if (until <= now) {
      total += until - start;
      start = now;
    }
    until = end;
  }
  // XON, a link going down, a watchdog: a running pause ends at `now`.
  void resume(uint64_t now) {
    if (until > now) until = now;
  }
  // Time paused up to `now`.
  uint64_t paused_ns(uint64_t now) const {
    const uint64_t end = until < now ? until : now;
    return total + (end > start ? end - start : 0);
  }
};

}  // namespace droce::wire
