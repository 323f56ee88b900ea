// QueuePair: state machine, verbs entry points, dispatch and shared helpers.
#include "droce/transport/qp.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include "droce/transport/device.h"
#include "droce/transport/requester.h"
#include "droce/wire/psn.h"
#include "prefetch.h"

namespace droce::transport {

std::string_view to_string(QpType t) {
  switch (t) {
    case QpType::kRc: return "RC";
    case QpType::kUc: return "UC";
    case QpType::kUd: return "UD";
  }
  return "?";
}

std::string_view to_string(QpState s) {
  switch (s) {
    case QpState::kReset: return "RESET";
    case QpState::kInit: return "INIT";
    case QpState::kRtr: return "RTR";
    case QpState::kRts: return "RTS";
    case QpState::kSqd: return "SQD";
    case QpState::kSqe: return "SQE";
    case QpState::kErr: return "ERR";
  }
  return "?";
}

ibv_qp_state to_ibv(QpState s) {
  switch (s) {
    case QpState::kReset: return IBV_QPS_RESET;
    case QpState::kInit: return IBV_QPS_INIT;
    case QpState::kRtr: return IBV_QPS_RTR;
    case QpState::kRts: return IBV_QPS_RTS;
    case QpState::kSqd: return IBV_QPS_SQD;
    case QpState::kSqe: return IBV_QPS_SQE;
    case QpState::kErr: return IBV_QPS_ERR;
  }
  return IBV_QPS_UNKNOWN;
}

bool transition_allowed(QpState from, QpState to) {
  using enum QpState;
  if (to == kReset || to == kErr) return true;
  switch (from) {
    case kReset: return to == kInit;
    case kInit: return to == kInit || to == kRtr;
    case kRtr: return to == kRts;
    case kRts: return to == kRts || to == kSqd;
    case kSqd: return to == kRts || to == kSqd;
    case kSqe: return to == kRts;
    case kErr: return false;
  }
  return false;
}

QueuePair::QueuePair(Device& device, uint32_t qpn, const QpInitAttr& init)
    : device_(device),
      qpn_(qpn),
      type_(init.type),
      pd_(init.pd),
      send_cq_(init.send_cq),
      recv_cq_(init.recv_cq),
      srq_(init.srq),
      caps_(init.caps),
      sq_sig_all_(init.sq_sig_all) {
  make_queues();
}

int QueuePair::modify(QpState target, const QpAttr& a) {
  if (!transition_allowed(state_, target)) return EINVAL;
  switch (target) {
    case QpState::kReset:
      // IBA 10.3.1: RESET empties the queues without completions.
      // The caller keeps posters out while it modifies (qp.h).
      sq_head_ = sq_send_ = sq_tail_ = 0;
      rq_head_ = rq_tail_ = 0;
      sq_posted_.store(0, std::memory_order_relaxed);
      rq_posted_.store(0, std::memory_order_relaxed);
      publish_heads();
      have_srq_wqe_ = false;
      resp_head_ = resp_count_ = 0;
      in_msg_ = InMsg::kNone;
      responder_fatal_ = false;
      cnp_pending_ = false;
      timer_deadline_ = rnr_wait_until_ = 0;
      outstanding_rd_atomic_ = 0;
      sr_recovery_ = false;
      atomic_cache_.reset();
      write_ctx_.reset();
      ooo_imm_.reset();
      break;
    case QpState::kInit:
      attr_.qp_access_flags = a.qp_access_flags;
      attr_.pkey = a.pkey;
      attr_.qkey = a.qkey;
      break;
    case QpState::kRtr: {
      const uint32_t mtu = mtu_bytes(a.path_mtu);
      if (mtu == 0 || a.rq_psn > wire::kPsnMask || a.dest_qpn > wire::kPsnMask) return EINVAL;
      if (a.path.src_ip.v6 != a.path.dst_ip.v6) return EINVAL;
      if (a.entropy.paths == 0 || a.entropy.paths > kMaxEntropyPaths) return EINVAL;
      if (a.entropy.mode != EntropyMode::kFixed &&
          (type_ != QpType::kRc || a.recovery != Recovery::kSelectiveRepeat))
        return EINVAL;
      if (a.recovery == Recovery::kSelectiveRepeat &&
          (a.sack_window < 64 || a.sack_window > (1u << 20) ||
           (a.sack_window & (a.sack_window - 1)) != 0))
        return EINVAL;
      attr_.path = a.path;
      attr_.dest_qpn = a.dest_qpn;
      attr_.rq_psn = a.rq_psn;
      attr_.path_mtu = a.path_mtu;
      attr_.max_dest_rd_atomic = std::max<uint8_t>(1, a.max_dest_rd_atomic);
      attr_.min_rnr_timer = a.min_rnr_timer & 31;
      attr_.ack_every_n = a.ack_every_n;
      attr_.recovery = a.recovery;
      attr_.sack_window = a.sack_window;
      attr_.np_min_time_between_cnps_ns = a.np_min_time_between_cnps_ns;
      attr_.cnp_dscp = a.cnp_dscp;
      attr_.entropy = a.entropy;
      entropy_.reset(a.entropy, a.path.udp_src_port);
      reorder_depth_max_ = 0;
      make_templates();
      mtu_ = mtu;
      epsn_ = a.rq_psn;
      msn_ = 0;
      nak_seq_sent_ = false;
      unacked_ = 0;
      // Room for one outstanding answer per READ/atomic plus ACKs/NAKs
      // interleaved with them; a power of two so resp_at() masks instead
      // of dividing (it runs for every request packet).
      resp_limit_ = std::bit_ceil(2u * attr_.max_dest_rd_atomic + 16);
      resp_head_ = resp_count_ = 0;
      if (a.recovery == Recovery::kSelectiveRepeat) {
        ooo_.assign(a.sack_window, 0);
        sack_.assign(a.sack_window, kSackNone);
        sr_mark_.assign(a.sack_window, 0);
      } else {
        ooo_.clear();
        sack_.clear();
        sr_mark_.clear();
      }
      sack_count_ = 0;
      break;
    }
    case QpState::kRts:
      if (state_ == QpState::kRtr) {
        if (a.sq_psn > wire::kPsnMask) return EINVAL;
        attr_.sq_psn = a.sq_psn;
        next_psn_ = send_high_ = a.sq_psn;
        acked_psn_ = wire::psn_add(a.sq_psn, wire::kPsnMask);  // sq_psn - 1
        sr_sack_high_ = acked_psn_;
        sr_rewalk_armed_ = false;
        rack_restart();
        rto_low_fired_ = 0;
        tail_ack_req_ = false;
        credits_ = CreditLimit{};
        ssn_ = 0;
      }
      attr_.honour_credits = a.honour_credits;
      attr_.write_reth_every_packet = a.write_reth_every_packet;
      attr_.sr_rto_low_ns = a.sr_rto_low_ns;
      attr_.sr_rto_low_threshold_pkts = a.sr_rto_low_threshold_pkts;
      attr_.sr_reorder_tolerance_pkts = a.sr_reorder_tolerance_pkts;
      sr_configure_send_record(a.sr_reorder_window_ns, a.sr_reorder_window_min_ns, a.sr_tail_probe);
      attr_.timeout = a.timeout;
      attr_.retry_cnt = std::min<uint8_t>(a.retry_cnt, 7);
      attr_.rnr_retry = std::min<uint8_t>(a.rnr_retry, 7);
      attr_.max_rd_atomic = std::max<uint8_t>(1, a.max_rd_atomic);
      attr_.ack_req_every_n = a.ack_req_every_n;
      attr_.ack_req_interval_ns = a.ack_req_interval_ns;
      attr_.max_inflight_psns =
          std::clamp<uint32_t>(a.max_inflight_psns, 1, wire::kPsnHalfSpace - 1);
      if (attr_.recovery == Recovery::kSelectiveRepeat)
        attr_.max_inflight_psns = std::min(attr_.max_inflight_psns, attr_.sack_window);
      retry_left_ = attr_.retry_cnt;
      rnr_retry_left_ = attr_.rnr_retry;
      break;
    case QpState::kSqd:
    case QpState::kSqe:
      break;
    case QpState::kErr:
      enter_error();
      return 0;
  }
  set_state(target);
  return 0;
}

void QueuePair::make_templates() {
  if (type_ != QpType::kUd)
    rx_template_ = wire::make_write_template(
        attr_.path, qpn_, type_ == QpType::kRc ? IBV_OPCODE_RC : IBV_OPCODE_UC, attr_.pkey);
  if (type_ == QpType::kRc)
    ack_template_ = wire::make_ack_template(attr_.path, attr_.dest_qpn, attr_.pkey);
  if (type_ != QpType::kUd)
    tx_template_ = wire::make_tx_template(attr_.path, attr_.dest_qpn, attr_.pkey);
}

void QueuePair::set_dest_mac(const wire::MacAddress& mac) {
  attr_.path.dst_mac = mac;
  if (state_ != QpState::kReset && state_ != QpState::kInit) make_templates();
}

void QueuePair::fail_unresolved() {
  take_posted();
  if (state_ == QpState::kErr) return;
  if (sq_head_ != sq_tail_) {
    fail_wqe(sq_head_, IBV_WC_RETRY_EXC_ERR);
  } else {
    enter_error();
  }
  end_of_call();
}

void QueuePair::enter_error() {
  set_state(QpState::kErr);
  resp_head_ = resp_count_ = 0;
  cnp_pending_ = false;
  timer_deadline_ = rnr_wait_until_ = 0;
  flush_all();
}

// IBA 10.3.1 (Error state) / 11.4.2.1: every outstanding WR completes with
// "flushed in error", signaled or not.
void QueuePair::flush_all() {
  while (sq_head_ != sq_tail_) {
    SendWqe& w = sq_at(sq_head_);
    WorkCompletion wc;
    wc.wr_id = w.wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = wc_opcode_for(w.opcode);
    wc.qp_num = qpn_;
    send_cq_->push(wc);
    ++rare_counters().flushed_wqes;
    ++sq_head_;
  }
  sq_send_ = sq_head_;
  send_pkt_ = 0;
  // IBA 10.2.9.5: the WQEs of an SRQ stay in it, except the one a message
  // of this QP had already taken.
  auto flush_recv = [&](const RecvWqe& r) {
    WorkCompletion wc;
    wc.wr_id = r.wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = qpn_;
    recv_cq_->push(wc);
    ++rare_counters().flushed_wqes;
  };
  if (have_srq_wqe_) {
    flush_recv(*srq_wqe_);
    have_srq_wqe_ = false;
  }
  for (; rq_head_ != rq_tail_; ++rq_head_) flush_recv(rq_at(rq_head_));
  in_msg_ = InMsg::kNone;
  publish_heads();
}

void QueuePair::destroy() {
  take_posted();
  if (state_ != QpState::kErr) enter_error();
  end_of_call();
}

void QueuePair::push_completion(CompletionQueue* cq, const WorkCompletion& wc) {
  if (!cq->push(wc)) cq_error_ = true;
}

void QueuePair::end_of_call() {
  if (cq_error_ && state_ != QpState::kErr) enter_error();
  publish_heads();
}

void QueuePair::take_posted() {
  const uint64_t sq = sq_posted_.load(std::memory_order_acquire);
  const uint64_t rq = rq_posted_.load(std::memory_order_acquire);
  if (sq == sq_tail_ && rq == rq_tail_) return;
  for (uint64_t i = sq_tail_; i != sq; ++i) sq_at(i).reset_progress();
  sq_tail_ = sq;
  rq_tail_ = rq;
  if (state_ == QpState::kErr) flush_all();
}

const RecvWqe* QueuePair::recv_wqe() {
  if (srq_) {
    if (!have_srq_wqe_) {
      if (!srq_wqe_) srq_wqe_ = std::make_unique<RecvWqe>();
      have_srq_wqe_ = srq_->take(*srq_wqe_);
    }
    return have_srq_wqe_ ? srq_wqe_.get() : nullptr;
  }
  if (rq_head_ == rq_tail_) {
    // A receive posted since the data path last looked counts: no RNR NAK
    // for a WQE that is there.
    rq_tail_ = rq_posted_.load(std::memory_order_acquire);
    if (rq_head_ == rq_tail_) return nullptr;
  }
  return &rq_at(rq_head_);
}

void QueuePair::consume_recv_wqe() {
  if (srq_)
    have_srq_wqe_ = false;
  else
    ++rq_head_;
}

void QueuePair::complete_send(SendWqe& w, ibv_wc_status status) {
  if (status == IBV_WC_SUCCESS && !sq_sig_all_ && !(w.send_flags & IBV_SEND_SIGNALED))
    return;
  WorkCompletion wc;
  wc.wr_id = w.wr_id;
  wc.status = status;
  wc.opcode = wc_opcode_for(w.opcode);
  wc.qp_num = qpn_;
  if (w.opcode == IBV_WR_RDMA_READ) wc.byte_len = static_cast<uint32_t>(w.length);
  if (w.is_atomic()) wc.byte_len = 8;
  // The slot (and every one before it) is free before its completion can
  // be seen: an application that posts again as soon as it polls this one
  // must find room, as on a NIC whose driver frees the slot with the CQE.
  if (sq_head_ != sq_tail_ && &w == &sq_at(sq_head_))
    sq_retired_.store(sq_head_ + 1, std::memory_order_release);
  push_completion(send_cq_, wc);
  ++counters_.send_completions;
}

void QueuePair::complete_recv(const RecvWqe& w, ibv_wc_status status, ibv_wc_opcode op,
                              uint32_t byte_len, unsigned flags, uint32_t imm,
                              uint32_t inv_rkey, uint32_t src_qp, bool solicited,
                              uint8_t sl) {
  WorkCompletion wc;
  wc.wr_id = w.wr_id;
  wc.status = status;
  wc.opcode = op;
  wc.byte_len = byte_len;
  wc.wc_flags = flags;
  wc.imm_data = imm;
  wc.invalidated_rkey = inv_rkey;
  wc.qp_num = qpn_;
  wc.src_qp = src_qp;
  wc.solicited = solicited;
  wc.sl = sl;
  // As complete_send: the receive slot is free before its completion shows
  // (an application reposting the buffer it just got back must not meet
  // ENOMEM). SRQ slots are the SRQ's, freed when taken.
  if (!srq_ && rq_head_ != rq_tail_ && &w == &rq_at(rq_head_))
    rq_retired_.store(rq_head_ + 1, std::memory_order_release);
  push_completion(recv_cq_, wc);
  ++counters_.recv_completions;
}

// *unheld: every byte is virtual payload (MemoryRegion::virtual_payload), so
// none was written to `dst`.
bool QueuePair::gather(const SendWqe& w, uint64_t offset, uint32_t len, uint8_t* dst,
                       bool* unheld) const {
  *unheld = false;
  if (w.send_flags & IBV_SEND_INLINE) {
    // Copied at post (post_send): the slot's inline area.
    if (offset + len > w.length) return false;
    std::memcpy(dst, inline_.data() + slot_of(w) * caps_.max_inline_data + offset, len);
    return true;
  }
  const Sge* sge = sges(w);
  bool all_virtual = true;
  for (uint32_t i = 0; i < w.num_sge && len > 0; ++i) {
    const Sge& s = sge[i];
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(s.length - offset, len));
    // Re-translate every time: the MR may have been deregistered since
    // post_send (then this is a local protection error).
    const MemoryRegion* mr = device_.find_mr(s.lkey);
    const uint8_t* src = mr ? mr->translate(s.addr + offset, n) : nullptr;
    if (!src) return false;
    if (!mr->virtual_payload()) {
      all_virtual = false;
      std::memcpy(dst, src, n);
      // The message's next packet reads on from here (prefetch.h).
      const uint64_t ahead = next_packet_bytes(offset + n, n, s.length);
      if (const uint8_t* next = ahead ? mr->translate(s.addr + offset + n, ahead) : nullptr)
        prefetch_for_read(next, ahead);
    }
    dst += n;
    len -= n;
    offset = 0;
  }
  *unheld = all_virtual && len == 0;
  return len == 0;
}

