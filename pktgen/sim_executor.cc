// Collective schedules over RC QPs in the virtual-time simulator; see the
// header for the completion rule.
#include "sim_executor.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace droce::pktgen {

namespace {

// Without verify mode only the traffic matters, not the bytes: each rank
// registers a window of at least twice the largest transfer and offsets
// wrap into it, so a 1024-rank run does not need 1024 full buffers.
constexpr uint64_t kMinWindow = 64 * 1024;

uint64_t wrap(uint64_t off, uint64_t bytes, uint64_t window) {
  if (off + bytes <= window) return off;
  const uint64_t w = off % window;
  return w + bytes <= window ? w : 0;
}

}  // namespace

SimExecutor::SimExecutor(sim::Simulator& sim, std::vector<uint32_t> rank_host,
                         SimExecutorOptions options)
    : sim_(sim), rank_host_(std::move(rank_host)), opt_(std::move(options)) {
  sim_.set_completion_handler(
      [this](size_t host, const transport::WorkCompletion& wc) { on_completion(host, wc); });
}

SimExecutor::~SimExecutor() { sim_.set_completion_handler(nullptr); }

SimExecutor::QpSide& SimExecutor::side_for(uint32_t src, uint32_t dst, uint32_t channel) {
  const uint32_t lo = std::min(src, dst), hi = std::max(src, dst);
  auto key = std::make_tuple(lo, hi, channel);
  auto it = qps_.find(key);
  if (it == qps_.end()) {
    const sim::QpPairRef p = sim_.connect(rank_host_[lo], rank_host_[hi], opt_.qp);
    Conn c;
    c.side[0].qp = p.a;
    c.side[0].host = rank_host_[lo];
    c.side[1].qp = p.b;
    c.side[1].host = rank_host_[hi];
    it = qps_.emplace(key, std::move(c)).first;
  }
  return it->second.side[src == lo ? 0 : 1];
}

bool SimExecutor::try_post(QpSide& side, uint32_t id) {
  const Transfer& t = s_->transfers[id];
  const uint64_t so = wrap(t.src_offset, t.bytes, window_[t.src]);
  const uint64_t d = wrap(t.dst_offset, t.bytes, window_[t.dst]);
  transport::Sge sge{reinterpret_cast<uint64_t>(base_[t.src] + so),
                     static_cast<uint32_t>(t.bytes), mr_[t.src]->lkey()};
  transport::SendWr wr;
  wr.wr_id = id;
  wr.opcode = t.with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = {&sge, 1};
  wr.imm_data = t.imm;
  wr.remote_addr = reinterpret_cast<uint64_t>(base_[t.dst] + d);
  wr.rkey = mr_[t.dst]->rkey();
  if (sim_.post_send(side.host, *side.qp, wr) != 0) return false;
  if (t.with_imm) {
    // The immediate consumes a receive WQE at the destination (IBA
    // 9.4.3); posted now, it is there long before the data (at least one
    // link delay later). RC keeps the order, so the WQEs match in order.
    QpSide& peer = side_for(t.dst, t.src, t.channel);
    transport::RecvWr rwr;
    rwr.wr_id = id;
    if (sim_.post_recv(peer.host, *peer.qp, rwr) != 0) ++run_->imm_bad;
  }
  if (opt_.trace)
    opt_.trace(SimTraceEvent{SimTraceEvent::Kind::kPost, sim_.now(), iteration_, id});
  return true;
}

void SimExecutor::post(uint32_t id) {
  const Transfer& t = s_->transfers[id];
  QpSide& side = *side_of_[id];
  posted_at_[id] = sim_.now();
  (void)t;
  // Keep the QP's order: behind anything already waiting for room.
  if (side.backlog_head < side.backlog.size() || !try_post(side, id)) side.backlog.push_back(id);
}

void SimExecutor::on_completion(size_t host, const transport::WorkCompletion& wc) {
  if (!s_ || !run_) return;
  (void)host;
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM || wc.opcode == IBV_WC_RECV) {
    ++run_->imm_received;
    const uint32_t step = wc.imm_data >> 8, channel = wc.imm_data & 0xFF;
    if (wc.status != IBV_WC_SUCCESS || step >= s_->num_steps ||
        channel >= s_->params.channels)
      ++run_->imm_bad;
    return;
  }
  const uint32_t id = static_cast<uint32_t>(wc.wr_id);
  if (id >= s_->transfers.size()) return;
  const Transfer& t = s_->transfers[id];
  const uint64_t now = sim_.now();
  if (wc.status != IBV_WC_SUCCESS) ++run_->failed_wrs;
  if (checking_ && wc.status == IBV_WC_SUCCESS) verify_->apply_landed(t);
  if (opt_.trace)
    opt_.trace(SimTraceEvent{SimTraceEvent::Kind::kComplete, now, iteration_, id});
  // Kept aside until the iteration finishes: a stalled one is not timed.
  if (timed_) iteration_latencies_.emplace_back(t.step, now - posted_at_[id]);
  ++completed_;
  last_completion_ns_ = now;
  // Room in this QP's send queue: post what was waiting.
  QpSide& side = *side_of_[id];
  while (side.backlog_head < side.backlog.size() &&
         try_post(side, side.backlog[side.backlog_head]))
    ++side.backlog_head;
  if (side.backlog_head == side.backlog.size()) {
    side.backlog.clear();
    side.backlog_head = 0;
  }
  for (uint32_t d : dependents_[id])
    if (--remaining_[d] == 0) post(d);
  if (completed_ == s_->transfers.size()) sim_.pause();
}

