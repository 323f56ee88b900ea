#include "droce/pktgen/dpdk_stream.h"

#include <fmt/format.h>
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "droce/engine/engine.h"
#include "droce/wire/packet.h"

namespace droce::pktgen {
namespace {

struct TscClock {
  uint64_t hz = rte_get_tsc_hz();
  // ns = tsc * mult >> 32
  uint64_t mult = static_cast<uint64_t>((static_cast<unsigned __int128>(1'000'000'000ull) << 32) /
                                        rte_get_tsc_hz());
  uint64_t ns(uint64_t tsc) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(tsc) * mult) >> 32);
  }
};

// The sequence numbers a stream emits, with the sender's impairments.
class SeqSource {
 public:
  SeqSource(uint64_t count, Impairment imp) : count_(count), imp_(imp) {}
  // Without impairments the sequence numbers of a burst are consecutive:
  // take() hands out up to `want` of them from *first at once (0 when the
  // stream has sent everything). Only valid when !impaired().
  bool impaired() const { return imp_.any(); }
  uint32_t take(uint32_t want, uint64_t* first) {
    uint64_t n = want;
    if (count_ != 0) n = std::min<uint64_t>(n, count_ - std::min(n_, count_));
    *first = n_;
    n_ += n;
    return static_cast<uint32_t>(n);
  }
  // false when the stream has sent everything.
  bool next(uint64_t* seq) {
    if (!imp_.any()) [[likely]] {
      if (count_ != 0 && n_ >= count_) return false;
      *seq = n_++;
      return true;
    }
    if (!queue_.empty()) {
      *seq = queue_.front();
      queue_.pop_front();
      return true;
    }
    if (!imp_.any()) {
      if (count_ != 0 && n_ >= count_) return false;
      *seq = n_++;
      return true;
    }
    while (count_ == 0 || n_ < count_) {
      const uint64_t n = n_;
      if (imp_.reorder_every && n % imp_.reorder_every == 0 && (count_ == 0 || n + 1 < count_)) {
        n_ += 2;
        emit(n + 1);
        emit(n);
      } else {
        n_ += 1;
        emit(n);
      }
      if (!queue_.empty()) return next(seq);
    }
    return false;
  }