bool QueuePair::scatter_sges(const Sge* sge, uint32_t num, uint64_t offset,
                             const uint8_t* src, uint32_t len) const {
  for (uint32_t i = 0; i < num && len > 0; ++i) {
    const Sge& s = sge[i];
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(s.length - offset, len));
    const MemoryRegion* mr = device_.find_mr(s.lkey);
    if (!mr || !mr->allows(IBV_ACCESS_LOCAL_WRITE)) return false;
    uint8_t* dst = mr->translate(s.addr + offset, n);
    if (!dst) return false;
    if (!mr->virtual_payload()) std::memcpy(dst, src, n);
    src += n;
    len -= n;
    offset = 0;
  }
  return len == 0;
}

bool QueuePair::scatter(const RecvWqe& w, uint64_t offset, const uint8_t* src,
                        uint32_t len) const {
  return scatter_sges(w.sge.data(), w.num_sge, offset, src, len);
}

void QueuePair::set_cc_hooks(const CcHooks* hooks, void* ctx) {
  cc_ = hooks ? hooks : &kNoCcHooks;
  cc_ctx_ = ctx;
}

int QueuePair::post_send(const SendWr& wr) { return post_send(std::span(&wr, 1), nullptr); }

int QueuePair::post_recv(const RecvWr& wr) { return post_recv(std::span(&wr, 1), nullptr); }

