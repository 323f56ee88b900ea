// Collective schedules over RC QPs in the virtual-time simulator; see the
// header for the completion rule.
#include "sim_executor.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <span>
#include <stdexcept>
#include <string>

namespace droce::pktgen {

namespace {

// Without verify mode only the traffic matters, not the bytes: each rank
// registers a window of at least twice the largest transfer and offsets
// wrap into it, so a 1024-rank run does not need 1024 full buffers.
constexpr uint64_t kMinWindow = 64 * 1024;

// wr_id tags beside a transfer's id: a credit SEND, a receive WR (whose
// low bits are the QP side's index).
constexpr uint64_t kCreditTag = uint64_t{1} << 62;
constexpr uint64_t kRecvTag = uint64_t{1} << 63;
// In a backlog or a release list: a credit for this transfer, not it.
constexpr uint32_t kCreditBit = uint32_t{1} << 31;

uint64_t wrap(uint64_t off, uint64_t bytes, uint64_t window) {
  if (off + bytes <= window) return off;
  const uint64_t w = off % window;
  return w + bytes <= window ? w : 0;
}

}  // namespace

SimExecutor::SimExecutor(sim::Simulator& sim, std::vector<uint32_t> rank_host,
                         SimExecutorOptions options)
    : sim_(sim), rank_host_(std::move(rank_host)), opt_(std::move(options)) {
  if (opt_.comm && !receiver())
    throw std::invalid_argument("a partitioned run needs the receiver trigger");
  sim_.set_completion_handler(
      [this](size_t, const transport::WorkCompletion& wc) { on_completion(wc); });
}

SimExecutor::~SimExecutor() { sim_.set_completion_handler(nullptr); }

// The connection of a rank pair and channel, made (without its QPs) on
// first use.
SimExecutor::Conn& SimExecutor::conn_for(uint32_t src, uint32_t dst, uint32_t channel) {
  const uint32_t lo = std::min(src, dst), hi = std::max(src, dst);
  auto [it, made] = qps_.try_emplace(std::make_tuple(lo, hi, channel));
  Conn& c = it->second;
  if (made) {
    c.join(rank_host_[lo], rank_host_[hi]);
    for (QpSide& side : c.side) {
      side.index = static_cast<uint32_t>(sides_.size());
      sides_.push_back(&side);
    }
    conns_.push_back(&c);
  }
  return c;
}

// Queues as deep as the schedule can fill them, up to the configured
// depth. In one iteration a side's send queue holds at most the WRITEs it
// sends and the credits for those it receives, and its receive queue the
// immediates and credits that arrive: together never more than the
// connection's transfers. So no post is refused that the configured depth
// would take, and the run is the same; but an all-to-all's connections,
// a transfer or two each, do not keep two 256-slot rings apiece (their
// first pages, 16 KiB a rank pair). QPs are made in the order their
// connections were first used, as in every partition; a later size of a
// sweep that needs more grows the rings of the QPs it reuses.
void SimExecutor::size_queues() {
  for (Conn* c : conns_) {
    const uint32_t need = opt_.size_queues ? std::max<uint32_t>(c->transfers, 1) : UINT32_MAX;
    const uint32_t send = std::min(opt_.qp.max_send_wr, need);
    const uint32_t recv = std::min(opt_.qp.max_recv_wr, need);
    if (!c->side[0].qp) {
      sim::QpOptions o = opt_.qp;
      o.max_send_wr = send;
      o.max_recv_wr = recv;
      const sim::QpPairRef p = sim_.connect(c->side[0].host, c->side[1].host, o);
      c->side[0].qp = p.a;
      c->side[1].qp = p.b;
      continue;
    }
    for (QpSide& side : c->side) {
      const transport::QpCaps& caps = side.qp->caps();
      if (caps.max_send_wr >= send && caps.max_recv_wr >= recv) continue;
      // Refused only while WRs are queued, after a stalled size (the sweep
      // stops there): the rings stay, and posts wait in the backlog.
      side.qp->resize_queues(std::max(caps.max_send_wr, send), std::max(caps.max_recv_wr, recv));
    }
  }
}

size_t SimExecutor::queue_bytes() const {
  size_t bytes = 0;
  for (const QpSide* side : sides_) bytes += side->qp ? side->qp->queue_bytes() : 0;
  return bytes;
}

bool SimExecutor::try_post(QpSide& side, uint32_t entry) {
  transport::SendWr wr;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (entry & kCreditBit) {
    // The destination's credit: the transfer's target range is free.
    // Signalled, so its completion makes room for the backlog too.
    const uint32_t id = entry & ~kCreditBit;
    wr.wr_id = kCreditTag | id;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = id;
    return sim_.post_send(side.host, *side.qp, wr) == 0;
  }
  const uint32_t id = entry;
  const Transfer& t = s_->transfers[id];
  const uint64_t so = wrap(t.src_offset, t.bytes, window_[t.src]);
  const uint64_t d = wrap(t.dst_offset, t.bytes, window_[t.dst]);
  transport::Sge sge{mr_[t.src]->iova() + so, static_cast<uint32_t>(t.bytes), mr_[t.src]->lkey()};
  wr.wr_id = id;
  // The receiver trigger tells every arrival by its id; the sender trigger
  // marks a message's last chunk with (step, channel).
  wr.opcode = t.with_imm || receiver() ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.imm_data = receiver() ? id : t.imm;
  wr.sg_list = {&sge, 1};
  wr.remote_addr = mr_[t.dst]->iova() + d;
  wr.rkey = mr_[t.dst]->rkey();
  if (sim_.post_send(side.host, *side.qp, wr) != 0) return false;
  if (t.with_imm && !receiver()) {
    // The immediate consumes a receive WQE at the destination (IBA
    // 9.4.3); posted now, it is there long before the data (at least one
    // link delay later). RC keeps the order, so the WQEs match in order.
    QpSide& peer = *side.peer;
    transport::RecvWr rwr;
    rwr.wr_id = id;
    if (sim_.post_recv(peer.host, *peer.qp, rwr) != 0) ++run_->imm_bad;
  }
  if (opt_.trace)
    opt_.trace(SimTraceEvent{SimTraceEvent::Kind::kPost, sim_.now(), iteration_, id});
  return true;
}

// Keeps the QP's order: behind anything already waiting for room.
void SimExecutor::enqueue(QpSide& side, uint32_t entry) {
  if (side.backlog_head < side.backlog.size() || !try_post(side, entry))
    side.backlog.push_back(entry);
}

void SimExecutor::post(uint32_t id) {
  posted_at_[id] = sim_.now();
  if (windowed()) open_connection(id);
  enqueue(side_of(id), id);
}

// A connection for transfer `id` alone: a WRITE and its immediate's
// receive, so rings of a few slots rather than the configured depth (tens
// of thousands are made and closed per rank).
void SimExecutor::open_connection(uint32_t id) {
  const Transfer& t = s_->transfers[id];
  auto c = std::make_unique<Conn>();
  c->join(rank_host_[t.src], rank_host_[t.dst]);
  c->side[0].index = c->side[1].index = UINT32_MAX;  // not in sides_
  sim::QpOptions o = opt_.qp;
  o.max_send_wr = o.max_recv_wr = 4;
  const sim::QpPairRef p = sim_.connect(c->side[0].host, c->side[1].host, o);
  c->side[0].qp = p.a;
  c->side[1].qp = p.b;
  open_.emplace(id, std::move(c));
  ++run_->connections;
  run_->connections_open_max = std::max<uint64_t>(run_->connections_open_max, open_.size());
}

// Its QPs destroyed (anything outstanding flushed), their counters kept in
// the simulator's summary.
void SimExecutor::close_connection(uint32_t id) {
  const auto it = open_.find(id);
  if (it == open_.end()) return;
  const Conn& c = *it->second;
  sim_.disconnect(c.side[0].host, c.side[1].host, sim::QpPairRef{c.side[0].qp, c.side[1].qp});
  open_.erase(it);
}

// Room in this QP's send queue: post what was waiting.
void SimExecutor::drain(QpSide& side) {
  while (side.backlog_head < side.backlog.size() &&
         try_post(side, side.backlog[side.backlog_head]))
    ++side.backlog_head;
  if (side.backlog_head == side.backlog.size()) {
    side.backlog.clear();
    side.backlog_head = 0;
  }
}

// Receive WRs for what still comes this iteration, up to the QP's depth.
void SimExecutor::top_up_recvs(QpSide& side) {
  while (side.recv_posted < side.recv_expected &&
         side.recv_posted - side.recv_done < side.qp->caps().max_recv_wr) {
    transport::RecvWr rwr;
    rwr.wr_id = kRecvTag | side.index;
    if (sim_.post_recv(side.host, *side.qp, rwr) != 0) {
      ++run_->failed_wrs;
      return;
    }
    ++side.recv_posted;
  }
}

void SimExecutor::release(uint32_t id) {
  if (--remaining_[id] == 0) post(id);
}

// At the transfer's destination: one more thing it waited for is done.
void SimExecutor::credit_step(uint32_t id) {
  if (--credit_left_[id] == 0) enqueue(*side_of(id).peer, id | kCreditBit);
}

void SimExecutor::on_completion(const transport::WorkCompletion& wc) {
  if (!s_ || !run_) return;
  if (receiver()) {
    if (wc.wr_id & kRecvTag) return on_receive(wc);
    if (wc.wr_id & kCreditTag) {
      const uint64_t id = wc.wr_id & ~kCreditTag;
      if (wc.status != IBV_WC_SUCCESS) ++run_->failed_wrs;
      if (id < side_index_.size()) drain(*side_of(id).peer);
      return;
    }
  } else if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM || wc.opcode == IBV_WC_RECV) {
    ++run_->imm_received;
    const uint32_t step = wc.imm_data >> 8, channel = wc.imm_data & 0xFF;
    if (wc.status != IBV_WC_SUCCESS || step >= s_->num_steps ||
        channel >= s_->params.channels)
      ++run_->imm_bad;
    return;
  }
  on_sent(wc);
}

