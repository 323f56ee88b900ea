// Queue pair: the RC / UC / UD transport state machine (IBA vol. 1 ch. 9,
// QP states ch. 10.3, RoCEv2 annex A17), DPDK-free.
//
// Contract with the endpoint (the only caller in the data path):
//   RX:     parse a frame, find the QP by BTH dest QPN (Device::find_qp),
//           call on_packet(parsed, now). The frame must stay valid for the
//           call only; payload is copied into registered memory.
//   TX:     while has_work(now): n = produce(now, buf); n == 0 means nothing
//           is due (window closed, CC said no, timer pending). One frame per
//           call, written with wire::build_packet; nothing is allocated.
//   Timers: next_deadline() (UINT64_MAX when none) and on_timer(now).
// The three halves of an RC QP live in their own files: requester.cc (what
// to send), responder.cc and responder_*.cc (incoming requests, ACK/NAK/READ
// responses; its steps in src/transport/responder_steps.h), completer.cc
// (incoming ACKs/responses, retiring WQEs).
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "droce/memory/huge_page_pool.h"
#include "droce/transport/cc_hooks.h"
#include "droce/transport/counters.h"
#include "droce/transport/credits.h"
#include "droce/transport/cq.h"
#include "droce/transport/entropy.h"
#include "droce/transport/mr.h"
#include "droce/transport/pd.h"
#include "droce/transport/qp_attr.h"
#include "droce/transport/responder.h"
#include "droce/transport/srq.h"
#include "droce/transport/wqe.h"
#include "droce/transport/zeroed_array.h"
#include "droce/wire/build.h"
#include "droce/wire/packet.h"
#include "droce/wire/rx_template.h"
#include "droce/wire/tx_template.h"

namespace droce::transport {

class Device;

// Created in huge pages (memory::InHugePages): with tens of thousands of
// QPs, each packet's QP is a TLB miss in 4 KiB pages.
class QueuePair : public memory::InHugePages {
 public:
  QueuePair(Device& device, uint32_t qpn, const QpInitAttr& init);
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  uint32_t qpn() const { return qpn_; }
  QpType type() const { return type_; }
  QpState state() const { return state_; }
  const QpAttr& attr() const { return attr_; }
  const ProtectionDomain* pd() const { return pd_; }
  // A snapshot: the inline counters and the rare ones (counters.h).
  QpCounters counters() const { return join_counters(counters_, rare_counters_.get()); }
  // Responder: the largest distance (in PSNs) between the expected PSN and
  // a request that arrived ahead of it: how deep the network reordered
  // (or how far a loss was overtaken).
  uint32_t reorder_depth_max() const { return reorder_depth_max_; }
  // Requester: times the UDP source port changed (entropy.h).
  uint64_t entropy_changes() const { return entropy_.changes(); }
  // `hooks` (shared by every QP bound the same way) must outlive the
  // binding; null unbinds. `ctx` is passed to every hook.
  void set_cc_hooks(const CcHooks* hooks, void* ctx);

  // Step function of the state machine: 0 on success, EINVAL if the
  // transition or an attribute is not allowed (IBA 10.3.1, 11.2.4.2).
  int modify(QpState target, const QpAttr& attr);
  // The peer's MAC, found by address resolution after the path was set
  // (the endpoint's neighbour cache): the path and the header templates
  // take it.
  void set_dest_mac(const wire::MacAddress& mac);
  // The peer's address never resolved: the oldest send WR completes with
  // IBV_WC_RETRY_EXC_ERR (what a NIC reports when its peer never answers)
  // and the QP goes to the error state, flushing the rest.
  void fail_unresolved();

