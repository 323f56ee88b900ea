// How the packet rate holds up as the number of active RC QPs grows past
// the caches: a sender endpoint and a responder endpoint in one thread,
// without DPDK, N RC QP pairs between them, 64-byte RDMA WRITEs posted
// round robin over all N (QP i's next WR only after every other QP got
// one), each burst of the sender's frames received by the responder and
// the responder's ACKs received back by the sender. The sender's calls
// (post, transmit, receiving the ACKs, polling) are timed apart from the
// responder's (receive, transmitting the ACKs): the send path and the
// receive path per data frame, for each N, against N = 1 in the same run:
// each run of N right after a run of the first N of the list, the ratio
// taken per pair of runs and the median over the rounds.
//
// Also the memory of an idle QP: resident memory before and after the
// responder's N QPs are created, connected (RTS) and attached to its
// endpoint (each with one send and one receive slot), per QP, with and
// without its work queues (QueuePair::queue_bytes).
//
//   droce-bench-qp-scale [--qps N,N,...] [--seconds S] [--rounds R] [--payload BYTES]
//   (defaults: 1,1024,65536,1048576; 3 rounds of 1 s per N; 64 B)
//
// Every data frame must reach the responder and be placed (PSNs in order
// on every QP) and every WR must complete: the bench exits 1 otherwise.
#include <fmt/format.h>
#include <infiniband/opcode.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "droce/cc/registry.h"
#include "droce/endpoint/endpoint.h"
#include "droce/memory/resident.h"
#include "droce/transport/device.h"
#include "droce/wire/psn.h"
#include "write_stream.h"

namespace {

using namespace droce;
using Clock = std::chrono::steady_clock;
constexpr size_t kBurst = 32;
constexpr uint32_t kCqMod = 64;  // every 64th WR signaled, as droce-perf posts

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

using memory::resident_bytes;

// The reference a frame's time at N QPs is held against: one read of a
// random 64-byte line in a buffer as large as the N QP pairs' state, the
// reads independent of each other (as a frame's misses may overlap) and
// the buffer in huge pages where the kernel grants them (as the QPs are):
// what touching one more line of some QP's state costs at best. The
// median of three passes of 4M reads. The buffer and the addresses are
// mapped and unmapped here, not taken from the heap, which would keep
// them for the next N's QPs and hide their memory from resident_bytes().
double random_line_ns(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20, kReads = size_t{1} << 22;
  const size_t size = std::max((bytes + kHuge - 1) / kHuge, size_t{1}) * kHuge;
  const size_t mapped = size + kHuge + kReads * sizeof(uint32_t);
  void* map = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED) {
    fmt::print(stderr, "droce-bench-qp-scale: no {} MiB for the random-line reference\n",
               mapped >> 20);
    return 0;
  }
  const uintptr_t base = (reinterpret_cast<uintptr_t>(map) + kHuge - 1) & ~(kHuge - 1);
  auto* words = reinterpret_cast<uint64_t*>(base);
  auto* at = reinterpret_cast<uint32_t*>(base + size);
  madvise(words, size, MADV_HUGEPAGE);
  std::memset(words, 1, size);
  // Drawn before the clock starts: drawing them in the loop would be a
  // chain of its own that the reads wait on.
  uint64_t x = 1;
  for (size_t i = 0; i < kReads; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;  // Knuth's MMIX LCG
    at[i] = static_cast<uint32_t>((x >> 33) % (size / 64));
  }
  std::vector<double> ns;
  uint64_t sum = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const uint64_t t0 = now_ns();
    for (size_t i = 0; i < kReads; ++i) sum += words[size_t{at[i]} * 8];
    ns.push_back(static_cast<double>(now_ns() - t0) / kReads);
  }
  munmap(map, mapped);
  if (sum == 0) return 0;  // every word is non-zero: keeps the reads
  std::sort(ns.begin(), ns.end());
  return ns[1];
}

wire::PathSpec path(bool from_sender) {
  wire::PathSpec p = bench::us_to_peer();
  if (!from_sender) {
    std::swap(p.src_mac, p.dst_mac);
    std::swap(p.src_ip, p.dst_ip);
  }
  return p;
}

