#include "droce/pktgen/dpdk_collective.h"

#include <fmt/format.h>
#include <rte_ethdev.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include "droce/engine/engine.h"
#include "droce/pktgen/busbw.h"
#include "droce/pktgen/index_lists.h"
#include "droce/options/values.h"
#include "droce/oob/fields.h"
#include "droce/oob/rank_group.h"
#include "droce/pktgen/report.h"
#include "droce/pktgen/verify.h"

namespace droce::pktgen {
namespace {

using transport::Sge;
using transport::WorkCompletion;

constexpr uint32_t kIdBits = 24;
constexpr uint32_t kIdMask = (1u << kIdBits) - 1;
constexpr uint32_t kRecvDepth = 2048;

uint32_t next_of(uint32_t r, uint32_t n) { return (r + 1) % n; }
uint32_t prev_of(uint32_t r, uint32_t n) { return (r + n - 1) % n; }

// Every rank's all-gather line, parsed once: a peer's words are checked
// input (oob::field_u64 refuses what is not a number).
std::vector<oob::Fields> parse_all(const std::vector<std::string>& lines) {
  std::vector<oob::Fields> out;
  out.reserve(lines.size());
  for (const std::string& l : lines) out.push_back(oob::parse_fields(l));
  return out;
}

struct Link {
  engine::PortIndex port = 0;
  engine::MrInfo mr;
  std::vector<engine::QpHandle> qps;  // one per channel
  std::vector<uint32_t> psn;
};

class Runner {
 public:
  Runner(const CollectiveRunConfig& c, engine::Engine& eng, oob::RankGroup& oob)
      : c_(c), eng_(eng), oob_(oob), n_(c.params.ranks), r_(c.rank) {}
  int run();

 private:
  void setup(uint64_t max_total);
  bool one_port() const { return c_.prev_port == c_.next_port; }
  bool on_next_link(engine::PortIndex port, uint32_t qpn) const;
  void post_send(const engine::QpHandle& qp, const transport::SendWr& wr);
  void post_recv(const engine::QpHandle& qp);
  void notify(Link& via, uint32_t id);
  void post_transfer(const Transfer& t);
  void learn(uint32_t id, uint64_t now);
  uint64_t run_iteration(const Schedule& s, VerifyBuffers& vb, IterationStats* stats);

