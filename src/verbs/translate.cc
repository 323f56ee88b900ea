// libdroce-verbs' verbs <-> droce translation (include/droce/verbs/translate.h).
#include "droce/verbs/translate.h"

#include <endian.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "droce/transport/device.h"
#include "droce/transport/requester.h"
#include "droce/wire/ethernet.h"

namespace droce::verbs {

// ---- identity and GIDs ------------------------------------------------------

std::array<uint8_t, 8> eui64(const wire::MacAddress& m) {
  return {static_cast<uint8_t>(m[0] ^ 0x02), m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]};
}

uint64_t node_guid_be(const wire::MacAddress& mac) {
  const auto e = eui64(mac);
  uint64_t v;
  std::memcpy(&v, e.data(), 8);  // the bytes in order: network order
  return v;
}

ibv_gid gid_of(const wire::IpAddress& ip) {
  ibv_gid g{};
  if (ip.v6) {
    std::memcpy(g.raw, ip.bytes, 16);
  } else {
    g.raw[10] = 0xff;
    g.raw[11] = 0xff;
    std::memcpy(g.raw + 12, ip.bytes, 4);
  }
  return g;
}

wire::IpAddress ip_of(const ibv_gid& g) {
  wire::IpAddress ip;
  static constexpr uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(g.raw, kV4Mapped, 12) == 0) {
    ip.v6 = false;
    std::memcpy(ip.bytes, g.raw + 12, 4);
  } else {
    ip.v6 = true;
    std::memcpy(ip.bytes, g.raw, 16);
  }
  return ip;
}

std::optional<wire::MacAddress> mac_of_link_local(const ibv_gid& g) {
  static constexpr uint8_t kPrefix[8] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(g.raw, kPrefix, 8) != 0 || g.raw[11] != 0xff || g.raw[12] != 0xfe)
    return std::nullopt;
  return wire::MacAddress{static_cast<uint8_t>(g.raw[8] ^ 0x02), g.raw[9], g.raw[10],
                          g.raw[13], g.raw[14], g.raw[15]};
}

std::vector<ibv_gid> gid_table(const wire::MacAddress& mac,
                               std::span<const wire::IpAddress> addresses) {
  std::vector<ibv_gid> t;
  ibv_gid ll{};
  ll.raw[0] = 0xfe;
  ll.raw[1] = 0x80;
  const auto e = eui64(mac);
  std::memcpy(ll.raw + 8, e.data(), 8);
  t.push_back(ll);
  for (const wire::IpAddress& ip : addresses) {
    if (t.size() == static_cast<size_t>(kGidTableLen)) break;
    t.push_back(gid_of(ip));
  }
  return t;
}

// ---- device and port ---------------------------------------------------------

void fill_device_attr(ibv_device_attr& a, const wire::MacAddress& mac) {
  a = ibv_device_attr{};
  std::snprintf(a.fw_ver, sizeof a.fw_ver, "droce");
  a.node_guid = node_guid_be(mac);
  a.sys_image_guid = a.node_guid;
  a.max_mr_size = uint64_t{1} << 32;
  a.page_size_cap = 0xfffff000;  // any multiple of 4 KiB
  a.vendor_id = kVendorId;
  a.vendor_part_id = kVendorPartId;
  a.hw_ver = 0;
  a.max_qp = static_cast<int>(transport::kQpnMask - 1);
  a.max_qp_wr = kMaxQpWr;
  a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN |
                       IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_UD_AV_PORT_ENFORCE |
                       IBV_DEVICE_CHANGE_PHY_PORT;
  a.max_sge = static_cast<int>(transport::kMaxSge);
  a.max_sge_rd = static_cast<int>(transport::kMaxSge);
  a.max_cq = 1 << 16;
  a.max_cqe = kMaxCqe;
  a.max_mr = 1 << 20;
  a.max_pd = 1 << 16;
  a.max_qp_rd_atom = kMaxRdAtomic;
  a.max_res_rd_atom = kMaxRdAtomic * (1 << 16);
  a.max_qp_init_rd_atom = kMaxRdAtomic;
  a.atomic_cap = IBV_ATOMIC_HCA;
  a.max_ah = 1 << 20;
  a.max_srq = 1 << 16;
  a.max_srq_wr = kMaxSrqWr;
  a.max_srq_sge = static_cast<int>(transport::kMaxSge);
  a.max_pkeys = 1;
  a.local_ca_ack_delay = 15;
  a.phys_port_cnt = 1;
}