namespace {

// A WR's SGEs (at most kMaxSge, checked before) on the poster's stack,
// only as many as it has: an array of Sge would zero all eight first.
union SgeCopy {
  explicit SgeCopy(std::span<const Sge> list) {
    std::uninitialized_copy(list.begin(), list.end(), sges);
  }
  Sge sges[kMaxSge];
};

}  // namespace

// A poster's view of how far the data path has retired: its own copy,
// refreshed only when the ring looks full. The data path moves the
// retired index on every call, and reading it on every post would bring
// its line over from the data path's core each time. (After RESET the
// copy is ahead of the tail: the difference wraps, and it is refreshed.)
int QueuePair::post_send(std::span<const SendWr> wrs, size_t* posted) {
  const QpState state = posted_state();
  uint64_t tail = sq_posted_.load(std::memory_order_relaxed);
  const uint64_t first = tail;
  int rc = 0;
  if (state == QpState::kReset || state == QpState::kInit || state == QpState::kRtr)
    rc = EINVAL;  // IBA 10.3.1: the send queue works from RTS on
  for (size_t i = 0; rc == 0 && i < wrs.size(); ++i)
    if ((rc = write_send_wqe(wrs[i], tail)) == 0) ++tail;
  // One release store publishes the whole list: the data path's core
  // reads this line once per list, not once per WR.
  if (tail != first) sq_posted_.store(tail, std::memory_order_release);
  if (posted) *posted = static_cast<size_t>(tail - first);
  return rc;
}