// Every rank's buffer, registered: verify mode's real data, else a zeroed
// window big enough for the largest transfer.
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
    plain_.resize(n);
    for (uint32_t r = 0; r < n; ++r) {
      window_[r] = std::min(w, std::max<uint64_t>(s.layout[r].total_bytes(), 4));
      plain_[r].reset(static_cast<uint8_t*>(std::calloc(window_[r], 1)));
      if (!plain_[r]) throw std::runtime_error("rank " + std::to_string(r) + ": out of memory");
      base_[r] = plain_[r].get();
    }
  }
  for (uint32_t r = 0; r < n; ++r) {
    mr_[r] = sim_.reg_mr(rank_host_[r], base_[r], window_[r]);
    if (!mr_[r]) throw std::runtime_error("rank " + std::to_string(r) + ": memory registration refused");
    // Without verify nothing reads what lands, so no payload byte is moved
    // (docs/SIM.md "Virtual payload": the same frames, ICRCs and outputs).
    mr_[r]->set_virtual_payload(!opt_.verify);
  }
}

SizeRun SimExecutor::run(const Schedule& s) {
  const uint32_t n = s.params.ranks;
  if (n > rank_host_.size())
    throw std::invalid_argument("schedule has " + std::to_string(n) + " ranks, the topology " +
                                std::to_string(rank_host_.size()) + " hosts");
  uint64_t max_bytes = 0;
  for (const Transfer& t : s.transfers) max_bytes = std::max(max_bytes, t.bytes);
  if (max_bytes > transport::kMaxMessageBytes)
    throw std::invalid_argument("a transfer of " + std::to_string(max_bytes) +
                                " bytes is larger than an RC message (2^31)");
  SizeRun result;
  s_ = &s;
  run_ = &result;

  register_buffers(s, max_bytes);

  // Dependency graph and each transfer's QP (connecting on first use).
  const size_t total = s.transfers.size();
  dependents_.assign(total, {});
  for (const Transfer& t : s.transfers)
    for (uint32_t d : t.depends_on) dependents_[d].push_back(t.id);
  side_of_.assign(total, nullptr);
  for (const Transfer& t : s.transfers) side_of_[t.id] = &side_for(t.src, t.dst, t.channel);
  posted_at_.assign(total, 0);

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
    remaining_.assign(total, 0);
    for (const Transfer& t : s.transfers) remaining_[t.id] = static_cast<uint32_t>(t.depends_on.size());
    completed_ = 0;
    iteration_latencies_.clear();
    IterationRecord rec;
    rec.iteration = it;
    rec.warmup = !timed_;
    rec.start_ns = sim_.now();
    last_completion_ns_ = rec.start_ns;
    for (const Transfer& t : s.transfers)
      if (t.depends_on.empty()) post(t.id);
    const uint64_t deadline = rec.start_ns + opt_.iteration_timeout_ns;
    while (completed_ < total) {
      const bool more = sim_.run_until(deadline);
      if (completed_ >= total) break;
      if (!more || sim_.now() >= deadline) {
        result.stalled = true;
        break;
      }
    }
    rec.end_ns = last_completion_ns_;
    if (checking_) {
      rec.wrong = static_cast<int64_t>(verify_->wrong_total());
      wrong += rec.wrong;
    }
    rec.stalled = result.stalled;
    result.iterations.push_back(rec);
    if (result.stalled) {
      // Not finished: count it as checked and wrong rather than silently
      // fine, and keep it out of the timing (a count, not a JCT).
      if (verify_ && !checking_) wrong = static_cast<int64_t>(verify_->wrong_total());
      result.stats.record_stalled();
      break;
    }
    if (timed_) {
      result.stats.record_iteration(rec.jct_ns());
      for (const auto& [step, ns] : iteration_latencies_) result.stats.record_transfer(step, ns);
      result.transfer_latencies.insert(result.transfer_latencies.end(), iteration_latencies_.begin(),
                                       iteration_latencies_.end());
    }
  }
  result.wrong = wrong;
  result.end_ns = sim_.now();
  for (uint32_t r = 0; r < n; ++r) sim_.dereg_mr(rank_host_[r], mr_[r]);
  for (auto& [key, c] : qps_)
    for (QpSide& side : c.side) {
      side.backlog.clear();
      side.backlog_head = 0;
    }
  s_ = nullptr;
  run_ = nullptr;
  return result;
}

}  // namespace droce::pktgen