  // Verbs: 0, ENOMEM (queue full) or EINVAL (bad opcode for the QP type,
  // too many SGEs, bad lkey / range, message too long, inline data longer
  // than max_inline_data, wrong state; post_recv on a QP with an SRQ).
  // Nothing is queued unless 0 is returned.
  //
  // The work queues are rings shared with the data path, as a NIC's are
  // with the host (docs/ENGINE.md "Work queues"): post_send and post_recv
  // may run on another thread than every other call, one poster at a time
  // (the caller serialises posters of one QP, and keeps modify() apart from
  // them); a WQE is published with its ring index. The data path takes
  // what was published when it next runs the QP (produce, on_packet,
  // on_timer, take_posted); whoever drives it must be told that the QP
  // has work (the endpoint's doorbell). WRs posted in ERR complete with
  // IBV_WC_WR_FLUSH_ERR when the data path takes them.
  int post_send(const SendWr& wr);
  int post_recv(const RecvWr& wr);
  // A list (ibv_post_send's chain), published at once, up to the first WR
  // refused, whose error is returned; `posted` (may be null): how many went.
  int post_send(std::span<const SendWr> wrs, size_t* posted);
  int post_recv(std::span<const RecvWr> wrs, size_t* posted);
  // The data path: takes what posters published; flushes it in ERR.
  void take_posted();
  // Device::destroy_qp: every outstanding WR completes with IBV_WC_WR_FLUSH_ERR.
  void destroy();
  // Both work queues' depths anew (Modify QP may change them, IBA 11.2.4.2;
  // the receive depth is ignored with an SRQ): EINVAL for 0, EBUSY unless
  // every WR posted has completed. By the data path's thread (the simulator).
  int resize_queues(uint32_t max_send_wr, uint32_t max_recv_wr);
  // The state as a poster sees it (any thread).
  QpState posted_state() const { return shared_state_.load(std::memory_order_acquire); }
  const QpCaps& caps() const { return caps_; }
  CompletionQueue* send_cq() const { return send_cq_; }
  CompletionQueue* recv_cq() const { return recv_cq_; }
  SharedReceiveQueue* srq() const { return srq_; }

  void on_packet(const wire::ParsedPacket& pkt, uint64_t now);
  // Header prediction (wire/rx_template.h): the RDMA WRITE requests (no
  // immediate) this QP's peer sends, as a template; set when the path is
  // (INIT->RTR), matches nothing before that and for UD.
  const wire::RxTemplate& rx_template() const { return rx_template_; }
  // on_packet() for requests rx_template() matched whose ICRCs are good, in
  // order, as long as each is the plain case: the expected PSN, the opcode
  // in sequence with the message in progress, a payload length right for
  // its position and the DMA length, an access the QP and the region
  // grant, room for the ACK, go-back-N. Returns how many it took; the first
  // it did not take changed nothing, and the caller parses it and calls
  // on_packet(), which applies the full rules.
  size_t try_predicted_writes(std::span<const wire::PredictedWrite> ws);
  // Asks for the lines the QP's next turn to send will read (see qp.cc).
  void prefetch_for_send() const;
  size_t produce(uint64_t now, std::span<uint8_t> buf);
  // produce() for several frames in a row, the shape of the endpoint's
  // transmit loop: begin_burst(), produce_in_burst() per frame (the
  // caller's bookkeeping in between, nothing else on the QP), end_burst().
  // Request frames written from the QP's send template leave their ICRCs
  // to `icrc`, which the caller flushes before the frames leave; nullptr
  // computes them at once. Each frame is what produce() would have made.
  void begin_burst(wire::IcrcBatch* icrc) {
    take_posted();
    icrc_batch_ = icrc;
  }
  size_t produce_in_burst(uint64_t now, std::span<uint8_t> buf) {
    return cq_error_ ? 0 : produce_frame(now, buf);
  }
  void end_burst() {
    icrc_batch_ = nullptr;
    end_of_call();
  }
  // Within a burst: the next new SEND/RDMA WRITE packets of the QP, as many
  // in a row as fit `bufs` (one frame each, lengths into `lens`) and
  // congestion control admits, built from the send template with their
  // ICRCs left to the burst's batch (requester_run.cc). 0 when the next
  // frame is not one of those (then produce_in_burst makes it): the same
  // frames and state as produce_in_burst frame by frame.
  size_t produce_run(uint64_t now, std::span<const std::span<uint8_t>> bufs, uint32_t* lens);
  bool has_work(uint64_t now) const;
  uint64_t next_deadline() const;
  void on_timer(uint64_t now);

  // Introspection (tests, stats).
  uint32_t next_send_psn() const { return next_psn_; }
  uint32_t expected_psn() const { return epsn_; }
  uint32_t msn() const { return msn_; }
  uint32_t send_queue_depth() const;
  uint32_t recv_queue_depth() const;
  uint32_t responses_queued() const { return resp_count_; }
  // Bytes of the work queues (send slots with their extra SGEs, UD
  // destinations and inline room; receive slots): what the capabilities
  // cost, apart from the QP's own state.
  size_t queue_bytes() const;
  uint32_t mtu() const { return mtu_; }
  // One line of requester/responder state for logs and test failures.
  std::string debug_state() const;

