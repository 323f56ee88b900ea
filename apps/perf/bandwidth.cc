// droce-perf's bandwidth tests: the client posts and counts completions,
// the server serves and reports each client (perf_test.h).
#include "perf/perf_test.h"

#include <thread>

namespace droce::perf {

using transport::Sge;
using transport::WorkCompletion;

PerfTest::BwPart PerfTest::bw_client_part(uint64_t size, size_t first, size_t stride,
                                          engine::CqHandle cq, uint64_t t0) {
  Peer& p = peers_[0];
  const size_t nq = p.qps.size();
  const uint32_t cq_mod = std::max<uint32_t>(1, std::min(o_.cq_mod, o_.tx_depth));
  const bool timed = o_.duration > 0;
  const uint64_t n_per_qp = timed ? UINT64_MAX : iters();
  const uint64_t t_stop = timed ? t0 + static_cast<uint64_t>(o_.duration * 1e9) : UINT64_MAX;
  // Indexed by the QP's index in the peer; this part touches its own only.
  std::vector<uint64_t> posted(nq, 0), completed(nq, 0);
  std::vector<bool> last_signaled(nq, true);
  std::vector<Sge> sges(nq);
  // WRs go to the send queue in batches (Engine::post_send with a span):
  // one lock and one doorbell per batch.
  constexpr size_t kPostBatch = 32;
  std::vector<transport::SendWr> batch;
  batch.reserve(kPostBatch);
  for (size_t q = first; q < nq; q += stride)
    sges[q] = local_sge(p.qps[q], o_.t->verb, max_size_, size);
  // A thread of its own polls its own CQ into its own buffer; the
  // deadline (--timeout, time without progress) is its own too.
  std::vector<WorkCompletion> wc((cq.id != 0) ? 256 : 0);
  uint64_t deadline = engine::now_ns() + static_cast<uint64_t>(o_.timeout * 1e9);
  BwPart r;
  r.events.reserve(timed ? 4096 : iters() * nq / stride / cq_mod + 16);
  r.events.emplace_back(t0, 0);
  bool stopping = false;
  auto post = [&](size_t q, std::span<const transport::SendWr> wrs, size_t* put) {
    const int rc = eng_.post_send(p.qps[q].h, wrs, put);
    if (rc != 0 && rc != ENOMEM)
      throw std::runtime_error(fmt::format("post_send refused: {}", std::strerror(rc)));
    return rc;
  };
  for (;;) {
    const uint64_t now = engine::now_ns();
    if (timed && !stopping && now >= t_stop) {
      stopping = true;
      // Close each QP's stream with a signaled WR so that every posted WR
      // is accounted for by a completion.
      for (size_t q = first; q < nq; q += stride) {
        if (last_signaled[q]) continue;
        auto wr = make_wr(p, q, posted[q], true);
        wr.sg_list = std::span(&sges[q], 1);
        while (post(q, std::span(&wr, 1), nullptr) == ENOMEM) {
          if (engine::now_ns() > deadline)
            fail_timeout("posting a send WR (the send queue stays full)");
          if ((cq.id != 0) && o_.run_to_completion) eng_.poll();
          std::this_thread::yield();
        }
        ++posted[q];
        last_signaled[q] = true;
      }
    }
    bool all_done = true;
    for (size_t q = first; q < nq; q += stride) {
      const uint64_t limit = stopping ? posted[q] : n_per_qp;
      for (bool full = false; !full && posted[q] < limit && posted[q] - completed[q] < o_.tx_depth;) {
        batch.clear();
        for (uint64_t id = posted[q];
             batch.size() < kPostBatch && id < limit && id - completed[q] < o_.tx_depth; ++id) {
          const bool sig = (id + 1) % cq_mod == 0 || id + 1 == n_per_qp;
          batch.push_back(make_wr(p, q, id, sig));
          batch.back().sg_list = std::span(&sges[q], 1);
        }
        size_t put = 0;
        post(q, std::span<const transport::SendWr>(batch), &put);
        if (put > 0) {
          posted[q] += put;
          last_signaled[q] = (batch[put - 1].send_flags & IBV_SEND_SIGNALED) != 0;
        }
        full = put < batch.size();  // send queue full: poll first
      }
      if (completed[q] < (stopping ? posted[q] : n_per_qp)) all_done = false;
    }
    if (all_done) break;
    // The completions: (QP index, wr_id) pairs.
    size_t n = 0;
    auto completion = [&](size_t i) -> std::pair<size_t, uint64_t> {
      if (!(cq.id != 0)) return {wc_qp_[i], wc_[i].wr_id};
      auto it = qp_index_.find(wc[i].qp_num);
      if (it == qp_index_.end())
        throw Failure(fmt::format("completion for unknown QP {:#x}", wc[i].qp_num));
      return {it->second.second, wc[i].wr_id};
    };
    if ((cq.id != 0)) {
      // Run to completion the threads take turns at the data path.
      if (o_.run_to_completion) eng_.poll();
      const int got = eng_.poll_cq(cq, wc);
      if (got < 0) throw Failure(fmt::format("poll_cq failed: {}", std::strerror(-got)));
      n = static_cast<size_t>(got);
      for (size_t i = 0; i < n; ++i) require_ok(wc[i]);
      if (n == 0 && o_.poll_sleep_us)
        std::this_thread::sleep_for(std::chrono::microseconds(*o_.poll_sleep_us));
    } else {
      n = poll();
    }
    if (n) {
      deadline = engine::now_ns() + static_cast<uint64_t>(o_.timeout * 1e9);
      const uint64_t tc = engine::now_ns();
      for (size_t i = 0; i < n; ++i) {
        const auto [q, wr_id] = completion(i);
        const uint64_t upto = wr_id + 1;  // in-order: everything before is done
        if (upto > completed[q]) {
          r.done += upto - completed[q];
          completed[q] = upto;
        }
      }
      r.events.emplace_back(tc, r.done);
    } else if (engine::now_ns() > deadline) {
      fail_timeout(fmt::format("waiting for completions ({} of {} messages done)", r.done,
                               timed ? r.done + 1 : n_per_qp * ((nq - first + stride - 1) / stride)));
    }
  }
  return r;
}

void PerfTest::bw_client(uint64_t size) {
  Peer& p = peers_[0];
  if (!o_.no_peer) barrier_all(fmt::format("start {}", size));
  const uint64_t t0 = engine::now_ns();
  std::vector<BwPart> parts(thread_cqs_.empty() ? 1 : thread_cqs_.size());
  if (thread_cqs_.empty()) {
    parts[0] = bw_client_part(size, 0, 1, {}, t0);
  } else {
    // Thread 0 is this one; a failure in any thread fails the test.
    std::vector<std::exception_ptr> errors(parts.size());
    std::vector<std::thread> threads;
    auto run = [&](size_t t) {
      try {
        parts[t] = bw_client_part(size, t, parts.size(), thread_cqs_[t], t0);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    };
    for (size_t t = 1; t < parts.size(); ++t) threads.emplace_back(run, t);
    run(0);
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }
  // One timeline: every part's progress, merged in time order.
  std::vector<std::pair<uint64_t, uint64_t>> steps;  // (time, messages done then)
  for (const BwPart& part : parts)
    for (size_t i = 1; i < part.events.size(); ++i)
      steps.emplace_back(part.events[i].first,
                         part.events[i].second - part.events[i - 1].second);
  std::sort(steps.begin(), steps.end());
  std::vector<std::pair<uint64_t, uint64_t>> events{{t0, 0}};
  uint64_t done_total = 0;
  for (const auto& [t, d] : steps) events.emplace_back(t, done_total += d);
  const uint64_t t1 = events.back().first;
  const BwResult r = bw_result(size, done_total, t0, t1, events);
  if (!o_.no_peer) {
    // The measurement rides along: a server with several clients prints it.
    p.oob.send_line(fmt::format("SYNC end {} msgs={} ns={} peak={}", size, done_total, t1 - t0,
                                static_cast<uint64_t>(r.peak_bps)));
    const std::string reply = p.oob.recv_line(o_.timeout, "end of test");
    if (reply.rfind("SYNC end", 0) != 0)
      throw Failure(fmt::format("peer out of step: '{}'", reply));
  }
  fmt::print("{}", bw_row(size, r, o_.report_gbits));
  std::fflush(stdout);
}

// One look at client p: its end line, and the answer once all its
// messages are in (SEND: every receive completion). True when done.
bool PerfTest::bw_server_step(Peer& p, uint64_t size, bool send) {
  if (!p.ended) {
    if (auto end = p.oob.try_recv_line(0)) {
      if (end->rfind("SYNC end", 0) != 0)
        throw Failure(fmt::format("peer out of step: '{}'", *end));
      p.t_end = engine::now_ns();
      const auto kv = parse_fields(end->substr(5));
      p.expected = field_u64(kv, "msgs");
      if (multi()) {
        std::vector<std::pair<uint64_t, uint64_t>> none;
        p.report = bw_result(size, p.expected, 0, field_u64(kv, "ns"), none);
        p.report.peak_bps = static_cast<double>(field_u64(kv, "peak"));
      }
      p.ended = true;
      arm_deadline();
    }
  }
  const bool done = p.ended && (!send || p.received >= p.expected);
  if (done && !p.replied) {
    p.oob.send_line(fmt::format("SYNC end {} msgs={}", size, send ? p.received : p.expected));
    p.replied = true;
  }
  return done;
}

void PerfTest::bw_server(uint64_t size) {
  const bool send = o_.t->verb == Verb::kSend;
  for (Peer& p : peers_) {
    p.ended = p.replied = false;
    p.expected = UINT64_MAX;
    p.received = 0;
  }
  barrier_all(fmt::format("start {}", size));
  arm_deadline();
  // A WRITE or READ server sees no completion to count as progress while a
  // timed (-D) client runs: the run's length is not a stall.
  if (!send && o_.duration > 0) deadline_ns_ += static_cast<uint64_t>(o_.duration * 1e9);
  const uint64_t t_start = engine::now_ns();
  // SEND: repost every receive as it completes until each client reports
  // its end and every message it sent has been seen. WRITE and READ: the
  // server's application has nothing to do but wait for the end lines.
  for (;;) {
    bool all_done = true;
    for (Peer& p : peers_) all_done &= bw_server_step(p, size, send);
    if (all_done) break;
    if (!send) {
      check_deadline("waiting for the client to finish");
      // Run to completion this thread is the data path: the client's
      // WRITEs and READs are answered here.
      if (o_.run_to_completion)
        eng_.poll();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    const size_t n = poll();
    for (size_t i = 0; i < n; ++i) {
      const WorkCompletion& wc = wc_[i];
      if (wc.opcode != IBV_WC_RECV) continue;
      Peer& p = peers_[wc_peer_[i]];
      if (wc.byte_len != size)
        throw Failure(fmt::format("{}QP {:#x}: received {} bytes, expected {}",
                                  who(wc_peer_[i]), wc.qp_num, wc.byte_len, size));
      ++p.received;
      post_recv_or_fail(p.qps[wc_qp_[i]], wc.wr_id);
    }
    if (n == 0) {
      uint64_t received = 0, expected = 0;
      bool ended = true;
      for (const Peer& p : peers_) {
        received += p.received;
        expected += p.ended ? p.expected : 0;
        ended &= p.ended;
      }
      check_deadline([&] {
        return ended ? fmt::format("for receive completions ({} of {})", received, expected)
                     : std::string("waiting for the client to finish");
      });
    }
  }
  if (multi()) print_server_rows(size, t_start);
}

// A server with several clients: each client's own measurement (from its
// end line), then the aggregate as the server saw it: all messages over
// the time from the start barrier to the last client's end. The server
// sees no completion events of WRITE/READ, so the aggregate has no peak of
// its own: its peak column repeats the average.
void PerfTest::print_server_rows(uint64_t size, uint64_t t_start) const {
  uint64_t total = 0, t_last = t_start;
  for (size_t i = 0; i < peers_.size(); ++i) {
    const Peer& p = peers_[i];
    fmt::print("{}", bw_row(size, p.report, o_.report_gbits,
                            fmt::format("     client {} {}", i, options::format_ip(p.ip))));
    total += p.report.msgs;
    t_last = std::max(t_last, p.t_end);
  }
  std::vector<std::pair<uint64_t, uint64_t>> none;
  fmt::print("{}", bw_row(size, bw_result(size, total, t_start, t_last, none), o_.report_gbits,
                          fmt::format("     all {} clients", peers_.size())));
  std::fflush(stdout);
}

}  // namespace droce::perf
