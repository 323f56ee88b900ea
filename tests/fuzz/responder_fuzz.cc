// libFuzzer target for the transport's receive path: arbitrary packets go to
// RC (go-back-N and selective repeat), UC and UD QPs in RTS that own a
// registered memory region, and the QPs' answers are drained after every
// packet. The input format is in responder_fuzz.h; control bits let the
// fuzzer patch in a real dest QPN, the expected PSN, a valid/invalid/stale
// rkey and an in-range VA so that random bytes reach deep responder and
// completer paths.
//
// Checks (abort on failure, on top of ASan/UBSan):
//  - no byte outside MR A changes: the guard zones on both sides and MR B
//    (remote-read only) keep their canary pattern;
//  - every frame a QP produces parses (with the ICRC check);
//  - a QP's produce() loop ends.
//
// Built only with -Dfuzz=true (clang, see docs/FUZZING.md).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "droce/transport/device.h"
#include "droce/wire/build.h"
#include "droce/wire/packet.h"
#include "responder_fuzz.h"
#include "fuzz_check.h"

namespace droce::fuzz {
namespace {

using transport::QpState;
using transport::QpType;

constexpr uint64_t kTotal = kGuard + kLenA + kLenB + kGuard;

uint8_t canary(size_t i) { return static_cast<uint8_t>(0xA5 ^ (i * 29)); }

void store_be(uint8_t* p, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}
uint64_t load_be(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

wire::PathSpec path(uint8_t self, uint8_t peer) {
  wire::PathSpec p;
  p.src_mac = {2, 0, 0, 0, 0, self};
  p.dst_mac = {2, 0, 0, 0, 0, peer};
  p.src_ip = wire::IpAddress::v4(0x0A000000u | self);
  p.dst_ip = wire::IpAddress::v4(0x0A000000u | peer);
  return p;
}

class Bench {
 public:
  explicit Bench(uint8_t setup) : mem_(kTotal) {
    for (size_t i = 0; i < mem_.size(); ++i) mem_[i] = canary(i);
    pd_ = dev_.alloc_pd();
    cq_ = dev_.create_cq(64);
    constexpr uint32_t kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    // A key that was valid once: its slot is re-used by MR A.
    transport::MemoryRegion* c = dev_.reg_mr(pd_, a(), kLenA, kAll, kIovaA);
    FUZZ_CHECK(c != nullptr);
    stale_key_ = c->rkey();
    FUZZ_CHECK(dev_.dereg_mr(c) == 0);
    mr_a_ = dev_.reg_mr(pd_, a(), kLenA, kAll, kIovaA);
    mr_b_ = dev_.reg_mr(pd_, a() + kLenA, kLenB, IBV_ACCESS_REMOTE_READ, kIovaB);
    FUZZ_CHECK(mr_a_ != nullptr && mr_b_ != nullptr);

    static constexpr ibv_mtu kMtus[4] = {IBV_MTU_256, IBV_MTU_1024, IBV_MTU_2048,
                                         IBV_MTU_4096};
    const QpType types[4] = {QpType::kRc, QpType::kRc, QpType::kUc, QpType::kUd};
    for (int i = 0; i < 4; ++i) {
      transport::QpInitAttr init;
      init.type = types[i];
      init.pd = pd_;
      init.send_cq = init.recv_cq = cq_;
      init.caps.max_send_wr = 16;
      init.caps.max_recv_wr = 16;
      qp_[i] = dev_.create_qp(init);
      FUZZ_CHECK(qp_[i] != nullptr && qp_[i]->qpn() == kQpnBase + i);
      transport::QpAttr at;
      at.qkey = kQkey;
      at.path = path(1, 2);
      at.path.udp_src_port = wire::udp_src_port_entropy(qp_[i]->qpn(), kPeerQpn);
      at.dest_qpn = kPeerQpn;
      at.rq_psn = kRqPsn[i];
      at.sq_psn = kSqPsn;
      at.path_mtu = kMtus[setup & kSetupMtuMask];
      at.ack_every_n = (setup & kSetupAckEveryN) ? 3 : 0;
      at.max_dest_rd_atomic = (setup & kSetupOneRdAtomic) ? 1 : 16;
      at.honour_credits = (setup & kSetupHonourCredits) != 0;
      at.recovery = i == kRcSr ? transport::Recovery::kSelectiveRepeat
                               : transport::Recovery::kGoBackN;
      at.sack_window = 64;
      at.timeout = 8;  // 1 ms
      at.retry_cnt = 2;
      at.rnr_retry = 2;
      at.min_rnr_timer = 1;
      FUZZ_CHECK(qp_[i]->modify(QpState::kInit, at) == 0);
      FUZZ_CHECK(qp_[i]->modify(QpState::kRtr, at) == 0);
      FUZZ_CHECK(qp_[i]->modify(QpState::kRts, at) == 0);
    }
  }

  void record(uint8_t ctrl, uint16_t word, std::span<const uint8_t> bytes) {
    now_ += 1000;
    int target = ctrl & kCtrlQpMask;
    if (!(word & kWordNoRecv)) refill_recv();
    if (word & kWordPostSend) post_send(target);

    std::vector<uint8_t> f(bytes.begin(), bytes.end());
    wire::ParseOptions lenient;
    lenient.verify_ip_checksum = false;
    lenient.verify_icrc = false;
    wire::ParsedPacket p;
    if (wire::parse(f, p, lenient) == wire::ParseError::kOk) {
      uint8_t* bth = f.data() + p.bth_offset;
      uint8_t* ext = bth + wire::kBthSize;
      if (ctrl & kCtrlPatchQpn) {
        switch (p.info->transport) {
          case wire::Transport::kRc: target = ctrl & 1; break;
          case wire::Transport::kUc: target = kUc; break;
          case wire::Transport::kUd: target = kUd; break;
          default: break;
        }
        store_be(bth + 5, qp_[target]->qpn(), 3);
        if (const int off = p.info->ext_offset(wire::kExtDeth); off >= 0)
          store_be(ext + off, kQkey, 4);
      }
      if (ctrl & kCtrlPatchPsn) store_be(bth + 9, qp_[target]->expected_psn(), 3);
      const int key_sel = (ctrl & kCtrlKeyMask) >> kCtrlKeyShift;
      const transport::MemoryRegion* mr = key_sel == 2 ? mr_b_ : mr_a_;
      const uint32_t key = key_sel == 1 ? mr_a_->rkey()
                           : key_sel == 2 ? mr_b_->rkey()
                                          : stale_key_;
      for (wire::ExtHeader h : {wire::kExtReth, wire::kExtAtomicEth}) {
        const int off = p.info->ext_offset(h);
        if (off < 0) continue;
        if (key_sel) store_be(ext + off + 8, key, 4);
        if (word & kWordPatchVa) {
          const uint64_t va = load_be(ext + off, 8);
          store_be(ext + off, mr->iova() + va % mr->length(), 8);
        }
      }
      if (const int off = p.info->ext_offset(wire::kExtIeth); off >= 0 && key_sel)
        store_be(ext + off, key, 4);

      wire::ParsedPacket q;
      bool ok;
      if (ctrl & kCtrlStrict) {
        wire::refresh_checksums(f, p);
        ok = wire::parse(f, q) == wire::ParseError::kOk;
      } else {
        ok = wire::parse(f, q, lenient) == wire::ParseError::kOk;
      }
      if (ok) {
        if (transport::QueuePair* qp = dev_.find_qp(q.dest_qp)) qp->on_packet(q, now_);
      }
    }

    if (ctrl & kCtrlTimeJump) {
      now_ += 200'000'000;
      for (transport::QueuePair* qp : qp_)
        if (qp->next_deadline() <= now_) qp->on_timer(now_);
    }
    drain();
    check_memory();
  }

  void check_memory() const {
    for (uint64_t i = 0; i < kTotal; ++i) {
      if (i == kGuard) i += kLenA;  // MR A may change
      if (mem_[i] != canary(i)) {
        std::fprintf(stderr, "responder_fuzz: byte %+lld from MR A start changed\n",
                     static_cast<long long>(i) - static_cast<long long>(kGuard));
        std::abort();
      }
    }
  }

 private:
  uint8_t* a() { return mem_.data() + kGuard; }

  void refill_recv() {
    for (transport::QueuePair* qp : qp_) {
      // (In ERR a posted WR completes at once: bounded, not "until full".)
      for (int k = 0; k < 2 && qp->recv_queue_depth() < 2; ++k) {
        const uint64_t off = kRecvOff + (recv_n_ % 4) * 1024;
        transport::Sge s[2] = {{kIovaA + off, 512, mr_a_->lkey()},
                               {kIovaA + off + 512, 512, mr_a_->lkey()}};
        transport::RecvWr r;
        r.wr_id = recv_n_;
        r.sg_list = {s, (recv_n_ & 1) ? 2u : 1u};
        if (recv_n_ & 1) s[0].length = 300;  // two SGEs with a gap
        ++recv_n_;
        if (qp->post_recv(r) != 0) break;
      }
    }
  }

  void post_send(int target) {
    static constexpr ibv_wr_opcode kOps[4] = {IBV_WR_RDMA_READ, IBV_WR_RDMA_WRITE,
                                              IBV_WR_SEND, IBV_WR_ATOMIC_FETCH_AND_ADD};
    const ibv_wr_opcode op = target == kUd ? IBV_WR_SEND : kOps[send_n_ % 4];
    transport::Sge s{kIovaA + kSendOff + (send_n_ % 4) * 8, 600, mr_a_->lkey()};
    if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) s.length = 8;
    const wire::PathSpec ud = path(1, 2);
    transport::SendWr w;
    w.wr_id = 1000 + send_n_++;
    w.opcode = op;
    w.send_flags = IBV_SEND_SIGNALED;
    w.sg_list = {&s, 1};
    w.remote_addr = 0x80000;
    w.rkey = 0x1234;
    w.compare_add = 1;
    w.ud_path = &ud;
    w.ud_remote_qpn = kPeerQpn;
    w.ud_remote_qkey = kQkey;
    (void)qp_[target]->post_send(w);  // may be refused (UC READ, full queue)
  }

  void drain() {
    for (transport::QueuePair* qp : qp_) {
      int n = 0;
      while (qp->has_work(now_)) {
        const size_t len = qp->produce(now_, out_);
        if (len == 0) break;
        FUZZ_CHECK(++n < 4096);  // produce() must run dry
        wire::ParsedPacket p;
        FUZZ_CHECK(wire::parse({out_.data(), len}, p) == wire::ParseError::kOk);
      }
    }
    transport::WorkCompletion wc[64];
    while (cq_->poll(wc) > 0) {
    }
  }

  std::vector<uint8_t> mem_;
  transport::Device dev_{0x6B657973};  // the same MR keys every run
  transport::ProtectionDomain* pd_ = nullptr;
  transport::CompletionQueue* cq_ = nullptr;
  transport::MemoryRegion* mr_a_ = nullptr;
  transport::MemoryRegion* mr_b_ = nullptr;
  uint32_t stale_key_ = 0;
  transport::QueuePair* qp_[4] = {};
  std::vector<uint8_t> out_ = std::vector<uint8_t>(9000);
  uint64_t now_ = 1'000'000;
  uint64_t recv_n_ = 0;
  uint64_t send_n_ = 0;
};

void fuzz_one(std::span<const uint8_t> in) {
  if (in.empty()) return;
  Bench bench(in[0]);
  size_t i = 1;
  while (i + 3 <= in.size()) {
    const uint8_t ctrl = in[i];
    const uint16_t word = static_cast<uint16_t>(in[i + 1] << 8 | in[i + 2]);
    i += 3;
    const size_t len = std::min<size_t>(word & kLenMask, in.size() - i);
    bench.record(ctrl, word, in.subspan(i, len));
    i += len;
  }
  bench.check_memory();
}

}  // namespace
}  // namespace droce::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  droce::fuzz::fuzz_one(std::span<const uint8_t>(data, size));
  return 0;
}