 private:
  // ---- qp.cc
  // States whose QP takes packets at all (on_packet; IBA 10.3.1).
  bool receives() const {
    return state_ != QpState::kReset && state_ != QpState::kInit && state_ != QpState::kErr;
  }
  // The packet's IP addresses are those of the QP's connection (RC, UC)
  // or, for UD, its destination is the QP's own address (on_packet).
  bool from_connection(const wire::ParsedPacket& pkt) const;
  void enter_error();
  // post_send's per-WR part: checks `wr`, writes slot `tail` unpublished.
  int write_send_wqe(const SendWr& wr, uint64_t tail);
  // A completion did not fit its CQ: the QP goes to ERR at the end of the
  // call that made it (IBA 11.6.2: CQ overflow is an affiliated error of
  // the QPs feeding it).
  void push_completion(CompletionQueue* cq, const WorkCompletion& wc);
  void end_of_call();
  void set_state(QpState s) {
    state_ = s;
    shared_state_.store(s, std::memory_order_release);
  }
  // Ring indices the data path publishes for posters (free slots).
  // Stored only when moved: a store takes the line from a poster's core.
  void publish_heads() {
    if (sq_retired_.load(std::memory_order_relaxed) != sq_head_)
      sq_retired_.store(sq_head_, std::memory_order_release);
    if (rq_retired_.load(std::memory_order_relaxed) != rq_head_)
      rq_retired_.store(rq_head_, std::memory_order_release);
  }
  // The receive WQE a message that needs one uses: the head of the QP's
  // own queue, or one taken from its SRQ and kept until the message ends.
  // nullptr when none is posted (RNR).
  const RecvWqe* recv_wqe();
  void consume_recv_wqe();
  bool recv_wqe_available() { return recv_wqe() != nullptr; }
  void make_templates();
  void flush_all();
  void complete_send(SendWqe& w, ibv_wc_status status);
  void complete_recv(const RecvWqe& w, ibv_wc_status status, ibv_wc_opcode op,
                     uint32_t byte_len, unsigned flags, uint32_t imm,
                     uint32_t inv_rkey, uint32_t src_qp, bool solicited = false,
                     uint8_t sl = 0);
  void dispatch_packet(const wire::ParsedPacket& pkt, uint64_t now);
  size_t produce_frame(uint64_t now, std::span<uint8_t> buf);
  bool gather(const SendWqe& w, uint64_t off, uint32_t len, uint8_t* dst, bool* unheld) const;
  bool scatter(const RecvWqe& w, uint64_t offset, const uint8_t* src, uint32_t len) const;
  bool scatter_sges(const Sge* sge, uint32_t n, uint64_t offset, const uint8_t* src,
                    uint32_t len) const;
  AccessCheck check_remote(uint32_t rkey, uint64_t va, uint64_t len, uint32_t access,
                           const MemoryRegion** mr) const;
  size_t build(const wire::TransportSpec& t, std::span<const uint8_t> payload,
               std::span<uint8_t> buf, const wire::PathSpec* path = nullptr);
  // A SEND or WRITE packet of `w` from the send template: headers written,
  // `len` payload bytes from offset `off` gathered in place (or unheld),
  // the ICRC left to icrc_batch_ or computed. *ok false: buffer vanished.
  wire::TxRequest send_write_fields(const SendWqe& w, uint32_t k, bool ask_ack, uint32_t* len,
                                    uint64_t* off) const;
  size_t build_templated(const SendWqe& w, const wire::TxRequest& r, uint64_t off,
                         uint32_t len, std::span<uint8_t> buf, bool* ok, uint64_t now);

  // ---- qp_rings.cc
  // The work queues' rings, empty, as caps_ says.
  void make_queues();
  static bool ring_has_room(uint64_t tail, uint64_t& seen, const std::atomic<uint64_t>& retired,
                            uint32_t depth);

  // ---- requester_run.cc
  bool run_may_start() const;
  SendWqe* run_wqe();