void connect(transport::QueuePair& qp, uint32_t dest_qpn, bool from_sender) {
  transport::QpAttr a;
  a.path = path(from_sender);
  a.dest_qpn = dest_qpn;
  a.rq_psn = 0;
  a.sq_psn = 0;
  a.path_mtu = IBV_MTU_1024;
  using transport::QpState;
  for (QpState s : {QpState::kInit, QpState::kRtr, QpState::kRts})
    if (qp.modify(s, a) != 0) {
      fmt::print(stderr, "droce-bench-qp-scale: QP {:#x} refused {}\n", qp.qpn(),
                 transport::to_string(s));
      std::exit(1);
    }
}

struct Side {
  explicit Side(size_t region_bytes)
      : ep(dev, bench::engine_port_sender()), mem(region_bytes, 0x5a) {
    pd = dev.alloc_pd();
    cq = dev.create_cq(1u << 16);
    mr = dev.reg_mr(pd, mem.data(), mem.size(),
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, bench::kIova, bench::kKey);
    if (!mr) {
      fmt::print(stderr, "droce-bench-qp-scale: reg_mr failed\n");
      std::exit(1);
    }
  }
  transport::QueuePair* add_qp(uint32_t send_depth) {
    transport::QpInitAttr init;
    init.pd = pd;
    init.send_cq = init.recv_cq = cq;
    init.caps.max_send_wr = send_depth;
    init.caps.max_recv_wr = 1;
    transport::QueuePair* qp = dev.create_qp(init);
    if (!qp) {
      fmt::print(stderr, "droce-bench-qp-scale: create_qp failed at {} QPs\n", qps.size());
      std::exit(1);
    }
    qps.push_back(qp);
    queue_bytes += qp->queue_bytes();
    return qp;
  }
  transport::Device dev;
  endpoint::Endpoint ep;
  std::vector<uint8_t> mem;
  transport::ProtectionDomain* pd = nullptr;
  transport::CompletionQueue* cq = nullptr;
  transport::MemoryRegion* mr = nullptr;
  std::vector<transport::QueuePair*> qps;
  size_t queue_bytes = 0;  // of every QP's work queues
};

struct Result {
  uint32_t qps = 0;
  double tx_ns = 0, rx_ns = 0;  // per data frame
  uint64_t frames = 0;
  bool ok = true;
};

class Pair {
 public:
  Pair(uint32_t n, size_t payload)
      : payload_(payload), sender_(payload + 64), responder_(region_bytes(n, payload)) {
    // A QP gets its next WR a round later, by when its ACK is back: with
    // many QPs one outstanding WR each is all the round robin uses; one QP
    // needs a deeper queue to fill a burst.
    send_depth_ = n >= 64 ? 4 : 128;
    for (uint32_t i = 0; i < n; ++i) sender_.add_qp(send_depth_);
    // The idle QP: created, connected (RTS) and attached, no traffic yet.
    const uint64_t before = resident_bytes();
    for (uint32_t i = 0; i < n; ++i)
      connect(*responder_.add_qp(1), sender_.qps[i]->qpn(), false);
    attach_all(responder_);
    idle_bytes_ = static_cast<double>(resident_bytes() - before) / n;
    idle_queue_bytes_ = static_cast<double>(responder_.queue_bytes) / n;
    for (uint32_t i = 0; i < n; ++i) connect(*sender_.qps[i], responder_.qps[i]->qpn(), true);
    attach_all(sender_);
    posted_.assign(n, 0);
    doorbells_ = std::vector<endpoint::DoorbellNode>(n);
    for (uint32_t i = 0; i < n; ++i) doorbells_[i].qpn = sender_.qps[i]->qpn();
    for (auto* out : {&data_store_, &ack_store_}) out->assign(kBurst, std::vector<uint8_t>(payload + 256));
    for (auto& b : data_store_) data_.emplace_back(b);
    for (auto& b : ack_store_) acks_.emplace_back(b);
    sge_ = {bench::kIova, static_cast<uint32_t>(payload),  // the region's iova
            sender_.mr->lkey()};
  }