  const CollectiveRunConfig& c_;
  engine::Engine& eng_;
  oob::RankGroup& oob_;
  uint32_t n_, r_;
  Link next_, prev_;
  uint32_t peer_prev_rkey_ = 0;  // rank+1's prev-link MR: where my WRITEs land
  uint64_t peer_prev_va_ = 0;
  // Iteration state.
  const Schedule* s_ = nullptr;
  VerifyBuffers* vb_ = nullptr;
  IterationStats* stats_ = nullptr;
  uint32_t iter_tag_ = 0;
  std::vector<uint32_t> pending_deps_;
  std::vector<uint8_t> known_;
  std::vector<uint64_t> posted_ns_;
  IndexLists dependents_;                       // my transfers waiting on id
  std::vector<std::vector<uint32_t>> needers_;  // ranks needing id done
  uint64_t to_learn_ = 0;                       // transfers I must learn of this iteration
  uint64_t sends_out_ = 0;                      // signaled sends not completed
  std::vector<WorkCompletion> wc_ = std::vector<WorkCompletion>(256);
  std::vector<engine::PortIndex> wc_port_ = std::vector<engine::PortIndex>(256);
  std::vector<uint64_t> iter_times_;
};

void Runner::setup(uint64_t max_total) {
  std::mt19937_64 rng(std::random_device{}() ^ (uint64_t{r_} << 32));
  auto add_port = [&](const std::string& name) {
    engine::PortConfig pc;
    pc.name = name;
    pc.rx_desc = 512;
    pc.tx_desc = 512;
    pc.endpoint.port_rate_bytes_per_sec = static_cast<uint64_t>(c_.rate_gbps * 1e9 / 8);
    return eng_.add_port(pc);
  };
  auto make_link = [&](engine::PortIndex port) {
    Link l;
    l.port = port;
    engine::MrSpec mr;
    mr.length = std::max<uint64_t>(max_total, 64);
    l.mr = eng_.reg_mr(l.port, mr);
    for (uint32_t ch = 0; ch < c_.params.channels; ++ch) {
      engine::QpSpec spec;
      spec.caps.max_send_wr = 4096;
      spec.caps.max_recv_wr = kRecvDepth;
      l.qps.push_back(eng_.create_qp(l.port, spec));
      l.psn.push_back(static_cast<uint32_t>(rng()) & 0xFFFFFF);
    }
    return l;
  };
  // The next link is the memif server end, the prev link the client end.
  // A memif client that starts before its server's socket exists never
  // connects: start the server ends everywhere first, then the clients.
  // One port for both neighbours (a rank behind a switch): both links'
  // QPs and MRs live on it, told apart by QP number.
  next_ = make_link(add_port(c_.next_port));
  eng_.start();
  oob_.barrier("servers started");
  prev_ = make_link(one_port() ? next_.port : add_port(c_.prev_port));

  // Exchange: my next-link QPs pair with rank+1's prev-link QPs.
  auto describe = [&](const Link& l, const char* tag) {
    std::string s = fmt::format(" {}_mac={} {}_rkey={} {}_va={}", tag, options::format_mac(eng_.port_mac(l.port)),
                                tag, l.mr.rkey, tag, l.mr.iova);
    for (size_t i = 0; i < l.qps.size(); ++i)
      s += fmt::format(" {}_qpn{}={} {}_psn{}={}", tag, i, l.qps[i].qpn, tag, i, l.psn[i]);
    return s;
  };
  const std::string_view recovery =
      options::recovery_name(c_.multipath.recovery.value_or(transport::Recovery::kGoBackN));
  const auto all = parse_all(oob_.all_gather(
      fmt::format("QPS rank={} channels={} recovery={}{}{}", r_, c_.params.channels, recovery,
                  describe(next_, "next"), describe(prev_, "prev"))));
  for (uint32_t i = 0; i < n_; ++i) {
    const uint64_t channels = oob::field_u64(all[i], "channels");
    if (channels != c_.params.channels)
      throw oob::Error(fmt::format("rank {} uses --channels {}, this rank {}", i, channels,
                                   c_.params.channels));
    const std::string& theirs = oob::field(all[i], "recovery");
    if (theirs != recovery)
      throw oob::Error(fmt::format("rank {} uses --recovery {}, this rank {} (give every rank "
                                   "the same)",
                                   i, theirs, recovery));
  }
  auto connect = [&](Link& l, const oob::Fields& peer, const char* peer_tag, uint32_t peer_rank) {
    for (size_t i = 0; i < l.qps.size(); ++i) {
      transport::QpAttr a;
      a.path.src_mac = eng_.port_mac(l.port);
      {
        const std::string mac = oob::field(peer, fmt::format("{}_mac", peer_tag));
        if (!options::try_parse_mac(mac, a.path.dst_mac))
          throw oob::Error(fmt::format("bad MAC '{}' from a peer", mac));
      }
      a.path.src_ip = wire::IpAddress::v4(0x0A000001u + r_);
      a.path.dst_ip = wire::IpAddress::v4(0x0A000001u + peer_rank);
      const uint32_t peer_qpn =
          static_cast<uint32_t>(oob::field_u64(peer, fmt::format("{}_qpn{}", peer_tag, i)));
      a.path.udp_src_port = wire::udp_src_port_entropy(l.qps[i].qpn, peer_qpn);
      a.dest_qpn = peer_qpn;
      a.rq_psn = static_cast<uint32_t>(oob::field_u64(peer, fmt::format("{}_psn{}", peer_tag, i)));
      a.sq_psn = l.psn[i];
      a.path_mtu = options::parse_mtu("--mtu", c_.mtu);
      options::apply_multipath(c_.multipath, a);
      if (int rc = eng_.connect_qp(l.qps[i], a); rc != 0)
        throw std::runtime_error(fmt::format("QP {:#x}: connect failed: {}", l.qps[i].qpn, std::strerror(rc)));
    }
  };
  connect(next_, all[next_of(r_, n_)], "prev", next_of(r_, n_));
  connect(prev_, all[prev_of(r_, n_)], "next", prev_of(r_, n_));
  peer_prev_rkey_ = static_cast<uint32_t>(oob::field_u64(all[next_of(r_, n_)], "prev_rkey"));
  peer_prev_va_ = oob::field_u64(all[next_of(r_, n_)], "prev_va");
  for (Link* l : {&next_, &prev_})
    for (auto& qp : l->qps)
      for (uint32_t i = 0; i < kRecvDepth; ++i) post_recv(qp);
}

bool Runner::on_next_link(engine::PortIndex port, uint32_t qpn) const {
  if (port != next_.port) return false;
  if (prev_.port != next_.port) return true;
  return std::any_of(next_.qps.begin(), next_.qps.end(),
                     [&](const engine::QpHandle& q) { return q.qpn == qpn; });
}

void Runner::post_send(const engine::QpHandle& qp, const transport::SendWr& wr) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(c_.timeout_s);
  int rc;
  while ((rc = eng_.post_send(qp, std::span(&wr, 1))) == ENOMEM) {
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("the send queue stayed full");
    eng_.poll();
    std::this_thread::yield();
  }
  if (rc != 0) throw std::runtime_error(fmt::format("post_send refused: {}", std::strerror(rc)));
  ++sends_out_;
}

void Runner::post_recv(const engine::QpHandle& qp) {
  transport::RecvWr wr;
  wr.wr_id = qp.qpn;
  int rc;
  while ((rc = eng_.post_recv(qp, std::span(&wr, 1))) == ENOMEM) {
    eng_.poll();
    std::this_thread::yield();
  }
  if (rc != 0) throw std::runtime_error(fmt::format("post_recv refused: {}", std::strerror(rc)));
}

// A zero-length SEND with immediate: "transfer id has completed".
void Runner::notify(Link& via, uint32_t id) {
  transport::SendWr wr;
  wr.wr_id = id;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = iter_tag_ << kIdBits | id;
  post_send(via.qps[0], wr);
}

void Runner::post_transfer(const Transfer& t) {
  // The canonical buffer is vb_->bytes(r); the NIC reads its copy in the
  // next link's MR (a port's MR belongs to that port's device).
  std::memcpy(next_.mr.addr + t.src_offset, vb_->bytes(r_).data() + t.src_offset, t.bytes);
  Sge sge{next_.mr.iova + t.src_offset, static_cast<uint32_t>(t.bytes), next_.mr.lkey};
  transport::SendWr wr;
  wr.wr_id = t.id;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = std::span(&sge, 1);
  wr.imm_data = iter_tag_ << kIdBits | t.id;
  wr.remote_addr = peer_prev_va_ + t.dst_offset;
  wr.rkey = peer_prev_rkey_;
  posted_ns_[t.id] = engine::now_ns();
  post_send(next_.qps[t.channel], wr);
}

void Runner::learn(uint32_t id, uint64_t now) {
  if (known_[id]) throw std::runtime_error(fmt::format("transfer {} completed twice", id));
  known_[id] = 1;
  --to_learn_;
  const Transfer& t = s_->transfers[id];
  if (t.src == r_ && stats_) stats_->record_transfer(t.step, now - posted_ns_[id]);
  for (uint32_t d : dependents_[id])
    if (--pending_deps_[d] == 0) post_transfer(s_->transfers[d]);
}

uint64_t Runner::run_iteration(const Schedule& s, VerifyBuffers& vb, IterationStats* stats) {
  s_ = &s;
  vb_ = &vb;
  stats_ = stats;
  const size_t nt = s.transfers.size();
  known_.assign(nt, 0);
  posted_ns_.assign(nt, 0);
  pending_deps_.assign(nt, 0);
  to_learn_ = 0;
  for (const Transfer& t : s.transfers) {
    pending_deps_[t.id] = static_cast<uint32_t>(s.depends_on[t.id].size());
    bool mine = t.src == r_ || t.dst == r_;
    for (uint32_t rk : needers_[t.id]) mine |= rk == r_;
    if (mine) ++to_learn_;
  }
  const uint64_t t0 = engine::now_ns();
  for (const Transfer& t : s.transfers)
    if (t.src == r_ && s.depends_on[t.id].empty()) post_transfer(t);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(c_.timeout_s);
  uint64_t t_end = t0;
  while (to_learn_ > 0 || sends_out_ > 0) {
    const size_t n = eng_.poll_completions(wc_, wc_port_);
    const uint64_t now = engine::now_ns();
    for (size_t i = 0; i < n; ++i) {
      const WorkCompletion& wc = wc_[i];
      if (wc.status != IBV_WC_SUCCESS)
        throw std::runtime_error(fmt::format("QP {:#x}: completion wr_id {} failed: status {} vendor_err {}",
                                             wc.qp_num, wc.wr_id, static_cast<int>(wc.status), wc.vendor_err));
      if (wc.opcode == IBV_WC_SEND || wc.opcode == IBV_WC_RDMA_WRITE) {
        --sends_out_;
        continue;
      }
      const bool on_next = on_next_link(wc_port_[i], wc.qp_num);
      post_recv(engine::QpHandle{wc_port_[i], wc.qp_num});
      const uint32_t tag = wc.imm_data >> kIdBits, id = wc.imm_data & kIdMask;
      if (tag != iter_tag_ || id >= nt)
        throw std::runtime_error(fmt::format("unexpected immediate {:#x} (iteration tag {})", wc.imm_data, iter_tag_));
      const Transfer& t = s.transfers[id];
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        // Data from rank-1 landed in the prev link's MR: apply, tell the sender.
        if (on_next || t.dst != r_)
          throw std::runtime_error(fmt::format("transfer {} arrived at the wrong rank/port", id));
        vb.on_transfer_complete(t, {prev_.mr.addr + t.dst_offset, t.bytes});
        notify(prev_, id);
        learn(id, now);
      } else {
        // A notification from rank+1: my transfer (from its receiver) or
        // rank+1's own transfer (forwarded by its sender).
        if (!on_next) throw std::runtime_error(fmt::format("notification {} on the prev link", id));
        learn(id, now);
        const uint32_t pv = prev_of(r_, n_);
        if (t.src == r_ && pv != t.dst &&
            std::find(needers_[id].begin(), needers_[id].end(), pv) != needers_[id].end())
          notify(prev_, id);
      }
      t_end = now;
    }
    if (n == 0) {
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error(fmt::format("rank {}: iteration stalled ({} transfers not complete, {} sends "
                                             "outstanding) after {} s", r_, to_learn_, sends_out_, c_.timeout_s));
      if (c_.poll_sleep_us) std::this_thread::sleep_for(std::chrono::microseconds(c_.poll_sleep_us));
    }
  }
  return t_end - t0;
}