  // ---- requester.cc
  size_t produce_request(uint64_t now, std::span<uint8_t> buf);
  bool requester_has_work() const;
  bool can_start(const SendWqe& w) const;
  void start_wqe(SendWqe& w);
  // `ask_ack`: the packet carries AckReq whatever wants_ack says (it fills
  // the CC window, CcHooks::fills_window, or ack_req_interval_ns is up).
  size_t build_request(SendWqe& w, uint32_t k, bool ask_ack, std::span<uint8_t> buf,
                       bool* ok, uint64_t now);
  // Asks congestion control for `bytes`, then builds packet k of the WQE at
  // `index`; 0 when CC says "not now", the buffer is too small, or the local
  // buffer vanished (the WQE then fails with LOC_PROT_ERR).
  // `resend`: needs no window room (CcHooks::on_send); `timed`: the RTT sample's packet.
  size_t gated_request(uint64_t index, uint32_t k, uint32_t bytes, uint64_t now,
                       std::span<uint8_t> buf, bool resend, bool timed = false);
  void advance_cursor_after(const SendWqe& w, uint32_t k);
  void rewind_to(uint32_t psn);
  uint32_t resume_psn() const;  // first PSN not yet acknowledged
  bool find_psn(uint32_t psn, uint64_t* index, uint32_t* k) const;
  void arm_timer(uint64_t now);
  uint64_t ack_deadline() const;  // 0: disarmed; RTO_low or RTO_high
  uint32_t sr_in_flight() const;
  void requester_timer(uint64_t now);
  void sr_resend_all();
  bool wants_ack(const SendWqe& w, uint32_t k) const;
  size_t produce_sack_hole(uint64_t now, std::span<uint8_t> buf, bool* sent);

  // ---- completer.cc
  void on_response(const wire::ParsedPacket& pkt, uint64_t now);
  bool ack_up_to(uint32_t psn, uint64_t now);  // false: ghost / stale
  void retire(uint64_t now);
  void on_read_response(const wire::ParsedPacket& pkt, uint64_t now);
  void on_atomic_ack(const wire::ParsedPacket& pkt, uint64_t now);
  void on_nak(const wire::ParsedPacket& pkt, uint64_t now);
  void fail_head(uint32_t psn, ibv_wc_status status);
  void fail_wqe(uint64_t index, ibv_wc_status status);
  bool reject(const wire::ParsedPacket& pkt, wire::NakCode code, bool uc);
  void sack_mark(uint32_t psn);
  uint8_t sack_state(uint32_t psn) const;  // kSack* below
  bool sacked(uint32_t psn) const { return sack_state(psn) == kSackReceived; }
  // Forgets the marks of [from, to], which an ACK at `now` covered: how many were SACKed.
  uint32_t clear_sacks_through(uint32_t from, uint32_t to, uint64_t now);
  void sr_note_resent(uint32_t psn);
  // Selective repeat: a hole episode starts at `first_missing`, or the one
  // under way grows, to resend the holes below `high`.
  void sr_extend_recovery(uint32_t first_missing, uint32_t high);

  // ---- requester_rack.cc: selective repeat's record of each send (its
  // time and entropy path), for time-based loss detection (RFC 8985) and
  // path-aware entropy.
  // At RTS: the window (QpAttr::sr_reorder_window_ns), the tail loss
  // probe and the record they and path-aware entropy need; a new
  // connection forgets what was delivered.
  void sr_configure_send_record(uint64_t window_ns, uint64_t window_min_ns, bool tail_probe);
  // The reorder window in force (QpAttr::sr_reorder_window_min_ns).
  uint64_t reorder_window() const;
  // A resent hole delivered at `now`: the resend was spurious if this is
  // too soon to be its answer; then the window grows.
  void rack_check_spurious(uint32_t psn, uint64_t now);
  void rack_restart();
  // A request packet for `psn` (and the `span` - 1 after it, a READ's)
  // left for the first time at `now`.
  void sr_note_first_send(uint32_t psn, uint32_t span, uint64_t now);
  // The UDP source port of request `psn` sent at `now` (entropy.h),
  // remembering its path for path-aware entropy.
  uint16_t request_port(uint32_t psn, uint64_t now);
  // `psn` was delivered (SACKed, or the PSN an ACK names) at `now`; only
  // a packet neither SACKed before nor resent (which copy arrived is then
  // unknown, RFC 8985 6.2) gives a round trip.
  void sr_delivered(uint32_t psn, uint64_t now);
  // Hole `psn` is about to be resent: its last copy is taken for lost.
  void sr_note_lost(uint32_t psn, uint64_t now);
  // Marks lost the holes RACK's rule finds and arms the reorder timer for
  // the next one that may become lost (rack_deadline_).
  void rack_detect(uint64_t now);
  bool rack_on() const { return attr_.sr_reorder_window_ns != 0 && !sr_sent_ns_.empty(); }
  // Hole `psn` was resent at `now`: rack_detect walks the holes again
  // once that resend is lost by RACK's rule ...
  void rack_note_resend(uint32_t psn, uint64_t now);
  // ... and the walk asks: lost (true), or not yet (then it re-arms that
  // walk for this resend).
  bool rack_resend_lost(uint32_t psn, uint64_t now);
  void rack_arm_rewalk(uint64_t resent_ns);
  // The tail loss probe's deadline (0: none due), an answer that restarts
  // it, and the probe itself (produce_request sends it before any hole).
  uint64_t tail_probe_deadline() const;
  void tail_probe_answered(uint64_t now);
  size_t produce_tail_probe(uint64_t now, std::span<uint8_t> buf);