int QueuePair::write_send_wqe(const SendWr& wr, uint64_t tail) {
  if (wr.sg_list.size() > caps_.max_send_sge || wr.sg_list.size() > kMaxSge) return EINVAL;
  switch (wr.opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM: break;
    case IBV_WR_SEND_WITH_INV:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      if (type_ != QpType::kRc) return EINVAL;
      break;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      if (type_ == QpType::kUd) return EINVAL;
      break;
    default: return EINVAL;
  }
  if (type_ == QpType::kUd && !wr.ud_path) return EINVAL;
  if (!ring_has_room(tail, sq_retired_seen_, sq_retired_, caps_.max_send_wr)) return ENOMEM;
  const bool read_or_atomic = opcode_is_read_or_atomic(wr.opcode);
  const auto n_sge = static_cast<uint32_t>(wr.sg_list.size());
  // The checks read a copy on this thread's stack, not the slot: the
  // slot's line was last read by the data path's core, and is written only
  // once the WR is known to be good (nothing is published unless every
  // check passes). A copy, so that what was checked is what is queued.
  SgeCopy copy(wr.sg_list);
  const Sge* sge = copy.sges;
  uint64_t length = 0;
  unsigned flags = wr.send_flags;
  const bool inline_data = (flags & IBV_SEND_INLINE) && !read_or_atomic;
  if (inline_data) {
    // ibv_post_send: an inline WR's SGEs are plain addresses, copied now;
    // their lkeys are not looked at.
    for (uint32_t i = 0; i < n_sge; ++i) length += sge[i].length;
    if (length > caps_.max_inline_data) return EINVAL;
  } else {
    flags &= ~static_cast<unsigned>(IBV_SEND_INLINE);
    // READ and atomic targets are written locally, so they need local
    // write (IBA 10.6.3.1); gathered data needs only a valid lkey.
    const uint32_t local_access = read_or_atomic ? IBV_ACCESS_LOCAL_WRITE : 0;
    if (!device_.check_sges(pd_, sge, n_sge, local_access, &length)) return EINVAL;
  }
  if (opcode_is_atomic(wr.opcode)) {
    if (length < 8) return EINVAL;  // the original value lands here
    length = 8;
  }
  if (length > kMaxMessageBytes) return EINVAL;
  if (type_ == QpType::kUd && length > mtu_) return EINVAL;

  // Only the poster's line of the slot is written (wqe.h).
  const size_t slot = tail & sq_mask_;
  SendWqe& w = sq_[slot];
  if (n_sge > 1) std::copy(sge, sge + n_sge, &sge_more_[slot * caps_.max_send_sge]);
  w.sge0 = n_sge > 0 ? sge[0] : Sge{};
  w.wr_id = wr.wr_id;
  w.opcode = wr.opcode;
  w.num_sge = n_sge;
  w.remote_addr = wr.remote_addr;
  w.rkey = wr.rkey;
  w.compare_add = wr.compare_add;
  w.swap = wr.swap;
  w.imm_data = wr.opcode == IBV_WR_SEND_WITH_INV ? wr.invalidate_rkey : wr.imm_data;
  w.send_flags = flags;
  w.length = static_cast<uint32_t>(length);
  if (type_ == QpType::kUd)
    ud_dest_[slot] = UdDest{*wr.ud_path, wr.ud_remote_qpn & wire::kPsnMask, wr.ud_remote_qkey};
  if (inline_data) {
    uint8_t* dst = inline_.data() + slot * caps_.max_inline_data;
    for (uint32_t i = 0; i < n_sge; ++i) {
      if (sge[i].length == 0) continue;
      std::memcpy(dst, reinterpret_cast<const void*>(sge[i].addr), sge[i].length);
      dst += sge[i].length;
    }
  }
  return 0;
}

