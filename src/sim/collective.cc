// Ring all-reduce and all-to-all over simulator hosts (collective.h).
#include "droce/sim/collective.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "droce/transport/zeroed_array.h"
#include "droce/wire/headers.h"

namespace droce::sim {

namespace {

using Pattern = CollectiveSpec::Pattern;

QpOptions qp_options(const FlowSpec& f) {
  QpOptions o;
  o.cc = f.cc;
  o.cc_params = f.cc_params;
  o.recovery = f.recovery;
  o.mtu = f.mtu;
  o.dscp = f.dscp;
  o.timeout = f.timeout;
  o.retry_cnt = f.retry_cnt;
  o.ack_every_n = f.ack_every_n;
  o.entropy = f.entropy;
  o.reorder_tolerance = f.reorder_tolerance;
  o.reorder_window_ns = f.reorder_window_ns;
  o.reorder_window_min_ns = f.reorder_window_min_ns;
  o.tail_probe = f.tail_probe;
  o.reth_every_packet = f.reth_every_packet;
  o.rto_low_ns = f.rto_low_ns;
  o.sack_window = f.sack_window;
  o.rto_low_threshold = f.rto_low_threshold;
  return o;
}

uint64_t percentile(std::vector<uint64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = std::clamp<size_t>(
      static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()))), 1, v.size());
  return v[rank - 1];
}

// Bytes on the wire per payload byte at `mtu`: BTH, ICRC, UDP, IPv4,
// Ethernet and its 24 bytes of preamble, FCS and gap per frame.
double wire_per_payload(uint32_t mtu) {
  const double frame = static_cast<double>(mtu + wire::kEthSize + wire::kIpv4Size +
                                           wire::kUdpSize + wire::kBthSize + wire::kIcrcSize + 24);
  return frame / mtu;
}

// The collective's transport counters of one QP, added to `r`.
void add_counters(CollectiveResult& r, const transport::QueuePair& qp) {
  const transport::QpCounters& c = qp.counters();
  r.retransmits += c.tx_retransmit_packets;
  r.timeouts += c.retransmit_timeouts;
  r.timeouts_low += c.retransmit_timeouts_low;
  r.seq_naks_sent += c.naks_seq_sent;
  r.out_of_sequence += c.rx_out_of_sequence;
  r.reorder_depth_max = std::max(r.reorder_depth_max, qp.reorder_depth_max());
  r.entropy_changes += qp.entropy_changes();
}

using Trigger = CollectiveSpec::Trigger;

// Receive WRs a receiver-triggered ring rank keeps posted (one per WRITE
// with immediate it expects), replenished as they complete.
constexpr uint32_t kRecvDepth = 64;

class Runner {
 public:
  Runner(Simulator& sim, const CollectiveSpec& spec, PartitionComm* comm)
      : sim_(sim), spec_(spec), comm_(comm), n_(spec.ranks.size()) {
    chunk_ = spec.bytes / n_;
    steps_ = spec.pattern == Pattern::kRing ? 2 * (n_ - 1) : n_ - 1;
    slices_ = spec.pattern == Pattern::kRing ? spec.slices : 1;
    const QpOptions o = qp_options(spec.qp);
    for (size_t r = 0; r < n_; ++r) {
      try {
        buf_.emplace_back(spec.bytes);
      } catch (const std::bad_alloc&) {
        throw ScenarioError("collective: out of memory");
      }
      // Addresses from the rank, not the heap: the same in every process
      // of a partitioned run.
      transport::MemoryRegion* mr =
          sim_.reg_mr(spec.ranks[r], buf_.back().data(), spec.bytes, (uint64_t{r} + 1) << 40);
      if (!mr) throw ScenarioError("collective: memory registration refused");
      mr->set_virtual_payload(true);
      mr_.push_back(mr);
    }
    // One QP pair per rank pair that exchanges data, kept across iterations;
    // with a window, one per transfer instead, made when it is posted.
    for (size_t r = 0; r < n_ && !windowed(); ++r) {
      const size_t first = 1, last = spec.pattern == Pattern::kRing ? 1 : n_ - 1;
      for (size_t k = first; k <= last; ++k) {
        const size_t d = (r + k) % n_;
        const auto key = std::minmax(r, d);
        if (conns_.count(key)) continue;
        const QpPairRef p = sim_.connect(spec.ranks[key.first], spec.ranks[key.second], o);
        conns_[key] = p;
        qps_.push_back({spec.ranks[key.first], p.a});
        qps_.push_back({spec.ranks[key.second], p.b});
      }
    }
    if (windowed()) {
      // A connection carries one WRITE: rings of a few slots, not the
      // default 256, since tens of thousands are made and closed per rank.
      options_ = o;
      options_.max_send_wr = options_.max_recv_wr = 4;
      options_.cq_entries = 4096;
    }
    sim_.set_completion_handler(
        [this](size_t, const transport::WorkCompletion& wc) { on_completion(wc); });
  }
  ~Runner() {
    sim_.set_completion_handler(nullptr);
    sim_.set_work({});
    for (size_t r = 0; r < n_; ++r) sim_.dereg_mr(spec_.ranks[r], mr_[r]);
  }

