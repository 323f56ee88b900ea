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
  X(timers_fired)                                                              \
  /* The port's IP interface (ip_interface.h): ARP, ND, ICMP echo. */        \
  X(arp_requests_in)      /* for one of our addresses */                      \
  X(arp_replies_in)                                                           \
  X(arp_requests_out)                                                         \
  X(arp_replies_out)                                                          \
  X(arp_other)            /* for other hosts' addresses: read, not answered */ \
  X(arp_bad)              /* malformed or unsupported: dropped */             \
  X(nd_solicits_in)       /* for one of our addresses */                      \
  X(nd_adverts_in)                                                            \
  X(nd_solicits_out)                                                          \
  X(nd_adverts_out)                                                           \
  X(nd_other)             /* for other targets, or other ICMPv6 */            \
  X(nd_bad)               /* invalid (RFC 4861 7.1), bad checksum: dropped */ \
  X(icmp_echo_in)         /* echo requests to our addresses */               \
  X(icmp_echo_out)        /* echo replies sent */                             \
  X(icmp_pings_out)       /* echo requests sent (ping) */                     \
  X(icmp_ping_replies_in) /* echo replies to them */                          \
  X(icmp_other)           /* other ICMP, or echo not for us */                \
  X(icmp_bad)             /* malformed, bad checksum, fragments: dropped */   \
  X(wrong_vlan)           /* ARP/ND/ICMP outside the port's VLAN */           \
  X(answers_rate_limited) /* requests not answered: over the rate limit */    \
  X(ctl_tx_queue_full)    /* ARP/ND/ICMP frames not queued: queue full */     \
  X(spoofed_answers)      /* answers for addresses nobody asked about */      \
  X(neigh_resolved)       /* addresses resolved for QPs */                    \
  X(neigh_failed)         /* resolutions that got no answer */                \
  X(neigh_changed)        /* a neighbour's MAC changed: QPs re-addressed */   \
  X(neigh_no_room)        /* cache full of entries in use: not added */       \
  X(unresolved_qps_failed) /* QPs failed: their peer did not resolve */

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

// Every frame received (rx_frames) is counted in exactly one of these:
// handed to a QP, or the named reason it was not (a parse error, no such QP,
// another protocol, MAC control, PFC, a broken INT header), or taken by the
// port's IP interface (ARP, neighbour discovery, ICMP), whose answers and
// rate limiting are counted besides. Tests check rx_frames against it.
inline uint64_t rx_frames_accounted(const EndpointCounters& c) {
  return c.rx_delivered + c.rx_malformed + c.rx_unknown_qpn + c.rx_not_roce +
         c.rx_mac_control_other + c.rx_pfc_frames + c.rx_int_bad +
         // The IP interface (ip_interface.h): one of these per frame it takes.
         c.arp_requests_in + c.arp_replies_in + c.arp_other + c.arp_bad + c.nd_solicits_in +
         c.nd_adverts_in + c.nd_other + c.nd_bad + c.icmp_echo_in + c.icmp_ping_replies_in +
         c.icmp_other + c.icmp_bad + c.wrong_vlan;
}

}  // namespace droce::endpoint