int QueuePair::post_recv(std::span<const RecvWr> wrs, size_t* posted) {
  uint64_t tail = rq_posted_.load(std::memory_order_relaxed);
  const uint64_t first = tail;
  int rc = 0;
  if (srq_) rc = EINVAL;  // ibv_post_recv: receives go to the SRQ
  else if (posted_state() == QpState::kReset) rc = EINVAL;
  for (size_t i = 0; rc == 0 && i < wrs.size(); ++i) {
    const RecvWr& wr = wrs[i];
    const auto n_sge = static_cast<uint32_t>(wr.sg_list.size());
    if (n_sge > caps_.max_recv_sge || n_sge > kMaxSge) rc = EINVAL;
    else if (!ring_has_room(tail, rq_retired_seen_, rq_retired_, caps_.max_recv_wr))
      rc = ENOMEM;
    if (rc != 0) break;
    // Checked on a copy, as post_send's SGEs are.
    SgeCopy copy(wr.sg_list);
    const Sge* sge = copy.sges;
    uint64_t length = 0;
    if (!device_.check_sges(pd_, sge, n_sge, IBV_ACCESS_LOCAL_WRITE, &length)) {
      rc = EINVAL;
      break;
    }
    RecvWqe& r = rq_at(tail++);
    r.wr_id = wr.wr_id;
    r.num_sge = n_sge;
    std::copy(sge, sge + n_sge, r.sge.begin());
    r.length = length;
  }
  if (tail != first) rq_posted_.store(tail, std::memory_order_release);
  if (posted) *posted = static_cast<size_t>(tail - first);
  return rc;
}