int Runner::run() {
  uint64_t max_total = 0;
  for (uint64_t size : c_.sizes) {
    ScheduleParams p = c_.params;
    p.bytes = size;
    const Schedule s = make_schedule(p);
    for (const auto& l : s.layout) max_total = std::max(max_total, l.total_bytes());
  }
  setup(max_total);
  // memif (and real NICs) need a moment before the link carries frames:
  // wait for both links (the one, on one port), or the first WRITEs run
  // out of retries.
  for (const Link* l : {&next_, &prev_}) {
    if (l == &prev_ && one_port()) break;
    if (!engine::wait_for_link_up(eng_.port_id(l->port), c_.timeout_s))
      throw std::runtime_error(fmt::format("rank {}: link on port {} not up after {} s (is the "
                                           "neighbour running?)", r_, eng_.port_id(l->port), c_.timeout_s));
  }
  oob_.barrier("ready");
  std::vector<CollectiveResult> rows;
  if (r_ == 0) fmt::print("{}", table_header());
  bool any_wrong = false;
  for (uint64_t size : c_.sizes) {
    ScheduleParams p = c_.params;
    p.bytes = size;
    const Schedule s = make_schedule(p);
    if (auto err = check_ring_topology(s); !err.empty())
      throw droce::ConfigError("--pattern", err);
    if (s.transfers.size() > kIdMask)
      throw droce::ConfigError("--chunk", "more than 2^24 transfers per iteration");
    dependents_ = IndexLists::build(s.transfers.size(), [&](auto&& emit) {
      for (const Transfer& t : s.transfers)
        if (t.src == r_)
          for (uint32_t d : s.depends_on[t.id]) emit(d, t.id);
    });
    needers_.assign(s.transfers.size(), {});
    for (const Transfer& t : s.transfers)
      for (uint32_t d : s.depends_on[t.id]) {
        auto& nd = needers_[d];
        if (std::find(nd.begin(), nd.end(), t.src) == nd.end()) nd.push_back(t.src);
      }
    VerifyBuffers vb(s);
    IterationStats stats;
    int64_t wrong = 0;
    for (uint32_t it = 0; it < c_.warmup + c_.iters; ++it) {
      vb.reset();
      vb.apply_local_copies();  // all-to-all's own block (none for the ring patterns run here)
      iter_tag_ = (iter_tag_ + 1) & 0xFF;
      oob_.barrier(fmt::format("size {} iter {}", size, it));
      const bool timed = it >= c_.warmup;
      const uint64_t jct = run_iteration(s, vb, timed ? &stats : nullptr);
      const uint64_t w = c_.verify ? vb.wrong_per_rank()[r_] : 0;
      const auto all = parse_all(oob_.all_gather(fmt::format("DONE jct={} wrong={}", jct, w)));
      uint64_t max_jct = 0, sum_wrong = 0;
      for (const oob::Fields& l : all) {
        max_jct = std::max(max_jct, oob::field_u64(l, "jct"));
        sum_wrong += oob::field_u64(l, "wrong");
      }
      if (timed) {
        stats.record_iteration(max_jct);
        wrong = std::max<int64_t>(wrong, static_cast<int64_t>(sum_wrong));
      }
    }
    CollectiveResult res = make_result(p, stats, c_.verify ? wrong : -1);
    any_wrong |= wrong > 0;
    rows.push_back(res);
    if (r_ == 0) fmt::print("{}", table_row(res));
    std::fflush(stdout);
  }
  if (r_ == 0) {
    fmt::print("{}", average_busbw_line(rows));
    fmt::print("{}", latency_header());
    for (const auto& row : rows) fmt::print("{}", latency_row(row));
    if (!c_.json_path.empty()) {
      std::ofstream(c_.json_path) << results_json(c_.params, c_.iters, c_.warmup, rows).dump(2) << "\n";
    }
  }
  oob_.barrier("done");
  return any_wrong ? 1 : 0;
}

}  // namespace

