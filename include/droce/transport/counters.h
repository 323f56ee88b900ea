// Per-QP counters: one uint64_t per drop, NAK and retransmission reason, so
// every packet the transport refuses or repeats is accounted for (docs/DESIGN.md
// "Error handling": invalid input from the network -> counter + drop or NAK).
// The X-macro keeps the struct and the names for telemetry export in one list.
#pragma once

#include <cstdint>
#include <string_view>

namespace droce::transport {

#define DROCE_QP_COUNTERS(X)                                                  \
  /* requester (TX of requests) */                                            \
  X(tx_packets)            /* every frame produce() wrote */                  \
  X(tx_bytes)              /* their payload bytes */                          \
  X(tx_request_packets)                                                       \
  X(tx_retransmit_packets) /* request packets sent more than once */          \
  X(retransmit_timeouts)   /* local ACK timer expired (IBA 9.7.6.1) */       \
  X(retransmit_seq_nak)    /* go-back on a PSN sequence error NAK */          \
  X(retransmit_implied_nak)/* ACK beyond an unanswered READ/atomic */         \
  X(retransmit_read_gap)   /* READ re-issued after a missing response */      \
  X(retransmit_sack_holes) /* selective repeat: holes resent */               \
  X(retransmit_sack_again) /* SR: a resent hole resent again (IRN 3.2) */    \
  X(retransmit_timeouts_low) /* SR: RTO_low expired (IRN 3.1) */             \
  X(rnr_naks_received)                                                        \
  X(rnr_retries)                                                              \
  X(seq_naks_received)                                                        \
  X(fatal_naks_received)   /* invalid request / access / operational */      \
  X(rx_response_packets)   /* ACKs, NAKs, READ responses, atomic ACKs taken */ \
  X(acks_received)                                                            \
  X(acks_stale)            /* ACK/NAK for a PSN already acknowledged */       \
  X(acks_ghost)            /* ACK/NAK for a PSN never sent: dropped */        \
  X(credits_malformed)     /* AETH credits not believable: ignored */         \
  X(read_responses_unexpected) /* no READ outstanding at that PSN */         \
  X(read_responses_out_of_order)                                              \
  X(read_responses_bad_length)                                                \
  X(atomic_acks_unexpected)                                                   \
  X(cnps_received)                                                            \
  X(window_stalls)         /* produce() found the send window closed */      \
  X(cc_stalls)             /* the congestion hook said "not now" */           \
  X(retry_exceeded)        /* IBV_WC_RETRY_EXC_ERR */                         \
  X(rnr_retry_exceeded)    /* IBV_WC_RNR_RETRY_EXC_ERR */                     \
  X(local_errors)          /* bad lkey / length at the requester */          \
  /* responder (RX of requests) */                                            \
  X(rx_request_packets)    /* requests taken (not those after a fatal error) */ \
  X(rx_duplicate_packets)  /* PSN behind the expected PSN */                  \
  X(rx_duplicate_reads)    /* READ re-executed (IBA 9.7.5.1.2) */             \
  X(rx_duplicate_atomics_replayed)                                            \
  X(rx_duplicate_atomics_unknown) /* not in the cache: dropped */            \
  X(rx_out_of_sequence)    /* PSN ahead of the expected PSN */                \
  X(rx_ooo_accepted)       /* selective repeat: placed out of order */        \
  X(naks_seq_sent)                                                            \
  X(naks_invalid_request_sent)                                                \
  X(naks_remote_access_sent)                                                  \
  X(naks_remote_operational_sent)                                             \
  X(rnr_naks_sent)                                                            \
  X(acks_sent)                                                                \
  X(read_response_packets_sent)                                               \
  X(read_responses_region_gone) /* READ's region deregistered: NAKed */       \
  X(atomic_acks_sent)                                                         \
  X(rx_response_queue_full) /* request dropped, no room to answer it */       \
  X(rx_dropped_bad_state)  /* QP not in a state that receives */              \
  X(rx_dropped_wrong_transport) /* e.g. UC opcode on an RC QP */             \
  X(rx_dropped_bad_pkey)   /* BTH P_Key not of the QP's partition */          \
  X(rx_dropped_bad_address) /* IP addresses not the QP's (IBA 9.6.1) */       \
  X(rx_dropped_uc)         /* UC: packet of a broken message dropped */       \
  X(rx_dropped_ud_qkey)                                                       \
  X(rx_dropped_ud_no_wqe)                                                     \
  X(rx_dropped_ud_too_long)                                                   \
  X(rx_ecn_ce)             /* data packets that arrived CE-marked */          \
  X(cnps_sent)                                                                \
  X(cnps_suppressed)       /* CE seen inside np_min_time_between_cnps */      \
  X(recv_completions)                                                         \
  X(send_completions)                                                         \
  X(flushed_wqes)

struct QpCounters {
#define DROCE_DECLARE_COUNTER(name) uint64_t name = 0;
  DROCE_QP_COUNTERS(DROCE_DECLARE_COUNTER)
#undef DROCE_DECLARE_COUNTER

  // Calls f(std::string_view name, uint64_t value) for each counter, in
  // declaration order (telemetry export, test dumps).
  template <class F>
  void for_each(F&& f) const {
#define DROCE_VISIT_COUNTER(name) f(std::string_view(#name), name);
    DROCE_QP_COUNTERS(DROCE_VISIT_COUNTER)
#undef DROCE_VISIT_COUNTER
  }
  QpCounters& operator+=(const QpCounters& o) {
#define DROCE_ADD_COUNTER(name) name += o.name;
    DROCE_QP_COUNTERS(DROCE_ADD_COUNTER)
#undef DROCE_ADD_COUNTER
    return *this;
  }
};

// Every packet an endpoint hands a QP (EndpointCounters::rx_delivered) is
// counted in exactly one of these: dropped before the transport looks at it
// (state, addresses, P_Key, transport), a CNP, a request the responder took,
// a response the requester took. The other counters say what became of a
// request or response, and may count one packet more than once (a NAK sent
// for a request, say).
inline uint64_t rx_packets_accounted(const QpCounters& c) {
  return c.rx_dropped_bad_state + c.rx_dropped_bad_address + c.rx_dropped_bad_pkey +
         c.rx_dropped_wrong_transport + c.cnps_received + c.rx_request_packets +
         c.rx_response_packets;
}

}  // namespace droce::transport
