// Writes the seed corpus of responder_fuzz (tests/fuzz/corpus/responder/):
//   responder_corpus_gen OUT_DIR
// Each seed is a short, valid conversation in the format of responder_fuzz.h:
// requests of every kind to the RC / UC / UD QPs (the control bits patch in
// the live dest QPN, expected PSN and MR A's rkey), plus a few deliberate
// misses (read-only MR, stale key, out of range, out of order, duplicate)
// and responses to a WR the bench posts. Deterministic.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "droce/wire/build.h"
#include "droce/wire/opcode.h"
#include "responder_fuzz.h"

namespace droce::fuzz {
namespace {

struct Seed {
  std::string name;
  std::vector<uint8_t> bytes;

  explicit Seed(std::string n, uint8_t setup = 1) : name(std::move(n)), bytes{setup} {}

  // One record: `t` goes to QP `qp` (by QPN), ctrl/word bits on top.
  Seed& add(wire::TransportSpec t, size_t payload_len, uint8_t ctrl, uint16_t word = 0) {
    const uint8_t qp = ctrl & kCtrlQpMask;
    wire::PathSpec p;
    p.src_mac = {2, 0, 0, 0, 0, 2};
    p.dst_mac = {2, 0, 0, 0, 0, 1};
    p.src_ip = wire::IpAddress::v4(0x0A000002);
    p.dst_ip = wire::IpAddress::v4(0x0A000001);
    p.udp_src_port = wire::udp_src_port_entropy(kPeerQpn, kQpnBase + qp);
    t.dest_qp = kQpnBase + qp;
    if (t.deth_qkey == 0) t.deth_qkey = kQkey;
    t.deth_src_qp = kPeerQpn;
    std::vector<uint8_t> payload(payload_len);
    for (size_t i = 0; i < payload_len; ++i) payload[i] = static_cast<uint8_t>(i + 7);
    std::vector<uint8_t> f(wire::packet_size(p, t.opcode, payload_len));
    if (wire::build_packet(p, t, payload, f) != f.size()) {
      std::fprintf(stderr, "%s: build_packet failed\n", name.c_str());
      std::exit(1);
    }
    const uint16_t w = static_cast<uint16_t>(word | f.size());
    bytes.push_back(ctrl);
    bytes.push_back(static_cast<uint8_t>(w >> 8));
    bytes.push_back(static_cast<uint8_t>(w));
    bytes.insert(bytes.end(), f.begin(), f.end());
    return *this;
  }
};

// Request to QP `qp` at its expected PSN, rkey := MR A (ctrl key 1).
constexpr uint8_t kLive = kCtrlPatchQpn | kCtrlPatchPsn | (1 << kCtrlKeyShift);

wire::TransportSpec op(uint8_t opcode, uint64_t va = 0, uint32_t len = 0) {
  wire::TransportSpec t;
  t.opcode = opcode;
  t.ack_req = true;
  t.reth_va = t.atomic_va = va;
  t.reth_dma_length = len;
  t.atomic_swap_add = 5;
  t.atomic_compare = 0;
  t.imm_data = 0xC0FFEE;
  return t;
}

std::vector<Seed> seeds() {
  std::vector<Seed> s;
  const uint64_t a = kIovaA;
  // MTU 256 (setup 0) for multi-packet messages.
  s.emplace_back("rc_write_only").add(op(IBV_OPCODE_RC_RDMA_WRITE_ONLY, a + 64, 100), 100, kLive);
  s.emplace_back("rc_write_first_middle_last", 0)
      .add(op(IBV_OPCODE_RC_RDMA_WRITE_FIRST, a + 256, 612), 256, kLive)
      .add(op(IBV_OPCODE_RC_RDMA_WRITE_MIDDLE), 256, kLive)
      .add(op(IBV_OPCODE_RC_RDMA_WRITE_LAST), 100, kLive);
  s.emplace_back("rc_write_first_last_imm", 0)
      .add(op(IBV_OPCODE_RC_RDMA_WRITE_FIRST, a + 1000, 300), 256, kLive)
      .add(op(IBV_OPCODE_RC_RDMA_WRITE_LAST_WITH_IMMEDIATE), 44, kLive);
  s.emplace_back("rc_write_only_imm").add(op(IBV_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, a, 9), 9, kLive);
  s.emplace_back("rc_write_zero_length").add(op(IBV_OPCODE_RC_RDMA_WRITE_ONLY, 0, 0), 0, kLive);
  s.emplace_back("rc_send_only").add(op(IBV_OPCODE_RC_SEND_ONLY), 100, kLive);
  s.emplace_back("rc_send_first_middle_last", 0)
      .add(op(IBV_OPCODE_RC_SEND_FIRST), 256, kLive)
      .add(op(IBV_OPCODE_RC_SEND_MIDDLE), 256, kLive)
      .add(op(IBV_OPCODE_RC_SEND_LAST_WITH_IMMEDIATE), 3, kLive);
  s.emplace_back("rc_send_too_long", 0)
      .add(op(IBV_OPCODE_RC_SEND_FIRST), 256, kLive)
      .add(op(IBV_OPCODE_RC_SEND_MIDDLE), 256, kLive)
      .add(op(IBV_OPCODE_RC_SEND_MIDDLE), 256, kLive)
      .add(op(IBV_OPCODE_RC_SEND_LAST), 256, kLive);
  s.emplace_back("rc_send_only_imm").add(op(IBV_OPCODE_RC_SEND_ONLY_WITH_IMMEDIATE), 17, kLive);
  s.emplace_back("rc_send_only_inv").add(op(wire::kOpRcSendOnlyWithInvalidate), 8, kLive)
      .add(op(IBV_OPCODE_RC_RDMA_WRITE_ONLY, a, 8), 8, kLive);  // key now invalid
  s.emplace_back("rc_send_rnr", 1)
      .add(op(IBV_OPCODE_RC_SEND_ONLY), 10, kLive, kWordNoRecv)
      .add(op(IBV_OPCODE_RC_SEND_ONLY), 10, kLive, kWordNoRecv)
      .add(op(IBV_OPCODE_RC_SEND_ONLY), 10, kLive, kWordNoRecv);
  s.emplace_back("rc_read_request").add(op(IBV_OPCODE_RC_RDMA_READ_REQUEST, a + 100, 3000), 0, kLive);
  s.emplace_back("rc_read_request_mr_b")
      .add(op(IBV_OPCODE_RC_RDMA_READ_REQUEST, kIovaB, 4096), 0,
           kCtrlPatchQpn | kCtrlPatchPsn | (2 << kCtrlKeyShift));
  s.emplace_back("rc_read_then_duplicate", 0)
      .add(op(IBV_OPCODE_RC_RDMA_READ_REQUEST, a, 1000), 0, kLive)
      .add([&] { auto t = op(IBV_OPCODE_RC_RDMA_READ_REQUEST, a + 256, 300);
                 t.psn = kRqPsn[kRcGbn] + 1; return t; }(), 0,
           kCtrlPatchQpn | (1 << kCtrlKeyShift));
  s.emplace_back("rc_cmp_swap").add(op(IBV_OPCODE_RC_COMPARE_SWAP, a + 8), 0, kLive);
  s.emplace_back("rc_fetch_add_twice")
      .add(op(IBV_OPCODE_RC_FETCH_ADD, a + 16), 0, kLive)
      .add([&] { auto t = op(IBV_OPCODE_RC_FETCH_ADD, a + 16);
                 t.psn = kRqPsn[kRcGbn]; return t; }(), 0,
           kCtrlPatchQpn | (1 << kCtrlKeyShift));  // duplicate: replay cache
  s.emplace_back("rc_atomic_misaligned").add(op(IBV_OPCODE_RC_FETCH_ADD, a + 3), 0, kLive);
  s.emplace_back("rc_write_mr_b").add(op(IBV_OPCODE_RC_RDMA_WRITE_ONLY, kIovaB, 64), 64,
                                      kCtrlPatchQpn | kCtrlPatchPsn | (2 << kCtrlKeyShift));
  s.emplace_back("rc_write_stale_key").add(op(IBV_OPCODE_RC_RDMA_WRITE_ONLY, a, 64), 64,
                                           kCtrlPatchQpn | kCtrlPatchPsn | (3 << kCtrlKeyShift));
  s.emplace_back("rc_write_out_of_range")
      .add(op(IBV_OPCODE_RC_RDMA_WRITE_ONLY, a + kLenA - 32, 64), 64, kLive);
  s.emplace_back("rc_write_strict_icrc")
      .add(op(IBV_OPCODE_RC_RDMA_WRITE_ONLY, a, 32), 32, kLive | kCtrlStrict);
  s.emplace_back("rc_out_of_order_gbn")
      .add([&] { auto t = op(IBV_OPCODE_RC_SEND_ONLY); t.psn = kRqPsn[kRcGbn] + 2; return t; }(),
           16, kCtrlPatchQpn)
      .add(op(IBV_OPCODE_RC_SEND_ONLY), 16, kLive);
  s.emplace_back("rc_sr_write_out_of_order", 0)
      .add(op(IBV_OPCODE_RC_RDMA_WRITE_FIRST, a, 768), 256, kLive | kRcSr)
      .add([&] { auto t = op(IBV_OPCODE_RC_RDMA_WRITE_LAST); t.psn = kRqPsn[kRcSr] + 2; return t; }(),
           256, kCtrlPatchQpn | kRcSr)
      .add(op(IBV_OPCODE_RC_RDMA_WRITE_MIDDLE), 256, kLive | kRcSr);
  s.emplace_back("rc_ecn_cnp").add(op(IBV_OPCODE_RC_SEND_ONLY), 4, kLive)
      .add([] { wire::TransportSpec t; t.opcode = wire::kOpCnp; t.becn = true; return t; }(), 0,
           kCtrlPatchQpn);
  // Responses to WRs the bench posts (READ, WRITE, SEND, FETCH_ADD in turn).
  s.emplace_back("rc_read_response", 1)
      .add([] { auto t = op(IBV_OPCODE_RC_RDMA_READ_RESPONSE_ONLY); t.psn = kSqPsn;
                t.aeth_syndrome = 0x1F; return t; }(), 600, kCtrlPatchQpn, kWordPostSend);
  s.emplace_back("rc_ack_and_timeout", 1)
      .add([] { auto t = op(IBV_OPCODE_RC_RDMA_READ_RESPONSE_FIRST); t.psn = kSqPsn;
                t.aeth_syndrome = 0x1F; return t; }(), 512, kCtrlPatchQpn, kWordPostSend)
      .add([] { auto t = op(IBV_OPCODE_RC_ACKNOWLEDGE); t.psn = kSqPsn + 1;
                t.aeth_syndrome = 0x1F; return t; }(), 0, kCtrlPatchQpn | kCtrlTimeJump);
  s.emplace_back("rc_atomic_ack", 1)
      .add([] { auto t = op(IBV_OPCODE_RC_RDMA_READ_RESPONSE_ONLY); t.psn = kSqPsn;
                t.aeth_syndrome = 0x1F; return t; }(), 600, kCtrlPatchQpn, kWordPostSend)
      .add([] { auto t = op(IBV_OPCODE_RC_ATOMIC_ACKNOWLEDGE); t.psn = kSqPsn + 3;
                t.aeth_syndrome = 0x1F; t.atomic_ack_original = 42; return t; }(), 0,
           kCtrlPatchQpn, kWordPostSend);
  s.emplace_back("rc_nak_psn_seq", 1)
      .add([] { auto t = op(IBV_OPCODE_RC_ACKNOWLEDGE); t.psn = kSqPsn;
                t.aeth_syndrome = 0x60; return t; }(), 0, kCtrlPatchQpn, kWordPostSend);
  s.emplace_back("uc_write_only").add(op(IBV_OPCODE_UC_RDMA_WRITE_ONLY, a + 40, 50), 50, kLive | kUc);
  s.emplace_back("uc_send_first_last", 0)
      .add(op(IBV_OPCODE_UC_SEND_FIRST), 256, kLive | kUc)
      .add(op(IBV_OPCODE_UC_SEND_LAST), 20, kLive | kUc);
  s.emplace_back("ud_send_only").add(op(IBV_OPCODE_UD_SEND_ONLY), 200, kLive | kUd);
  s.emplace_back("ud_send_only_imm_strict")
      .add(op(IBV_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE), 1000, kLive | kUd | kCtrlStrict);
  return s;
}

}  // namespace
}  // namespace droce::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  int n = 0;
  for (const auto& s : droce::fuzz::seeds()) {
    const std::string path = std::string(argv[1]) + "/" + s.name;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(s.bytes.data(), 1, s.bytes.size(), f) != s.bytes.size() ||
        std::fclose(f) != 0) {
      std::perror(path.c_str());
      return 1;
    }
    ++n;
  }
  std::printf("wrote %d seeds to %s\n", n, argv[1]);
  return 0;
}