  // ---- responder.cc, responder_*.cc (the steps: responder_steps.h)
  void on_request(const wire::ParsedPacket& pkt, uint64_t now);
  void on_request_ud(const wire::ParsedPacket& pkt);  // responder_send.cc
  void on_request_uc(const wire::ParsedPacket& pkt);
  // Executes the in-order request at epsn_ step by step: validate, execute
  // by opcode family, answer. Returns false when it was NAKed/RNR-NAKed or
  // dropped (epsn_ not advanced).
  bool execute(const wire::ParsedPacket& pkt, bool uc);
  ResponderVerdict validate_request(const wire::ParsedPacket& pkt, bool uc);
  ResponderVerdict execute_send(const wire::ParsedPacket& pkt);    // responder_send.cc
  ResponderVerdict execute_write(const wire::ParsedPacket& pkt);   // responder_write.cc
  ResponderVerdict execute_read(const wire::ParsedPacket& pkt);    // responder_read.cc
  ResponderVerdict execute_atomic(const wire::ParsedPacket& pkt);  // responder_atomic.cc
  bool answer(const wire::ParsedPacket& pkt, ResponderVerdict v, bool uc);
  // Duplicate READs and atomics (responder_read.cc, responder_atomic.cc).
  void replay_read(const wire::ParsedPacket& pkt);
  void replay_atomic(const wire::ParsedPacket& pkt);
  // The end of every executed request: the expected PSN moves on and an RC
  // QP queues an ACK when one is due (coalesced, IBA 9.7.5.1.2).
  void advance_after_request(uint32_t psn, bool ack_req, bool uc);
  // Pieces of execute() the predicted path (try_predicted_write) uses too, so
  // both apply the same rules and leave the same state.
  bool room_for_answer() const { return resp_count_ + 2 <= resp_limit_; }
  std::optional<wire::NakCode> check_reth_of(uint32_t access, uint32_t rkey, uint64_t va,
                                             uint32_t dma_length,
                                             const MemoryRegion** checked) const;
  bool in_sequence(wire::Operation op, wire::Position pos) const;
  bool legal_payload_length(wire::Position pos, uint32_t len) const;
  // A WRITE message starts (FIRST/ONLY, its RETH checked), a packet of it is
  // placed at `offset` (into the region the access check returned), it ends
  // (LAST/ONLY: the MSN moves on).
  void start_write(uint32_t psn, uint64_t va, uint32_t length, uint32_t rkey);
  uint64_t write_offset(uint32_t psn) const;
  static bool write_fits(uint64_t offset, uint32_t len, uint64_t length, bool last);
  void place_write(const MemoryRegion& mr, uint64_t offset, const uint8_t* src, uint32_t len);
  void prefetch_next_packet(const MemoryRegion& mr, uint64_t offset, uint32_t len);
  void finish_write();
  // try_predicted_write for the packet position kPos; for FIRST, MIDDLE
  // and LAST (not inlined: see try_predicted_write).
  template <wire::Position kPos>
  bool try_write_packet(const wire::PredictedWrite& w);
  [[gnu::noinline]] bool try_message_packet(const wire::PredictedWrite& w);
  // try_write_packet<kOnly> over the WRITE ONLY packets that start `ws`.
  size_t try_write_only_run(std::span<const wire::PredictedWrite> ws);
  void on_duplicate(const wire::ParsedPacket& pkt);
  void on_out_of_order(const wire::ParsedPacket& pkt);
  bool sr_accept(const wire::ParsedPacket& pkt);  // responder_selective_repeat.cc
  bool sr_placed(uint32_t psn) const;             // an out-of-order packet placed already
  OooImmediate* claim_ooo_immediate();
  bool sr_complete_immediate();
  void sr_advance();
  Response* push_response();
  // The last queued response if it is an ACK (a new ACK coalesces into it).
  Response* tail_ack();
  void queue_ack(uint32_t psn);
  void queue_nak(uint32_t psn, wire::NakCode code, uint32_t msn_field, bool fatal);
  void queue_rnr_nak(uint32_t psn);
  size_t produce_response(uint64_t now, std::span<uint8_t> buf);
  size_t produce_read_response(uint64_t now, Response& r, std::span<uint8_t> buf);
  wire::TransportSpec response_spec(const Response& r) const;
  void pop_response();
  bool write_context_live(const WriteContext& c, uint32_t epsn) const;
  WriteContext* find_write_context(uint32_t psn);
  WriteContext* alloc_write_context();  // nullptr: every context is live
  void retire_write_contexts(uint32_t epsn);