 private:
  void emit(uint64_t n) {
    if (imp_.drop_every && (n + 1) % imp_.drop_every == 0) return;
    queue_.push_back(n);
    if (imp_.dup_every && (n + 1) % imp_.dup_every == 0) queue_.push_back(n);
  }
  uint64_t count_;
  Impairment imp_;
  uint64_t n_ = 0;
  std::deque<uint64_t> queue_;
};

struct TxStream {
  TxStream(const DpdkStream& s) : filler(s.spec), seqs(s.count, s.impair) {}
  FastFiller filler;
  SeqSource seqs;
  double pps = 0;
  bool limited = true;
  double tokens = 0;
  double tokens_per_tsc = 0;
  double depth = 0;
  uint64_t last_tsc = 0;
  bool done = false;
  // Packets tx_burst did not take, sent first next time (no sequence gap).
  std::vector<rte_mbuf*> pending;
  size_t pending_head = 0;
  StreamStats stats;
};

// Mbufs taken raw from the pool (rte_mempool_generic_get) are in the state
// rte_pktmbuf_free left them: refcnt 1, one segment, next NULL (the
// rte_mbuf_raw_alloc contract). rte_pktmbuf_alloc_bulk would also reset
// next, tx_offload, VLAN tags and port, two of them in the mbuf's second
// cache line; a single-segment frame without TX offloads needs only these,
// all in the first cache line.
inline void init_tx_mbuf(rte_mbuf* m, uint16_t len) {
  m->data_off = RTE_PKTMBUF_HEADROOM;
  m->ol_flags &= RTE_MBUF_F_EXTERNAL;  // no offload requests (as rte_pktmbuf_reset)
  m->packet_type = 0;
  m->pkt_len = len;
  m->data_len = len;
}

rte_mempool* make_pool(const char* tag, uint16_t port, uint32_t n, uint32_t data_room) {
  const std::string name = fmt::format("pg_{}_{}", tag, port);
  rte_mempool* mp = rte_pktmbuf_pool_create(name.c_str(), n, 256, 0,
                                            static_cast<uint16_t>(data_room + RTE_PKTMBUF_HEADROOM),
                                            static_cast<int>(rte_eth_dev_socket_id(port) < 0
                                                                 ? SOCKET_ID_ANY
                                                                 : rte_eth_dev_socket_id(port)));
  if (!mp)
    throw std::runtime_error(fmt::format("cannot create mbuf pool {} of {} mbufs: {}", name, n,
                                         rte_strerror(rte_errno)));
  return mp;
}

void setup_port(uint16_t port, rte_mempool* pool, const StreamRunConfig& c) {
  if (!rte_eth_dev_is_valid_port(port))
    throw std::invalid_argument(fmt::format("port {} does not exist", port));
  rte_eth_conf conf{};
  int rc = rte_eth_dev_configure(port, 1, 1, &conf);
  if (rc < 0) throw std::runtime_error(fmt::format("port {}: configure: {}", port, rte_strerror(-rc)));
  uint16_t rxd = c.rx_desc, txd = c.tx_desc;
  rte_eth_dev_adjust_nb_rx_tx_desc(port, &rxd, &txd);
  const int socket = rte_eth_dev_socket_id(port) < 0 ? SOCKET_ID_ANY : rte_eth_dev_socket_id(port);
  rc = rte_eth_rx_queue_setup(port, 0, rxd, static_cast<unsigned>(socket), nullptr, pool);
  if (rc < 0) throw std::runtime_error(fmt::format("port {}: rx queue: {}", port, rte_strerror(-rc)));
  rc = rte_eth_tx_queue_setup(port, 0, txd, static_cast<unsigned>(socket), nullptr);
  if (rc < 0) throw std::runtime_error(fmt::format("port {}: tx queue: {}", port, rte_strerror(-rc)));
  rc = rte_eth_dev_start(port);
  if (rc < 0) throw std::runtime_error(fmt::format("port {}: start: {}", port, rte_strerror(-rc)));
  rte_eth_promiscuous_enable(port);
}

// Receives one burst; returns how many frames arrived.
uint16_t rx_once(uint16_t port, const TscClock& clk, StreamRunResult& r, uint32_t burst) {
  rte_mbuf* pkts[64];
  const uint16_t n = rte_eth_rx_burst(port, 0, pkts, static_cast<uint16_t>(std::min(burst, 64u)));
  if (n == 0) return 0;
  const uint64_t now = clk.ns(rte_rdtsc());
  wire::ParsedPacket p;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    r.rx_packets++;
    r.rx_bytes += m->pkt_len;
    const auto* data = rte_pktmbuf_mtod(m, const uint8_t*);
    if (m->nb_segs != 1 ||
        wire::parse({data, m->data_len}, p) != wire::ParseError::kOk) {
      r.rx_not_roce++;
    } else {
      const std::span<const uint8_t> payload{p.payload, p.payload_length};
      const auto probe = read_probe(payload);
      if (!probe) {
        r.rx_not_probe++;
      } else {
        const ProbeTracker* t = r.rx->stream(probe->stream_id);
        const uint64_t before = t ? t->counters().unique : 0;
        const uint64_t neg_before = t ? t->counters().negative_latency : 0;
        r.rx->on_payload(payload, now);
        t = r.rx->stream(probe->stream_id);
        if (t->counters().unique > before && t->counters().negative_latency == neg_before) {
          if (r.samples_total < kMaxLatencySamples) {
            r.latency_samples[probe->stream_id].push(now - probe->tx_ns);
            r.samples_total++;
          } else {
            r.samples_dropped++;
          }
        }
      }
    }
  }
  rte_pktmbuf_free_bulk(pkts, n);
  return n;
}

}  // namespace

uint64_t tsc_ns() {
  static const TscClock clk;
  return clk.ns(rte_rdtsc());
}