void QueuePair::on_packet(const wire::ParsedPacket& pkt, uint64_t now) {
  take_posted();
  dispatch_packet(pkt, now);
  end_of_call();
}

void QueuePair::dispatch_packet(const wire::ParsedPacket& pkt, uint64_t now) {
  if (!pkt.info || !pkt.info->supported) return;
  if (!receives()) {
    ++rare_counters().rx_dropped_bad_state;
    return;
  }
  if (!from_connection(pkt)) {
    ++rare_counters().rx_dropped_bad_address;
    return;
  }
  // IBA 10.9 (partitioning): a packet whose P_Key does not match the QP's
  // is dropped and counted, whatever it carries.
  if (!wire::pkeys_match(pkt.pkey, attr_.pkey)) {
    ++rare_counters().rx_dropped_bad_pkey;
    return;
  }
  const wire::OpcodeInfo& info = *pkt.info;
  if (info.op_class == wire::OpClass::kCnp) {
    // RoCEv2 annex A17.9.3: the reaction point lowers its rate.
    ++counters_.cnps_received;
    if (cc_->on_cnp) cc_->on_cnp(cc_ctx_, qpn_, now);
    return;
  }
  const wire::Transport want = type_ == QpType::kRc   ? wire::Transport::kRc
                               : type_ == QpType::kUc ? wire::Transport::kUc
                                                      : wire::Transport::kUd;
  if (info.transport != want) {
    ++rare_counters().rx_dropped_wrong_transport;
    return;
  }
  maybe_cnp(pkt, now);
  if (info.op_class == wire::OpClass::kRequest) {
    on_request(pkt, now);
  } else if (type_ == QpType::kRc) {
    if (state_ == QpState::kRtr) {
      ++rare_counters().rx_dropped_bad_state;  // nothing sent yet: cannot be ours
      return;
    }
    on_response(pkt, now);
  }
}

