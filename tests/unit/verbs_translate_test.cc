// libdroce-verbs' verbs <-> droce translation: GIDs, attributes, masks,
// work requests and completions as libibverbs applications use them.
#include "droce/verbs/translate.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "droce/options/values.h"
#include "droce/wire/ethernet.h"

namespace droce::verbs {
namespace {

const wire::MacAddress kMac{0x02, 0x00, 0x00, 0xaa, 0xbb, 0xcc};

wire::IpAddress ip(const char* text) {
  wire::IpAddress a;
  EXPECT_TRUE(options::try_parse_ip(text, a)) << text;
  return a;
}

ibv_gid gid_text(const char* text) {
  ibv_gid g{};
  EXPECT_EQ(inet_pton(AF_INET6, text, g.raw), 1) << text;
  return g;
}

TEST(VerbsGid, TableIsLinkLocalEui64ThenTheAddresses) {
  const wire::IpAddress addrs[] = {ip("10.0.0.1"), ip("fd00::7")};
  const auto t = gid_table(kMac, addrs);
  ASSERT_EQ(t.size(), 3u);
  // RFC 4291 appendix A: the U/L bit flipped, ff:fe in the middle.
  const ibv_gid want0 = gid_text("fe80::0000:00ff:feaa:bbcc");
  EXPECT_EQ(std::memcmp(t[0].raw, want0.raw, 16), 0);
  const ibv_gid want1 = gid_text("::ffff:10.0.0.1");
  EXPECT_EQ(std::memcmp(t[1].raw, want1.raw, 16), 0);
  const ibv_gid want2 = gid_text("fd00::7");
  EXPECT_EQ(std::memcmp(t[2].raw, want2.raw, 16), 0);
}

TEST(VerbsGid, GidToAddressAndBack) {
  EXPECT_EQ(ip_of(gid_text("::ffff:192.168.1.2")), ip("192.168.1.2"));
  EXPECT_EQ(ip_of(gid_text("fd00::1")), ip("fd00::1"));
  EXPECT_EQ(ip_of(gid_of(ip("10.1.2.3"))), ip("10.1.2.3"));
  EXPECT_EQ(mac_of_link_local(gid_table(kMac, {})[0]), kMac);
  EXPECT_FALSE(mac_of_link_local(gid_text("fd00::1")).has_value());
  EXPECT_FALSE(mac_of_link_local(gid_text("fe80::1")).has_value());
}

TEST(VerbsGid, NodeGuidIsTheEui64InNetworkOrder) {
  const uint64_t g = node_guid_be(kMac);
  uint8_t b[8];
  std::memcpy(b, &g, 8);
  const uint8_t want[8] = {0x00, 0x00, 0x00, 0xff, 0xfe, 0xaa, 0xbb, 0xcc};
  EXPECT_EQ(std::memcmp(b, want, 8), 0);
}

TEST(VerbsAttr, PortIsActiveEthernetWithItsMtu) {
  ibv_port_attr a;
  fill_port_attr(a, 1024, true, 100);
  EXPECT_EQ(a.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(a.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(a.active_mtu, IBV_MTU_1024);
  EXPECT_EQ(a.max_mtu, IBV_MTU_4096);
  EXPECT_EQ(a.gid_tbl_len, kGidTableLen);
  EXPECT_EQ(a.active_width, 2);   // 4X
  EXPECT_EQ(a.active_speed, 32);  // EDR: 4 x 25 Gb/s
  fill_port_attr(a, 4096, false, 25);
  EXPECT_EQ(a.state, IBV_PORT_DOWN);
  EXPECT_EQ(a.active_width, 1);
}

TEST(VerbsAttr, DeviceIsNotAMellanoxPart) {
  ibv_device_attr a;
  fill_device_attr(a, kMac);
  EXPECT_EQ(a.vendor_part_id, kVendorPartId);
  // perftest's table of ConnectX / BlueField part ids (4099..4131, 41682+).
  EXPECT_TRUE(a.vendor_part_id < 4096 || a.vendor_part_id > 4200);
  EXPECT_NE(a.vendor_part_id & 0xfff0, 0xa2d0u);
  EXPECT_EQ(a.phys_port_cnt, 1);
  EXPECT_EQ(a.atomic_cap, IBV_ATOMIC_HCA);
  EXPECT_EQ(a.max_sge, static_cast<int>(transport::kMaxSge));
  EXPECT_EQ(a.node_guid, node_guid_be(kMac));
}

TEST(VerbsAccess, RelaxedOrderingIsAcceptedUnknownBitsAreNot) {
  uint32_t out = 0;
  EXPECT_EQ(mr_access(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                          IBV_ACCESS_RELAXED_ORDERING, out),
            0);
  EXPECT_EQ(out, static_cast<uint32_t>(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  EXPECT_EQ(mr_access(IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE, out), EOPNOTSUPP);
  EXPECT_EQ(mr_access(IBV_ACCESS_MW_BIND, out), EOPNOTSUPP);
  EXPECT_EQ(mr_access(1u << 15, out), EINVAL);
  // IBA 10.6.3.1: remote write needs local write.
  EXPECT_EQ(mr_access(IBV_ACCESS_REMOTE_WRITE, out), EINVAL);
  EXPECT_EQ(mr_access(IBV_ACCESS_HUGETLB | IBV_ACCESS_REMOTE_READ, out), 0);
  EXPECT_EQ(out, static_cast<uint32_t>(IBV_ACCESS_REMOTE_READ));
}

TEST(VerbsQp, TypesAndStates) {
  transport::QpType t;
  EXPECT_EQ(qp_type(IBV_QPT_RC, t), 0);
  EXPECT_EQ(t, transport::QpType::kRc);
  EXPECT_EQ(qp_type(IBV_QPT_UD, t), 0);
  EXPECT_EQ(t, transport::QpType::kUd);
  EXPECT_EQ(qp_type(IBV_QPT_XRC_SEND, t), EOPNOTSUPP);
  EXPECT_EQ(qp_type(IBV_QPT_RAW_PACKET, t), EOPNOTSUPP);
  for (ibv_qp_state s : {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_ERR})
    EXPECT_EQ(to_ibv_state(qp_state(s)), s);
}

TEST(VerbsQp, MasksDroceDoesNotImplementAreRefused) {
  EXPECT_EQ(check_qp_mask(IBV_QP_STATE | IBV_QP_AV | IBV_QP_CUR_STATE), 0);
  // Not silently ignored: the queues keep their size, and the caller is told.
  EXPECT_EQ(check_qp_mask(IBV_QP_STATE | IBV_QP_CAP), EINVAL);
  EXPECT_EQ(check_qp_mask(IBV_QP_STATE | IBV_QP_ALT_PATH), EOPNOTSUPP);
  EXPECT_EQ(check_qp_mask(IBV_QP_PATH_MIG_STATE), EOPNOTSUPP);
  EXPECT_EQ(check_qp_mask(IBV_QP_RATE_LIMIT), EOPNOTSUPP);
  EXPECT_EQ(check_qp_mask(1 << 30), EINVAL);
}

TEST(VerbsQp, RequiredAttributesPerTransition) {
  using S = transport::QpState;
  using T = transport::QpType;
  const int init_rc = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  EXPECT_EQ(check_required_attrs(T::kRc, S::kReset, S::kInit, init_rc), 0);
  EXPECT_EQ(check_required_attrs(T::kRc, S::kReset, S::kInit, init_rc & ~IBV_QP_PORT), EINVAL);
  // UD takes a Q_Key instead of access flags.
  EXPECT_EQ(check_required_attrs(T::kUd, S::kReset, S::kInit, init_rc), EINVAL);
  EXPECT_EQ(check_required_attrs(T::kUd, S::kReset, S::kInit,
                                 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
            0);
  const int rtr_rc = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  EXPECT_EQ(check_required_attrs(T::kRc, S::kInit, S::kRtr, rtr_rc), 0);
  EXPECT_EQ(check_required_attrs(T::kRc, S::kInit, S::kRtr, rtr_rc & ~IBV_QP_MIN_RNR_TIMER),
            EINVAL);
  EXPECT_EQ(check_required_attrs(T::kUc, S::kInit, S::kRtr,
                                 rtr_rc & ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)),
            0);
  EXPECT_EQ(check_required_attrs(T::kUd, S::kInit, S::kRtr, IBV_QP_STATE), 0);
  EXPECT_EQ(check_required_attrs(T::kRc, S::kRtr, S::kRts, IBV_QP_STATE | IBV_QP_SQ_PSN),
            EINVAL);
  EXPECT_EQ(check_required_attrs(T::kUd, S::kRtr, S::kRts, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  EXPECT_EQ(check_required_attrs(T::kRc, S::kRts, S::kErr, IBV_QP_STATE), 0);
  EXPECT_EQ(check_required_attrs(T::kRc, S::kErr, S::kReset, IBV_QP_STATE), 0);
}

TEST(VerbsQp, MergeKeepsWhatEachModifySet) {
  ibv_qp_attr s{};
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
  a.sq_psn = 77;  // not in the mask: ignored
  merge_qp_attr(s, a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS);
  EXPECT_EQ(s.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(s.qp_access_flags, static_cast<unsigned>(IBV_ACCESS_REMOTE_READ));
  EXPECT_EQ(s.sq_psn, 0u);
  ibv_qp_attr b{};
  b.qp_state = IBV_QPS_RTR;
  b.dest_qp_num = 0x123;
  b.rq_psn = 5;
  merge_qp_attr(s, b, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
  EXPECT_EQ(s.qp_access_flags, static_cast<unsigned>(IBV_ACCESS_REMOTE_READ));
  EXPECT_EQ(s.dest_qp_num, 0x123u);
  EXPECT_EQ(s.rq_psn, 5u);
}

TEST(VerbsQp, TransportAttributes) {
  ibv_qp_attr s{};
  s.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  s.path_mtu = IBV_MTU_4096;
  s.dest_qp_num = 0x1000011;  // beyond 24 bits: masked
  s.rq_psn = 9;
  s.sq_psn = 10;
  s.timeout = 0;
  s.retry_cnt = 9;
  s.max_rd_atomic = 0;
  s.max_dest_rd_atomic = 200;
  wire::PathSpec p;
  p.dst_ip = ip("10.0.0.2");
  const transport::QpAttr a = to_transport_attr(s, 1024, p);
  EXPECT_EQ(a.qp_access_flags, static_cast<uint32_t>(IBV_ACCESS_REMOTE_WRITE));
  EXPECT_EQ(a.path_mtu, IBV_MTU_1024);  // capped at the port's
  EXPECT_EQ(a.dest_qpn, 0x11u);
  EXPECT_EQ(a.rq_psn, 9u);
  EXPECT_EQ(a.sq_psn, 10u);
  EXPECT_EQ(a.timeout, 31);  // IBA 9.7.6.1.3: 0 is infinite
  EXPECT_EQ(a.retry_cnt, 7);
  EXPECT_EQ(a.max_rd_atomic, 1);
  EXPECT_EQ(a.max_dest_rd_atomic, kMaxRdAtomic);
  EXPECT_EQ(a.path.dst_ip, ip("10.0.0.2"));
}

TEST(VerbsPath, FromAnAddressVector) {
  const wire::IpAddress addrs[] = {ip("10.0.0.1")};
  const auto gids = gid_table(kMac, addrs);
  const Neighbour nbs[] = {{ip("10.0.0.2"), {2, 0, 0, 0, 0, 2}}};
  const PathContext ctx{kMac, gids, nbs, 10};
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.port_num = 1;
  ah.grh.sgid_index = 1;
  ah.grh.dgid = gid_text("::ffff:10.0.0.2");
  ah.grh.hop_limit = 1;
  wire::PathSpec p;
  ASSERT_EQ(path_from_ah(ah, ctx, p), 0);
  EXPECT_EQ(p.src_ip, ip("10.0.0.1"));
  EXPECT_EQ(p.dst_ip, ip("10.0.0.2"));
  EXPECT_EQ(p.src_mac, kMac);
  EXPECT_EQ(p.dst_mac, (wire::MacAddress{2, 0, 0, 0, 0, 2}));
  EXPECT_EQ(p.dscp, 10);  // no traffic class: the configured DSCP
  EXPECT_EQ(p.ttl, 1);
  ah.grh.traffic_class = 26 << 2;
  ASSERT_EQ(path_from_ah(ah, ctx, p), 0);
  EXPECT_EQ(p.dscp, 26);
  // An unknown IPv4 peer: no MAC (the engine resolves it).
  ah.grh.dgid = gid_text("::ffff:10.0.0.9");
  ASSERT_EQ(path_from_ah(ah, ctx, p), 0);
  EXPECT_TRUE(wire::is_zero_mac(p.dst_mac));
  // A link-local peer carries its MAC.
  const wire::MacAddress peer{0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  ah.grh.sgid_index = 0;
  ah.grh.dgid = gid_table(peer, {})[0];
  ASSERT_EQ(path_from_ah(ah, ctx, p), 0);
  EXPECT_EQ(p.dst_mac, peer);
  EXPECT_TRUE(p.src_ip.v6);
  // Mistakes.
  ah.grh.sgid_index = 1;  // IPv4 source, IPv6 destination
  EXPECT_EQ(path_from_ah(ah, ctx, p), EINVAL);
  ah.grh.sgid_index = 5;
  EXPECT_EQ(path_from_ah(ah, ctx, p), EINVAL);
  ah.grh.sgid_index = 0;
  ah.is_global = 0;  // RoCE needs the GRH
  EXPECT_EQ(path_from_ah(ah, ctx, p), EINVAL);
}

TEST(VerbsWr, SendWorkRequests) {
  uint8_t buf[64];
  ibv_sge sge[2] = {{reinterpret_cast<uintptr_t>(buf), 16, 0x100},
                    {reinterpret_cast<uintptr_t>(buf + 16), 8, 0x100}};
  ibv_send_wr wr{};
  wr.wr_id = 42;
  wr.sg_list = sge;
  wr.num_sge = 2;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE | IBV_SEND_IP_CSUM;
  wr.imm_data = htonl(0x11223344);
  wr.wr.rdma.remote_addr = 0x1000;
  wr.wr.rdma.rkey = 0x55;
  std::array<transport::Sge, transport::kMaxSge> sges;
  transport::SendWr out;
  ASSERT_EQ(to_send_wr(wr, sges, out), 0);
  EXPECT_EQ(out.wr_id, 42u);
  EXPECT_EQ(out.opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
  EXPECT_EQ(out.send_flags, static_cast<unsigned>(IBV_SEND_SIGNALED | IBV_SEND_INLINE));
  EXPECT_EQ(out.imm_data, 0x11223344u);  // host order in droce
  EXPECT_EQ(out.remote_addr, 0x1000u);
  EXPECT_EQ(out.rkey, 0x55u);
  ASSERT_EQ(out.sg_list.size(), 2u);
  EXPECT_EQ(out.sg_list[1].length, 8u);
  wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
  wr.wr.atomic.remote_addr = 0x2000;
  wr.wr.atomic.rkey = 0x66;
  wr.wr.atomic.compare_add = 1;
  wr.wr.atomic.swap = 2;
  ASSERT_EQ(to_send_wr(wr, sges, out), 0);
  EXPECT_EQ(out.remote_addr, 0x2000u);
  EXPECT_EQ(out.rkey, 0x66u);
  EXPECT_EQ(out.compare_add, 1u);
  EXPECT_EQ(out.swap, 2u);
  for (ibv_wr_opcode op : {IBV_WR_LOCAL_INV, IBV_WR_BIND_MW, IBV_WR_TSO, IBV_WR_ATOMIC_WRITE})
    EXPECT_EQ((wr.opcode = op, to_send_wr(wr, sges, out)), EOPNOTSUPP);
  wr.opcode = IBV_WR_SEND;
  wr.num_sge = transport::kMaxSge + 1;
  EXPECT_EQ(to_send_wr(wr, sges, out), EINVAL);
}

TEST(VerbsWc, CompletionsInVerbsTerms) {
  transport::WorkCompletion w;
  w.wr_id = 7;
  w.status = IBV_WC_REM_ACCESS_ERR;
  w.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
  w.byte_len = 100;
  w.imm_data = 0x01020304;
  w.qp_num = 0x12;
  w.src_qp = 0x34;
  w.wc_flags = IBV_WC_WITH_IMM | IBV_WC_GRH;
  w.sl = transport::kWcSlRoceV2Ipv6;
  ibv_wc wc;
  to_ibv_wc(w, wc);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc.byte_len, 100u);
  EXPECT_EQ(wc.imm_data, htonl(0x01020304));
  EXPECT_EQ(wc.qp_num, 0x12u);
  EXPECT_EQ(wc.src_qp, 0x34u);
  EXPECT_EQ(wc.wc_flags, static_cast<unsigned>(IBV_WC_WITH_IMM | IBV_WC_GRH));
  EXPECT_EQ(wc.sl, transport::kWcSlRoceV2Ipv6);
  w.wc_flags = IBV_WC_WITH_INV;
  w.invalidated_rkey = 0x99;
  to_ibv_wc(w, wc);
  EXPECT_EQ(wc.invalidated_rkey, 0x99u);
}

TEST(VerbsGrh, Ipv4HeaderInTheLast20Bytes) {
  std::array<uint8_t, 40> grh{};
  uint8_t* h = grh.data() + 20;
  h[0] = 0x45;
  h[1] = 26 << 2;
  h[8] = 63;
  const uint8_t s[4] = {10, 0, 0, 2}, d[4] = {10, 0, 0, 1};
  std::memcpy(h + 12, s, 4);
  std::memcpy(h + 16, d, 4);
  ibv_gid sg, dg;
  uint8_t tc, hop;
  uint32_t flow;
  ASSERT_TRUE(gids_of_grh(grh, sg, dg, tc, hop, flow));
  EXPECT_EQ(ip_of(sg), ip("10.0.0.2"));
  EXPECT_EQ(ip_of(dg), ip("10.0.0.1"));
  EXPECT_EQ(tc, 26 << 2);
  EXPECT_EQ(hop, 63);
  std::array<uint8_t, 40> v6{};
  v6[0] = 0x61;  // version 6, traffic class 0x1f
  v6[1] = 0xf1;  // ... flow label 0x1abcd
  v6[2] = 0xab;
  v6[3] = 0xcd;
  v6[7] = 5;
  const ibv_gid a = gid_text("fd00::2"), b = gid_text("fd00::1");
  std::memcpy(v6.data() + 8, a.raw, 16);
  std::memcpy(v6.data() + 24, b.raw, 16);
  ASSERT_TRUE(gids_of_grh(v6, sg, dg, tc, hop, flow));
  EXPECT_EQ(ip_of(sg), ip("fd00::2"));
  EXPECT_EQ(ip_of(dg), ip("fd00::1"));
  EXPECT_EQ(tc, 0x1f);
  EXPECT_EQ(flow, 0x1abcdu);
  EXPECT_EQ(hop, 5);
  std::array<uint8_t, 40> junk{};
  EXPECT_FALSE(gids_of_grh(junk, sg, dg, tc, hop, flow));
}

}  // namespace
}  // namespace droce::verbs
