// End-to-end credits on a QP (IBA 9.7.7.2; the codes and the limit in
// credits.h). The responder advertises its receive queue in every AETH
// with an ACK syndrome it sends (ACKs, READ responses, atomic ACKs); the
// requester learns the limit from the ACKs it accepts and, with
// QpAttr::honour_credits, starts a message that consumes a receive WQE
// only within it.
#include "droce/transport/qp.h"
#include "droce/wire/psn.h"

namespace droce::transport {

// Counted at the time the answer is written, so it is as fresh as it can
// be: WQEs posted since the ACK was queued count, and one consumed since
// by a later message only makes the count lower than the truth, never
// higher. A QP on a shared receive queue does not own the WQEs its
// messages will take: it advertises the invalid count.
uint8_t QueuePair::ack_syndrome() const {
  const uint8_t code = srq_ ? kCreditCodeInvalid : credit_code_for(rq_tail_ - rq_head_);
  return wire::make_syndrome(wire::AethType::kAck, code);
}

// SEND and RDMA WRITE with immediate consume a receive WQE at the
// responder (IBA 9.7.7.2 counts only those); READs, atomics and WRITEs
// without immediate do not wait for credits.
bool QueuePair::credits_allow(const SendWqe& w) const {
  if (!attr_.honour_credits || type_ != QpType::kRc) return true;
  const bool consumes = w.opcode == IBV_WR_SEND || w.opcode == IBV_WR_SEND_WITH_IMM ||
                        w.opcode == IBV_WR_SEND_WITH_INV ||
                        w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  if (!consumes) return true;
  const bool idle = sq_head_ == sq_tail_ || !sq_at(sq_head_).started;
  return credits_.allows(wire::psn_add(ssn_, 1), idle);
}

void QueuePair::note_credits(const wire::ParsedPacket& pkt) {
  if (credits_.on_ack(pkt.aeth_msn, wire::aeth_value(pkt.aeth_syndrome), ssn_) ==
      CreditLimit::Update::kMalformed)
    ++rare_counters().credits_malformed;
}

}  // namespace droce::transport