  void run(CollectiveResult& res) {
    res_ = &res;
    res.transfers = n_ * writes_per_rank();
    res.connections = res.connections_open_max = qps_.size() / 2;
    // The transfers this partition starts (all of them in one process).
    uint64_t mine = 0;
    for (size_t r = 0; r < n_; ++r) mine += runs(r) ? writes_per_rank() : 0;
    // Flows beside the collective must not end the run under it.
    sim_.set_work([this, mine] { return mine - done_; });
    if (receiver_triggered()) {
      rposted_.assign(n_, 0);
      rdone_.assign(n_, 0);
      for (size_t r = 0; r < n_; ++r) post_recvs(r);
    }
    for (uint32_t it = 0; it < spec_.iterations; ++it) {
      sent_.assign(n_, 0);
      got_.assign(n_, 0);
      posted_.assign(n_, 0);
      done_ = 0;
      const uint64_t start = sim_.now();
      last_ns_ = start;
      if (spec_.pattern == Pattern::kRing) {
        for (size_t r = 0; r < n_; ++r) post_ring(r);
      } else if (windowed()) {
        next_peer_.assign(n_, 1);
        for (size_t r = 0; r < n_; ++r)
          for (uint32_t i = 0; i < spec_.window; ++i) post_windowed(r);
      } else {
        for (size_t r = 0; r < n_; ++r)
          for (size_t k = 1; k < n_ && runs(r); ++k) post(r, (r + k) % n_, (r + k) % n_, r, k);
      }
      Progress p;
      for (;;) {
        const bool more = comm_ ? sim_.run_partitioned_until(sim_.now() + 10'000'000'000ull)
                                : sim_.run_until(sim_.now() + 10'000'000'000ull);
        p = progress();
        if (p.done >= res.transfers) break;
        if (!more || p.failed) break;
      }
      res.failed_wrs = p.failed;
      if (p.done < res.transfers) {
        res.stalled = true;
        return;
      }
      res.jct_ns.push_back(p.last_ns - start);
    }
  }

 private:
  // Transfers done and failed, and the last completion: over every
  // partition when the run is split.
  struct Progress {
    uint64_t done = 0, failed = 0, last_ns = 0;
  };
  Progress progress() const {
    if (!comm_) return {done_, failed_, last_ns_};
    const uint64_t mine[3] = {done_, failed_, last_ns_};
    const std::vector<uint64_t> all = comm_->allgather(mine);
    Progress p;
    for (size_t q = 0; q < all.size(); q += 3) {
      p.done += all[q];
      p.failed += all[q + 1];
      p.last_ns = std::max(p.last_ns, all[q + 2]);
    }
    return p;
  }

  // Whether this process runs rank r's host (always, unpartitioned).
  bool runs(size_t r) const { return sim_.runs_host(spec_.ranks[r]); }
  bool receiver_triggered() const {
    return spec_.pattern == Pattern::kRing && spec_.trigger == Trigger::kReceiver;
  }
  // The QP on rank r's side of its connection with rank `peer`.
  transport::QueuePair& qp_of(size_t r, size_t peer) {
    const QpPairRef& p = conns_.at(std::minmax(r, peer));
    return r < peer ? *p.a : *p.b;
  }

  // A receiver-triggered ring rank's receive WRs for its predecessor's
  // WRITEs with immediate, up to kRecvDepth ahead of what arrived.
  void post_recvs(size_t r) {
    if (!runs(r)) return;
    const uint64_t total = uint64_t{writes_per_rank()} * spec_.iterations;
    transport::QueuePair& qp = qp_of(r, (r + n_ - 1) % n_);
    while (rposted_[r] < total && rposted_[r] < rdone_[r] + kRecvDepth) {
      transport::RecvWr wr;
      wr.wr_id = kRecvTag | r;  // no scatter list: the WRITE placed the data
      if (sim_.post_recv(spec_.ranks[r], qp, wr) != 0) {
        ++failed_;
        return;
      }
      ++rposted_[r];
    }
  }

  uint32_t writes_per_rank() const { return steps_ * slices_; }

  // Rank r's next ring WRITEs, in order, while their inputs are there:
  // slice j of step k needs slice j of step k-1 from rank r itself and from
  // its predecessor (sender trigger: that WRITE's completion; receiver
  // trigger: its arrival here). Completions and arrivals on one RC QP come
  // in order, so counts say which are in.
  void post_ring(size_t r) {
    if (!runs(r)) return;
    const size_t prev = (r + n_ - 1) % n_;
    for (;;) {
      const uint32_t m = posted_[r];  // WRITE m is slice m % S of step m / S
      if (m >= writes_per_rank()) return;
      const uint32_t k = m / slices_;
      const uint32_t arrived = receiver_triggered() ? got_[r] : sent_[prev];
      const uint32_t needed = m + 1 - slices_;  // slice j of step k-1 is WRITE m - S
      if (k > 0 && (sent_[r] < needed || arrived < needed)) return;
      // Reduce-scatter sends chunk (r-k) mod N, all-gather (r+1-k) mod N.
      const size_t c =
          k < n_ - 1 ? (r + n_ - k % n_) % n_ : (r + 1 + n_ - (k - (n_ - 1)) % n_) % n_;
      const uint64_t j = m % slices_;
      const uint64_t begin = c * chunk_ + chunk_ * j / slices_;
      const uint64_t end = c * chunk_ + chunk_ * (j + 1) / slices_;
      ++posted_[r];
      const size_t next = (r + 1) % n_;
      post_write(r, next, begin, begin, end - begin, m, qp_of(r, next));
    }
  }

  // All-to-all with a window: rank r's next peer (r+1 first) over a
  // connection of its own, made now and closed at the WRITE's completion.
  void post_windowed(size_t r) {
    const uint32_t k = next_peer_[r];
    if (k >= n_) return;
    ++next_peer_[r];
    const size_t d = (r + k) % n_;
    const QpPairRef p = sim_.connect(spec_.ranks[r], spec_.ranks[d], options_);
    open_.emplace(r << 32 | k, p);
    ++res_->connections;
    res_->connections_open_max = std::max<uint64_t>(res_->connections_open_max, open_.size());
    post(r, d, d, r, k, *p.a);
  }

  void post(size_t src, size_t dst, size_t src_chunk, size_t dst_chunk, uint64_t step) {
    const QpPairRef& p = conns_.at(std::minmax(src, dst));
    post(src, dst, src_chunk, dst_chunk, step, src < dst ? *p.a : *p.b);
  }

  void post(size_t src, size_t dst, size_t src_chunk, size_t dst_chunk, uint64_t step,
            transport::QueuePair& qp) {
    post_write(src, dst, src_chunk * chunk_, dst_chunk * chunk_, chunk_, step, qp);
  }

  // One WRITE of `len` bytes from offset `from` of src's buffer to offset
  // `to` of dst's; wr_id and immediate say which of src's WRITEs it is.
  void post_write(size_t src, size_t dst, uint64_t from, uint64_t to, uint64_t len, uint64_t seq,
                  transport::QueuePair& qp) {
    transport::Sge sge{mr_[src]->iova() + from, static_cast<uint32_t>(len), mr_[src]->lkey()};
    transport::SendWr wr;
    wr.wr_id = src << 32 | seq;
    wr.opcode = receiver_triggered() ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.imm_data = static_cast<uint32_t>(seq);
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = {&sge, 1};
    wr.remote_addr = mr_[dst]->iova() + to;
    wr.rkey = mr_[dst]->rkey();
    if (sim_.post_send(spec_.ranks[src], qp, wr) != 0) ++failed_;
  }

  void on_completion(const transport::WorkCompletion& wc) {
    if (wc.status != IBV_WC_SUCCESS) {
      ++failed_;
      // One process stops at the first failure; split, a partition cannot
      // stop the others, and the run goes on until nothing is left.
      if (!comm_) sim_.pause();
      return;
    }
    if (wc.wr_id & kRecvTag) {
      // Receiver trigger: the predecessor's step arrived at rank r.
      const size_t r = static_cast<size_t>(wc.wr_id & ~kRecvTag);
      ++got_[r];
      ++rdone_[r];
      post_recvs(r);
      post_ring(r);
      return;
    }
    ++done_;
    last_ns_ = sim_.now();
    const size_t r = static_cast<size_t>(wc.wr_id >> 32);
    if (spec_.pattern == Pattern::kRing) {
      ++sent_[r];
      post_ring(r);
      if (!receiver_triggered()) post_ring((r + 1) % n_);
    } else if (windowed()) {
      const auto it = open_.find(wc.wr_id);
      const size_t d = (r + (wc.wr_id & 0xFFFFFFFF)) % n_;
      add_counters(*res_, *it->second.a);
      add_counters(*res_, *it->second.b);
      sim_.disconnect(spec_.ranks[r], spec_.ranks[d], it->second);
      open_.erase(it);
      post_windowed(r);
    }
    if (done_ == res_->transfers && !comm_) sim_.pause();
  }

  bool windowed() const { return spec_.pattern == Pattern::kAllToAll && spec_.window; }

  static constexpr uint64_t kRecvTag = uint64_t{1} << 63;  // a receive WR's wr_id

  Simulator& sim_;
  const CollectiveSpec& spec_;
  PartitionComm* comm_;  // null: one process
  size_t n_;
  CollectiveResult* res_ = nullptr;
  QpOptions options_;                             // windowed: each transfer's connection
  std::vector<uint32_t> next_peer_;               // windowed: per rank, the next k (peer r+k)
  std::unordered_map<uint64_t, QpPairRef> open_;  // windowed: by wr_id
  uint64_t chunk_ = 0;
  uint32_t steps_ = 0;
  uint32_t slices_ = 1;  // ring: WRITEs a step
  // Windows from anonymous pages (memory/zeroed_memory.h): virtual payload
  // never writes them, so they take no memory. calloc gave heap memory it
  // had to clear once glibc's mmap threshold had risen past their size, and
  // 8192 ranks' windows then took gigabytes.
  std::vector<transport::ZeroedArray<uint8_t>> buf_;
  std::vector<transport::MemoryRegion*> mr_;
  std::map<std::pair<size_t, size_t>, QpPairRef> conns_;
  std::vector<uint32_t> sent_, posted_;
  std::vector<uint32_t> got_;              // receiver trigger: arrivals this iteration
  std::vector<uint64_t> rposted_, rdone_;  // receiver trigger: receive WRs, all iterations
  uint64_t done_ = 0, failed_ = 0, last_ns_ = 0;

 public:
  // Kept connections' QPs, and the windowed ones still open (a stalled
  // run); split, each partition's own, added up over the partitions.
  void add_open_counters(CollectiveResult& res) const {
    CollectiveResult mine;
    for (const auto& [host, qp] : qps_)
      if (sim_.runs_host(host)) add_counters(mine, *qp);
    for (const auto& [id, p] : open_) {
      add_counters(mine, *p.a);
      add_counters(mine, *p.b);
    }
    uint64_t w[7] = {mine.retransmits,    mine.timeouts,        mine.timeouts_low,
                     mine.seq_naks_sent,  mine.out_of_sequence, mine.reorder_depth_max,
                     mine.entropy_changes};
    std::vector<uint64_t> all(std::begin(w), std::end(w));
    if (comm_) all = comm_->allgather(w);
    for (size_t q = 0; q < all.size(); q += 7) {
      res.retransmits += all[q];
      res.timeouts += all[q + 1];
      res.timeouts_low += all[q + 2];
      res.seq_naks_sent += all[q + 3];
      res.out_of_sequence += all[q + 4];
      res.reorder_depth_max =
          std::max<uint32_t>(res.reorder_depth_max, static_cast<uint32_t>(all[q + 5]));
      res.entropy_changes += all[q + 6];
    }
  }
  std::vector<std::pair<size_t, transport::QueuePair*>> qps_;  // (host, QP)
};

}  // namespace

CollectiveResult run_collective(Simulator& sim, const Scenario& sc, const CollectiveSpec& spec,
                                PartitionComm* comm) {
  CollectiveResult res;
  const size_t n = spec.ranks.size();
  const double share = spec.pattern == Pattern::kRing ? 2.0 * static_cast<double>(n - 1) / n
                                                       : static_cast<double>(n - 1) / n;
  uint64_t rate = UINT64_MAX;
  for (uint32_t h : spec.ranks) rate = std::min(rate, sc.hosts[h].rate_bps);
  res.bound_ns = static_cast<uint64_t>(share * static_cast<double>(spec.bytes) *
                                       wire_per_payload(spec.qp.mtu) * 8e9 /
                                       static_cast<double>(rate));
  Runner runner(sim, spec, comm);
  runner.run(res);
  runner.add_open_counters(res);
  return res;
}

std::string collective_json(const Simulator& sim, const Scenario& sc, const CollectiveSpec& spec,
                            const CollectiveResult& r) {
  using nlohmann::ordered_json;
  const Summary s = sim.summary();
  ordered_json j;
  j["scenario"] = sc.file;
  j["seed"] = sc.run.seed;
  j["pattern"] = to_string(spec.pattern);
  j["ranks"] = spec.ranks.size();
  j["bytes"] = spec.bytes;
  j["iterations"] = spec.iterations;
  j["transfers_per_iteration"] = r.transfers;
  if (spec.slices > 1) j["slices"] = spec.slices;
  j["recovery"] =
      spec.qp.recovery == transport::Recovery::kGoBackN ? "go_back_n" : "selective_repeat";
  j["entropy"] = to_string(spec.qp.entropy.mode);
  j["entropy_paths"] = spec.qp.entropy.paths;
  j["reorder_tolerance"] = spec.qp.reorder_tolerance;
  j["reorder_window_ns"] = spec.qp.reorder_window_ns;
  if (spec.qp.reorder_window_min_ns) j["reorder_window_min_ns"] = spec.qp.reorder_window_min_ns;
  j["reth_every_packet"] = spec.qp.reth_every_packet;
  j["tail_probe"] = spec.qp.tail_probe;
  if (spec.window) {
    j["window"] = spec.window;
    j["connections"] = r.connections;
    j["connections_open_max"] = r.connections_open_max;
  }
  j["stalled"] = r.stalled;
  j["failed_wrs"] = r.failed_wrs;
  j["jct_ns"] = r.jct_ns;
  j["jct_p50_ns"] = percentile(r.jct_ns, 0.5);
  j["jct_p99_ns"] = percentile(r.jct_ns, 0.99);
  j["bound_ns"] = r.bound_ns;
  j["retransmits"] = r.retransmits;
  j["timeouts"] = r.timeouts;
  j["timeouts_low"] = r.timeouts_low;
  j["seq_naks_sent"] = r.seq_naks_sent;
  j["out_of_sequence"] = r.out_of_sequence;
  j["reorder_depth_max"] = r.reorder_depth_max;
  j["entropy_changes"] = r.entropy_changes;
  j["switch_drops"] = s.switch_drops;
  j["link_losses"] = s.link_losses;
  j["host_paused_ns"] = s.host_paused_ns;
  j["switch_paused_ns"] = s.switch_paused_ns;
  j["ecn_marks"] = s.ecn_marks;
  ordered_json links = ordered_json::array();
  for (size_t l = 0; l < sim.num_links(); ++l) {
    const LinkSpec& ls = sc.links[l / 2];
    if (sc.switch_index(ls.a) < 0 || sc.switch_index(ls.b) < 0) continue;
    links.push_back({{"link", sim.link_name(l)}, {"bytes", sim.link_delivered_bytes(l)}});
  }
  j["switch_links"] = links;
  return j.dump(2) + "\n";
}

std::string collective_line(const CollectiveSpec& spec, const CollectiveResult& r) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(3);
  o << "collective " << to_string(spec.pattern) << "  ranks " << spec.ranks.size() << "  bytes "
    << spec.bytes << "  iterations " << r.jct_ns.size() << "/" << spec.iterations;
  if (r.jct_ns.empty()) {
    o << "  " << (r.stalled ? "STALLED" : "none finished");
    return o.str();
  }
  const uint64_t p50 = percentile(r.jct_ns, 0.5), p99 = percentile(r.jct_ns, 0.99);
  o << "  JCT p50 " << static_cast<double>(p50) / 1e3 << " us  p99 "
    << static_cast<double>(p99) / 1e3 << " us  bound " << static_cast<double>(r.bound_ns) / 1e3
    << " us (" << std::setprecision(2) << static_cast<double>(r.bound_ns) / static_cast<double>(p50)
    << " of it at p50)" << (r.stalled ? "  STALLED" : "");
  return o.str();
}

}  // namespace droce::sim