void fill_port_attr(ibv_port_attr& a, uint32_t mtu, bool link_up, double rate_gbps) {
  a = ibv_port_attr{};
  a.state = link_up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  a.max_mtu = IBV_MTU_4096;
  a.active_mtu = transport::mtu_code(mtu).value_or(static_cast<ibv_mtu>(0));
  a.gid_tbl_len = kGidTableLen;
  a.port_cap_flags = 0;
  a.max_msg_sz = static_cast<uint32_t>(transport::kMaxMessageBytes);
  a.bad_pkey_cntr = 0;
  a.qkey_viol_cntr = 0;
  a.pkey_tbl_len = 1;
  a.lid = 0;
  a.sm_lid = 0;
  a.lmc = 0;
  a.max_vl_num = 1;
  a.sm_sl = 0;
  a.subnet_timeout = 0;
  a.init_type_reply = 0;
  // The link rate as IB width x speed (ibv_devinfo prints it; UCX derives
  // the bandwidth from it): 4X EDR is 100 Gb/s.
  const double r = rate_gbps <= 0 ? 100 : rate_gbps;
  if (r <= 10) {
    a.active_width = 1, a.active_speed = 4;  // 1X QDR
  } else if (r <= 25) {
    a.active_width = 1, a.active_speed = 32;  // 1X EDR
  } else if (r <= 50) {
    a.active_width = 1, a.active_speed = 64;  // 1X HDR
  } else if (r <= 100) {
    a.active_width = 2, a.active_speed = 32;  // 4X EDR
  } else if (r <= 200) {
    a.active_width = 2, a.active_speed = 64;  // 4X HDR
  } else {
    a.active_width = 2, a.active_speed = 128;  // 4X NDR
  }
  a.phys_state = link_up ? 5 : 3;  // LinkUp : Disabled (IBA 14.2.5.6)
  a.link_layer = IBV_LINK_LAYER_ETHERNET;
  a.flags = 0;
  a.port_cap_flags2 = 0;
}

// ---- memory regions ----------------------------------------------------------

int mr_access(unsigned access, uint32_t& out) {
  constexpr unsigned kKnown = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                              IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
                              IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | (1u << 8) |
                              (1u << 9);  // IBV_ACCESS_FLUSH_GLOBAL, _PERSISTENT
  // Optional bits (IBV_ACCESS_OPTIONAL_RANGE: relaxed ordering and what
  // follows) may be ignored by a device that does not know them.
  const unsigned mandatory = access & ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  if (mandatory & ~kKnown) return EINVAL;
  if (mandatory & (IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND |
                   (1u << 8) | (1u << 9)))
    return EOPNOTSUPP;
  // IBA 10.6.3.1: remote write or atomic access needs local write.
  if ((mandatory & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(mandatory & IBV_ACCESS_LOCAL_WRITE))
    return EINVAL;
  out = mandatory & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  return 0;
}

// ---- queue pairs -------------------------------------------------------------

int qp_type(ibv_qp_type t, transport::QpType& out) {
  switch (t) {
    case IBV_QPT_RC: out = transport::QpType::kRc; return 0;
    case IBV_QPT_UC: out = transport::QpType::kUc; return 0;
    case IBV_QPT_UD: out = transport::QpType::kUd; return 0;
    default: return EOPNOTSUPP;
  }
}

transport::QpState qp_state(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET: return transport::QpState::kReset;
    case IBV_QPS_INIT: return transport::QpState::kInit;
    case IBV_QPS_RTR: return transport::QpState::kRtr;
    case IBV_QPS_RTS: return transport::QpState::kRts;
    case IBV_QPS_SQD: return transport::QpState::kSqd;
    case IBV_QPS_SQE: return transport::QpState::kSqe;
    default: return transport::QpState::kErr;
  }
}

ibv_qp_state to_ibv_state(transport::QpState s) { return transport::to_ibv(s); }

int check_qp_mask(int mask) {
  constexpr int kUnsupported = IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
                               IBV_QP_EN_SQD_ASYNC_NOTIFY | IBV_QP_RATE_LIMIT;
  constexpr int kKnown = (IBV_QP_RATE_LIMIT << 1) - 1;
  if ((mask & ~kKnown) || (mask & IBV_QP_CAP)) return EINVAL;
  return (mask & kUnsupported) ? EOPNOTSUPP : 0;
}

