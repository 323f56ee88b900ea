// droce-endpoint's configuration (src/endpoint_config): the TOML schema, the
// flags, region fills, a port's interface and a QP's path, the completions
// file's lines.
#include "droce/endpoint_config/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <vector>

#include "droce/endpoint_config/completion_log.h"

#include "config_error_util.h"

namespace droce::endpoint_config {
namespace {

using droce::testing::config_error_of;

Definitions load(const std::string& text) {
  Definitions d;
  load_config_text(text, "ep.toml", d);
  return d;
}

TEST(EndpointConfig, RegionsAndQpsFromTheFile) {
  const Definitions d = load(R"(
[[mr]]
length = 65536
key = 0x1234
iova = 0x10000
fill = "counter"
access = ["local_write", "remote_read"]

[[qp]]
qpn = 0x11
peer_qpn = 0x22
type = "uc"
mtu = 4096
local_ip = "10.0.0.1"
peer_ip = "10.0.0.2"
peer_mac = "02:00:00:00:00:02"
dscp = 10
pcp = 3
pkey = 0x8001
max_dest_rd_atomic = 8
selective_repeat = true
honour_credits = true
access = ["remote_write"]
recv = { count = 16, length = 1024, mr = 0x1234 }
)");
  ASSERT_EQ(d.mrs.size(), 1u);
  EXPECT_EQ(d.mrs[0].key, 0x1234u);
  EXPECT_EQ(d.mrs[0].fill, Fill::kCounter);
  EXPECT_EQ(d.mrs[0].access, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_EQ(d.qps.size(), 1u);
  const QpDef& q = d.qps[0];
  EXPECT_EQ(q.spec.qpn, 0x11u);
  EXPECT_EQ(q.spec.type, transport::QpType::kUc);
  EXPECT_EQ(q.attr.dest_qpn, 0x22u);
  EXPECT_EQ(q.attr.path_mtu, IBV_MTU_4096);
  EXPECT_EQ(q.attr.pkey, 0x8001);
  EXPECT_EQ(q.attr.max_dest_rd_atomic, 8);
  EXPECT_EQ(q.attr.recovery, transport::Recovery::kSelectiveRepeat);
  EXPECT_TRUE(q.attr.honour_credits);
  EXPECT_EQ(q.attr.qp_access_flags, static_cast<uint32_t>(IBV_ACCESS_REMOTE_WRITE));
  EXPECT_EQ(q.attr.path.dscp, 10);
  EXPECT_TRUE(q.attr.path.vlan);  // PCP alone: a priority tag
  EXPECT_EQ(q.recv_count, 16u);
  EXPECT_EQ(q.recv_mr, 0x1234u);
}

TEST(EndpointConfig, MistakesNameTheirKey) {
  EXPECT_NE(config_error_of([] { load("[[mr]]\nlenght = 1\n"); }).find("mr[0].lenght: unknown key"),
            std::string::npos);
  EXPECT_NE(config_error_of([] { load("[[mr]]\nkey = 1\n"); }).find("mr[0].length: missing"),
            std::string::npos);
  EXPECT_NE(config_error_of([] { load("[[qp]]\nqpn = 1\nmtu = 1500\n"); }).find("qp[0].mtu"),
            std::string::npos);
  // IBA 10.9: partition 0 is invalid.
  EXPECT_NE(config_error_of([] { load("[[qp]]\nqpn = 1\npkey = 0x8000\n"); })
                .find("qp[0].pkey: 0x8000 is in the invalid partition 0"),
            std::string::npos);
  EXPECT_NE(config_error_of([] { load("[[qp]]\nqpn = 1\nmax_dest_rd_atomic = 0\n"); })
                .find("qp[0].max_dest_rd_atomic"),
            std::string::npos);
  EXPECT_NE(config_error_of([] { load("[[qp]]\nqpn = 1\necn = \"red\"\n"); }).find("qp[0].ecn"),
            std::string::npos);
  EXPECT_NE(config_error_of([] { load("[[qp]\n"); }).find("ep.toml:1:"), std::string::npos);
  EXPECT_NE(config_error_of([] { load("[[mr]]\nlength = 1\nfill = \"ones\"\n"); })
                .find("mr[0].fill: 'ones' is not a fill pattern"),
            std::string::npos);
}

// docs/MULTIPATH.md: the keys of droce-sim's flows, per QP.
TEST(EndpointConfig, MultipathKeysSetTheQp) {
  const Definitions d = load(R"(
[[qp]]
qpn = 0x11
recovery = "sr"
entropy = "spray"
entropy_paths = 8
reorder_tolerance = 64

[[qp]]
qpn = 0x12
selective_repeat = true
entropy = "flowlet"
entropy_paths = "16"
flowlet_gap = "4us"

[[qp]]
qpn = 0x13
recovery = "selective_repeat"
flowlet_gap = 2000
entropy = "flowlet"
reorder_window = "20us"
reorder_window_min = "2us"
reth_every_packet = true
tail_probe = true

[[qp]]
qpn = 0x14
)");
  ASSERT_EQ(d.qps.size(), 4u);
  const transport::QpAttr& a = d.qps[0].attr;
  EXPECT_EQ(a.recovery, transport::Recovery::kSelectiveRepeat);
  EXPECT_EQ(a.entropy.mode, transport::EntropyMode::kSpray);
  EXPECT_EQ(a.entropy.paths, 8u);
  EXPECT_EQ(a.sr_reorder_tolerance_pkts, 64u);
  const transport::QpAttr& b = d.qps[1].attr;
  EXPECT_EQ(b.recovery, transport::Recovery::kSelectiveRepeat);
  EXPECT_EQ(b.entropy.mode, transport::EntropyMode::kFlowlet);
  EXPECT_EQ(b.entropy.paths, 16u);
  EXPECT_EQ(b.entropy.flowlet_gap_ns, 4'000u);
  EXPECT_EQ(b.sr_reorder_tolerance_pkts, 0u);
  EXPECT_EQ(d.qps[2].attr.entropy.flowlet_gap_ns, 2'000u);  // an integer is nanoseconds
  EXPECT_EQ(d.qps[2].attr.sr_reorder_window_ns, 20'000u);
  EXPECT_EQ(d.qps[2].attr.sr_reorder_window_min_ns, 2'000u);
  EXPECT_TRUE(d.qps[2].attr.write_reth_every_packet);
  EXPECT_TRUE(d.qps[2].attr.sr_tail_probe);
  EXPECT_FALSE(b.sr_tail_probe);
  EXPECT_EQ(b.sr_reorder_window_ns, 0u);
  EXPECT_FALSE(b.write_reth_every_packet);
  const transport::QpAttr& def = d.qps[3].attr;
  const transport::QpAttr none;
  EXPECT_EQ(def.recovery, transport::Recovery::kGoBackN);
  EXPECT_EQ(def.entropy.mode, transport::EntropyMode::kFixed);
  EXPECT_EQ(def.entropy.paths, none.entropy.paths);
  EXPECT_EQ(def.entropy.flowlet_gap_ns, none.entropy.flowlet_gap_ns);
}

TEST(EndpointConfig, MultipathMistakesNameTheirKey) {
  auto err = [](const std::string& keys) {
    return config_error_of([&] { load("[[qp]]\nqpn = 1\n" + keys); });
  };
  // What the transport would refuse with EINVAL, refused by name.
  EXPECT_NE(err("entropy = \"spray\"\n").find("qp[0].entropy: spray reorders packets: it "
                                               "needs qp[0].recovery sr"),
            std::string::npos)
      << err("entropy = \"spray\"\n");
  EXPECT_NE(err("recovery = \"gbn\"\nentropy = \"flowlet\"\n").find("qp[0].entropy:"),
            std::string::npos);
  EXPECT_NE(err("recovery = \"sr\"\nentropy = \"spray\"\ntype = \"uc\"\n")
                .find("qp[0].entropy: spray needs type = \"rc\""),
            std::string::npos);
  EXPECT_NE(err("entropy = \"ecmp\"\n").find("qp[0].entropy: 'ecmp' is not an entropy mode"),
            std::string::npos);
  EXPECT_NE(err("recovery = \"irn\"\n").find("qp[0].recovery: 'irn'"), std::string::npos);
  EXPECT_NE(err("recovery = \"sr\"\nentropy = \"spray\"\nentropy_paths = 0\n")
                .find("qp[0].entropy_paths: 0 is out of range 1..16384"),
            std::string::npos);
  EXPECT_NE(err("recovery = \"sr\"\nentropy = \"spray\"\nentropy_paths = 16385\n")
                .find("qp[0].entropy_paths"),
            std::string::npos);
  EXPECT_NE(err("recovery = \"sr\"\nentropy = \"flowlet\"\nflowlet_gap = \"4 weeks\"\n")
                .find("qp[0].flowlet_gap: '4 weeks' is not a time"),
            std::string::npos);
  EXPECT_NE(err("reorder_tolerance = 64\n").find("qp[0].reorder_tolerance: is selective "
                                                 "repeat's"),
            std::string::npos);
  EXPECT_NE(err("recovery = \"sr\"\nentropy_paths = 8\n").find("qp[0].entropy_paths: needs"),
            std::string::npos);
  EXPECT_NE(err("reorder_window = \"20us\"\n").find("qp[0].reorder_window: is selective "
                                                   "repeat's"),
            std::string::npos);
  EXPECT_NE(err("recovery = \"sr\"\ntail_probe = true\n")
                .find("qp[0].tail_probe: is RACK's: it needs qp[0].reorder_window"),
            std::string::npos);
  EXPECT_NE(err("tail_probe = 1\n").find("qp[0].tail_probe: expected true or false"),
            std::string::npos);
  EXPECT_NE(err("reth_every_packet = 1\n").find("qp[0].reth_every_packet: expected true or "
                                               "false"),
            std::string::npos);
  EXPECT_NE(err("recovery = \"gbn\"\nselective_repeat = true\n")
                .find("qp[0].selective_repeat: true contradicts recovery = \"gbn\""),
            std::string::npos);
  EXPECT_NE(err("recovery = 1\n").find("qp[0].recovery: expected a string"), std::string::npos);
}

TEST(EndpointConfig, FlagsDefineOneRegionAndOneQp) {
  FlagDefs f;
  f.mr_size = "4096";
  f.mr_key = "0x99";
  f.qpn = "0x11";
  f.peer_qpn = "0x22";
  f.local_ip = "fd00::1";
  f.peer_ip = "fd00::2";
  f.recv_wqes = 4;
  f.cc_params = {"g=0.5"};
  Definitions d;
  flags_to_defs(f, d);
  ASSERT_EQ(d.mrs.size(), 1u);
  ASSERT_EQ(d.qps.size(), 1u);
  EXPECT_EQ(d.qps[0].recv_mr, 0x99u);
  EXPECT_EQ(d.qps[0].spec.cc_params.at("g"), "0.5");
  EXPECT_TRUE(d.qps[0].attr.path.src_ip.v6);
  FlagDefs bad;
  bad.mr_key = "1";
  Definitions e;
  EXPECT_NE(config_error_of([&] { flags_to_defs(bad, e); }).find("--mr-key: needs --mr-size"),
            std::string::npos);
  FlagDefs bad_param;
  bad_param.qpn = "1";
  bad_param.cc_params = {"=1"};
  EXPECT_NE(config_error_of([&] { flags_to_defs(bad_param, e); }).find("--cc-param"), std::string::npos);
}

TEST(EndpointConfig, FlagsSetTheFlagQpsMultipath) {
  FlagDefs f;
  f.qpn = "0x11";
  f.multipath.recovery = "sr";
  f.multipath.entropy = "spray";
  f.multipath.entropy_paths = "8";
  Definitions d;
  flags_to_defs(f, d);
  ASSERT_EQ(d.qps.size(), 1u);
  EXPECT_EQ(d.qps[0].attr.recovery, transport::Recovery::kSelectiveRepeat);
  EXPECT_EQ(d.qps[0].attr.entropy.mode, transport::EntropyMode::kSpray);
  EXPECT_EQ(d.qps[0].attr.entropy.paths, 8u);
  FlagDefs no_sr;
  no_sr.qpn = "0x11";
  no_sr.multipath.entropy = "flowlet";
  Definitions e;
  EXPECT_NE(config_error_of([&] { flags_to_defs(no_sr, e); })
                .find("--entropy: flowlet reorders packets: it needs --recovery sr"),
            std::string::npos);
  FlagDefs ud = f;
  ud.qp_type = "ud";
  EXPECT_NE(config_error_of([&] { flags_to_defs(ud, e); })
                .find("--entropy: spray needs --qp-type rc"),
            std::string::npos);
}

TEST(EndpointConfig, CounterFillIsByVirtualAddress) {
  MrDef d;
  d.fill = Fill::kCounter;
  std::vector<uint8_t> mem(512);
  fill_region(mem.data(), mem.size(), 0x1080, d);
  EXPECT_EQ(mem[0], 0x80);  // VA 0x1080
  EXPECT_EQ(mem[0x80], 0x00);
  d.fill = Fill::kByte;
  d.fill_byte = 0x5a;
  fill_region(mem.data(), mem.size(), 0, d);
  EXPECT_EQ(mem[300], 0x5a);
}

TEST(EndpointConfig, FileFillMustFitTheRegion) {
  const std::string path = ::testing::TempDir() + "/droce_fill.bin";
  std::ofstream(path, std::ios::binary) << "abcdef";
  MrDef d;
  d.fill = Fill::kFile;
  d.fill_file = path;
  d.fill_option = "mr[0].fill";
  std::vector<uint8_t> mem(8, 0);
  fill_region(mem.data(), mem.size(), 0, d);
  EXPECT_EQ(std::string(mem.begin(), mem.begin() + 6), "abcdef");
  EXPECT_EQ(mem[7], 0);  // the rest stays zero
  std::vector<uint8_t> small(4);
  EXPECT_NE(config_error_of([&] { fill_region(small.data(), small.size(), 0, d); })
                .find("is longer than the region"),
            std::string::npos);
  std::remove(path.c_str());
}

TEST(EndpointConfig, APortsInterfaceComesFromItsQps) {
  const Definitions d = load(R"(
[[qp]]
qpn = 1
local_ip = "10.0.0.1"
local_mac = "02:00:00:00:00:aa"
vlan = 7
[[qp]]
qpn = 2
local_ip = "10.0.0.1"
[[qp]]
port = 1
qpn = 3
local_ip = "10.0.1.1"
)");
  wire::IpAddress extra;
  ASSERT_TRUE(options::try_parse_ip("10.0.0.9", extra));
  const endpoint::InterfaceConfig itf = port_interface(0, {extra}, d.qps);
  ASSERT_EQ(itf.addresses.size(), 2u);  // the extra one, then 10.0.0.1 once
  EXPECT_EQ(options::format_ip(itf.addresses[1]), "10.0.0.1");
  EXPECT_EQ(options::format_mac(itf.mac), "02:00:00:00:00:aa");
  EXPECT_TRUE(itf.vlan);
  EXPECT_EQ(itf.vlan_id, 7);
  EXPECT_EQ(port_interface(1, {}, d.qps).addresses.size(), 1u);
}

TEST(EndpointConfig, AQpsPathNeedsItsAddresses) {
  Definitions d = load("[[qp]]\nqpn = 1\npeer_qpn = 2\nlocal_ip = \"10.0.0.1\"\n");
  EXPECT_NE(config_error_of([&] { finish_path(d.qps[0], {}); }).find("peer_ip (--peer-ip) is required"),
            std::string::npos);
  Definitions ud = load("[[qp]]\nqpn = 1\ntype = \"ud\"\nlocal_ip = \"fd00::1\"\n");
  finish_path(ud.qps[0], {2, 0, 0, 0, 0, 1});
  EXPECT_TRUE(ud.qps[0].attr.path.dst_ip.v6);
  EXPECT_EQ(ud.qps[0].attr.path.src_mac, (wire::MacAddress{2, 0, 0, 0, 0, 1}));
  Definitions mixed =
      load("[[qp]]\nqpn = 1\nlocal_ip = \"10.0.0.1\"\npeer_ip = \"fd00::2\"\n");
  EXPECT_NE(config_error_of([&] { finish_path(mixed.qps[0], {}); }).find("same family"),
            std::string::npos);
  // RoCEv2's UDP source port carries the flow's entropy (annex A17.4.3).
  Definitions rc = load("[[qp]]\nqpn = 1\npeer_qpn = 2\nlocal_ip = \"10.0.0.1\"\n"
                        "peer_ip = \"10.0.0.2\"\n");
  finish_path(rc.qps[0], {});
  EXPECT_EQ(rc.qps[0].attr.path.udp_src_port, wire::udp_src_port_entropy(1, 2));
}

TEST(EndpointConfig, ACompletionIsOneJsonLineWithEveryField) {
  transport::WorkCompletion wc;
  wc.wr_id = 7;
  wc.status = IBV_WC_REM_ACCESS_ERR;
  wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
  wc.byte_len = 64;
  wc.imm_data = 0xabcd;
  wc.wc_flags = IBV_WC_WITH_IMM;
  wc.qp_num = 0x11;
  const std::string line = completion_line(1, wc, 123);
  EXPECT_EQ(line.back(), '\n');
  for (const char* want : {"\"time_ns\":123", "\"port\":1", "\"qpn\":17", "\"wr_id\":7",
                           "\"status_name\":\"rem_access_err\"",
                           "\"opcode_name\":\"recv_rdma_with_imm\"", "\"byte_len\":64",
                           "\"imm_data\":43981", "\"flags\":[\"with_imm\"]"})
    EXPECT_NE(line.find(want), std::string::npos) << want << " in " << line;
  EXPECT_NE(config_error_of([] { CompletionLog log("/nonexistent-dir/c.jsonl"); }).find("--completions"),
            std::string::npos);
}

}  // namespace
}  // namespace droce::endpoint_config
