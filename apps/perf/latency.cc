// droce-perf's latency tests: ping-pong for WRITE and SEND, one READ at a
// time, half the round trip reported as perftest does (perf_test.h).
#include "perf/perf_test.h"

#include <cmath>
#include <thread>

namespace droce::perf {

using transport::Sge;
using transport::WorkCompletion;

// One client only (validate() refuses --clients for latency tests).
void PerfTest::lat_run(uint64_t size) {
  Peer& peer = peers_[0];
  const Verb v = o_.t->verb;
  const LocalQp& lq = peer.qps[0];
  uint8_t* src = lq.mr.addr;
  uint8_t* dst = lq.mr.addr + max_size_;
  Sge sge = local_sge(lq, v, max_size_, size);
  const bool timed = o_.duration > 0;
  const uint64_t n = timed ? UINT64_MAX : iters();
  telemetry::LatencyHistogram hist;
  // WRITE ping-pong: the last byte of each message carries a tag the other
  // side polls for (perftest's write_lat polls memory the same way).
  if (v == Verb::kWrite) dst[size - 1] = 0;

  barrier_all(fmt::format("start {}", size));
  arm_deadline();
  const uint64_t t0 = engine::now_ns();
  const uint64_t t_stop = timed ? t0 + static_cast<uint64_t>(o_.duration * 1e9) : UINT64_MAX;
  uint64_t sends_outstanding = 0;
  uint64_t done = 0;
  // A side that answers (the server) cannot know when a timed client
  // stops: it keeps answering until the client's end line arrives.
  auto post = [&](uint64_t i) {
    auto wr = make_wr(peer, 0, i, true);
    wr.sg_list = std::span(&sge, 1);
    if (v == Verb::kWrite) src[size - 1] = lat_tag(i);
    post_send_or_fail(lq, wr);
    ++sends_outstanding;
  };
  // Waits for the i-th incoming message (WRITE: its tag in memory; SEND: a
  // receive completion); returns false if the client ended the run.
  auto wait_incoming = [&](uint64_t i, bool may_end) -> bool {
    for (;;) {
      if (v == Verb::kWrite && load_byte(dst + size - 1) == lat_tag(i)) return true;
      const size_t k = poll();
      bool got = false;
      for (size_t j = 0; j < k; ++j) {
        const WorkCompletion& wc = wc_[j];
        if (wc.opcode == IBV_WC_RECV) {
          if (wc.byte_len != size)
            throw Failure(fmt::format("received {} bytes, expected {}", wc.byte_len, size));
          post_recv_or_fail(lq, wc.wr_id);
          got = true;
        } else {
          --sends_outstanding;
        }
      }
      if (got) return true;
      if (k == 0) {
        if (may_end) {
          if (auto line = peer.oob.try_recv_line(0)) {
            if (line->rfind("SYNC end", 0) != 0)
              throw Failure(fmt::format("peer out of step: '{}'", *line));
            return false;
          }
        }
        check_deadline([&] { return fmt::format("waiting for message {} from the peer", i); });
      }
    }
  };

  if (client()) {
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t ts = engine::now_ns();
      if (timed && ts >= t_stop) break;
      post(i);
      if (v == Verb::kRead) {
        // The READ's own completion ends the iteration.
        for (;;) {
          const size_t k = poll();
          if (k) {
            sends_outstanding -= k;
            break;
          }
          check_deadline([&] { return fmt::format("waiting for READ {} to complete", i); });
        }
        hist.record(engine::now_ns() - ts);
      } else {
        wait_incoming(i, false);
        hist.record((engine::now_ns() - ts) / 2);  // perftest: half the round trip
      }
      ++done;
    }
  } else if (v != Verb::kRead) {
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t ts = engine::now_ns();
      if (!wait_incoming(i, true)) break;  // timed run ended by the client
      post(i);
      // The server's view: from its reply i-1 to its reply i is one round
      // trip; half of it, as on the client.
      if (i > 0) hist.record((engine::now_ns() - ts) / 2);
      ++done;
    }
  }
  // Drain our own send completions so the next size starts clean.
  while (sends_outstanding > 0) {
    const size_t k = poll();
    for (size_t j = 0; j < k; ++j)
      if (wc_[j].opcode != IBV_WC_RECV) --sends_outstanding;
    if (k == 0) check_deadline("draining send completions");
  }
  // A server that stopped at the client's end line has had it already.
  lat_end(size, done, !client() && v != Verb::kRead && done < n, hist);
}

// The end of one size: the sides exchange their end lines, and those that
// timed something print their row (a READ's server times nothing).
void PerfTest::lat_end(uint64_t size, uint64_t done, bool client_ended,
                       const telemetry::LatencyHistogram& hist) {
  Peer& peer = peers_[0];
  const auto expect_end = [&] {
    const std::string line = peer.oob.recv_line(o_.timeout, "end of test");
    if (line.rfind("SYNC end", 0) != 0)
      throw Failure(fmt::format("peer out of step: '{}'", line));
  };
  if (client()) {
    peer.oob.send_line(fmt::format("SYNC end {} msgs={}", size, done));
    expect_end();
    print_lat_row(size, done, hist);
  } else {
    if (!client_ended) expect_end();
    peer.oob.send_line(fmt::format("SYNC end {} msgs={}", size, done));
    if (o_.t->verb != Verb::kRead) print_lat_row(size, done, hist);
  }
}

// #iterations is the iterations done, as perftest prints: a ping-pong
// server times one fewer (from its first reply to its last) than it did.
void PerfTest::print_lat_row(uint64_t size, uint64_t iters,
                             const telemetry::LatencyHistogram& h) const {
  const auto us = [](double ns) { return ns / 1000.0; };
  fmt::print(" {:<7} {:<10}    {:>8.2f}     {:>8.2f}      {:>8.2f}         {:>8.2f}     "
             "   {:>8.2f}          {:>8.2f}                {:>8.2f}\n",
             size, iters, us(static_cast<double>(h.min())),
             us(static_cast<double>(h.max())), us(static_cast<double>(h.percentile(0.5))),
             us(h.mean()), us(h.stddev()), us(static_cast<double>(h.percentile(0.99))),
             us(static_cast<double>(h.percentile(0.999))));
  std::fflush(stdout);
}

}  // namespace droce::perf