int check_required_attrs(transport::QpType type, transport::QpState from,
                         transport::QpState to, int mask) {
  using S = transport::QpState;
  using T = transport::QpType;
  int need = IBV_QP_STATE;
  if (from == S::kReset && to == S::kInit) {
    need |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
    need |= type == T::kUd ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
  } else if (from == S::kInit && to == S::kRtr) {
    if (type == T::kRc)
      need |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
              IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    else if (type == T::kUc)
      need |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  } else if (from == S::kRtr && to == S::kRts) {
    need |= IBV_QP_SQ_PSN;
    if (type == T::kRc)
      need |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  return (mask & need) == need ? 0 : EINVAL;
}

void merge_qp_attr(ibv_qp_attr& s, const ibv_qp_attr& in, int mask) {
  if (mask & IBV_QP_STATE) s.qp_state = in.qp_state;
  if (mask & IBV_QP_ACCESS_FLAGS) s.qp_access_flags = in.qp_access_flags;
  if (mask & IBV_QP_PKEY_INDEX) s.pkey_index = in.pkey_index;
  if (mask & IBV_QP_PORT) s.port_num = in.port_num;
  if (mask & IBV_QP_QKEY) s.qkey = in.qkey;
  if (mask & IBV_QP_AV) s.ah_attr = in.ah_attr;
  if (mask & IBV_QP_PATH_MTU) s.path_mtu = in.path_mtu;
  if (mask & IBV_QP_TIMEOUT) s.timeout = in.timeout;
  if (mask & IBV_QP_RETRY_CNT) s.retry_cnt = in.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) s.rnr_retry = in.rnr_retry;
  if (mask & IBV_QP_RQ_PSN) s.rq_psn = in.rq_psn;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) s.max_rd_atomic = in.max_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) s.min_rnr_timer = in.min_rnr_timer;
  if (mask & IBV_QP_SQ_PSN) s.sq_psn = in.sq_psn;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) s.max_dest_rd_atomic = in.max_dest_rd_atomic;
  if (mask & IBV_QP_DEST_QPN) s.dest_qp_num = in.dest_qp_num;
}

int path_from_ah(const ibv_ah_attr& ah, const PathContext& ctx, wire::PathSpec& out) {
  // RoCE has no LIDs: the GRH is the address (RoCEv2 annex A17.4).
  if (!ah.is_global) return EINVAL;
  const ibv_global_route& grh = ah.grh;
  if (grh.sgid_index >= ctx.gids.size()) return EINVAL;
  wire::PathSpec p;
  p.src_mac = ctx.mac;
  p.src_ip = ip_of(ctx.gids[grh.sgid_index]);
  p.dst_ip = ip_of(grh.dgid);
  if (p.src_ip.v6 != p.dst_ip.v6) return EINVAL;
  // The traffic class is DSCP and ECN (RFC 2474, RFC 3168); ECN stays the
  // transport's (ECT(0) for data).
  p.dscp = grh.traffic_class ? static_cast<uint8_t>(grh.traffic_class >> 2) : ctx.dscp;
  p.ttl = grh.hop_limit ? grh.hop_limit : 64;
  p.flow_label = grh.flow_label & 0xfffff;
  for (const Neighbour& n : ctx.neighbours)
    if (n.ip == p.dst_ip) p.dst_mac = n.mac;
  if (wire::is_zero_mac(p.dst_mac))
    if (auto m = mac_of_link_local(grh.dgid)) p.dst_mac = *m;
  out = p;
  return 0;
}

