// Per-QP counters: one uint64_t per drop, NAK and retransmission reason, so
// every packet the transport refuses or repeats is accounted for (docs/DESIGN.md
// "Error handling": invalid input from the network -> counter + drop or NAK).
// The X-macro keeps the struct and the names for telemetry export in one list.
// H marks the counters of the loss-free data path, which a QP keeps inline;
// C the rest (drops, NAKs, retransmissions, errors), which a QP allocates
// when it first counts one: an idle or healthy QP does not carry 45 zeros.
#pragma once

#include <cstdint>
#include <string_view>

namespace droce::transport {

#define DROCE_QP_COUNTER_LIST(H, C)                                           \
  /* requester (TX of requests) */                                            \
  H(tx_packets)            /* every frame produce() wrote */                  \
  H(tx_bytes)              /* their payload bytes */                          \
  H(tx_request_packets)                                                       \
  C(tx_retransmit_packets) /* request packets sent more than once */          \
  C(retransmit_timeouts)   /* local ACK timer expired (IBA 9.7.6.1) */       \
  C(retransmit_seq_nak)    /* go-back on a PSN sequence error NAK */          \
  C(retransmit_implied_nak)/* ACK beyond an unanswered READ/atomic */         \
  C(retransmit_read_gap)   /* READ re-issued after a missing response */      \
  C(retransmit_sack_holes) /* selective repeat: holes resent */               \
  C(retransmit_sack_again) /* SR: a resent hole resent again (IRN 3.2) */    \
  C(retransmit_timeouts_low) /* SR: RTO_low expired (IRN 3.1) */             \
  C(retransmit_rack)       /* SR: holes found lost by time (RFC 8985) */     \
  C(retransmit_spurious)   /* SR: resent holes whose first copy was late */   \
  C(retransmit_tail_probes) /* SR: tail loss probes sent (RFC 8985 7) */     \
  C(rnr_naks_received)                                                        \
  C(rnr_retries)                                                              \
  C(seq_naks_received)                                                        \
  C(fatal_naks_received)   /* invalid request / access / operational */      \
  H(rx_response_packets)   /* ACKs, NAKs, READ responses, atomic ACKs taken */ \
  H(acks_received)                                                            \
  C(acks_stale)            /* ACK/NAK for a PSN already acknowledged */       \
  C(acks_ghost)            /* ACK/NAK for a PSN never sent: dropped */        \
  C(credits_malformed)     /* AETH credits not believable: ignored */         \
  C(read_responses_unexpected) /* no READ outstanding at that PSN */         \
  C(read_responses_out_of_order)                                              \
  C(read_responses_bad_length)                                                \
  C(atomic_acks_unexpected)                                                   \
  H(cnps_received)                                                            \
  H(window_stalls)         /* produce() found the send window closed */      \
  H(cc_stalls)             /* the congestion hook said "not now" */           \
  C(retry_exceeded)        /* IBV_WC_RETRY_EXC_ERR */                         \
  C(rnr_retry_exceeded)    /* IBV_WC_RNR_RETRY_EXC_ERR */                     \
  C(local_errors)          /* bad lkey / length at the requester */          \
  /* responder (RX of requests) */                                            \
  H(rx_request_packets)    /* requests taken (not those after a fatal error) */ \
  C(rx_duplicate_packets)  /* behind the expected PSN, or placed (SR) */      \
  C(rx_duplicate_reads)    /* READ re-executed (IBA 9.7.5.1.2) */             \
  C(rx_duplicate_atomics_replayed)                                            \
  C(rx_duplicate_atomics_unknown) /* not in the cache: dropped */            \
  C(rx_out_of_sequence)    /* PSN ahead of the expected PSN */                \
  C(rx_ooo_accepted)       /* selective repeat: placed out of order */        \
  C(rx_ooo_rnr)            /* placed WRITE with immediate: no receive WQE */  \
  C(naks_seq_sent)                                                            \
  C(naks_invalid_request_sent)                                                \
  C(naks_remote_access_sent)                                                  \
  C(naks_remote_operational_sent)                                             \
  C(rnr_naks_sent)                                                            \
  H(acks_sent)                                                                \
  H(read_response_packets_sent)                                               \
  C(read_responses_region_gone) /* READ's region deregistered: NAKed */       \
  H(atomic_acks_sent)                                                         \
  C(rx_response_queue_full) /* request dropped, no room to answer it */       \
  C(rx_dropped_bad_state)  /* QP not in a state that receives */              \
  C(rx_dropped_wrong_transport) /* e.g. UC opcode on an RC QP */             \
  C(rx_dropped_bad_pkey)   /* BTH P_Key not of the QP's partition */          \
  C(rx_dropped_bad_address) /* IP addresses not the QP's (IBA 9.6.1) */       \
  C(rx_dropped_uc)         /* UC: packet of a broken message dropped */       \
  C(rx_dropped_ud_qkey)                                                       \
  C(rx_dropped_ud_no_wqe)                                                     \
  C(rx_dropped_ud_too_long)                                                   \
  H(rx_ecn_ce)             /* data packets that arrived CE-marked */          \
  H(cnps_sent)                                                                \
  C(cnps_suppressed)       /* CE seen inside np_min_time_between_cnps */      \
  H(recv_completions)                                                         \
  H(send_completions)                                                         \
  C(flushed_wqes)

// Every counter, in declaration order.
#define DROCE_QP_COUNTERS(X) DROCE_QP_COUNTER_LIST(X, X)

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

#define DROCE_DECLARE_COUNTER(name) uint64_t name = 0;
#define DROCE_IGNORE_COUNTER(name)
// A QP's inline and allocated-on-demand halves of QpCounters.
struct QpHotCounters {
  DROCE_QP_COUNTER_LIST(DROCE_DECLARE_COUNTER, DROCE_IGNORE_COUNTER)
};
struct QpRareCounters {
  DROCE_QP_COUNTER_LIST(DROCE_IGNORE_COUNTER, DROCE_DECLARE_COUNTER)
};
#undef DROCE_IGNORE_COUNTER
#undef DROCE_DECLARE_COUNTER

// The two halves as one QpCounters; `rare` may be null (none counted yet).
inline QpCounters join_counters(const QpHotCounters& hot, const QpRareCounters* rare) {
  QpCounters c;
#define DROCE_COPY_HOT(name) c.name = hot.name;
#define DROCE_COPY_RARE(name) c.name = rare ? rare->name : 0;
  DROCE_QP_COUNTER_LIST(DROCE_COPY_HOT, DROCE_COPY_RARE)
#undef DROCE_COPY_RARE
#undef DROCE_COPY_HOT
  return c;
}

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