namespace {

// One stream's turn: what its token bucket allows of the last burst's
// leftovers, then fresh frames, handed to TX queue 0 of `txp`; what the
// queue does not take waits for the next turn. False once the stream has
// nothing left to send.
bool transmit_stream(TxStream& t, uint64_t now, uint64_t now_ns, uint32_t burst, uint16_t txp,
                     rte_mempool* tx_pool, rte_mempool_cache* cache, StreamRunResult& r,
                     uint64_t& first_tx, uint64_t& last_tx) {
  rte_mbuf* mbufs[64];
  if (t.done && t.pending_head == t.pending.size()) return false;
  uint32_t budget = burst;
  if (t.limited) {
    t.tokens = std::min(t.depth, t.tokens + static_cast<double>(now - t.last_tsc) * t.tokens_per_tsc);
    t.last_tsc = now;
    budget = static_cast<uint32_t>(std::min<double>(burst, t.tokens));
    if (budget == 0) return true;
  }
  uint32_t k = 0;
  // Leftovers of the last burst first, in order.
  while (k < budget && t.pending_head < t.pending.size()) mbufs[k++] = t.pending[t.pending_head++];
  if (t.pending_head == t.pending.size()) {
    t.pending.clear();
    t.pending_head = 0;
  }
  const uint16_t len = static_cast<uint16_t>(t.filler.frame_size());
  if (k < budget && !t.done) {
    const uint32_t want = budget - k;
    rte_mbuf** fresh_m = mbufs + k;
    if (rte_mempool_generic_get(tx_pool, reinterpret_cast<void**>(fresh_m), want, cache) != 0) {
      r.tx_alloc_failed++;
    } else {
      uint32_t fresh = 0;
      if (!t.seqs.impaired()) {
        // Consecutive sequence numbers: one fill_burst call.
        uint64_t n0 = 0;
        fresh = t.seqs.take(want, &n0);
        uint8_t* outs[64];
        for (uint32_t i = 0; i < fresh; ++i) {
          init_tx_mbuf(fresh_m[i], len);
          outs[i] = rte_pktmbuf_mtod(fresh_m[i], uint8_t*);
        }
        t.filler.fill_burst(n0, outs, fresh, now_ns);
      } else {
        uint64_t seq = 0;
        for (; fresh < want && t.seqs.next(&seq); ++fresh) {
          init_tx_mbuf(fresh_m[fresh], len);
          t.filler.fill(seq, rte_pktmbuf_mtod(fresh_m[fresh], uint8_t*), now_ns);
        }
      }
      if (fresh < want) {
        t.done = true;
        // Untouched, so still raw: straight back to the pool.
        rte_mempool_generic_put(tx_pool, reinterpret_cast<void**>(fresh_m + fresh),
                                want - fresh, cache);
      }
      k += fresh;
    }
  }
  if (k == 0) return true;
  const uint16_t sent = rte_eth_tx_burst(txp, 0, mbufs, static_cast<uint16_t>(k));
  // Every frame of a stream has the same length; the mbufs belong to
  // the PMD once sent (net_null has freed them already).
  t.stats.tx_bytes += uint64_t{sent} * len;
  t.stats.tx_packets += sent;
  if (sent < k) {
    // Keep the rest for the next round (they go before new packets).
    std::vector<rte_mbuf*> rest(mbufs + sent, mbufs + k);
    rest.insert(rest.end(), t.pending.begin() + static_cast<ptrdiff_t>(t.pending_head),
                t.pending.end());
    t.pending = std::move(rest);
    t.pending_head = 0;
  }
  if (t.limited) t.tokens -= sent;
  if (sent) {
    if (t.stats.tx_first_ns == 0) t.stats.tx_first_ns = now_ns;
    t.stats.tx_last_ns = now_ns;
    if (first_tx == 0) first_tx = now;
    last_tx = now;
  }
  return true;
}

}  // namespace

