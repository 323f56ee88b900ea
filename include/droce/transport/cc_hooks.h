// The transport's side of congestion control: a small table of function
// pointers the endpoint fills in (it owns the cc/ algorithm instances), one
// table for every QP bound the same way, as a vtable is; each QP keeps a
// pointer to it and the context its hooks get. The
// transport never depends on cc/: it asks "may I send N bytes now?" before
// each request packet and reports events (docs/DESIGN.md "Congestion control
// interface": events, not packets; no virtual call per data packet — a null
// hook costs a branch).
#pragma once

#include <cstdint>

namespace droce::transport {

enum class LossEvent : uint8_t { kTimeout, kSeqNak, kRnrNak, kSack };

struct CcHooks {
  // Gate for request packets (new and retransmitted). nullptr = always yes.
  // `bytes` is what the packet adds in flight: 0 for a resend (on_send).
  // Returning false makes produce() return 0; has_work() stays true, so the
  // endpoint's pacer asks again later.
  bool (*may_send)(void* ctx, uint32_t qpn, uint32_t bytes, uint64_t now) = nullptr;
  // True when a request packet of `bytes`, once sent, leaves the window no
  // room for another of `next_bytes`. The requester then sets AckReq on it:
  // the responder coalesces ACKs until an AckReq (IBA 9.7.5.1.2), so a
  // window-limited QP that stopped mid-message without asking would wait
  // for an ACK nobody sends, until its retransmission timeout. nullptr =
  // never (no window).
  bool (*fills_window)(void* ctx, uint32_t bytes, uint32_t next_bytes) = nullptr;
  // A request packet left. `retransmit`: it replaces a copy the requester
  // gave up on (a hole, a go-back-N rewind, a timeout, a tail probe), and
  // may_send asked no room for it.
  void (*on_send)(void* ctx, uint32_t qpn, uint32_t bytes, bool retransmit,
                  uint64_t now) = nullptr;
  // The same three for a run of new request packets built in one go (the
  // requester's run, requester_run.cc), so that congestion control costs
  // a few calls per run, not per packet. admit: how many of at most `max`
  // packets may go now, the first `first_bytes` long, each later one at
  // most `bytes_each`: for the first packet exactly may_send's answer,
  // for the rest as if each were `bytes_each` (so never more than
  // may_send packet by packet would allow). window_room: bytes left in
  // the window before the run (UINT64_MAX: no window), from which the run
  // works out which packet fills it. on_send_run: on_send for the run's
  // `packets` packets of `bytes` in all. All three or none.
  uint32_t (*admit)(void* ctx, uint32_t first_bytes, uint32_t bytes_each, uint32_t max,
                    uint64_t now) = nullptr;
  uint64_t (*window_room)(void* ctx) = nullptr;
  void (*on_send_run)(void* ctx, uint64_t bytes, uint32_t packets, uint64_t now) = nullptr;
  // acked_bytes: newly acknowledged PSNs times the path MTU (an upper bound
  // for the last packet of a message, exact otherwise). rtt_ns: 0 when this
  // ACK carries no valid sample (Karn: none from retransmitted packets).
  void (*on_ack)(void* ctx, uint32_t qpn, uint64_t acked_bytes, uint64_t rtt_ns,
                 uint64_t now) = nullptr;
  // Request packets left the network: a PSN's first SACK, or a cumulative
  // ACK of PSNs no SACK had answered (path MTU each, as on_ack). Each PSN
  // is reported once, so a window counts what is in flight (RFC 6675's
  // "pipe"), not everything above the oldest hole.
  void (*on_delivered)(void* ctx, uint64_t bytes) = nullptr;
  void (*on_cnp)(void* ctx, uint32_t qpn, uint64_t now) = nullptr;
  // READ response packets, the responder's data: paced at the rate as
  // requests are (a NIC's rate limiter holds all of a QP's traffic, and
  // DCQCN's CNPs for marked responses come to this QP), but outside the
  // window: no ACK answers a response, so nothing would open it again.
  // nullptr = always yes / nothing to note.
  bool (*may_send_response)(void* ctx, uint64_t now) = nullptr;
  void (*on_response_sent)(void* ctx, uint32_t bytes, uint64_t now) = nullptr;
  void (*on_loss)(void* ctx, uint32_t qpn, LossEvent event, uint64_t now) = nullptr;
  // The algorithm wants RTT samples: the packet the requester times (one
  // in flight at a time) carries AckReq, so its ACK comes back at once and
  // not after the responder's coalescing.
  bool samples_rtt = false;
};

inline constexpr CcHooks kNoCcHooks{};  // every hook null: no congestion control

}  // namespace droce::transport