transport::QpAttr to_transport_attr(const ibv_qp_attr& s, uint32_t port_mtu,
                                    const wire::PathSpec& path) {
  transport::QpAttr a;
  a.qp_access_flags = s.qp_access_flags &
                      (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  a.pkey = 0xffff;
  a.qkey = s.qkey;
  a.path = path;
  a.dest_qpn = s.dest_qp_num & transport::kQpnMask;
  a.rq_psn = s.rq_psn & wire::kPsnMask;
  const ibv_mtu port = transport::mtu_code(port_mtu).value_or(static_cast<ibv_mtu>(0));
  a.path_mtu = s.path_mtu >= IBV_MTU_256 && s.path_mtu <= port ? s.path_mtu : port;
  a.max_dest_rd_atomic = static_cast<uint8_t>(
      std::clamp<int>(s.max_dest_rd_atomic, 1, kMaxRdAtomic));
  a.min_rnr_timer = s.min_rnr_timer & 31;
  a.sq_psn = s.sq_psn & wire::kPsnMask;
  a.timeout = s.timeout == 0 ? 31 : std::min<uint8_t>(s.timeout, 31);
  a.retry_cnt = std::min<uint8_t>(s.retry_cnt, 7);
  a.rnr_retry = std::min<uint8_t>(s.rnr_retry, 7);
  a.max_rd_atomic = static_cast<uint8_t>(std::clamp<int>(s.max_rd_atomic, 1, kMaxRdAtomic));
  return a;
}

// ---- work requests and completions ----------------------------------------------

int to_send_wr(const ibv_send_wr& wr, std::span<transport::Sge> sges, transport::SendWr& out) {
  switch (wr.opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_SEND_WITH_INV:
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD: break;
    default: return EOPNOTSUPP;
  }
  if (wr.num_sge < 0 || static_cast<size_t>(wr.num_sge) > sges.size()) return EINVAL;
  for (int i = 0; i < wr.num_sge; ++i)
    sges[i] = transport::Sge{wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey};
  transport::SendWr w;
  w.wr_id = wr.wr_id;
  w.opcode = wr.opcode;
  w.send_flags = wr.send_flags & (IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED |
                                  IBV_SEND_INLINE);
  w.sg_list = sges.first(static_cast<size_t>(wr.num_sge));
  if (wr.opcode == IBV_WR_SEND_WITH_IMM || wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
    w.imm_data = be32toh(wr.imm_data);
  if (wr.opcode == IBV_WR_SEND_WITH_INV) w.invalidate_rkey = wr.invalidate_rkey;
  switch (wr.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
      w.remote_addr = wr.wr.rdma.remote_addr;
      w.rkey = wr.wr.rdma.rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      w.remote_addr = wr.wr.atomic.remote_addr;
      w.rkey = wr.wr.atomic.rkey;
      w.compare_add = wr.wr.atomic.compare_add;
      w.swap = wr.wr.atomic.swap;
      break;
    default: break;
  }
  out = w;
  return 0;
}

int to_recv_wr(const ibv_recv_wr& wr, std::span<transport::Sge> sges, transport::RecvWr& out) {
  if (wr.num_sge < 0 || static_cast<size_t>(wr.num_sge) > sges.size()) return EINVAL;
  for (int i = 0; i < wr.num_sge; ++i)
    sges[i] = transport::Sge{wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey};
  out.wr_id = wr.wr_id;
  out.sg_list = sges.first(static_cast<size_t>(wr.num_sge));
  return 0;
}

void to_ibv_wc(const transport::WorkCompletion& in, ibv_wc& out) {
  out = ibv_wc{};
  out.wr_id = in.wr_id;
  out.status = in.status;
  out.opcode = in.opcode;
  out.vendor_err = in.vendor_err;
  out.byte_len = in.byte_len;
  if (in.wc_flags & IBV_WC_WITH_INV) out.invalidated_rkey = in.invalidated_rkey;
  else out.imm_data = htobe32(in.imm_data);
  out.qp_num = in.qp_num;
  out.src_qp = in.src_qp;
  out.wc_flags = in.wc_flags;
  out.sl = in.sl;
  out.pkey_index = 0;
}

bool gids_of_grh(std::span<const uint8_t, 40> grh, ibv_gid& sgid, ibv_gid& dgid,
                 uint8_t& traffic_class, uint8_t& hop_limit, uint32_t& flow_label) {
  if ((grh[0] >> 4) == 6) {
    traffic_class = static_cast<uint8_t>(((grh[0] & 0x0f) << 4) | (grh[1] >> 4));
    flow_label = (static_cast<uint32_t>(grh[1] & 0x0f) << 16) |
                 (static_cast<uint32_t>(grh[2]) << 8) | grh[3];
    hop_limit = grh[7];
    std::memcpy(sgid.raw, grh.data() + 8, 16);
    std::memcpy(dgid.raw, grh.data() + 24, 16);
    return true;
  }
  const uint8_t* ip4 = grh.data() + 20;
  if (ip4[0] != 0x45) return false;
  traffic_class = ip4[1];
  flow_label = 0;
  hop_limit = ip4[8];
  wire::IpAddress s, d;
  std::memcpy(s.bytes, ip4 + 12, 4);
  std::memcpy(d.bytes, ip4 + 16, 4);
  sgid = gid_of(s);
  dgid = gid_of(d);
  return true;
}

}  // namespace droce::verbs