StreamRunResult run_streams(const StreamRunConfig& c) {
  const TscClock clk;
  StreamRunResult r;
  rte_mempool* tx_pool = nullptr;
  rte_mempool* rx_pool = nullptr;
  std::vector<TxStream> txs;
  txs.reserve(c.streams.size());
  uint32_t max_frame = 64;
  for (const DpdkStream& s : c.streams) {
    TxStream t(s);
    t.limited = !s.unlimited;
    t.pps = rate_pps(s.rate, t.filler.frame_size(), s.line_rate_bps);
    t.tokens_per_tsc = t.pps / static_cast<double>(clk.hz);
    t.depth = std::max<double>(c.burst, t.pps * static_cast<double>(c.bucket_ns) / 1e9);
    t.stats.stream_id = s.spec.stream_id;
    t.stats.count = s.count;
    t.stats.configured_pps = s.unlimited ? 0 : t.pps;
    t.pending.reserve(c.burst);
    max_frame = std::max<uint32_t>(max_frame, static_cast<uint32_t>(t.filler.frame_size()));
    txs.push_back(std::move(t));
  }
  if (c.rx_port >= 0) {
    rx_pool = make_pool("rx", static_cast<uint16_t>(c.rx_port), c.mbufs, 9216 + 256);
    setup_port(static_cast<uint16_t>(c.rx_port), rx_pool, c);
    r.rx = std::make_shared<ProbeReceiver>();
  }
  if (c.tx_port >= 0 && c.tx_port != c.rx_port) {
    tx_pool = make_pool("tx", static_cast<uint16_t>(c.tx_port), c.mbufs, std::max(max_frame, 2048u));
    setup_port(static_cast<uint16_t>(c.tx_port), tx_pool, c);
  } else if (c.tx_port >= 0) {
    tx_pool = rx_pool;
  }

  if (c.tx_port >= 0 && !txs.empty() &&
      !engine::wait_for_link_up(static_cast<uint16_t>(c.tx_port), c.link_timeout_s))
    throw std::runtime_error(fmt::format("--tx-port: the link of port {} did not come up within "
                                         "{} s (is the peer running?)", c.tx_port, c.link_timeout_s));
  const uint64_t start = rte_rdtsc();
  const uint64_t end_tx = start + static_cast<uint64_t>(c.duration_s * static_cast<double>(clk.hz));
  const uint64_t drain = static_cast<uint64_t>(c.drain_s * static_cast<double>(clk.hz));
  // A stream starts at its rate: one frame is due now, the next one an
  // interval later. A bucket that started full would send a burst first,
  // and a slow probe stream's first probes would share one tx_burst.
  for (TxStream& t : txs) {
    t.last_tsc = start;
    t.tokens = 1;
  }
  const uint16_t txp = static_cast<uint16_t>(c.tx_port);
  const uint16_t rxp = static_cast<uint16_t>(c.rx_port);
  const uint32_t burst = std::min<uint32_t>(c.burst, 64);
  bool sending = c.tx_port >= 0 && !txs.empty();
  uint64_t first_tx = 0, last_tx = start, last_rx = start, first_rx = 0;
  rte_mempool_cache* const cache =
      tx_pool ? rte_mempool_default_cache(tx_pool, rte_lcore_id()) : nullptr;
  // rdtsc costs about 20 ns in the development VM, a 64-byte packet about
  // as much. Only token buckets, probes and the receive side need the time
  // of every burst; streams that are all unlimited and probe-free read it
  // every kClockEvery-th loop (the end of the run and tx_last_ns are then
  // up to that many bursts late: a few microseconds).
  constexpr uint32_t kClockEvery = 8;
  bool clock_each_loop = c.rx_port >= 0;
  for (const TxStream& t : txs) clock_each_loop = clock_each_loop || t.limited || t.filler.spec().probe;
  uint32_t loops = 0;
  uint64_t now = start;
  for (;;) {
    if (clock_each_loop || loops++ % kClockEvery == 0) now = rte_rdtsc();
    if (sending) {
      bool any = false;
      if (now >= end_tx) {
        sending = false;
      } else {
        const uint64_t now_ns = clk.ns(now);
        for (TxStream& t : txs)
          any |= transmit_stream(t, now, now_ns, burst, txp, tx_pool, cache, r, first_tx, last_tx);
        if (!any) sending = false;
      }
    }
    if (c.rx_port >= 0) {
      if (rx_once(rxp, clk, r, burst) > 0) {
        last_rx = rte_rdtsc();
        if (first_rx == 0) first_rx = last_rx;
      } else if (!sending) {
        const uint64_t t = rte_rdtsc();
        const uint64_t quiet_since = std::max(last_rx, last_tx);
        // Receive only: run for the duration, then drain.
        if (c.tx_port < 0 ? (t >= end_tx && t - quiet_since > drain) : (t - quiet_since > drain))
          break;
        if (c.idle_sleep_us) std::this_thread::sleep_for(std::chrono::microseconds(c.idle_sleep_us));
      } else if (c.idle_sleep_us && c.tx_port < 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(c.idle_sleep_us));
      }
    } else if (!sending) {
      break;
    }
  }
  for (TxStream& t : txs) {
    if (t.pending_head < t.pending.size())
      rte_pktmbuf_free_bulk(t.pending.data() + t.pending_head,
                            static_cast<unsigned>(t.pending.size() - t.pending_head));
    t.stats.tx_wire_bytes = t.stats.tx_packets * wire_bytes(t.filler.frame_size());
    r.tx.push_back(t.stats);
  }
  if (first_tx) r.tx_seconds = static_cast<double>(last_tx - first_tx) / static_cast<double>(clk.hz);
  if (first_rx) r.rx_seconds = static_cast<double>(last_rx - first_rx) / static_cast<double>(clk.hz);
  for (int p : {c.tx_port, c.rx_port}) {
    if (p < 0) continue;
    rte_eth_dev_stop(static_cast<uint16_t>(p));
    rte_eth_dev_close(static_cast<uint16_t>(p));
    if (c.tx_port == c.rx_port) break;
  }
  if (tx_pool && tx_pool != rx_pool) rte_mempool_free(tx_pool);
  if (rx_pool) rte_mempool_free(rx_pool);
  return r;
}

