// What a queue pair is made with and moved through its states with: its
// type and states (IBA 10.3.1), ibv_qp_init_attr's and ibv_qp_attr's
// counterparts (QpInitAttr, QpAttr) and the loss recovery it runs.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string_view>

#include "droce/transport/entropy.h"
#include "droce/transport/wqe.h"
#include "droce/wire/build.h"

namespace droce::transport {

class CompletionQueue;
class ProtectionDomain;
class SharedReceiveQueue;

enum class QpType : uint8_t { kRc, kUc, kUd };
std::string_view to_string(QpType t);

// IBA 10.3.1 QP states (SQE, "send queue error", is UC/UD only).
enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kSqd, kSqe, kErr };
std::string_view to_string(QpState s);
ibv_qp_state to_ibv(QpState s);
// IBA 10.3.1 figure 124 / ibv_modify_qp: which modify transitions a
// consumer may request. Any state may go to RESET or ERR.
bool transition_allowed(QpState from, QpState to);

// Loss recovery. Go-back-N is IBA 9.7.5.2. Selective repeat is IRN-style
// (Mittal et al., SIGCOMM 2018) on a standard wire:
//  - the responder places out-of-order RDMA WRITE packets whose message
//    context (RETH of the first packet) it knows — offset = (PSN - first
//    PSN) * MTU — and drops other out-of-order packets (SEND, READ,
//    atomics: they need in-order receive WQE or execution semantics).
//    The last packet of a WRITE with immediate is placed too, its
//    immediate kept aside (kOooImmediates of them): the receive WQE it
//    consumes is taken, and its completion made, when the expected PSN
//    reaches it, in order as IBA 9.7.5.2 wants them. Should no receive
//    WQE be there then, the packet is forgotten and RNR-NAKed (9.7.5.2.8),
//    and the requester resends from it;
//  - for every out-of-order packet it sends a PSN-sequence-error NAK whose
//    BTH PSN is the first missing PSN (cumulative) and whose AETH MSN field
//    carries the PSN of the packet just received (the selective ACK); a
//    value equal to the BTH PSN means "no selective information". A
//    go-back-N peer reading this NAK simply goes back N: still correct;
//  - the requester marks SACKed PSNs and resends only the holes below the
//    highest SACKed PSN. A hole is resent once, and again only on evidence
//    that the resend was lost too: a SACK for a PSN first sent after the
//    resend (the network keeps a flow in order, so that packet overtook
//    nothing). This is IRN's loss recovery (§3.2) with a per-hole
//    retransmission mark instead of one resend per recovery episode;
//  - two timeouts (IRN §3.1): the IBA local ACK timeout (RTO_high) and
//    sr_rto_low_ns (RTO_low) when at most sr_rto_low_threshold_pkts
//    packets are in flight (sent, neither ACKed nor SACKed) and the
//    newest one will be answered (AckReq, or already SACKed). Each
//    RTO_low without forward progress doubles the next (a resend lost
//    again waits 2, 4, ... RTO_low, as TCP backs its RTO off, RFC 6298
//    5.5) until it would reach RTO_high, which then takes over. RTO_low
//    does not count against retry_cnt, so the time to
//    IBV_WC_RETRY_EXC_ERR stays at least (retry_cnt + 1) RTO_high as IBA
//    9.7.6.1.3 sets it. On either timeout the requester resends every
//    un-SACKed outstanding packet. A packet placed already that arrives
//    again is SACKed again (its SACK may be what was lost).
//    READ responses stay in order (the requester re-issues the READ from
//    the first missing response).
// Both ends must be configured for selective repeat. Go-back-N keeps the
// IBA rules: one timeout, no SACK state.
enum class Recovery : uint8_t { kGoBackN, kSelectiveRepeat };

// ibv_qp_cap: the depths of the two work queues, the SGEs a WR may carry
// (at most kMaxSge) and the bytes of payload a send may carry inline
// (IBV_SEND_INLINE: copied at post, at most kMaxInlineData).
struct QpCaps {
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  uint32_t max_send_sge = kMaxSge;
  uint32_t max_recv_sge = kMaxSge;
  uint32_t max_inline_data = 0;
};
constexpr uint32_t kMaxInlineData = 4096;

