// The endpoint's send path without DPDK: RDMA WRITE WRs posted into UC
// QPs' send queues, Endpoint::transmit filling buffers in memory (32 per
// burst, as the engine's poll loop hands it mbuf data areas), completions
// polled, next to a lower bound in the same run.
//
//   droce-bench-transmit [PAYLOAD, default 64] [SECONDS per way, default 2]
//                        [--qps N, default 1] [--poster-thread] [droce]
//
// droce's way: post 32 WRs (every 64th signaled, as droce-perf and
// perftest's cq_mod), one transmit() of up to 32 frames, poll the CQ. The
// WRs go round robin over the QPs. With --poster-thread a second thread
// posts (and polls) while the first only runs the endpoint, the shape of
// the engine with a worker lcore; otherwise one thread does both, the
// run-to-completion shape.
//
// The lower bound, per frame: copy a 58-byte header template, patch the
// PSN, copy the payload from a source buffer, compute the ICRC (droce's own
// CRC, the fastest in this code base), and write and read back a 64-byte
// work request. It leaves out everything a real requester also needs (QP
// state, CC gate, scheduling, completions, counters): a bound, not an
// alternative. `droce` runs droce's way only (for profiling).
//
// Every frame droce sends is checked once per run by wire::parse with the
// ICRC verified (one burst), so the figure is for correct frames.
#include <fmt/format.h>
#include <infiniband/opcode.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "droce/cc/registry.h"
#include "droce/endpoint/endpoint.h"
#include "droce/transport/device.h"
#include "droce/wire/build.h"
#include "droce/wire/icrc.h"
#include "droce/wire/packet.h"
#include "write_stream.h"

