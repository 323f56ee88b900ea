// Responder, RDMA READ (IBA 9.7.5.2, 10.6.3): a READ is checked when it
// arrives and answered by a stream of response packets queued in its place
// among the answers (IBA 9.7.5.1: responses go out in request order); a
// duplicate READ is executed again from what its retransmission carries.
#include <algorithm>

#include "responder_steps.h"

namespace droce::transport {

using wire::NakCode;

namespace {

// The response stream of a READ of `pkt` at the MSN `msn`, from `mr`.
Response read_response(const wire::ParsedPacket& pkt, uint32_t npkts, uint32_t msn,
                       const MemoryRegion* mr) {
  Response r{};
  r.kind = Response::Kind::kRead;
  r.psn = pkt.psn;
  r.end_psn = wire::psn_add(pkt.psn, npkts);
  r.msn = msn;
  r.rkey = pkt.reth_rkey;
  r.registration = mr ? mr->registration() : 0;
  r.va = pkt.reth_va;
  r.remaining = pkt.reth_dma_length;
  return r;
}

}  // namespace

Verdict QueuePair::execute_read(const wire::ParsedPacket& pkt) {
  const MemoryRegion* checked = nullptr;
  if (const auto nak = check_reth_of(IBV_ACCESS_REMOTE_READ, pkt.reth_rkey, pkt.reth_va,
                                     pkt.reth_dma_length, &checked))
    return nak_verdict(*nak);
  // IBA 9.7.5.2 : more outstanding READ/atomics than the responder
  // advertised (max_dest_rd_atomic) is an invalid request. A READ answered
  // again is not counted: the requester may have completed it from its
  // first answer, and cannot know the second still waits here.
  uint32_t reads = 0;
  for (uint32_t i = 0; i < resp_count_; ++i) {
    const Response& q = resp_at(resp_head_ + i);
    if (q.kind == Response::Kind::kRead && !q.replay) ++reads;
  }
  if (reads >= attr_.max_dest_rd_atomic) return Verdict::kInvalidRequest;
  const uint32_t npkts = read_response_packets(pkt.reth_dma_length, mtu_);
  msn_ = wire::psn_add(msn_, 1);
  Response* r = push_response();
  *r = read_response(pkt, npkts, msn_, checked);
  // IBA 9.7.5.2 : a READ consumes one PSN per response packet.
  epsn_ = r->end_psn;
  unacked_ = 0;  // the responses acknowledge everything before them
  return Verdict::kResponded;
}

// A duplicate READ (IBA 9.7.5.2): answered again, from the PSN and RETH
// the retransmission carries, if that range lies inside what was executed
// and is not being answered already.
void QueuePair::replay_read(const wire::ParsedPacket& pkt) {
  const uint32_t npkts = read_response_packets(pkt.reth_dma_length, mtu_);
  // The re-issued range must lie inside what was executed.
  if (pkt.reth_dma_length > kMaxMessageBytes ||
      wire::psn_gt(wire::psn_add(pkt.psn, npkts), epsn_))
    return;
  const MemoryRegion* mr = nullptr;
  if (pkt.reth_dma_length > 0 && check_remote(pkt.reth_rkey, pkt.reth_va, pkt.reth_dma_length,
                                              IBV_ACCESS_REMOTE_READ, &mr) != AccessCheck::kOk)
    return;
  const uint32_t end_psn = wire::psn_add(pkt.psn, npkts);
  for (uint32_t i = 0; i < resp_count_; ++i) {
    Response& q = resp_at(resp_head_ + i);
    if (q.kind != Response::Kind::kRead || !wire::psn_lt(pkt.psn, q.end_psn)) continue;
    // Already answering that range: the queued stream covers it.
    if (wire::psn_le(q.psn, pkt.psn)) return;
    // The same READ (it ends where the queued stream ends), whose stream
    // has sent past the PSN asked for: answered again from there (IBA
    // 9.7.5.2), by the queued stream itself. A second stream would answer
    // one READ twice and count twice against max_dest_rd_atomic, and the
    // next new READ would be refused as an invalid request.
    if (q.end_psn == end_psn) {
      ++rare_counters().rx_duplicate_reads;
      const bool replay = q.replay;
      q = read_response(pkt, npkts, q.msn, mr);
      q.replay = replay;
      return;
    }
  }
  Response* r = push_response();
  if (!r) {
    ++rare_counters().rx_response_queue_full;
    return;
  }
  ++rare_counters().rx_duplicate_reads;
  *r = read_response(pkt, npkts, msn_, mr);
  r->replay = true;
  // Its first answer has left, so answers to later requests may be queued:
  // a go-back-N requester sends them all again after this one and expects
  // the answers in PSN order (IBA 9.7.5.1), so the new stream goes ahead
  // of every answer to a later PSN, as a NIC rewinding its answer queue to
  // the duplicate would send them.
  for (uint32_t i = resp_count_ - 1; i > 0; --i) {
    Response& before = resp_at(resp_head_ + i - 1);
    Response& self = resp_at(resp_head_ + i);
    if (!wire::psn_gt(before.psn, self.psn)) break;
    std::swap(before, self);
  }
}

// The next packet of the READ response stream `r` (the oldest answer).
size_t QueuePair::produce_read_response(uint64_t now, Response& r, std::span<uint8_t> buf) {
  // The responses are this QP's data: paced by its congestion control
  // (CcHooks::may_send_response); held, the QP stays with work, and its
  // endpoint's pacer asks again.
  if (cc_->may_send_response && !cc_->may_send_response(cc_ctx_, now)) {
    ++counters_.cc_stalls;
    return 0;
  }
  wire::TransportSpec t = response_spec(r);
  const uint32_t len = std::min(r.remaining, mtu_);
  const bool last = r.remaining <= mtu_;
  if (r.first && last) t.opcode = IBV_OPCODE_RC_RDMA_READ_RESPONSE_ONLY;
  else if (r.first) t.opcode = IBV_OPCODE_RC_RDMA_READ_RESPONSE_FIRST;
  else if (last) t.opcode = IBV_OPCODE_RC_RDMA_READ_RESPONSE_LAST;
  else t.opcode = IBV_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE;
  t.aeth_syndrome = ack_syndrome();  // MIDDLE packets carry no AETH
  std::span<const uint8_t> payload;
  if (len > 0) {
    // The READ's R_Key was checked when it was accepted (IBA 10.6.3.2)
    // and the READ is served from that region to its end: a Send with
    // Invalidate accepted after it (IBA 10.6.7.2) revokes the R_Key
    // for the requests that follow, not for one already taken, whose
    // responses still go out in order (IBA 9.7.5.1). The closest
    // clause found is o9-5.2.1, which lets the invalidation happen
    // only once the Send with Invalidate's own header checks passed;
    // none found speaks of requests accepted before it. So no
    // remote_valid() here; the region must still be the same
    // registration, though: a deregistered one's memory is not ours.
    const MemoryRegion* mr = device_.find_mr(r.rkey);
    const uint8_t* src =
        mr && mr->registration() == r.registration ? mr->translate(r.va, len) : nullptr;
    if (!src) {
      // Deregistered while queued: the READ cannot complete. Answer
      // it, in its place in the queue, with the NAK for an error local
      // to the responder, Remote Operational Error (IBA 9.7.5.2; it
      // ends the connection, IBA 9.9.3), at the PSN of the response
      // packet that could not be sent; the MSN is the last completed
      // request's, the one before this READ's.
      ++rare_counters().read_responses_region_gone;
      r.kind = Response::Kind::kNak;
      r.syndrome = wire::make_syndrome(wire::AethType::kNak,
                                       static_cast<uint8_t>(NakCode::kRemoteOperationalError));
      r.msn = wire::psn_add(r.msn, wire::kPsnMask);
      r.fatal = true;
      responder_fatal_ = true;
      in_msg_ = InMsg::kNone;
      return produce_response(now, buf);
    }
    payload = {src, len};
  }
  const size_t n = build(t, payload, buf);
  if (!n) return 0;
  if (cc_->on_response_sent) cc_->on_response_sent(cc_ctx_, len, now);
  ++counters_.read_response_packets_sent;
  r.first = false;
  r.psn = wire::psn_add(r.psn, 1);
  r.va += len;
  r.remaining -= len;
  if (last) pop_response();
  return n;
}

}  // namespace droce::transport
