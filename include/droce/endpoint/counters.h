// Endpoint counters: what happened to every frame the endpoint was handed or
// produced. Per-QP transport counters live in transport/counters.h.
#pragma once

#include <array>
#include <cstdint>

#include "droce/wire/packet.h"

namespace droce::endpoint {

struct EndpointCounters {
  uint64_t rx_frames = 0;
  uint64_t rx_bytes = 0;
  uint64_t rx_not_roce = 0;    // other protocols: not ours, dropped
  uint64_t rx_malformed = 0;   // sum of rx_parse_errors
  uint64_t rx_unknown_qpn = 0; // well-formed, but no such QP here
  uint64_t rx_delivered = 0;
  // Indexed by wire::ParseError.
  std::array<uint64_t, static_cast<size_t>(wire::ParseError::kCount)> rx_parse_errors{};
  uint64_t rx_pfc_frames = 0;   // 802.1Qbb frames honoured
  uint64_t rx_mac_control_other = 0;  // 802.3x PAUSE etc.: counted, not honoured
  uint64_t rx_int_stripped = 0; // INT-MD frames whose records were taken off
  uint64_t rx_int_echoes = 0;   // of those, echoes carrying hops for our CC
  uint64_t rx_int_bad = 0;      // INT header present but unusable: dropped
  uint64_t tx_frames = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_paced = 0;       // a QP had work but its rate/window said wait
  uint64_t tx_pfc_held = 0;    // a QP's priority was paused by PFC
  uint64_t tx_int_echoed = 0;  // ACKs that carried INT hops back
  uint64_t tx_int_echo_no_room = 0;
  uint64_t timers_fired = 0;
};

}  // namespace droce::endpoint