struct QpInitAttr {
  QpType type = QpType::kRc;
  ProtectionDomain* pd = nullptr;
  CompletionQueue* send_cq = nullptr;
  CompletionQueue* recv_cq = nullptr;
  // Receives come from this shared receive queue (of the QP's PD) instead
  // of the QP's own; max_recv_wr is then not used.
  SharedReceiveQueue* srq = nullptr;
  QpCaps caps;
  bool sq_sig_all = false;
};

// Attributes for modify(); which fields a transition reads mirrors
// ibv_modify_qp's required masks (IBA 11.2.4.2):
//   RESET->INIT: qp_access_flags, pkey, qkey (UD)
//   INIT->RTR:   path, dest_qpn, rq_psn, path_mtu, max_dest_rd_atomic,
//                min_rnr_timer, ack_every_n, recovery, sack_window, CNP knobs,
//                entropy
//   RTR->RTS:    sq_psn, timeout, retry_cnt, rnr_retry, max_rd_atomic,
//                ack_req_every_n, ack_req_interval_ns, max_inflight_psns, sr_rto_low_ns,
//                sr_rto_low_threshold_pkts, sr_reorder_tolerance_pkts,
//                sr_reorder_window_ns, sr_tail_probe, write_reth_every_packet,
//                honour_credits
struct QpAttr {
  uint32_t qp_access_flags =
      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  uint16_t pkey = 0xFFFF;
  uint32_t qkey = 0;

  wire::PathSpec path;
  uint32_t dest_qpn = 0;
  uint32_t rq_psn = 0;
  ibv_mtu path_mtu = IBV_MTU_1024;
  uint8_t max_dest_rd_atomic = 16;
  uint8_t min_rnr_timer = 12;  // table 45 code: 0.64 ms
  // Responder ACK coalescing: ACK when the request has AckReq set, or after
  // this many unacknowledged packets (0 = only on AckReq).
  uint32_t ack_every_n = 0;
  Recovery recovery = Recovery::kGoBackN;
  // Selective repeat: PSNs tracked; a power of two (64..2^20) so PSN % size
  // stays consistent across the 2^24 wrap.
  uint32_t sack_window = 1024;
  // The UDP source port of request packets (entropy.h): fixed (the path's
  // udp_src_port), sprayed per packet or changed per flowlet. Anything but
  // fixed reorders packets on a multipath fabric, so it is accepted only
  // with selective repeat: go-back-N would take every overtaken packet for
  // a loss (IBA 9.7.5.1.2 NAKs it) and resend everything after it.
  EntropyConfig entropy;
  // DCQCN notification point (RoCEv2 annex A17.9; mlx5 names).
  uint64_t np_min_time_between_cnps_ns = 4000;
  uint8_t cnp_dscp = 48;

