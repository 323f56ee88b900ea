// Responder, RDMA WRITE family (IBA 9.7.5.2, 10.6.3): the RETH of the
// first packet names the range, every packet lands at its offset in it,
// WRITE with immediate consumes a receive WQE at its last packet. The
// predicted path (responder_fast_path.cc) takes the plain cases with the
// same steps (responder_steps.h).
#include "responder_steps.h"

namespace droce::transport {

using wire::Position;

Verdict QueuePair::execute_write(const wire::ParsedPacket& pkt) {
  const wire::OpcodeInfo& info = *pkt.info;
  const Position pos = info.position;
  const uint32_t len = pkt.payload_length;
  // The region the RETH check found (null for a zero-length RETH).
  const MemoryRegion* checked = nullptr;
  if (pos == Position::kFirst || pos == Position::kOnly) {
    if (const auto nak = check_reth_of(IBV_ACCESS_REMOTE_WRITE, pkt.reth_rkey, pkt.reth_va,
                                       pkt.reth_dma_length, &checked))
      return nak_verdict(*nak);
    start_write(pkt.psn, pkt.reth_va, pkt.reth_dma_length, pkt.reth_rkey);
    // Selective repeat: remember the RETH so later packets of this
    // message can be placed out of order. No free context only means
    // they will not be (they are dropped and resent as holes).
    if (attr_.recovery == Recovery::kSelectiveRepeat && pos == Position::kFirst) {
      if (WriteContext* c = alloc_write_context())
        *c = WriteContext{true, pkt.psn, (write_length_ + mtu_ - 1) / mtu_, write_va_,
                          write_length_, write_rkey_};
    }
  }
  const uint64_t offset = write_offset(pkt.psn);
  if (!write_fits(offset, len, write_length_, info.is_last_or_only())) {
    in_msg_ = InMsg::kNone;
    return Verdict::kInvalidRequest;
  }
  if (pkt.has(wire::kExtImmDt) && !recv_wqe_available()) {
    // WRITE with immediate consumes a receive WQE at its last packet.
    // IBA 9.7.5.2.8: an RNR NAK consumes no PSN and leaves no responder
    // state, so the retry finds the responder as this packet did. An
    // ONLY started its message just above: undo that, or the retry
    // (an ONLY again) would be out of sequence. A LAST continues the
    // message its FIRST started, which stays in progress: go-back-N
    // resends from the NAKed PSN, i.e. this LAST.
    if (pos == Position::kOnly) in_msg_ = InMsg::kNone;
    return Verdict::kRnr;
  }
  if (len > 0) {
    // A first or only packet's bytes lie in the range its RETH check
    // just validated (offset 0, len <= the DMA length): same region.
    const MemoryRegion* mr = checked;
    if (!mr && check_remote(write_rkey_, write_va_ + offset, len, IBV_ACCESS_REMOTE_WRITE,
                            &mr) != AccessCheck::kOk) {
      in_msg_ = InMsg::kNone;
      return Verdict::kRemoteAccessError;
    }
    place_write(*mr, offset, pkt.payload, len);
    prefetch_next_packet(*mr, offset, len);
  }
  if (info.is_last_or_only()) {
    if (pkt.has(wire::kExtImmDt)) {
      const RecvWqe& r = *recv_wqe();
      complete_recv(r, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, write_length_,
                    IBV_WC_WITH_IMM, pkt.imm_data, 0, 0, pkt.solicited);
      consume_recv_wqe();
    }
    finish_write();
  }
  return Verdict::kAck;
}

}  // namespace droce::transport