// Receiver trigger: a transfer arrived at its destination, or a credit at
// a transfer's source.
void SimExecutor::on_receive(const transport::WorkCompletion& wc) {
  QpSide& side = *sides_.at(wc.wr_id & ~kRecvTag);
  ++side.recv_done;
  top_up_recvs(side);
  if (wc.status != IBV_WC_SUCCESS) {
    ++run_->failed_wrs;
    return;
  }
  const bool credit = wc.opcode == IBV_WC_RECV;
  ++(credit ? run_->credits : run_->imm_received);
  const uint32_t id = wc.imm_data;
  // Only what this side can receive: a transfer to it, a credit for one from it.
  if (!(wc.wc_flags & IBV_WC_WITH_IMM) || id >= side_index_.size() ||
      &side_of(id) != (credit ? &side : side.peer)) {
    ++run_->imm_bad;
    return;
  }
  if (credit) return release(id);
  if (checking_) verify_->apply_landed(s_->transfers[id]);
  for (uint32_t e : after_arrival_[id])
    (e & kCreditBit) ? credit_step(e & ~kCreditBit) : release(e);
}

// A transfer's WRITE completed at its sender.
void SimExecutor::on_sent(const transport::WorkCompletion& wc) {
  const uint32_t id = static_cast<uint32_t>(wc.wr_id);
  if (wc.wr_id >= s_->transfers.size()) return;
  const Transfer& t = s_->transfers[id];
  const uint64_t now = sim_.now();
  if (wc.status != IBV_WC_SUCCESS) ++run_->failed_wrs;
  // The sender trigger applies the receiver's action here: the responder
  // ACKs a WRITE only after placing it (IBA 9.7.5.1).
  if (checking_ && !receiver() && wc.status == IBV_WC_SUCCESS) verify_->apply_landed(t);
  if (opt_.trace)
    opt_.trace(SimTraceEvent{SimTraceEvent::Kind::kComplete, now, iteration_, id});
  // Kept aside until the iteration finishes: a stalled one is not timed.
  if (timed_) iteration_latencies_.push_back({now, id, t.step, now - posted_at_[id]});
  ++completed_;
  last_completion_ns_ = now;
  if (windowed())
    close_connection(id);
  else
    drain(side_of(id));
  for (uint32_t e : dependents_[id]) (e & kCreditBit) ? credit_step(e & ~kCreditBit) : release(e);
  // Split, the partitions' work count stops the run instead (set_work).
  if (completed_ == local_total_ && !opt_.comm) sim_.pause();
}