  double idle_bytes() const { return idle_bytes_; }
  double idle_queue_bytes() const { return idle_queue_bytes_; }

  Result run(double seconds) {
    Result r;
    r.qps = static_cast<uint32_t>(sender_.qps.size());
    // One round over every QP first, untimed: each QP's state has been
    // touched once, as in a run that has been going for a while.
    while (r.frames < sender_.qps.size()) r.frames += step(nullptr, nullptr);
    r.frames = 0;
    uint64_t tx = 0, rx = 0;
    const auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end)
      for (int rep = 0; rep < 64; ++rep) r.frames += step(&tx, &rx);
    r.tx_ns = static_cast<double>(tx) / static_cast<double>(r.frames);
    r.rx_ns = static_cast<double>(rx) / static_cast<double>(r.frames);
    r.ok = drain_and_check();
    return r;
  }

 private:
  static size_t region_bytes(uint32_t n, size_t payload) {
    return std::min<size_t>(size_t{n} * payload, size_t{64} << 20) + payload;
  }
  static void attach_all(Side& s) {
    for (transport::QueuePair* qp : s.qps)
      s.ep.attach(*qp, cc::make_algorithm("none", {}, 400'000'000'000ull / 8));
  }

  transport::SendWr wr_for(uint32_t q) const {
    transport::SendWr wr;
    const uint64_t id = posted_[q];
    wr.wr_id = id;
    wr.opcode = IBV_WR_RDMA_WRITE;
    // Every 64th WR of a QP signaled or, with a shallower queue, the last
    // one that fits (a queue of unsignaled WRs alone never drains).
    wr.send_flags = (id + 1) % std::min(kCqMod, send_depth_) == 0 ? IBV_SEND_SIGNALED : 0;
    wr.sg_list = std::span(&sge_, 1);
    const size_t slots = (responder_.mem.size() - payload_) / payload_;
    wr.remote_addr = bench::kIova + (q % slots) * payload_;
    wr.rkey = bench::kKey;
    return wr;
  }

  // One burst: up to kBurst WRs posted round robin, the sender's frames to
  // the responder, its ACKs back. Returns the data frames sent.
  size_t step(uint64_t* tx_ns, uint64_t* rx_ns) {
    uint32_t lens[kBurst];
    const uint64_t t0 = now_ns();
    for (size_t k = 0; k < kBurst; ++k) {
      const uint32_t q = next_q_;
      const int rc = sender_.qps[q]->post_send(wr_for(q));
      if (rc == ENOMEM) break;  // that QP's ring is full: its ACKs are due
      if (rc != 0) {
        fmt::print(stderr, "droce-bench-qp-scale: post_send: error {}\n", rc);
        std::exit(1);
      }
      next_q_ = next_q_ + 1 == sender_.qps.size() ? 0 : next_q_ + 1;
      ++posted_[q];
      sender_.ep.ring(doorbells_[q]);
    }
    const size_t n = sender_.ep.transmit(t0, data_, lens);
    const uint64_t t1 = now_ns();
    for (size_t i = 0; i < n; ++i) in_[i] = std::span<const uint8_t>(data_store_[i].data(), lens[i]);
    responder_.ep.receive_burst(std::span(in_.data(), n), t1);
    const size_t a = responder_.ep.transmit(t1, acks_, lens);
    const uint64_t t2 = now_ns();
    for (size_t i = 0; i < a; ++i) in_[i] = std::span<const uint8_t>(ack_store_[i].data(), lens[i]);
    sender_.ep.receive_burst(std::span(in_.data(), a), t2);
    completions_ += poll(sender_);
    const uint64_t t3 = now_ns();
    if (tx_ns) *tx_ns += (t1 - t0) + (t3 - t2);
    if (rx_ns) *rx_ns += t2 - t1;
    data_frames_ += n;
    return n;
  }

  uint64_t poll(Side& s) {
    uint64_t got = 0;
    for (int n; (n = s.cq->poll(wc_)) > 0;) {
      for (int i = 0; i < n; ++i)
        if (wc_[static_cast<size_t>(i)].status != IBV_WC_SUCCESS) ++bad_completions_;
      got += static_cast<uint64_t>(n);
    }
    return got;
  }

  // Every frame sent was placed in order on its QP and nothing failed.
  bool drain_and_check() {
    uint32_t lens[kBurst];
    for (int i = 0; i < 1000; ++i) {
      const uint64_t now = now_ns();
      const size_t n = sender_.ep.transmit(now, data_, lens);
      for (size_t k = 0; k < n; ++k) in_[k] = std::span<const uint8_t>(data_store_[k].data(), lens[k]);
      responder_.ep.receive_burst(std::span(in_.data(), n), now);
      const size_t a = responder_.ep.transmit(now, acks_, lens);
      for (size_t k = 0; k < a; ++k) in_[k] = std::span<const uint8_t>(ack_store_[k].data(), lens[k]);
      sender_.ep.receive_burst(std::span(in_.data(), a), now);
      completions_ += poll(sender_);
      data_frames_ += n;
      if (n == 0 && a == 0) break;
    }
    // PSNs are 24 bits (IBA 9.7.1): one fast QP wraps them in a second.
    uint64_t posted = 0, short_qps = 0;
    for (uint32_t q = 0; q < sender_.qps.size(); ++q) {
      posted += posted_[q];
      const uint32_t placed =
          (responder_.qps[q]->expected_psn() - sender_start_psn_) & wire::kPsnMask;
      if (placed != (posted_[q] & wire::kPsnMask)) ++short_qps;
    }
    bool ok = true;
    if (short_qps != 0 || data_frames_ != posted) {
      fmt::print(stderr, "droce-bench-qp-scale: {} WRs posted, {} frames sent; {} QPs placed "
                         "other than what they were sent\n",
                 posted, data_frames_, short_qps);
      ok = false;
    }
    if (bad_completions_) {
      fmt::print(stderr, "droce-bench-qp-scale: {} completions with an error\n", bad_completions_);
      ok = false;
    }
    return ok;
  }

  size_t payload_;
  Side sender_, responder_;
  double idle_bytes_ = 0;
  double idle_queue_bytes_ = 0;
  uint32_t send_depth_ = 4;
  std::vector<uint64_t> posted_;
  std::vector<endpoint::DoorbellNode> doorbells_;
  std::vector<std::vector<uint8_t>> data_store_, ack_store_;
  std::vector<std::span<uint8_t>> data_, acks_;
  std::array<std::span<const uint8_t>, kBurst> in_{};
  transport::Sge sge_{};
  uint32_t next_q_ = 0;
  uint64_t completions_ = 0, bad_completions_ = 0, data_frames_ = 0;
  const uint32_t sender_start_psn_ = 0;
  std::array<transport::WorkCompletion, 64> wc_;
};

struct Options {
  std::vector<uint32_t> qps{1, 1024, 65536, 1u << 20};
  double seconds = 1;   // per run
  uint32_t rounds = 3;  // runs of each N, each beside a run of the first
  size_t payload = 64;
};

[[noreturn]] void usage(const std::string& why) {
  fmt::print(stderr,
             "droce-bench-qp-scale: {}\n"
             "usage: droce-bench-qp-scale [--qps N,N,...] [--seconds S] [--rounds R] "
             "[--payload BYTES]\n",
             why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 == argc) usage("'" + a + "' needs a value or is unknown");
    const std::string v = argv[++i];
    char* end = nullptr;
    if (a == "--qps") {
      o.qps.clear();
      for (const char* p = v.c_str(); *p;) {
        const unsigned long n = std::strtoul(p, &end, 10);
        if (end == p || n == 0 || n > (1u << 23)) usage("--qps: '" + v + "' is not a list of 1..8388608");
        o.qps.push_back(static_cast<uint32_t>(n));
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') usage("--qps: '" + v + "' is not a list of 1..8388608");
      }
    } else if (a == "--seconds") {
      o.seconds = std::strtod(v.c_str(), &end);
      if (*end || o.seconds <= 0) usage("--seconds: '" + v + "' is not a positive number");
    } else if (a == "--rounds") {
      const unsigned long r = std::strtoul(v.c_str(), &end, 10);
      if (*end || r == 0 || r > 100) usage("--rounds: '" + v + "' is not 1..100");
      o.rounds = static_cast<uint32_t>(r);
    } else if (a == "--payload") {
      o.payload = std::strtoul(v.c_str(), &end, 10);
      if (*end || o.payload == 0 || o.payload > 1024) usage("--payload: '" + v + "' is not 1..1024");
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  if (o.qps.empty()) usage("--qps: no QP count");
  return o;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Each N's figures: medians over the rounds, and its rates against the
// first N of the list measured beside it in each round (that one's run
// just before), because this machine's speed moves from one minute to the
// next by more than the differences measured.
struct Row {
  double tx_ns, rx_ns, tx_vs_first, rx_vs_first;
  bool ok = true;
};

Row measure(Pair& p, Pair* first, const Options& o) {
  std::vector<double> tx, rx, tx_vs, rx_vs;
  Row row{};
  for (uint32_t round = 0; round < o.rounds; ++round) {
    const Result ref = first ? first->run(o.seconds) : Result{};
    const Result r = p.run(o.seconds);
    row.ok = row.ok && r.ok && ref.ok;
    tx.push_back(r.tx_ns);
    rx.push_back(r.rx_ns);
    tx_vs.push_back(first ? ref.tx_ns / r.tx_ns : 1.0);
    rx_vs.push_back(first ? ref.rx_ns / r.rx_ns : 1.0);
  }
  row.tx_ns = median(tx);
  row.rx_ns = median(rx);
  row.tx_vs_first = median(tx_vs);
  row.rx_vs_first = median(rx_vs);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  fmt::print(
      "RC RDMA WRITE {} B, round robin over N QP pairs; per data frame, the median of {} "
      "runs of {} s, each after one of the first N\n",
      o.payload, o.rounds, o.seconds);
  fmt::print("{:>9} {:>9} {:>7} {:>7} {:>9} {:>7} {:>7} {:>13} {:>13} {:>8} {:>11}\n", "QPs",
             "send ns", "Mpps", "vs 1", "recv ns", "Mpps", "vs 1", "idle QP B", "without ring",
             "line ns", "lines s/r");
  bool ok = true;
  std::unique_ptr<Pair> first;
  for (uint32_t n : o.qps) {
    const uint64_t before = resident_bytes();
    auto p = std::make_unique<Pair>(n, o.payload);
    const Row r = measure(*p, first.get(), o);
    const double line_ns = random_line_ns(resident_bytes() - before);
    const std::string lines = line_ns == 0 ? "-" : fmt::format("{:.0f}/{:.0f}", r.tx_ns / line_ns,
                                                                r.rx_ns / line_ns);
    ok = ok && r.ok;
    // Below a thousand QPs the resident memory moves by whole pages: no
    // per-QP figure.
    const std::string idle = n < 1000 ? "-" : fmt::format("{:.0f}", p->idle_bytes());
    const std::string bare =
        n < 1000 ? "-" : fmt::format("{:.0f}", p->idle_bytes() - p->idle_queue_bytes());
    fmt::print("{:>9} {:>9.1f} {:>7.2f} {:>6.2f}x {:>9.1f} {:>7.2f} {:>6.2f}x {:>13} {:>13} "
               "{:>8.1f} {:>11}\n",
               n, r.tx_ns, 1e3 / r.tx_ns, r.tx_vs_first, r.rx_ns, 1e3 / r.rx_ns, r.rx_vs_first,
               idle, bare, line_ns, lines);
    std::fflush(stdout);
    if (!first) first = std::move(p);
  }
  fmt::print(
      "'vs 1': the rate against the first N of the list, run beside it. 'idle QP B':\n"
      "resident memory per responder QP with one send and one receive slot, the\n"
      "endpoint's per-QP state included ('without ring': less its work queues,\n"
      "QueuePair::queue_bytes). 'line ns': one read of a random line, independent\n"
      "reads, in a buffer the size of the N pairs' state; 'lines s/r': a frame's\n"
      "send and receive time in such reads. A frame's path touches its QPs' state\n"
      "(tens of lines); once that state is out of cache each line costs about\n"
      "'line ns', however many overlap.\n");
  return ok ? 0 : 1;
}