  uint32_t sq_psn = 0;
  uint8_t timeout = 14;  // 4.096 us * 2^14 = 67 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;  // 7 = infinite
  uint8_t max_rd_atomic = 16;
  // Requester AckReq policy: always on the last packet of a message, and
  // on every N-th packet of a long message (0 = last packet only).
  uint32_t ack_req_every_n = 64;
  // ... and on the first packet sent at least this long after the last one
  // that asked (0 = never by time). A flow its CC paces slowly (TIMELY at
  // its 10 Mb/s floor takes 210 ms for 64 packets of 4 KiB) would otherwise
  // get no feedback, and its local ACK timer would fire with nothing lost.
  // 25 us is more than 64 packets of 4 KiB take at 100 Gb/s, so a flow at
  // line rate asks as often as before.
  uint64_t ack_req_interval_ns = 25'000;
  // Cap on PSNs in flight (at most 2^23 - 1 so that the responder can tell
  // duplicates from future packets, IBA 9.7.1).
  uint32_t max_inflight_psns = 8192;
  // Selective repeat only (IRN §3.1): RTO_low, used instead of the local ACK
  // timeout when at most sr_rto_low_threshold_pkts packets are in flight
  // (0 = off). IRN's values are 100 us and N = 3: RTO_low must cover the
  // round trip of a few packets through queues other flows may fill, plus
  // the responder's turnaround — tens of fabric RTTs, far below the
  // milliseconds RoCE uses for timeout — and a spurious RTO_low costs only
  // the resend of those few packets.
  uint64_t sr_rto_low_ns = 100'000;
  uint32_t sr_rto_low_threshold_pkts = 3;
  // Selective repeat only: how far a network that reorders (packets sprayed
  // over several paths) may reorder. A hole is taken for a loss, and
  // resent, only once a PSN at least this many packets beyond it was
  // SACKed (TCP's duplicate-ACK threshold, RFC 5681 3.2, counted in
  // packets); 0 resends as soon as anything after it arrives, right for a
  // network that keeps a flow in order. A lost packet the threshold hides
  // (the last few of a message) is found by RTO_low.
  uint32_t sr_reorder_tolerance_pkts = 0;
  // Selective repeat only: time-based loss detection (RACK, RFC 8985
  // section 6.2; requester_rack.cc), 0 = off. A hole is taken for a loss
  // once a packet first sent after it was delivered (SACKed or ACKed) and
  // the hole has been out for longer than that packet's round trip plus
  // this window: a loss near the end of a message, which no SACK far
  // enough beyond it reveals, is found in about one round trip instead of
  // RTO_low, and a hole is not resent while it is merely late by less
  // than the window. The window must cover how much later one path can
  // deliver than another (RFC 8985 6.2 starts from a quarter of
  // the minimum RTT; a sprayed fabric's queues need more). Either this
  // or sr_reorder_tolerance_pkts finding a hole lost is enough.
  uint64_t sr_reorder_window_ns = 0;
  // With a reorder window: 0 keeps the window fixed; otherwise it starts
  // here and adapts between this and sr_reorder_window_ns (RFC 8985
  // 6.2.4): doubled, at most once per round trip, when a resend turns out
  // spurious (the hole was delivered sooner after its resend than the
  // smallest round trip: the first copy was only late, the evidence a
  // DSACK gives TCP), back to this after 16 rounds of losses found by time
  // without one. A sprayed fabric with shallow queues then finds a late
  // loss in a few us, one with deep ones widens the window as its
  // reordering asks.
  uint64_t sr_reorder_window_min_ns = 0;
  // Selective repeat with RACK (a reorder window) only: the tail loss
  // probe of RACK-TLP (RFC 8985 section 7). When the newest packet, which
  // asked for its ACK, has been answered neither by an ACK nor a SACK for
  // two smoothed round trips since the last packet sent or answer
  // received, it is sent again, asking for its ACK: one packet instead of
  // a timeout. Its answer either acknowledges what a lost ACK did not, or
  // SACKs it and lets RACK find the holes below; lost too, RTO_low or
  // RTO_high follows as without it. Off by default.
  bool sr_tail_probe = false;
  // An RDMA WRITE longer than the path MTU leaves as a run of WRITE ONLY
  // packets, each with the RETH of its own slice, instead of FIRST,
  // MIDDLE..., LAST (IBA 9.7.4: each is a message of its own to the
  // responder; ImmDt rides on the last). A selective-repeat responder
  // places a MIDDLE or LAST only once it knows its message's FIRST, so on
  // a network that loses or reorders, a late or lost FIRST costs its whole
  // message (dropped, resent as holes found only by RTO_high when it ends
  // a burst); with a RETH in every packet each one is placed wherever it
  // lands. IRN puts a RETH in every packet for the same reason (Mittal et
  // al. SIGCOMM 2018, its RoCE extensions); this is the same on a standard
  // wire, for 16 bytes a packet. Off by default, as RoCE NICs segment.
  bool write_reth_every_packet = false;
  // End-to-end credits (IBA 9.7.7.2, credits.h): start a SEND or RDMA
  // WRITE with immediate only within the limit the responder's ACKs
  // advertise, or alone as a probe when nothing is outstanding. Off by
  // default, as on many RNICs: the requester then relies on RNR NAKs. (The
  // responder advertises its receive queue either way.)
  bool honour_credits = false;
};

}  // namespace droce::transport