// Every rank's buffer, registered: verify mode's real data, else a zeroed
// window big enough for the largest transfer. Addresses come from the rank
// (ibv_reg_mr_iova), the same in every process of a partitioned run.
void SimExecutor::register_buffers(const Schedule& s, uint64_t max_bytes) {
  const uint32_t n = s.params.ranks;
  base_.assign(n, nullptr);
  window_.assign(n, 0);
  mr_.assign(n, nullptr);
  plain_.clear();
  verify_.reset();
  if (opt_.verify) {
    verify_ = std::make_unique<VerifyBuffers>(s);
    for (uint32_t r = 0; r < n; ++r) {
      auto b = verify_->bytes(r);
      base_[r] = b.data();
      window_[r] = b.size();
    }
  } else {
    const uint64_t w = std::max(kMinWindow, 2 * max_bytes);
    plain_.reserve(n);
    for (uint32_t r = 0; r < n; ++r) {
      window_[r] = std::min(w, std::max<uint64_t>(s.layout[r].total_bytes(), 4));
      try {
        plain_.emplace_back(window_[r]);
      } catch (const std::bad_alloc&) {
        throw std::runtime_error("rank " + std::to_string(r) + ": out of memory");
      }
      base_[r] = plain_[r].data();
    }
  }
  for (uint32_t r = 0; r < n; ++r) {
    mr_[r] = sim_.reg_mr(rank_host_[r], base_[r], window_[r], (uint64_t{r} + 1) << 40);
    if (!mr_[r])
      throw std::runtime_error("rank " + std::to_string(r) + ": memory registration refused");
    // Without verify nothing reads what lands, so no payload byte is moved
    // (docs/SIM.md "Virtual payload": the same frames, ICRCs and outputs).
    mr_[r]->set_virtual_payload(!opt_.verify);
  }
}

