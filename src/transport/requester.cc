// Requester: turns send WQEs into request packets (IBA 9.7.4 "Requester
// side", 9.7.6 retransmission): PSN assignment, segmentation by path MTU,
// AckReq policy, outstanding-request limits, go-back-N and selective-repeat
// retransmission, the local ACK timer and RNR waits.
#include <algorithm>
#include <cstdio>

#include "droce/transport/qp.h"
#include "droce/transport/requester.h"
#include "droce/wire/bytes.h"
#include "droce/wire/psn.h"

namespace droce::transport {

namespace {
bool unstarted_or(const SendWqe& w) { return !w.started; }
}  // namespace

uint32_t QueuePair::resume_psn() const {
  if (sq_head_ == sq_tail_) return next_psn_;
  const SendWqe& w = sq_at(sq_head_);
  if (unstarted_or(w)) return next_psn_;
  if (w.is_read_or_atomic()) return wire::psn_add(w.first_psn, w.resp_received);
  const uint32_t after_ack = wire::psn_add(acked_psn_, 1);
  return wire::psn_gt(after_ack, w.first_psn) ? after_ack : w.first_psn;
}

bool QueuePair::find_psn(uint32_t psn, uint64_t* index, uint32_t* k) const {
  for (uint64_t i = sq_head_; i != sq_tail_; ++i) {
    const SendWqe& w = sq_at(i);
    if (!w.started) break;
    const uint32_t d = wire::psn_distance(w.first_psn, psn);
    if (d < w.npkts) {
      *index = i;
      *k = d;
      return true;
    }
  }
  return false;
}

// Go back to `psn` (IBA 9.7.6.2: retransmit starting from the first
// unacknowledged packet).
void QueuePair::rewind_to(uint32_t psn) {
  uint64_t idx;
  uint32_t k;
  if (find_psn(psn, &idx, &k)) {
    SendWqe& w = sq_at(idx);
    sq_send_ = idx;
    send_pkt_ = w.is_atomic() ? 0 : k;
  } else {
    uint64_t i = sq_head_;
    while (i != sq_tail_ && sq_at(i).started) ++i;
    sq_send_ = i;
    send_pkt_ = 0;
  }
  rtt_probe_ = false;  // Karn: retransmissions give no RTT sample
}

bool QueuePair::can_start(const SendWqe& w) const {
  if (state_ != QpState::kRts) return false;  // SQD: drain, start nothing new
  if (type_ != QpType::kRc) return true;
  if (w.is_read_or_atomic() && outstanding_rd_atomic_ >= attr_.max_rd_atomic) return false;
  // IBV_SEND_FENCE (IBA 10.8.3.3): wait for earlier READ/atomics.
  if ((w.send_flags & IBV_SEND_FENCE) && outstanding_rd_atomic_ > 0) return false;
  return credits_allow(w);  // IBA 9.7.7.2 (qp_credits.cc)
}

void QueuePair::start_wqe(SendWqe& w) {
  w.started = true;
  w.first_psn = next_psn_;
  if (w.is_atomic() || type_ == QpType::kUd)
    w.npkts = 1;
  else
    w.npkts = w.length <= mtu_ ? 1 : (w.length + mtu_ - 1) / mtu_;
  next_psn_ = wire::psn_add(next_psn_, w.npkts);
  ssn_ = wire::psn_add(ssn_, 1);
  if (w.is_read_or_atomic()) ++outstanding_rd_atomic_;
}

bool QueuePair::requester_has_work() const {
  if (rnr_wait_until_) return false;
  if (tlp_pending_) return true;
  if (sr_recovery_ && wire::psn_lt(sr_cursor_, sr_high_)) return true;
  for (uint64_t i = sq_send_; i != sq_tail_; ++i) {
    const SendWqe& w = sq_at(i);
    if (!w.started) return can_start(w);
    if (w.is_read_or_atomic() && w.done) continue;
    if (type_ == QpType::kRc && !w.is_read_or_atomic() &&
        wire::psn_le(w.last_psn(), acked_psn_) && wire::psn_ge(acked_psn_, w.first_psn))
      continue;
    return true;
  }
  return false;
}

void QueuePair::arm_timer(uint64_t now) {
  const uint64_t t = ack_timeout_ns(attr_.timeout);
  timer_deadline_ = t ? now + t : 0;
  rto_low_from_ns_ = now;
}

// Packets sent and neither acknowledged nor selectively acknowledged.
uint32_t QueuePair::sr_in_flight() const {
  const uint32_t unacked = wire::psn_distance(acked_psn_, send_high_) - 1;
  return unacked > sack_count_ ? unacked - sack_count_ : 0;
}

// The retransmission deadline: the IBA local ACK timer (9.7.6.1.3), or for
// selective repeat IRN's RTO_low (§3.1) when few packets are in flight.
// RTO_low needs an answer to be due: the newest packet asked for one
// (AckReq) or was already SACKed (then any resent hole is answered: an
// in-order one by the ACK of the walk over placed packets, an out-of-order
// one by a SACK NAK). Without that, a slow sender's packets may wait for a
// later AckReq legitimately. Evaluated on every call, so the deadline
// moves as SACKs arrive (the endpoint re-reads it after each packet).
uint64_t QueuePair::ack_deadline() const {
  if (!timer_deadline_ || attr_.recovery != Recovery::kSelectiveRepeat || !attr_.sr_rto_low_ns)
    return timer_deadline_;
  if (!tail_ack_req_ && !sacked(wire::psn_add(send_high_, wire::kPsnMask)))
    return timer_deadline_;
  if (sr_in_flight() > attr_.sr_rto_low_threshold_pkts) return timer_deadline_;
  const uint64_t rto_low = attr_.sr_rto_low_ns << std::min<uint32_t>(rto_low_fired_, 16);
  if (rto_low >= ack_timeout_ns(attr_.timeout)) return timer_deadline_;
  return std::min(timer_deadline_, rto_low_from_ns_ + rto_low);
}

// AckReq (IBA 9.7.4.1): READ and atomics always; otherwise on the last
// packet of every message, and every ack_req_every_n packets so long
// messages make progress.
bool QueuePair::wants_ack(const SendWqe& w, uint32_t k) const {
  if (type_ != QpType::kRc) return false;
  if (w.is_read_or_atomic()) return true;
  return k + 1 == w.npkts || (attr_.ack_req_every_n && (k + 1) % attr_.ack_req_every_n == 0);
}

// Packet k of a SEND or RDMA WRITE WQE: its opcode (IBA 9.2.1 table 38,
// the low five bits per position; UD sends are ONLY), the RETH on the
// first packet of a WRITE, ImmDt or IETH on the last, AckReq; `len` bytes
// of payload from offset `off` of the message.
wire::TxRequest QueuePair::send_write_fields(const SendWqe& w, uint32_t k, bool ask_ack,
                                             uint32_t* len, uint64_t* off) const {
  const bool first = k == 0;
  const bool last = k + 1 == w.npkts;
  *off = uint64_t{k} * mtu_;
  *len = static_cast<uint32_t>(std::min<uint64_t>(mtu_, w.length - *off));
  const bool write = w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  const bool imm = w.opcode == IBV_WR_SEND_WITH_IMM || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  uint8_t code;
  if (first && last) code = write ? (imm ? 0x0b : 0x0a) : (imm ? 0x05 : 0x04);
  else if (first) code = write ? 0x06 : 0x00;
  else if (last) code = write ? (imm ? 0x09 : 0x08) : (imm ? 0x03 : 0x02);
  else code = write ? 0x07 : 0x01;
  wire::TxRequest r;
  if (w.opcode == IBV_WR_SEND_WITH_INV && last) {
    code = first ? wire::kOpRcSendOnlyWithInvalidate : wire::kOpRcSendLastWithInvalidate;
    r.ieth_rkey = w.invalidate_rkey;
  }
  if (write && !(first && last) && attr_.write_reth_every_packet) {
    // A WRITE ONLY of this packet's slice (QpAttr::write_reth_every_packet).
    code = imm && last ? 0x0b : 0x0a;
    r.reth_va = w.remote_addr + *off;
    r.reth_rkey = w.rkey;
    r.reth_dma_length = *len;
  } else if (write && first) {
    r.reth_va = w.remote_addr;
    r.reth_rkey = w.rkey;
    r.reth_dma_length = w.length;
  }
  if (type_ == QpType::kUd)
    r.opcode = imm ? IBV_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE : IBV_OPCODE_UD_SEND_ONLY;
  else
    r.opcode = static_cast<uint8_t>((type_ == QpType::kUc ? IBV_OPCODE_UC : IBV_OPCODE_RC) | code);
  if (imm) r.imm_data = w.imm_data;
  r.solicited = last && (w.send_flags & IBV_SEND_SOLICITED);
  r.ack_req = wants_ack(w, k) || (type_ == QpType::kRc && ask_ack);
  r.psn = wire::psn_add(w.first_psn, k);
  return r;
}

size_t QueuePair::build_request(SendWqe& w, uint32_t k, bool ask_ack,
                                std::span<uint8_t> buf, bool* ok, uint64_t now) {
  *ok = true;
  if (!w.is_read_or_atomic()) {
    uint32_t len;
    uint64_t off;
    const wire::TxRequest r = send_write_fields(w, k, ask_ack, &len, &off);
    built_ack_req_ = r.ack_req;
    if (type_ != QpType::kUd && tx_template_.valid())
      return build_templated(w, r, off, len, buf, ok, now);
    // UD: the WR's own destination, through build_packet.
    const UdDest& ud = ud_dest(w);
    wire::TransportSpec t;
    t.opcode = r.opcode;
    t.dest_qp = ud.remote_qpn;
    t.pkey = attr_.pkey;
    t.psn = r.psn;
    t.solicited = r.solicited;
    t.imm_data = r.imm_data;
    t.deth_qkey = ud.remote_qkey;
    t.deth_src_qp = qpn_;
    // Gathered straight into the frame where build_packet puts the payload
    // (it then copies nothing); a frame that would not fit is not built.
    if (wire::packet_size(ud.path, t.opcode, len) > buf.size()) return 0;
    uint8_t* dst = buf.data() + wire::payload_offset(ud.path, t.opcode);
    bool unheld;  // UD frames take the bytes as they are
    if (len > 0 && !gather(w, off, len, dst, &unheld)) {
      *ok = false;
      return 0;
    }
    return build(t, {dst, len}, buf, &ud.path);
  }
  wire::TransportSpec t;
  t.dest_qp = attr_.dest_qpn;
  t.pkey = attr_.pkey;
  t.psn = wire::psn_add(w.first_psn, k);
  t.ack_req = true;
  if (w.opcode == IBV_WR_RDMA_READ) {
    // A re-issued READ asks only for what is missing (IBA 9.7.6.2).
    const uint64_t off = uint64_t{k} * mtu_;
    t.opcode = IBV_OPCODE_RC_RDMA_READ_REQUEST;
    t.reth_va = w.remote_addr + off;
    t.reth_rkey = w.rkey;
    t.reth_dma_length = static_cast<uint32_t>(w.length - std::min<uint64_t>(off, w.length));
  } else {
    t.opcode = w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? IBV_OPCODE_RC_COMPARE_SWAP
                                                     : IBV_OPCODE_RC_FETCH_ADD;
    t.atomic_va = w.remote_addr;
    t.atomic_rkey = w.rkey;
    if (w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
      t.atomic_compare = w.compare_add;
      t.atomic_swap_add = w.swap;
    } else {
      t.atomic_swap_add = w.compare_add;
    }
  }
  built_ack_req_ = true;
  if (attr_.entropy.mode != EntropyMode::kFixed) {
    wire::PathSpec path = attr_.path;
    path.udp_src_port = request_port(t.psn, now);
    return build(t, {}, buf, &path);
  }
  return build(t, {}, buf);
}

size_t QueuePair::build_templated(const SendWqe& w, const wire::TxRequest& r, uint64_t off,
                                  uint32_t len, std::span<uint8_t> buf, bool* ok,
                                  uint64_t now) {
  wire::IcrcCheck icrc;
  const size_t n = wire::write_request(tx_template_, r, len, buf, &icrc);
  if (n == 0) return 0;
  // The UDP source port (RoCEv2 annex A17.4.3: the sender's choice), before
  // the ICRC, which covers it.
  if (attr_.entropy.mode != EntropyMode::kFixed && type_ != QpType::kUd)
    wire::store_be16(buf.data() + tx_template_.bth_offset - wire::kUdpSize,
                     request_port(r.psn, now));
  const size_t payload_at = wire::tx_payload_offset(tx_template_, r.opcode);
  bool unheld = false;
  if (len > 0 && !gather(w, off, len, buf.data() + payload_at, &unheld)) {
    *ok = false;
    return 0;
  }
  if (icrc_batch_) {
    // Virtual payload: a batch that keeps unheld payload (the simulator's)
    // takes these bytes as zeros instead of reading them (wire/icrc.h).
    if (unheld && len <= UINT16_MAX) {
      icrc.zeros_at = static_cast<uint16_t>(payload_at - tx_template_.l3_offset);
      icrc.zeros = static_cast<uint16_t>(len);
    }
    icrc_batch_->add(icrc);
  } else {
    uint8_t* l3 = buf.data() + tx_template_.l3_offset;
    wire::store_le32(l3 + icrc.len_before_icrc,
                     wire::icrc_compute(l3, icrc.len_before_icrc, icrc.ipv6));
  }
  ++counters_.tx_packets;
  counters_.tx_bytes += len;
  return n;
}

// Moves sq_ past a request packet just sent from the cursor.
void QueuePair::advance_cursor_after(const SendWqe& w, uint32_t k) {
  if (w.is_read_or_atomic() || k + 1 >= w.npkts) {
    ++sq_send_;
    send_pkt_ = 0;
  } else {
    send_pkt_ = k + 1;
  }
}

// Fails WQE `index`: earlier unfinished WQEs are flushed, this one gets
// `status` (always reported, signaled or not), the rest flush with the QP.
void QueuePair::fail_wqe(uint64_t index, ibv_wc_status status) {
  while (sq_head_ != index && sq_head_ != sq_tail_) {
    SendWqe& e = sq_at(sq_head_);
    complete_send(e, IBV_WC_WR_FLUSH_ERR);
    ++rare_counters().flushed_wqes;
    ++sq_head_;
  }
  if (sq_head_ != sq_tail_) {
    complete_send(sq_at(sq_head_), status);
    ++sq_head_;
  }
  enter_error();
}

size_t QueuePair::gated_request(uint64_t index, uint32_t k, uint32_t bytes, uint64_t now,
                                std::span<uint8_t> buf, bool resend, bool timed) {
  const uint32_t window_bytes = resend ? 0 : bytes;
  if (cc_->may_send && !cc_->may_send(cc_ctx_, qpn_, window_bytes, now)) {
    ++counters_.cc_stalls;
    if (cc_hold_ == kCcHoldWatch) cc_hold_ = kCcHeld;
    return 0;
  }
  // Asking for an ACK beyond wants_ack(): a packet that fills the CC window
  // (the responder coalesces until asked, IBA 9.7.5.1.2), or the first new
  // one ack_req_interval_ns after the last that asked (qp.h).
  const bool overdue = last_ack_req_ns_ != UINT64_MAX && attr_.ack_req_interval_ns &&
                       now - last_ack_req_ns_ >= attr_.ack_req_interval_ns;
  const bool ask_ack = force_ack_req_ || overdue || (timed && cc_->samples_rtt) ||
                       (cc_->fills_window && cc_->fills_window(cc_ctx_, window_bytes, mtu_));
  bool ok;
  const size_t n = build_request(sq_at(index), k, ask_ack, buf, &ok, now);
  if (n) cc_hold_ = kCcHoldNone;
  if (!ok) {
    // The local buffer vanished since post_send: local protection error
    // (IBA 10.8.3 / 11.6.2), the QP enters ERR.
    ++rare_counters().local_errors;
    fail_wqe(index, IBV_WC_LOC_PROT_ERR);
    return 0;
  }
  return n;
}

size_t QueuePair::produce_request(uint64_t now, std::span<uint8_t> buf) {
  if (rnr_wait_until_) return 0;
  if (tlp_pending_) {
    if (const size_t n = produce_tail_probe(now, buf)) return n;
    if (tlp_pending_ || state_ == QpState::kErr) return 0;
  }
  if (type_ == QpType::kRc && sr_recovery_) {
    bool attempted = false;
    const size_t n = produce_sack_hole(now, buf, &attempted);
    if (attempted) return n;
  }
  SendWqe* wp = nullptr;
  while (sq_send_ != sq_tail_) {
    SendWqe& w = sq_at(sq_send_);
    if (w.started && type_ == QpType::kRc) {
      if (w.is_read_or_atomic() && w.done) {
        ++sq_send_;
        send_pkt_ = 0;
        continue;
      }
      if (!w.is_read_or_atomic()) {
        // Packets the responder already acknowledged (we went back past
        // them to re-issue an earlier READ) are not sent again.
        const uint32_t psn = wire::psn_add(w.first_psn, send_pkt_);
        if (wire::psn_le(psn, acked_psn_) && wire::psn_ge(acked_psn_, w.first_psn)) {
          const uint32_t next = wire::psn_distance(w.first_psn, acked_psn_) + 1;
          if (next >= w.npkts) {
            ++sq_send_;
            send_pkt_ = 0;
            continue;
          }
          send_pkt_ = next;
        }
      }
      if (w.opcode == IBV_WR_RDMA_READ) send_pkt_ = std::max(send_pkt_, w.resp_received);
    }
    wp = &w;
    break;
  }
  if (!wp) return 0;
  SendWqe& w = *wp;
  if (!w.started) {
    if (!can_start(w)) return 0;
    if (type_ == QpType::kRc &&
        wire::psn_distance(resume_psn(), next_psn_) >= attr_.max_inflight_psns) {
      ++counters_.window_stalls;
      return 0;
    }
    start_wqe(w);
  }
  const uint32_t k = send_pkt_;
  const uint32_t psn = wire::psn_add(w.first_psn, k);
  if (type_ == QpType::kRc &&
      wire::psn_distance(resume_psn(), psn) >= attr_.max_inflight_psns) {
    ++counters_.window_stalls;
    return 0;
  }
  const uint32_t bytes = w.is_read_or_atomic()
                             ? 0
                             : static_cast<uint32_t>(std::min<uint64_t>(
                                   mtu_, w.length - std::min<uint64_t>(w.length, uint64_t{k} * mtu_)));
  const bool retransmit = type_ == QpType::kRc && wire::psn_lt(psn, send_high_);
  // A new packet while no RTT sample is under way becomes the timed one.
  const bool timed = type_ == QpType::kRc && !retransmit && !rtt_probe_;
  const size_t n = gated_request(sq_send_, k, bytes, now, buf, retransmit, timed);
  if (!n) return 0;
  ++counters_.tx_request_packets;
  if (retransmit) {
    ++rare_counters().tx_retransmit_packets;
    w.retransmitted = true;
  } else {
    const uint32_t span = w.opcode == IBV_WR_RDMA_READ ? w.npkts - k : 1;
    send_high_ = wire::psn_add(psn, span);
    if (!sr_sent_ns_.empty()) sr_note_first_send(psn, span, now);
    tail_ack_req_ = built_ack_req_;
    if (built_ack_req_ || last_ack_req_ns_ == UINT64_MAX) last_ack_req_ns_ = now;
    // The RTT is sampled on a packet that asks for its ACK: the responder
    // answers it at once, where a packet without AckReq may wait in its ACK
    // coalescing (up to 64 packets), which is not path delay. TIMELY and
    // Swift read such samples as queueing and cut their rates (over memif
    // TIMELY moved 1 % of what none did). With CcHooks::samples_rtt the
    // timed packet always asks.
    if (timed && built_ack_req_) {
      rtt_probe_ = true;
      rtt_psn_ = wire::psn_add(send_high_, wire::kPsnMask);
      rtt_sent_ns_ = now;
    }
  }
  w.last_sent_ns = now;
  if (cc_->on_send) cc_->on_send(cc_ctx_, qpn_, bytes, retransmit, now);
  if (type_ == QpType::kRc) {
    if (!timer_deadline_) arm_timer(now);
    advance_cursor_after(w, k);
  } else {
    // UC/UD: no acknowledgements; the WQE completes once its last packet
    // is handed to the wire (IBA 9.8 / 11.4.2.1).
    const bool last = k + 1 >= w.npkts;
    advance_cursor_after(w, k);
    if (last) {
      complete_send(w, IBV_WC_SUCCESS);
      ++sq_head_;
    }
  }
  return n;
}

// Selective repeat: resend the next hole below the highest SACKed PSN.
// IRN §3.2: a hole is resent when packets after it were SACKed; a hole
// already resent is resent again only when a PSN first sent after that
// resend (>= its mark) has been SACKed: in an in-order network the resend
// then has been lost too. Until then it is skipped, and the lowest pending
// mark arms a re-walk (on_nak) for when such a SACK arrives.
size_t QueuePair::produce_sack_hole(uint64_t now, std::span<uint8_t> buf, bool* attempted) {
  *attempted = false;
  while (wire::psn_lt(sr_cursor_, sr_high_)) {
    if (wire::psn_le(sr_cursor_, acked_psn_)) {
      // Acknowledged, except a READ/atomic whose response never came: an
      // ACK beyond it is an implied NAK (IBA 9.7.5.1) and, if the one
      // re-issue retire() made was lost too, a timeout must re-issue it.
      uint64_t idx;
      uint32_t k;
      if (!find_psn(sr_cursor_, &idx, &k) || !sq_at(idx).is_read_or_atomic() ||
          sq_at(idx).done) {
        sr_cursor_ = wire::psn_add(acked_psn_, 1);
        continue;
      }
    }
    if (sacked(sr_cursor_) || wire::psn_ge(sr_cursor_, send_high_)) {
      sr_cursor_ = wire::psn_add(sr_cursor_, 1);
      continue;
    }
    uint64_t idx;
    uint32_t k;
    if (!find_psn(sr_cursor_, &idx, &k)) {
      sr_cursor_ = wire::psn_add(sr_cursor_, 1);
      continue;
    }
    SendWqe& w = sq_at(idx);
    uint32_t next_cursor = wire::psn_add(sr_cursor_, 1);
    if (w.is_read_or_atomic()) {
      next_cursor = wire::psn_add(w.first_psn, w.npkts);
      if (w.done) {
        sr_cursor_ = next_cursor;
        continue;
      }
      k = w.is_atomic() ? 0 : w.resp_received;
    }
    const uint32_t psn = wire::psn_add(w.first_psn, k);  // what the resend carries
    bool again = false;
    if (sack_state(psn) == kSackResent) {
      // On a network that reorders, the packets sent after the resend may
      // overtake it: only a SACK the reorder tolerance beyond is evidence,
      // or (RACK) a later packet delivered long enough before now.
      const uint32_t mark =
          wire::psn_add(sr_mark_[psn % sr_mark_.size()], attr_.sr_reorder_tolerance_pkts);
      if (!wire::psn_ge(sr_sack_high_, mark) && !rack_resend_lost(psn, now)) {
        if (!sr_rewalk_armed_ || wire::psn_lt(mark, sr_rewalk_at_)) {
          sr_rewalk_armed_ = true;
          sr_rewalk_at_ = mark;
        }
        sr_cursor_ = next_cursor;
        continue;
      }
      again = true;
    }
    const uint32_t bytes = w.is_read_or_atomic() ? 0 : mtu_;
    *attempted = true;
    sr_note_lost(psn, now);
    const size_t n = gated_request(idx, k, bytes, now, buf, true);
    if (!n) return 0;
    sr_cursor_ = next_cursor;
    sr_note_resent(psn);
    if (rack_on()) rack_note_resend(psn, now);
    ++counters_.tx_request_packets;
    ++rare_counters().tx_retransmit_packets;
    ++rare_counters().retransmit_sack_holes;
    if (again) ++rare_counters().retransmit_sack_again;
    w.retransmitted = true;
    w.last_sent_ns = now;
    rtt_probe_ = false;
    if (cc_->on_send) cc_->on_send(cc_ctx_, qpn_, bytes, true, now);
    if (!timer_deadline_) arm_timer(now);
    rto_low_from_ns_ = now;  // RTO_low gives this resend its own round trip
    return n;
  }
  return 0;
}

// Selective repeat timeout (RTO_high or RTO_low): resend every outstanding
// packet not SACKed, whatever the state of earlier resends.
void QueuePair::sr_resend_all() {
  const uint32_t from = wire::psn_add(acked_psn_, 1);
  const uint32_t n = std::min<uint32_t>(wire::psn_distance(from, send_high_),
                                        static_cast<uint32_t>(sack_.size()));
  for (uint32_t i = 0; i < n; ++i) {
    uint8_t& st = sack_[wire::psn_add(from, i) % sack_.size()];
    if (st == kSackResent) st = kSackNone;
  }
  sr_rewalk_armed_ = false;
  rack_rewalk_armed_ = false;
  sr_recovery_ = true;
  sr_cursor_ = resume_psn();
  sr_high_ = send_high_;
  sr_point_ = send_high_;
  rtt_probe_ = false;
  // A READ needing re-issue is also covered by the hole walk.
}

void QueuePair::requester_timer(uint64_t now) {
  if (rnr_wait_until_ && now >= rnr_wait_until_) {
    // IBA 9.7.5.2.8: after the RNR delay, resend from the NAKed PSN.
    rnr_wait_until_ = 0;
    rewind_to(rnr_psn_);
    arm_timer(now);
  }
  if (rack_deadline_ && now >= rack_deadline_) rack_detect(now);
  if (const uint64_t probe = tail_probe_deadline(); probe && now >= probe) tlp_pending_ = true;
  const uint64_t due = ack_deadline();
  if (!due || now < due) return;
  const bool outstanding = sq_head_ != sq_tail_ && sq_at(sq_head_).started;
  if (!outstanding) {
    timer_deadline_ = 0;
    return;
  }
  if (due < timer_deadline_) {
    // IRN §3.1 RTO_low: few packets in flight and none answered. Each one
    // without forward progress doubles the next, outside retry_cnt (see
    // qp.h); RTO_high restarts from now.
    ++rare_counters().retransmit_timeouts_low;
    if (cc_->on_loss) cc_->on_loss(cc_ctx_, qpn_, LossEvent::kTimeout, now);
    cc_hold_ = kCcHoldWatch;
    if (rto_low_fired_ < 255) ++rto_low_fired_;
    sr_resend_all();
    arm_timer(now);
    return;
  }
  // IBA 9.7.6.1.3: local ACK timeout; retry_cnt bounds consecutive
  // timeouts without progress, then IBV_WC_RETRY_EXC_ERR.
  ++rare_counters().retransmit_timeouts;
  if (cc_->on_loss) cc_->on_loss(cc_ctx_, qpn_, LossEvent::kTimeout, now);
  // The timer measures a request's time on the wire: when congestion
  // control has held back every packet since the last timeout (a window
  // below one packet paced slower than the timeout), nothing was retried,
  // and the retry budget is not spent; the resend already queued stands.
  // A QP that did send (or was held by anything else, such as PFC) counts
  // as before.
  const bool held = cc_hold_ == kCcHeld;
  cc_hold_ = kCcHoldWatch;
  if (held) {
    arm_timer(now);
    return;
  }
  if (retry_left_ == 0) {
    ++rare_counters().retry_exceeded;
    fail_head(resume_psn(), IBV_WC_RETRY_EXC_ERR);
    return;
  }
  --retry_left_;
  if (attr_.recovery == Recovery::kSelectiveRepeat) {
    sr_resend_all();
  } else {
    rewind_to(resume_psn());
  }
  arm_timer(now);
}

}  // namespace droce::transport
