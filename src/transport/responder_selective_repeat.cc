// Responder, selective repeat (IRN, Mittal et al. SIGCOMM 2018; see
// Recovery in qp.h): out-of-order RDMA WRITE packets whose message context
// is known are placed at once; when the hole before them fills, the
// expected PSN walks over them, and completes the WRITEs with immediate
// among them in order.
#include <cstring>

#include "responder_steps.h"

namespace droce::transport {

using wire::Operation;
using wire::Position;

// Selective repeat write contexts. A context is live from the FIRST packet
// that creates it until the expected PSN passes the message's last PSN:
// until then, packets of that message placed out of order (and the walk in
// sr_advance over a placed FIRST) depend on it. Only dead or free slots are
// reused; a live context is never evicted, whatever the arrival order.
bool QueuePair::write_context_live(const WriteContext& c, uint32_t epsn) const {
  return c.valid && wire::psn_lt(epsn, wire::psn_add(c.first_psn, c.npkts));
}

WriteContext* QueuePair::find_write_context(uint32_t psn) {
  if (!write_ctx_) return nullptr;
  for (WriteContext& c : *write_ctx_) {
    if (write_context_live(c, epsn_) && wire::psn_ge(psn, c.first_psn) &&
        wire::psn_distance(c.first_psn, psn) < c.npkts)
      return &c;
  }
  return nullptr;
}

WriteContext* QueuePair::alloc_write_context() {
  if (!write_ctx_) write_ctx_ = std::make_unique<std::array<WriteContext, kWriteContexts>>();
  for (WriteContext& c : *write_ctx_)
    if (!write_context_live(c, epsn_)) return &c;
  return nullptr;
}

// Called when a WRITE message ends in order (epsn = the PSN after it):
// every context it or earlier messages used is dead. Invalidating them here,
// not only by comparison, keeps a context from looking live again once the
// 24-bit PSN space wraps (IBA 9.7.1).
void QueuePair::retire_write_contexts(uint32_t epsn) {
  if (!write_ctx_) return;
  for (WriteContext& c : *write_ctx_)
    if (c.valid && !write_context_live(c, epsn)) c.valid = false;
}

bool QueuePair::sr_placed(uint32_t psn) const {
  const uint32_t d = wire::psn_distance(epsn_, psn);
  return d < ooo_.size() && ooo_[psn % ooo_.size()] != 0;
}

// Selective repeat: place an out-of-order RDMA WRITE packet if its message
// context is known (see qp.h). Anything doubtful is dropped, not NAKed: the
// requester resends it as a hole and the in-order path judges it.
bool QueuePair::sr_accept(const wire::ParsedPacket& pkt) {
  const uint32_t d = wire::psn_distance(epsn_, pkt.psn);
  if (d >= ooo_.size()) return false;
  uint8_t& slot = ooo_[pkt.psn % ooo_.size()];
  if (slot) return false;  // already placed
  const wire::OpcodeInfo& info = *pkt.info;
  if (info.operation != Operation::kWrite) return false;
  // A WRITE with immediate's last packet: room to keep its immediate
  // first, or it is dropped as before.
  OooImmediate* imm = nullptr;
  if (pkt.has(wire::kExtImmDt) && !(imm = claim_ooo_immediate())) return false;
  const uint32_t len = pkt.payload_length;
  if (len > mtu_) return false;
  WriteContext learned;            // FIRST: the context this packet creates
  WriteContext* store = nullptr;   // ... and where it will be kept
  const WriteContext* c = nullptr;
  if (info.is_first_or_only()) {
    if (!(attr_.qp_access_flags & IBV_ACCESS_REMOTE_WRITE) ||
        pkt.reth_dma_length > kMaxMessageBytes)
      return false;
    if (info.position == Position::kFirst ? len != mtu_ : len != pkt.reth_dma_length)
      return false;
    if (info.position == Position::kFirst) {
      // Claim a slot before placing anything: with every context live the
      // packet is dropped rather than placed without a context to find it.
      store = alloc_write_context();
      if (!store) return false;
      learned = WriteContext{true, pkt.psn, (pkt.reth_dma_length + mtu_ - 1) / mtu_,
                             pkt.reth_va, pkt.reth_dma_length, pkt.reth_rkey};
      c = &learned;
    } else if (len > 0) {
      const MemoryRegion* mr = nullptr;
      if (check_remote(pkt.reth_rkey, pkt.reth_va, len, IBV_ACCESS_REMOTE_WRITE, &mr) !=
          AccessCheck::kOk)
        return false;
      if (!mr->virtual_payload()) std::memcpy(mr->translate(pkt.reth_va, len), pkt.payload, len);
    }
  } else {
    c = find_write_context(pkt.psn);
    if (!c || c->first_psn == pkt.psn) return false;
  }
  if (c) {
    const uint64_t offset = uint64_t{wire::psn_distance(c->first_psn, pkt.psn)} * mtu_;
    const bool last = info.position == Position::kLast;
    if ((info.position == Position::kMiddle && len != mtu_) ||
        offset + len > c->length || (last && offset + len != c->length))
      return false;
    if (len > 0) {
      const MemoryRegion* mr = nullptr;
      if (check_remote(c->rkey, c->va + offset, len, IBV_ACCESS_REMOTE_WRITE, &mr) !=
          AccessCheck::kOk)
        return false;
      if (!mr->virtual_payload()) std::memcpy(mr->translate(c->va + offset, len), pkt.payload, len);
    }
  }
  if (store) *store = learned;
  if (imm)
    *imm = OooImmediate{true, pkt.psn, pkt.imm_data,
                        info.is_first_or_only() ? pkt.reth_dma_length : c->length,
                        pkt.solicited};
  slot = static_cast<uint8_t>(pkt.opcode + 1);
  return true;
}

OooImmediate* QueuePair::claim_ooo_immediate() {
  if (!ooo_imm_) ooo_imm_ = std::make_unique<std::array<OooImmediate, kOooImmediates>>();
  for (OooImmediate& m : *ooo_imm_)
    if (!m.valid) return &m;
  return nullptr;
}

// The expected PSN reached a placed WRITE-with-immediate packet: its
// receive WQE is consumed and its completion made now, in order. Without a
// receive WQE the placement is forgotten (false: the walk stops there and
// the packet is RNR-NAKed, IBA 9.7.5.2.8); the requester resends from it,
// and the in-order path takes it then.
bool QueuePair::sr_complete_immediate() {
  OooImmediate* m = nullptr;
  if (ooo_imm_)
    for (OooImmediate& e : *ooo_imm_)
      if (e.valid && e.psn == epsn_) m = &e;
  if (!m || !recv_wqe_available()) {
    if (m) m->valid = false;
    ++rare_counters().rx_ooo_rnr;
    return false;
  }
  m->valid = false;
  complete_recv(*recv_wqe(), IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, m->length,
                IBV_WC_WITH_IMM, m->imm_data, 0, 0, m->solicited);
  consume_recv_wqe();
  return true;
}

// After the in-order packet: walk over packets already placed out of order,
// replaying their sequencing effects (message start/end, MSN).
void QueuePair::sr_advance() {
  bool moved = false;
  bool rnr = false;
  for (;;) {
    uint8_t& slot = ooo_[epsn_ % ooo_.size()];
    if (!slot) break;
    const wire::OpcodeInfo& info = wire::opcode_info(static_cast<uint8_t>(slot - 1));
    slot = 0;
    if ((info.ext & wire::kExtImmDt) && !sr_complete_immediate()) {
      rnr = true;
      break;
    }
    if (info.position == Position::kFirst) {
      // The context of a placed FIRST stays live until this message ends
      // (alloc_write_context never evicts it), so it is always found.
      if (const WriteContext* c = find_write_context(epsn_)) {
        write_first_psn_ = c->first_psn;
        write_va_ = c->va;
        write_length_ = c->length;
        write_rkey_ = c->rkey;
      }
      in_msg_ = InMsg::kWrite;
    } else if (info.is_last_or_only()) {
      in_msg_ = InMsg::kNone;
      msn_ = wire::psn_add(msn_, 1);
      retire_write_contexts(wire::psn_add(epsn_, 1));
    }
    epsn_ = wire::psn_add(epsn_, 1);
    moved = true;
  }
  if (moved) {
    queue_ack(wire::psn_add(epsn_, wire::kPsnMask));
    unacked_ = 0;
  }
  if (rnr) queue_rnr_nak(epsn_);
}

}  // namespace droce::transport