// IBA 9.6.1 (packet header validation) with RoCEv2's IP header in the
// place of the GRH (annex A17.4): a connected QP (RC, UC) takes packets
// only from its connection, sent by the peer's address (the path's
// destination) to ours (its source), as Linux rxe's check_addr requires of
// RC and UC packets; here requests, responses and CNPs alike. The header
// template of the predicted path compares both addresses too. UD takes
// datagrams from any address, sent to the QP's own when it has one (an
// unspecified source address in its path, 0.0.0.0 or ::, means none).
// IPv6 addresses compare in full.
bool QueuePair::from_connection(const wire::ParsedPacket& pkt) const {
  if (type_ == QpType::kUd) {
    const wire::IpAddress& ours = attr_.path.src_ip;
    const bool unspecified =
        std::all_of(std::begin(ours.bytes), std::end(ours.bytes), [](uint8_t b) { return b == 0; });
    return unspecified || pkt.dst_ip == ours;
  }
  return pkt.src_ip == attr_.path.dst_ip && pkt.dst_ip == attr_.path.src_ip;
}

size_t QueuePair::build(const wire::TransportSpec& t, std::span<const uint8_t> payload,
                        std::span<uint8_t> buf, const wire::PathSpec* path) {
  const size_t n = wire::build_packet(path ? *path : attr_.path, t, payload, buf);
  if (n) {
    ++counters_.tx_packets;
    counters_.tx_bytes += payload.size();
  }
  return n;
}

size_t QueuePair::produce(uint64_t now, std::span<uint8_t> buf) {
  begin_burst(nullptr);
  const size_t n = produce_in_burst(now, buf);
  end_burst();
  return n;
}