std::string check_ring_topology(const Schedule& s) {
  const uint32_t n = s.params.ranks;
  for (const Transfer& t : s.transfers) {
    if (t.dst != next_of(t.src, n))
      return fmt::format("pattern {} sends from rank {} to rank {}: --mode dpdk runs on a ring of "
                         "links (rank r to r+1); use ring, all_gather or reduce_scatter",
                         to_string(s.params.pattern), t.src, t.dst);
    for (uint32_t d : s.depends_on[t.id]) {
      const Transfer& u = s.transfers[d];
      if (t.src != u.src && t.src != u.dst && t.src != prev_of(u.src, n))
        return fmt::format("transfer {} on rank {} depends on transfer {} ({} to {}), which that "
                           "rank cannot learn of on a ring", t.id, t.src, d, u.src, u.dst);
    }
  }
  return {};
}

int run_collective(const CollectiveRunConfig& c) {
  if (c.rank >= c.params.ranks)
    throw droce::ConfigError("--rank", fmt::format("{} is not below --ranks {}", c.rank, c.params.ranks));
  engine::EngineConfig ec;
  ec.idle_sleep_us = c.idle_sleep_us;
  ec.telemetry = false;
  oob::RankGroup oob(c.rank, c.params.ranks, c.oob_host, c.oob_port, c.timeout_s);
  engine::Engine eng(ec);
  Runner runner(c, eng, oob);
  const int rc = runner.run();
  // Tear the memif links down in step: every worker stops before any rank
  // closes its ports (a peer vanishing under a running worker crashed it).
  eng.stop();
  oob.barrier("stopped");
  eng.close_ports();
  oob.barrier("closed");
  return rc;
}

}  // namespace droce::pktgen