  // ---- notification_point.cc
  void maybe_cnp(const wire::ParsedPacket& pkt, uint64_t now);
  size_t produce_cnp(std::span<uint8_t> buf);

  // ---- qp_credits.cc: end-to-end credits (IBA 9.7.7.2)
  // The AETH syndrome of an ACK, its credit field counting the receive
  // queue; may the unstarted WQE `w` start; an accepted ACK's credits.
  uint8_t ack_syndrome() const;
  bool credits_allow(const SendWqe& w) const;
  void note_credits(const wire::ParsedPacket& pkt);

  Device& device_;
  const uint32_t qpn_;
  const QpType type_;
  ProtectionDomain* pd_;
  CompletionQueue* send_cq_;
  CompletionQueue* recv_cq_;
  SharedReceiveQueue* srq_;
  QpCaps caps_;  // its depths change only by resize_queues
  const bool sq_sig_all_;
  QpState state_ = QpState::kReset;
  std::atomic<QpState> shared_state_{QpState::kReset};
  uint32_t mtu_ = 1024;  // (a UD post checks its length)
  // Send queue: a ring whose counters only grow; slot = counter & sq_mask_
  // (max_send_wr rounded up to a power of two; post_send holds it to that).
  ZeroedArray<SendWqe> sq_;
  uint64_t sq_mask_ = 0;
  SendWqe& sq_at(uint64_t i) { return sq_[i & sq_mask_]; }
  const SendWqe& sq_at(uint64_t i) const { return sq_[i & sq_mask_]; }
  // Every SGE of a WQE with more than one, max_send_sge per slot (the first
  // is in the WQE itself), and UD WQEs' destinations, per slot.
  ZeroedArray<Sge> sge_more_;
  ZeroedArray<UdDest> ud_dest_;
  // Inline payloads, max_inline_data bytes per send queue slot.
  ZeroedArray<uint8_t> inline_;
  // Receive queue (unused with an SRQ), a ring like sq_.
  ZeroedArray<RecvWqe> rq_;
  uint64_t rq_mask_ = 0;
  RecvWqe& rq_at(uint64_t i) { return rq_[i & rq_mask_]; }
  // ---- Up to here: what posters read, on lines the data path never writes
  // (docs/ENGINE.md, "Who writes which line").
  alignas(64) bool cq_error_ = false;  // a completion did not fit: to ERR (end_of_call)
  QpAttr attr_;
  QpHotCounters counters_;
  std::unique_ptr<QpRareCounters> rare_counters_;  // allocated at the first rare event
  QpRareCounters& rare_counters() {
    if (!rare_counters_) rare_counters_ = std::make_unique<QpRareCounters>();
    return *rare_counters_;
  }
  const CcHooks* cc_ = &kNoCcHooks;
  void* cc_ctx_ = nullptr;
  wire::RxTemplate rx_template_;
  wire::AckTemplate ack_template_;  // RC: this QP's ACK/NAK frame, set at RTR
  wire::TxTemplate tx_template_;    // RC, UC: its request headers, set at RTR

