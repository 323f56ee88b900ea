// Responder, SEND family (IBA 9.7.5.2): the message lands in the receive
// WQE at the head of the receive queue (or one taken from the SRQ), Send
// with Invalidate revokes a region's R_Key (IBA 10.6.7.2); and UD, whose
// datagrams are SENDs (IBA 10.2.5, 11.4.1.2).
#include <cstring>

#include "responder_steps.h"

namespace droce::transport {

using wire::Position;

namespace {
constexpr uint32_t kGrhSize = 40;  // IBA 11.4.1.2: UD receive buffers start with a GRH
}

Verdict QueuePair::execute_send(const wire::ParsedPacket& pkt) {
  const wire::OpcodeInfo& info = *pkt.info;
  const Position pos = info.position;
  const uint32_t len = pkt.payload_length;
  if (pos == Position::kFirst || pos == Position::kOnly) {
    if (!recv_wqe_available()) return Verdict::kRnr;
    in_msg_ = InMsg::kSend;
    recv_offset_ = 0;
  }
  const RecvWqe& r = *recv_wqe();
  if (recv_offset_ + len > r.length) {
    // Message longer than the receive buffer: the receive WQE completes
    // with a local length error, the requester gets Invalid Request
    // (IBA 9.7.5.2 / verbs IBV_WC_REM_INV_REQ_ERR).
    complete_recv(r, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, 0, 0, 0, 0);
    consume_recv_wqe();
    in_msg_ = InMsg::kNone;
    return Verdict::kInvalidRequest;
  }
  if (!scatter(r, recv_offset_, pkt.payload, len)) {
    // The receive buffer's MR went away: local protection error here,
    // Remote Operational Error for the requester (IBA 9.7.5.2).
    complete_recv(r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, 0, 0, 0, 0);
    consume_recv_wqe();
    in_msg_ = InMsg::kNone;
    return Verdict::kRemoteOperationalError;
  }
  recv_offset_ += len;
  if (!info.is_last_or_only()) return Verdict::kAck;
  unsigned flags = 0;
  uint32_t inv = 0;
  if (pkt.has(wire::kExtImmDt)) flags |= IBV_WC_WITH_IMM;
  if (pkt.has(wire::kExtIeth)) {
    // IBA 10.6.7.2 (Send with Invalidate): the named R_Key must be a
    // region of this PD.
    MemoryRegion* mr = const_cast<MemoryRegion*>(device_.find_mr(pkt.ieth_rkey));
    if (!mr || mr->pd() != pd_) {
      complete_recv(r, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV, 0, 0, 0, 0, 0);
      consume_recv_wqe();
      in_msg_ = InMsg::kNone;
      return Verdict::kInvalidRequest;
    }
    mr->invalidate_remote();
    inv = pkt.ieth_rkey;
    flags |= IBV_WC_WITH_INV;
  }
  complete_recv(r, IBV_WC_SUCCESS, IBV_WC_RECV, static_cast<uint32_t>(recv_offset_), flags,
                pkt.imm_data, inv, 0, pkt.solicited);
  consume_recv_wqe();
  in_msg_ = InMsg::kNone;
  msn_ = wire::psn_add(msn_, 1);
  return Verdict::kAck;
}

void QueuePair::on_request_ud(const wire::ParsedPacket& pkt) {
  // IBA 10.2.5 / 9.6.1: the Q_Key must match, otherwise silently dropped.
  if (pkt.deth_qkey != attr_.qkey) {
    ++rare_counters().rx_dropped_ud_qkey;
    return;
  }
  if (!recv_wqe_available()) {
    ++rare_counters().rx_dropped_ud_no_wqe;  // UD has no RNR: the datagram is lost
    return;
  }
  const RecvWqe& r = *recv_wqe();
  const uint32_t total = kGrhSize + pkt.payload_length;
  if (total > r.length) {
    ++rare_counters().rx_dropped_ud_too_long;
    complete_recv(r, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, 0, 0, 0, pkt.deth_src_qp);
    consume_recv_wqe();
    return;
  }
  // The first 40 bytes receive the GRH; for RoCEv2 over IPv4 that is 20
  // zero bytes and the IPv4 header (as rdma-core documents for RoCE).
  uint8_t grh[kGrhSize] = {};
  const uint8_t* frame = pkt.payload - pkt.payload_offset;
  if (pkt.ipv6())
    std::memcpy(grh, frame + pkt.l3_offset, kGrhSize);
  else
    std::memcpy(grh + 20, frame + pkt.l3_offset, 20);
  if (!scatter(r, 0, grh, kGrhSize) ||
      !scatter(r, kGrhSize, pkt.payload, pkt.payload_length)) {
    complete_recv(r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, 0, 0, 0, pkt.deth_src_qp);
    consume_recv_wqe();
    return;
  }
  unsigned flags = IBV_WC_GRH;
  if (pkt.has(wire::kExtImmDt)) flags |= IBV_WC_WITH_IMM;
  complete_recv(r, IBV_WC_SUCCESS, IBV_WC_RECV, total, flags, pkt.imm_data, 0,
                pkt.deth_src_qp, pkt.solicited,
                pkt.ipv6() ? kWcSlRoceV2Ipv6 : kWcSlRoceV2Ipv4);
  consume_recv_wqe();
}

}  // namespace droce::transport