// Who learns of each dependency where (see the header): the transfer's own
// source (its own WRITE completed, or a WRITE arrived at it) releases it;
// what its destination must see first is counted there and sent as one
// credit.
void SimExecutor::plan_receiver_trigger(const Schedule& s) {
  const size_t total = s.transfers.size();
  if (total >= kCreditBit)
    throw std::invalid_argument("the receiver trigger tells transfers apart by a 31-bit id; this "
                                "schedule has " + std::to_string(total));
  // Where transfer t learns that d is done, and who acts on it: t's source
  // (released) or t's destination (a credit step).
  enum Where : uint8_t { kSentHere, kArrivedHere, kSentThere, kArrivedThere };
  const auto where = [&](const Transfer& t, uint32_t d) {
    const Transfer& w = s.transfers[d];
    if (w.src == t.src) return kSentHere;
    if (w.dst == t.src) return kArrivedHere;
    if (w.src == t.dst) return kSentThere;
    if (w.dst == t.dst) return kArrivedThere;
    throw std::invalid_argument(
        "transfer " + std::to_string(t.id) + " waits for transfer " + std::to_string(d) +
        " between two other ranks, which neither of its ranks sees (receiver trigger)");
  };
  credits_at_start_.assign(total, 0);
  for (QpSide* side : sides_) side->recv_expected = 0;
  for (const Transfer& t : s.transfers) {
    uint32_t here = 0, there = 0;
    for (uint32_t d : s.depends_on[t.id]) ++(where(t, d) <= kArrivedHere ? here : there);
    credits_at_start_[t.id] = there;
    remaining_at_start_[t.id] = here + (there > 0);
    ++side_of(t.id).peer->recv_expected;
    if (there > 0) ++side_of(t.id).recv_expected;
  }
  // What d's completion at its sender (`on_sent`), or else its arrival,
  // releases.
  const auto lists = [&](bool on_sent) {
    return IndexLists::build(total, [&](auto&& emit) {
      for (const Transfer& t : s.transfers)
        for (uint32_t d : s.depends_on[t.id]) {
          const Where w = where(t, d);
          if ((w == kSentHere || w == kSentThere) != on_sent) continue;
          emit(d, w == kSentHere || w == kArrivedHere ? t.id : t.id | kCreditBit);
        }
    });
  };
  dependents_ = lists(true);
  after_arrival_ = lists(false);
}

