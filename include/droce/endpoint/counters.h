// Endpoint counters: what happened to every frame the endpoint was handed or
// produced. Per-QP transport counters live in transport/counters.h. The
// X-macro keeps the fields and their telemetry names in one list.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "droce/wire/packet.h"

namespace droce::endpoint {

#define DROCE_ENDPOINT_COUNTERS(X)                                            \
  X(rx_frames)                                                                \
  X(rx_bytes)                                                                 \
  X(rx_not_roce)          /* other protocols: not ours, dropped */           \
  X(rx_malformed)         /* sum of the rx_error_* counters */               \
  X(rx_unknown_qpn)       /* well-formed, but no such QP here */             \
  X(rx_delivered)                                                             \
  X(rx_pfc_frames)        /* 802.1Qbb frames honoured */                      \
  X(rx_mac_control_other) /* 802.3x PAUSE etc.: counted, not honoured */     \
  X(rx_int_stripped)      /* INT-MD frames whose records were taken off */    \
  X(rx_int_echoes)        /* of those, echoes carrying hops for our CC */     \
  X(rx_int_bad)           /* INT header present but unusable: dropped */      \
  X(cc_acks_without_int)  /* ACKs for a QP whose CC needs INT: none on them */ \
  X(tx_frames)                                                                \
  X(tx_bytes)                                                                 \
  X(tx_paced)             /* a QP had work but its rate/window said wait */   \
  X(tx_pfc_held)          /* a QP's priority was paused by PFC */             \
  X(tx_int_echoed)        /* ACKs that carried INT hops back */               \
  X(tx_int_echo_no_room)                                                      \
  X(timers_fired)

struct EndpointCounters {
#define DROCE_DECLARE_ENDPOINT_COUNTER(name) uint64_t name = 0;
  DROCE_ENDPOINT_COUNTERS(DROCE_DECLARE_ENDPOINT_COUNTER)
#undef DROCE_DECLARE_ENDPOINT_COUNTER
  // Indexed by wire::ParseError (kOk unused).
  std::array<uint64_t, static_cast<size_t>(wire::ParseError::kCount)> rx_parse_errors{};

  // Calls f(name, value) for every counter, the parse errors as
  // "rx_error_<reason>" (e.g. rx_error_bad_icrc), in a stable order.
  template <class F>
  void for_each(F&& f) const {
#define DROCE_VISIT_ENDPOINT_COUNTER(name) f(std::string_view(#name), name);
    DROCE_ENDPOINT_COUNTERS(DROCE_VISIT_ENDPOINT_COUNTER)
#undef DROCE_VISIT_ENDPOINT_COUNTER
    for (size_t i = 1; i < rx_parse_errors.size(); ++i) {
      const std::string name =
          "rx_error_" + std::string(wire::to_string(static_cast<wire::ParseError>(i)));
      f(std::string_view(name), rx_parse_errors[i]);
    }
  }

  EndpointCounters& operator+=(const EndpointCounters& o) {
#define DROCE_ADD_ENDPOINT_COUNTER(name) name += o.name;
    DROCE_ENDPOINT_COUNTERS(DROCE_ADD_ENDPOINT_COUNTER)
#undef DROCE_ADD_ENDPOINT_COUNTER
    for (size_t i = 0; i < rx_parse_errors.size(); ++i) rx_parse_errors[i] += o.rx_parse_errors[i];
    return *this;
  }
};

}  // namespace droce::endpoint
