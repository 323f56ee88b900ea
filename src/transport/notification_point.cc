// The DCQCN notification point (RoCEv2 annex A17.9.2, mlx5 behaviour), on
// the receive side next to the responder: a CE-marked data packet makes
// the QP send a CNP back to the sending QP, at most one per
// np_min_time_between_cnps. The reaction point (a CNP arriving) is
// congestion control's, through CcHooks::on_cnp (qp.cc).
#include "droce/transport/qp.h"

namespace droce::transport {

void QueuePair::maybe_cnp(const wire::ParsedPacket& pkt, uint64_t now) {
  if (pkt.ecn != wire::Ecn::kCe || type_ == QpType::kUd) return;
  if (pkt.info->op_class != wire::OpClass::kRequest &&
      pkt.info->op_class != wire::OpClass::kResponse)
    return;
  ++counters_.rx_ecn_ce;
  if (cnp_pending_ ||
      (cnp_sent_once_ && now - last_cnp_ns_ < attr_.np_min_time_between_cnps_ns)) {
    ++rare_counters().cnps_suppressed;
    return;
  }
  cnp_pending_ = true;
  cnp_sent_once_ = true;
  last_cnp_ns_ = now;
}

// The pending CNP as a frame (wire::build_packet writes its reserved
// bytes): BECN set, not ECN-capable, at the CNP's own DSCP.
size_t QueuePair::produce_cnp(std::span<uint8_t> buf) {
  wire::TransportSpec t;
  t.opcode = wire::kOpCnp;
  t.dest_qp = attr_.dest_qpn;
  t.becn = true;  // annex A17.9.2: BECN set in a CNP
  t.pkey = attr_.pkey;
  wire::PathSpec path = attr_.path;
  path.ecn = wire::Ecn::kNotEct;
  path.dscp = attr_.cnp_dscp;
  const size_t n = build(t, {}, buf, &path);
  if (n) {
    cnp_pending_ = false;
    ++counters_.cnps_sent;
  }
  return n;
}

}  // namespace droce::transport