void SimExecutor::start_iteration() {
  remaining_ = remaining_at_start_;
  credit_left_ = credits_at_start_;
  completed_ = 0;
  iteration_latencies_.clear();
  // Every local transfer completes once: no regrowth (a copy of what it
  // holds, and up to twice the memory) at a million transfers.
  if (timed_) iteration_latencies_.reserve(local_total_);
  if (receiver())
    for (QpSide* side : sides_) {
      side->recv_posted = side->recv_done = 0;
      if (sim_.runs_host(side->host)) top_up_recvs(*side);
    }
  for (const Transfer& t : s_->transfers)
    if (remaining_[t.id] == 0 && local(t.src)) post(t.id);
}

// Runs until every partition's transfers completed (false) or the
// iteration stalled (true).
bool SimExecutor::wait_iteration(uint64_t deadline) {
  const uint64_t total = s_->transfers.size();
  for (;;) {
    const bool more = opt_.comm ? sim_.run_partitioned_until(deadline) : sim_.run_until(deadline);
    if (summed(completed_) >= total) return false;
    if (!more || sim_.now() >= deadline) return true;
  }
}

// The iteration's end and its transfers' latencies, from every partition:
// the end everywhere, the latencies in partition 0. The receiver trigger
// lists them by (completion time, id), which a split run can rebuild.
void SimExecutor::gather_latencies(IterationRecord& rec) {
  rec.end_ns = last_completion_ns_;
  if (opt_.comm) {
    for (uint64_t end : opt_.comm->allgather(std::span<const uint64_t>(&last_completion_ns_, 1)))
      rec.end_ns = std::max(rec.end_ns, end);
    std::vector<std::vector<uint8_t>> out(opt_.comm->count());
    if (opt_.comm->index() != 0) {
      const auto* p = reinterpret_cast<const uint8_t*>(iteration_latencies_.data());
      out[0].assign(p, p + iteration_latencies_.size() * sizeof(Latency));
    }
    const std::span<const uint8_t> in = opt_.comm->exchange(out);
    if (opt_.comm->index() != 0) return;  // its share went to partition 0
    const size_t mine = iteration_latencies_.size();
    iteration_latencies_.resize(mine + in.size() / sizeof(Latency));
    std::memcpy(iteration_latencies_.data() + mine, in.data(), in.size());
  }
  if (receiver())
    std::sort(iteration_latencies_.begin(), iteration_latencies_.end(),
              [](const Latency& a, const Latency& b) {
                return a.at_ns != b.at_ns ? a.at_ns < b.at_ns : a.id < b.id;
              });
}

// `mine` added up over the partitions (itself, unsplit).
uint64_t SimExecutor::summed(uint64_t mine) {
  if (!opt_.comm) return mine;
  uint64_t all = 0;
  for (uint64_t v : opt_.comm->allgather(std::span<const uint64_t>(&mine, 1))) all += v;
  return all;
}

// Verify mode's #wrong over the ranks of every partition, each counted by
// the partition that runs it.
uint64_t SimExecutor::wrong_now() {
  const std::vector<uint64_t> per_rank = verify_->wrong_per_rank();
  uint64_t mine = 0;
  for (uint32_t r = 0; r < per_rank.size(); ++r) mine += local(r) ? per_rank[r] : 0;
  return summed(mine);
}

// Split, each partition counted its own QPs' completions: the sums.
void SimExecutor::gather_counters(SizeRun& result) {
  if (!opt_.comm) return;
  const uint64_t mine[4] = {result.failed_wrs, result.imm_received, result.imm_bad,
                            result.credits};
  const std::vector<uint64_t> all = opt_.comm->allgather(mine);
  result.failed_wrs = result.imm_received = result.imm_bad = result.credits = 0;
  for (size_t q = 0; q < all.size(); q += 4) {
    result.failed_wrs += all[q];
    result.imm_received += all[q + 1];
    result.imm_bad += all[q + 2];
    result.credits += all[q + 3];
  }
}