  size_t slot_of(const SendWqe& w) const { return static_cast<size_t>(&w - sq_.data()); }
  const Sge* sges(const SendWqe& w) const {
    return w.num_sge <= 1 ? &w.sge0 : &sge_more_[slot_of(w) * caps_.max_send_sge];
  }
  const UdDest& ud_dest(const SendWqe& w) const { return ud_dest_[slot_of(w)]; }
  uint64_t sq_head_ = 0;  // oldest WQE not yet completed
  uint64_t sq_send_ = 0;  // WQE holding the next packet to send
  uint64_t sq_tail_ = 0;  // one past the newest WQE the data path took
  wire::IcrcBatch* icrc_batch_ = nullptr;  // during a burst (begin_burst)
  uint32_t send_pkt_ = 0; // packet index in sq_[sq_send_]
  CreditLimit credits_;  // what the responder's ACKs said
  uint32_t ssn_ = 0;     // number of the newest message started (24 bits)
  uint32_t next_psn_ = 0; // PSN for the next WQE to start
  uint32_t send_high_ = 0;  // one past the highest PSN ever sent
  uint32_t acked_psn_ = 0;  // last PSN acknowledged (cumulative)
  uint32_t outstanding_rd_atomic_ = 0;
  uint8_t retry_left_ = 7;
  uint8_t rnr_retry_left_ = 7;
  // (The flags sit together where they fill the padding of their
  // neighbours: a QP's size is what a million idle QPs cost.)
  uint8_t rto_low_fired_ = 0;  // RTO_lows since the last progress (backoff)
  enum : uint8_t { kCcHoldNone, kCcHoldWatch, kCcHeld } cc_hold_ = kCcHoldNone;  // requester_timer
  bool sr_recovery_ = false;
  uint64_t timer_deadline_ = 0;  // RTO_high; 0: disarmed
  uint64_t rto_low_from_ns_ = 0; // RTO_low counts from progress or a resend
  uint64_t rnr_wait_until_ = 0;  // 0: not waiting
  uint32_t rnr_psn_ = 0;
  uint32_t read_gap_psn_ = 0;
  bool read_gap_reissued_ = false;
  // RTT sampling: one AckReq packet in flight at a time.
  bool rtt_probe_ = false;
  uint32_t rtt_psn_ = 0;
  uint64_t rtt_sent_ns_ = 0;
  // Selective repeat, requester side.
  static constexpr uint8_t kSackNone = 0;      // not known to be received
  static constexpr uint8_t kSackReceived = 1;  // SACKed
  static constexpr uint8_t kSackResent = 2;    // resent as a hole, mark valid
  std::vector<uint8_t> sack_;      // kSack*, indexed by psn % size
  std::vector<uint32_t> sr_mark_;  // kSackResent: send_high_ when resent
  uint32_t sack_count_ = 0;        // PSNs in sack_ marked kSackReceived
  uint32_t sr_sack_high_ = 0;      // highest PSN ever SACKed (or acked)
  bool sr_rewalk_armed_ = false;   // a resent hole waits for evidence ...
  uint32_t sr_rewalk_at_ = 0;      // ... a SACK at or above this PSN
  bool tail_ack_req_ = false;      // PSN send_high_ - 1 carried AckReq
  bool built_ack_req_ = false;     // the request build_request wrote last did
  bool force_ack_req_ = false;     // gated_request: this one asks (a tail probe)
  uint64_t last_ack_req_ns_ = UINT64_MAX;  // a new request last asked (none yet)
  EntropySource entropy_;          // UDP source ports of request packets
  uint32_t reorder_depth_max_ = 0;  // responder: furthest PSN ahead of epsn_ seen
  // Selective repeat's send record (requester_rack.cc): the first-send
  // time of each PSN in the window (rising with the PSN), each resent
  // hole's last resend and, for path-aware entropy, each PSN's path. RACK:
  // the newest first-send time among delivered packets and that packet's
  // round trip, the PSN below which every hole is lost by time, and the
  // reorder timer (0: none).
  std::vector<uint64_t> sr_sent_ns_;    // indexed by psn % sack_window
  std::vector<uint64_t> sr_resent_ns_;  // a resent hole's last resend
  std::vector<uint16_t> sr_path_;       // path-aware: entropy index of the last send
  uint64_t rack_xmit_ns_ = 0;
  uint64_t rack_rtt_ns_ = 0;
  uint64_t rack_deadline_ = 0;
  uint64_t rack_rewalk_ns_ = 0;       // oldest resend skipped as not yet lost
  uint32_t rack_high_ = 0;
  bool rack_rewalk_armed_ = false;
  bool rack_valid_ = false;           // something was delivered
  // Tail loss probe (QpAttr::sr_tail_probe): due at tlp_from_ns_ (the last
  // first send or answer) plus two smoothed round trips of first sends.
  bool tlp_pending_ = false;  // due: produce_request sends it next
  bool tlp_sent_ = false;     // one out; no other before an answer
  uint64_t tlp_from_ns_ = 0;
  uint64_t sr_srtt_ns_ = 0;    // 0: no round trip measured yet
  // The adaptive reorder window (QpAttr::sr_reorder_window_min_ns), the
  // smallest round trip of a first send, when the window last grew, and
  // the RACK rounds left before it is back at its floor.
  uint64_t reo_wnd_ns_ = 0;
  uint64_t sr_min_rtt_ns_ = 0;
  uint64_t reo_grown_ns_ = 0;
  uint8_t reo_persist_ = 0;
  uint32_t sr_cursor_ = 0;     // next PSN to consider resending
  uint32_t sr_high_ = 0;       // resend holes below this PSN
  uint32_t sr_point_ = 0;      // episode ends when everything below is acked