namespace {

struct Row {
  uint32_t id = 0;
  uint64_t count = 0, tx = 0, rx = 0, loss = 0, dup = 0, ooo = 0;
  double mpps = 0, gbps = 0;
  bool has_tx = false, has_rx = false;
  uint64_t p50 = 0, p99 = 0, p999 = 0, max = 0;
};

// Nearest rank: the smallest sample with at least q% of samples <= it.
uint64_t nearest_rank(std::vector<uint64_t>& v, double q) {
  size_t rank = static_cast<size_t>(std::ceil(q / 100.0 * static_cast<double>(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size());
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(rank - 1), v.end());
  return v[rank - 1];
}

std::vector<Row> rows(const StreamRunConfig& c, const StreamRunResult& r) {
  std::vector<Row> out;
  auto find = [&](uint32_t id) -> Row& {
    for (Row& row : out)
      if (row.id == id) return row;
    out.push_back(Row{});
    out.back().id = id;
    return out.back();
  };
  for (const StreamStats& s : r.tx) {
    Row& row = find(s.stream_id);
    row.has_tx = true;
    row.tx = s.tx_packets;
    row.count = s.count;
    const double secs = s.tx_last_ns > s.tx_first_ns ? (s.tx_last_ns - s.tx_first_ns) / 1e9 : 0;
    if (secs > 0) {
      row.mpps = static_cast<double>(s.tx_packets) / secs / 1e6;
      row.gbps = static_cast<double>(s.tx_wire_bytes) * 8 / secs / 1e9;
    }
  }
  if (r.rx) {
    for (const auto& [id, tr] : r.rx->streams()) {
      Row& row = find(id);
      row.has_rx = true;
      const auto& k = tr.counters();
      row.rx = k.received;
      // Intended sequence numbers: the configured count, else what the
      // sender reports (same process), else the gaps seen.
      uint64_t sent = row.count;
      if (sent == 0 && row.has_tx) sent = 0;  // unlimited: gaps only
      row.loss = sent ? tr.lost(sent) : tr.lost();
      row.dup = k.duplicate;
      row.ooo = k.out_of_order;
      const auto& h = tr.latency();
      auto it = r.latency_samples.find(id);
      if (r.samples_dropped == 0 && it != r.latency_samples.end() && !it->second.empty()) {
        std::vector<uint64_t> v = it->second.to_vector();
        row.p50 = nearest_rank(v, 50);
        row.p99 = nearest_rank(v, 99);
        row.p999 = nearest_rank(v, 99.9);
        row.max = *std::max_element(v.begin(), v.end());
      } else if (h.count()) {
        row.p50 = h.percentile(50);
        row.p99 = h.percentile(99);
        row.p999 = h.percentile(99.9);
        row.max = h.max();
      }
    }
  }
  (void)c;
  std::sort(out.begin(), out.end(), [](const Row& a, const Row& b) { return a.id < b.id; });
  return out;
}

}  // namespace

std::string stream_report(const StreamRunConfig& c, const StreamRunResult& r) {
  std::string s;
  const char* line =
      "------------------------------------------------------------------------------------------"
      "------------------------";
  s += fmt::format("{}\n", line);
  s += fmt::format(" {:>6} {:>12} {:>12} {:>9} {:>7} {:>7} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}\n",
                   "#stream", "tx pkts", "rx pkts", "loss", "dup", "ooo", "Mpps", "Gb/s",
                   "p50[usec]", "p99[usec]", "p99.9[usec]", "max[usec]");
  for (const Row& row : rows(c, r)) {
    auto na = [](bool ok, uint64_t v) { return ok ? std::to_string(v) : std::string("-"); };
    auto us = [&](uint64_t ns) { return row.has_rx && row.rx ? fmt::format("{:.2f}", ns / 1e3) : std::string("-"); };
    s += fmt::format(" {:>7} {:>12} {:>12} {:>9} {:>7} {:>7} {:>9.3f} {:>9.3f} {:>10} {:>10} {:>10} {:>10}\n",
                     row.id, na(row.has_tx, row.tx), na(row.has_rx, row.rx), na(row.has_rx, row.loss),
                     na(row.has_rx, row.dup), na(row.has_rx, row.ooo), row.mpps, row.gbps,
                     us(row.p50), us(row.p99), us(row.p999), us(row.max));
  }
  s += fmt::format("{}\n", line);
  if (r.rx)
    s += fmt::format(" rx frames {} ({} bytes), not RoCEv2 {}, not a probe {}\n", r.rx_packets,
                     r.rx_bytes, r.rx_not_roce, r.rx_not_probe);
  if (r.tx_alloc_failed) s += fmt::format(" tx mbuf allocation failures {}\n", r.tx_alloc_failed);
  return s;
}

std::string stream_report_json(const StreamRunConfig& c, const StreamRunResult& r) {
  nlohmann::json j;
  j["streams"] = nlohmann::json::array();
  for (const Row& row : rows(c, r)) {
    nlohmann::json o{{"stream", row.id}, {"count", row.count}, {"tx_packets", row.tx},
                     {"mpps", row.mpps}, {"gbps", row.gbps}};
    for (const StreamStats& t : r.tx)
      if (t.stream_id == row.id) o["configured_pps"] = t.configured_pps;
    if (row.has_rx)
      o.update({{"rx_packets", row.rx}, {"lost", row.loss}, {"duplicate", row.dup},
                {"out_of_order", row.ooo}, {"lat_p50_ns", row.p50}, {"lat_p99_ns", row.p99},
                {"lat_p999_ns", row.p999}, {"lat_max_ns", row.max}});
    j["streams"].push_back(o);
  }
  j["tx_seconds"] = r.tx_seconds;
  j["rx_packets"] = r.rx_packets;
  j["rx_not_roce"] = r.rx_not_roce;
  j["rx_not_probe"] = r.rx_not_probe;
  j["tx_alloc_failed"] = r.tx_alloc_failed;
  return j.dump(2);
}

}  // namespace droce::pktgen