SizeRun SimExecutor::run(const Schedule& s) {
  const uint32_t n = s.params.ranks;
  if (n > rank_host_.size())
    throw std::invalid_argument("schedule has " + std::to_string(n) + " ranks, the topology " +
                                std::to_string(rank_host_.size()) + " hosts");
  check_dependencies(s);
  // A window's connections are made as the run goes: split processes could
  // not agree on them, and the receiver trigger's receive WRs and credits
  // live on kept connections.
  if (s.params.window > 0 && (opt_.comm || receiver()))
    throw std::invalid_argument(
        "an all-to-all with a window runs in one process with the sender trigger");
  uint64_t max_bytes = 0;
  for (const Transfer& t : s.transfers) max_bytes = std::max(max_bytes, t.bytes);
  if (max_bytes > transport::kMaxMessageBytes)
    throw std::invalid_argument("a transfer of " + std::to_string(max_bytes) +
                                " bytes is larger than an RC message (2^31)");
  // Each transfer's QP (connecting on first use, in the same order in
  // every partition; with a window, as it is posted) and who releases it.
  const size_t total = s.transfers.size();
  const bool kept = s.params.window == 0;
  side_index_.assign(kept ? total : 0, 0);
  for (Conn* c : conns_) c->transfers = 0;
  if (kept) {
    for (const Transfer& t : s.transfers) {
      Conn& c = conn_for(t.src, t.dst, t.channel);
      ++c.transfers;
      side_index_[t.id] = c.side[t.src <= t.dst ? 0 : 1].index;
    }
  }
  size_queues();
  remaining_at_start_.assign(total, 0);
  if (receiver()) {
    plan_receiver_trigger(s);
  } else {
    dependents_ = dependents_of(s);
    after_arrival_ = {};
    for (const Transfer& t : s.transfers)
      remaining_at_start_[t.id] = static_cast<uint32_t>(s.depends_on[t.id].size());
  }
  local_total_ = 0;
  for (const Transfer& t : s.transfers) local_total_ += local(t.src);
  posted_at_.assign(total, 0);

  SizeRun result;
  s_ = &s;
  run_ = &result;
  register_buffers(s, max_bytes);
  if (opt_.comm) sim_.set_work([this] { return local_total_ - completed_; });

  result.start_ns = sim_.now();
  int64_t wrong = opt_.verify ? 0 : -1;
  const uint32_t iterations = opt_.warmup + opt_.iters;
  for (uint32_t it = 0; it < iterations; ++it) {
    iteration_ = it;
    timed_ = it >= opt_.warmup;
    // Verify mode checks the last iteration of the size (nccl-tests checks
    // one iteration too): data are reset before it, the receivers' actions
    // applied during it, #wrong counted after it. The other iterations move
    // the same bytes in the same virtual time; only the host-side bookkeeping
    // (2-3 passes over every rank's buffer) is skipped.
    checking_ = verify_ && it + 1 == iterations;
    if (checking_ && it > 0) verify_->reset();
    if (checking_) verify_->apply_local_copies();  // all-to-all's own block, no network
    IterationRecord rec;
    rec.iteration = it;
    rec.warmup = !timed_;
    rec.start_ns = sim_.now();
    last_completion_ns_ = rec.start_ns;
    start_iteration();
    result.stalled = wait_iteration(rec.start_ns + opt_.iteration_timeout_ns);
    gather_latencies(rec);
    if (checking_) {
      rec.wrong = static_cast<int64_t>(wrong_now());
      wrong += rec.wrong;
    }
    rec.stalled = result.stalled;
    result.iterations.push_back(rec);
    if (result.stalled) {
      // Not finished: count it as checked and wrong rather than silently
      // fine, and keep it out of the timing (a count, not a JCT).
      if (verify_ && !checking_) wrong = static_cast<int64_t>(wrong_now());
      result.stats.record_stalled();
      break;
    }
    if (timed_) {
      result.stats.record_iteration(rec.jct_ns());
      const bool keep = opt_.keep_transfer_latencies;
      if (keep && result.transfer_latencies.empty())  // the same count each iteration
        result.transfer_latencies.reserve(iteration_latencies_.size() * (iterations - it));
      for (const Latency& l : iteration_latencies_) {
        result.stats.record_transfer(l.step, l.ns);
        if (keep) result.transfer_latencies.emplace_back(l.step, l.ns);
      }
    }
  }
  result.wrong = wrong;
  result.end_ns = sim_.now();
  gather_counters(result);
  if (opt_.comm) sim_.set_work({});
  for (uint32_t r = 0; r < n; ++r) sim_.dereg_mr(rank_host_[r], mr_[r]);
  for (QpSide* side : sides_) {
    side->backlog.clear();
    side->backlog_head = 0;
  }
  // A stalled iteration's connections.
  while (!open_.empty()) close_connection(open_.begin()->first);
  s_ = nullptr;
  run_ = nullptr;
  return result;
}

}  // namespace droce::pktgen