size_t QueuePair::produce_frame(uint64_t now, std::span<uint8_t> buf) {
  if (state_ == QpState::kReset || state_ == QpState::kInit || state_ == QpState::kErr)
    return 0;
  if (cnp_pending_) return produce_cnp(buf);  // notification_point.cc
  if (resp_count_ > 0) {
    const size_t n = produce_response(now, buf);
    if (n || state_ == QpState::kErr) return n;
  }
  if (state_ == QpState::kRts || state_ == QpState::kSqd)
    return produce_request(now, buf);
  return 0;
}

bool QueuePair::has_work(uint64_t) const {
  if (state_ == QpState::kReset || state_ == QpState::kInit || state_ == QpState::kErr)
    return false;
  if (cnp_pending_ || resp_count_ > 0) return true;
  if (state_ != QpState::kRts && state_ != QpState::kSqd) return false;
  return requester_has_work() || sq_posted_.load(std::memory_order_acquire) != sq_tail_;
}

// The endpoint calls this for the QP after the one whose turn it is: with
// tens of thousands of QPs in the round robin, each is out of cache by its
// next turn, and its state is spread over many lines (produce_run's gate
// alone reads eight); asked for a turn ahead, they arrive while the QP
// before sends. A QP with answers queued sends those first (produce): the
// answer's lines then, not the requester's, which a responder-only QP
// would fetch for nothing (on the QP-scale bench that cost its side more
// than the prefetch saved).
void QueuePair::prefetch_for_send() const {
  const auto line = [](const auto& member) { __builtin_prefetch(&member); };
  line(type_);
  line(state_);
  line(cq_error_);
  line(cnp_pending_);
  if (resp_count_ != 0) {
    line(resp_first_);
    line(counters_.acks_sent);
    line(ack_template_);
    line(ack_template_.size);
    line(attr_.recovery);
    return;
  }
  line(attr_.max_inflight_psns);
  line(counters_);
  line(cc_);
  line(tx_template_);
  line(sq_head_);
  line(send_pkt_);
  line(rnr_wait_until_);
  line(tail_ack_req_);
  line(entropy_);
  line(rack_deadline_);
  line(tlp_pending_);
  line(sq_posted_);
  line(sq_retired_);
}

uint64_t QueuePair::next_deadline() const {
  uint64_t d = std::numeric_limits<uint64_t>::max();
  if (const uint64_t t = ack_deadline()) d = std::min(d, t);
  if (rnr_wait_until_) d = std::min(d, rnr_wait_until_);
  if (rack_deadline_) d = std::min(d, rack_deadline_);
  if (const uint64_t t = tail_probe_deadline()) d = std::min(d, t);
  return d;
}

void QueuePair::on_timer(uint64_t now) {
  take_posted();
  if (state_ == QpState::kRts || state_ == QpState::kSqd) requester_timer(now);
  end_of_call();
}

std::string QueuePair::debug_state() const {
  char line[512];
  int n = std::snprintf(line, sizeof line,
                        "qp %u %s sq[%llu,%llu,%llu) pkt %u next_psn %u send_high %u acked %u "
                        "rd_out %u retry %u timer %llu rnr %llu | epsn %u msn %u resp %u",
                        qpn_, std::string(to_string(state_)).c_str(),
                        static_cast<unsigned long long>(sq_head_),
                        static_cast<unsigned long long>(sq_send_),
                        static_cast<unsigned long long>(sq_tail_), send_pkt_, next_psn_,
                        send_high_, acked_psn_, outstanding_rd_atomic_, retry_left_,
                        static_cast<unsigned long long>(timer_deadline_),
                        static_cast<unsigned long long>(rnr_wait_until_), epsn_, msn_, resp_count_);
  std::string out(line, static_cast<size_t>(std::max(n, 0)));
  for (uint64_t i = sq_head_; i != sq_tail_ && i < sq_head_ + 4; ++i) {
    const SendWqe& w = sq_at(i);
    std::snprintf(line, sizeof line, "\n  wqe %llu op %d len %llu started %d psn %u+%u resp %u done %d",
                  static_cast<unsigned long long>(i), static_cast<int>(w.opcode),
                  static_cast<unsigned long long>(w.length), w.started, w.first_psn, w.npkts,
                  w.resp_received, w.done);
    out += line;
  }
  return out;
}

}  // namespace droce::transport