namespace {

using namespace droce;
using Clock = std::chrono::steady_clock;
constexpr size_t kBurst = 32;
constexpr uint32_t kCqMod = 64;

// The engine reads its clock once per loop pass; so does this bench (the
// QPs' CC "none" still paces at its line rate).
uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

struct Options {
  size_t payload = 64;
  double seconds = 2;
  uint32_t qps = 1;
  bool poster_thread = false;
  bool droce_only = false;
};

struct Result {
  double ns_per_frame = 0;
  uint64_t frames = 0;
  bool frames_ok = true;
};

class Sender {
 public:
  explicit Sender(const Options& o)
      : o_(o),
        ep_(dev_, bench::engine_port_sender()),
        src_(o.payload + 64, 0x5a) {
    pd_ = dev_.alloc_pd();
    cq_ = dev_.create_cq(1u << 16);
    mr_ = dev_.reg_mr(pd_, src_.data(), src_.size(), IBV_ACCESS_LOCAL_WRITE);
    if (!mr_) fail("reg_mr");
    for (uint32_t i = 0; i < o.qps; ++i) {
      transport::QpInitAttr init;
      init.type = transport::QpType::kUc;
      init.pd = pd_;
      init.send_cq = init.recv_cq = cq_;
      init.caps.max_send_wr = 256;
      init.caps.max_recv_wr = 1;
      transport::QueuePair* qp = dev_.create_qp(init);
      if (!qp) fail("create_qp");
      bench::connect(*qp, o.payload > 1024 ? IBV_MTU_4096 : IBV_MTU_1024);
      ep_.attach(*qp, cc::make_algorithm("none", {}, 400'000'000'000ull / 8));
      qps_.push_back(qp);
    }
    doorbells_ = std::vector<endpoint::DoorbellNode>(qps_.size());
    for (size_t i = 0; i < qps_.size(); ++i) doorbells_[i].qpn = qps_[i]->qpn();
    tx_store_.assign(kBurst, std::vector<uint8_t>(o.payload + 256));
    for (auto& b : tx_store_) tx_.emplace_back(b);
    sge_ = {reinterpret_cast<uint64_t>(src_.data()), static_cast<uint32_t>(o.payload),
            mr_->lkey()};
  }

  Result run() {
    posted_.assign(qps_.size(), 0);
    return o_.poster_thread ? run_two_threads() : run_one_thread();
  }

 private:
  [[noreturn]] static void fail(const char* what) {
    fmt::print(stderr, "droce-bench-transmit: {} failed\n", what);
    std::exit(1);
  }

  transport::SendWr wr_for(uint64_t id) const {
    transport::SendWr wr;
    wr.wr_id = id;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = (id + 1) % kCqMod == 0 ? IBV_SEND_SIGNALED : 0;
    wr.sg_list = std::span(&sge_, 1);
    wr.remote_addr = bench::kIova;
    wr.rkey = bench::kKey;
    return wr;
  }

  // Up to `n` WRs, round robin over the QPs, stopping at a full queue;
  // each QP posted to rings its doorbell once. With one QP the WRs go as
  // one list, as the engine's post_send takes droce-perf's batches.
  size_t post(size_t n) {
    if (qps_.size() == 1) {
      list_.clear();
      for (size_t k = 0; k < n; ++k) list_.push_back(wr_for(posted_[0] + k));
      size_t put = 0;
      qps_[0]->post_send(list_, &put);
      posted_[0] += put;
      if (put > 0) ep_.ring(doorbells_[0]);
      return put;
    }
    size_t put = 0;
    for (size_t k = 0; k < n; ++k) {
      const size_t q = next_q_;
      next_q_ = next_q_ + 1 == qps_.size() ? 0 : next_q_ + 1;
      if (qps_[q]->post_send(wr_for(posted_[q])) != 0) break;
      ++posted_[q];
      ++put;
      ep_.ring(doorbells_[q]);
    }
    return put;
  }

  void poll() {
    while (cq_->poll(wc_) > 0) {
    }
  }

  bool check(size_t n, const uint32_t* lens) const {
    for (size_t i = 0; i < n; ++i) {
      wire::ParsedPacket p;
      const wire::ParseError e =
          wire::parse(std::span<const uint8_t>(tx_store_[i].data(), lens[i]), p);
      if (e != wire::ParseError::kOk || p.payload_length != o_.payload) {
        fmt::print(stderr, "droce-bench-transmit: frame {} of a burst: {}, {} bytes of payload\n",
                   i, wire::to_string(e), p.payload_length);
        return false;
      }
    }
    return true;
  }

  Result run_one_thread() {
    Result r;
    uint32_t lens[kBurst];
    bool checked = false;
    const auto t0 = Clock::now();
    const auto end = t0 + std::chrono::duration<double>(o_.seconds);
    while (Clock::now() < end) {
      for (int rep = 0; rep < 64; ++rep) {
        post(kBurst);
        const size_t n = ep_.transmit(now_ns(), tx_, lens);
        if (!checked && n == kBurst) {
          r.frames_ok = check(n, lens);
          checked = true;
        }
        r.frames += n;
        poll();
      }
    }
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    r.ns_per_frame = ns / static_cast<double>(r.frames);
    r.frames_ok = r.frames_ok && checked;
    return r;
  }

  Result run_two_threads() {
    Result r;
    std::atomic<bool> stop{false};
    // The poster: posts and polls completions, as droce-perf's thread does
    // beside a worker lcore. Endpoint::post_send rings the doorbell.
    std::thread poster([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        post(kBurst);
        poll();
      }
    });
    uint32_t lens[kBurst];
    bool checked = false;
    const auto t0 = Clock::now();
    const auto end = t0 + std::chrono::duration<double>(o_.seconds);
    while (Clock::now() < end) {
      for (int rep = 0; rep < 64; ++rep) {
        const size_t n = ep_.transmit(now_ns(), tx_, lens);
        if (!checked && n == kBurst) {
          r.frames_ok = check(n, lens);
          checked = true;
        }
        r.frames += n;
      }
    }
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    stop = true;
    poster.join();
    r.ns_per_frame = ns / static_cast<double>(r.frames);
    r.frames_ok = r.frames_ok && checked;
    return r;
  }

  const Options& o_;
  transport::Device dev_;
  endpoint::Endpoint ep_;
  std::vector<uint8_t> src_;
  transport::ProtectionDomain* pd_ = nullptr;
  transport::CompletionQueue* cq_ = nullptr;
  transport::MemoryRegion* mr_ = nullptr;
  std::vector<transport::QueuePair*> qps_;
  std::vector<endpoint::DoorbellNode> doorbells_;
  std::vector<std::vector<uint8_t>> tx_store_;
  std::vector<std::span<uint8_t>> tx_;
  transport::Sge sge_{};
  std::vector<uint64_t> posted_;
  size_t next_q_ = 0;
  std::vector<transport::SendWr> list_;
  std::array<transport::WorkCompletion, 64> wc_;  // not zeroed per poll
};

// The flat loop (see the top of the file).
double bound_ns(const Options& o, double seconds) {
  wire::TransportSpec t;
  t.opcode = IBV_OPCODE_UC | IBV_OPCODE_RDMA_WRITE_ONLY;
  t.dest_qp = bench::kPeerQpn;
  t.reth_va = bench::kIova;
  t.reth_rkey = bench::kKey;
  t.reth_dma_length = static_cast<uint32_t>(o.payload);
  std::vector<uint8_t> payload(o.payload, 0x5a);
  std::vector<uint8_t> tmpl(o.payload + 256);
  const size_t len = wire::build_packet(bench::us_to_peer(), t, payload, tmpl);
  const size_t hdr = len - o.payload - wire::kIcrcSize;
  std::vector<std::vector<uint8_t>> out(kBurst, std::vector<uint8_t>(len));
  struct alignas(64) Wr {
    uint64_t id, addr, raddr;
    uint32_t len, key, rkey, op;
    uint8_t pad[24];
  };
  std::vector<Wr> ring(256);
  uint64_t frames = 0, sink = 0;
  uint32_t psn = 0;
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < std::chrono::duration<double>(seconds)) {
    for (int rep = 0; rep < 64; ++rep) {
      for (size_t i = 0; i < kBurst; ++i) {
        Wr& w = ring[(frames + i) % ring.size()];
        w = Wr{frames + i, reinterpret_cast<uint64_t>(payload.data()), bench::kIova,
               static_cast<uint32_t>(o.payload), 1, bench::kKey, 0, {}};
      }
      for (size_t i = 0; i < kBurst; ++i) {
        const Wr& w = ring[(frames + i) % ring.size()];
        uint8_t* f = out[i].data();
        std::memcpy(f, tmpl.data(), hdr);
        const size_t bth = wire::kEthSize + wire::kIpv4Size + wire::kUdpSize;
        f[bth + 9] = static_cast<uint8_t>(psn >> 16);
        f[bth + 10] = static_cast<uint8_t>(psn >> 8);
        f[bth + 11] = static_cast<uint8_t>(psn);
        ++psn;
        std::memcpy(f + hdr, reinterpret_cast<const uint8_t*>(w.addr), w.len);
        const uint32_t icrc =
            wire::icrc_compute(f + wire::kEthSize, len - wire::kEthSize - wire::kIcrcSize, false);
        std::memcpy(f + len - wire::kIcrcSize, &icrc, sizeof icrc);
        sink += icrc;
      }
      frames += kBurst;
    }
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  if (sink == 1) std::puts("");  // keeps the ICRCs alive
  return ns / static_cast<double>(frames);
}

Options parse(int argc, char** argv) {
  Options o;
  int pos = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--qps" && i + 1 < argc) {
      o.qps = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (a == "--poster-thread") {
      o.poster_thread = true;
    } else if (a == "droce") {
      o.droce_only = true;
    } else if (pos == 0) {
      o.payload = std::strtoul(argv[i], nullptr, 10);
      ++pos;
    } else if (pos == 1) {
      o.seconds = std::strtod(argv[i], nullptr);
      ++pos;
    } else {
      fmt::print(stderr, "droce-bench-transmit: unexpected argument '{}'\n", a);
      std::exit(2);
    }
  }
  if (o.payload == 0 || o.payload > 4096 || o.qps == 0 || o.seconds <= 0) {
    fmt::print(stderr, "droce-bench-transmit: PAYLOAD 1..4096, SECONDS > 0, --qps >= 1\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  Sender sender(o);
  const Result d = sender.run();
  fmt::print("transmit {} B WRITE, {} UC QP(s), {}: droce {:.1f} ns/frame ({:.2f} Mpps, "
             "{:.2f} GB/s payload, {} frames){}\n",
             o.payload, o.qps, o.poster_thread ? "a poster thread beside the data path"
                                               : "one thread posts and sends",
             d.ns_per_frame, 1e3 / d.ns_per_frame,
             static_cast<double>(o.payload) / d.ns_per_frame, d.frames, d.frames_ok ? "" : ", BAD FRAMES");
  if (!o.droce_only) {
    const double b = bound_ns(o, o.seconds);
    fmt::print("lower bound (template copy, PSN, payload copy, ICRC, a 64 B WR): {:.1f} "
               "ns/frame; droce / bound {:.2f}\n",
               b, d.ns_per_frame / b);
  }
  return d.frames_ok ? 0 : 1;
}