  // Receive queue progress (its ring is above, with what posters read).
  uint64_t rq_head_ = 0;
  uint64_t rq_tail_ = 0;
  // SRQ: the WQE the message in progress (or the next) uses.
  std::unique_ptr<RecvWqe> srq_wqe_;  // see atomic_cache_
  bool have_srq_wqe_ = false;

  // Shared with posters (post_send/post_recv), on cache lines of their own:
  // what they published and what the data path has retired.
  alignas(64) std::atomic<uint64_t> sq_posted_{0};
  std::atomic<uint64_t> rq_posted_{0};
  uint64_t sq_retired_seen_ = 0;  // the posters' copies (ring_has_room)
  uint64_t rq_retired_seen_ = 0;
  alignas(64) std::atomic<uint64_t> sq_retired_{0};
  std::atomic<uint64_t> rq_retired_{0};

  // Responder.
  uint32_t epsn_ = 0;
  uint32_t msn_ = 0;
  enum class InMsg : uint8_t { kNone, kSend, kWrite };
  InMsg in_msg_ = InMsg::kNone;
  uint64_t recv_offset_ = 0;         // SEND: bytes placed in rq_[rq_head_]
  bool recv_failed_ = false;
  uint32_t write_first_psn_ = 0;     // WRITE in progress
  uint64_t write_va_ = 0;
  uint32_t write_length_ = 0;
  uint32_t write_rkey_ = 0;
  bool nak_seq_sent_ = false;        // one NAK per gap (IBA 9.7.5.2.1)
  uint32_t unacked_ = 0;
  // The answers to send, a ring whose size is a power of two. Its first
  // entry lives in the QP: most QPs only ever queue a coalesced ACK, and
  // with many QPs an answer ring of its own was one more line from memory
  // per packet. It grows on the heap, on demand, up to resp_limit_
  // entries (an idle QP's memory should not be its answer ring).
  Response resp_first_;
  std::unique_ptr<Response[]> resp_grown_;
  Response* resp_ = &resp_first_;
  uint32_t resp_size_ = 1;
  Response& resp_at(uint32_t i) { return resp_[i & (resp_size_ - 1)]; }
  bool grow_responses();
  uint32_t resp_head_ = 0;
  uint32_t resp_count_ = 0;
  uint32_t resp_limit_ = 0;
  // Allocated when first needed (an atomic executed, an SRQ WQE taken, an
  // out-of-order WRITE placed): most QPs never use them.
  std::unique_ptr<std::array<AtomicCacheEntry, kAtomicCacheSize>> atomic_cache_;
  uint32_t atomic_cache_next_ = 0;
  bool responder_fatal_ = false;     // a fatal NAK is queued: stop executing
  // Selective repeat, responder side: opcode+1 of out-of-order packets
  // already placed, indexed by psn % sack_window.
  std::vector<uint8_t> ooo_;
  // WRITE contexts (RETH) of messages the expected PSN has not yet passed.
  std::unique_ptr<std::array<WriteContext, kWriteContexts>> write_ctx_;
  // Immediates of WRITEs whose last packet was placed out of order.
  std::unique_ptr<std::array<OooImmediate, kOooImmediates>> ooo_imm_;

  // DCQCN NP.
  bool cnp_pending_ = false;
  bool cnp_sent_once_ = false;
  uint64_t last_cnp_ns_ = 0;
};

}  // namespace droce::transport
