// The data path: one run-to-completion loop per worker lcore over its
// shards (docs/DESIGN.md "Data path"): RX bursts into the endpoint, its
// frames out through the TX queue (or the ring to the polling shard),
// frames of other shards' QPs handed over by ring, PFC shared between a
// port's shards, the link polled.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_pause.h>

#include <algorithm>

#include "droce/wire/bytes.h"
#include "droce/wire/int.h"
#include "droce/wire/packet.h"
#include "engine_impl.h"
#include "tx_watchdog.h"

namespace droce::engine {

namespace {

constexpr uint32_t kTxRetries = 8;

void capture(Shard& s, const uint8_t* data, uint32_t len) {
  PortState& p = *s.port;
  if (!p.capture) return;
  const uint64_t wall = telemetry::PcapWriter::wall_now_ns();
  if (p.sharded()) {
    std::lock_guard lock(p.capture_mu);
    p.capture->write({data, len}, wall);
  } else {
    p.capture->write({data, len}, wall);
  }
  ++s.counters.captured;
}

// Sharded port, on a lcore polling an RX queue: a PFC frame becomes the
// port's shared pause state (every shard applies it, apply_pfc); the pause
// ends are computed at the port's full rate, as the frame means them. With
// an RX queue per shard two queues may each bring one at once; each store
// is atomic and the later one wins, as on one queue.
void share_pfc(Shard& s, const wire::PfcFrame& pfc, uint64_t now) {
  PortState& p = *s.port;
  const uint64_t bps = p.cfg.endpoint.port_rate_bytes_per_sec * 8;
  for (unsigned prio = 0; prio < wire::kPfcPriorities; ++prio) {
    if (!pfc.enabled(prio)) continue;
    const uint64_t until = pfc.quanta[prio] == 0 || bps == 0
                               ? now
                               : now + wire::pfc_quanta_to_ns(pfc.quanta[prio], bps);
    p.pfc_until[prio].store(until, std::memory_order_relaxed);
    p.pfc_seq[prio].fetch_add(1, std::memory_order_release);
  }
  p.pfc_gen.fetch_add(1, std::memory_order_release);
  ++s.counters.pfc_shared;
}

// Sharded port, on each shard's lcore: the pause updates not yet seen are
// fed to the shard's endpoint as one PFC frame whose quanta are the time
// left, converted at the shard's share of the rate (the endpoint turns
// quanta into time at its own configured rate, which is that share).
// XON, or a pause already over, is quanta 0.
void apply_pfc(Shard& s, uint64_t now) {
  PortState& p = *s.port;
  const uint32_t gen = p.pfc_gen.load(std::memory_order_acquire);
  if (gen == s.pfc_gen_seen) return;
  s.pfc_gen_seen = gen;
  if (const uint32_t downs = p.link_downs.load(std::memory_order_acquire);
      downs != s.link_downs_seen) {
    s.link_downs_seen = downs;
    s.ep->link_down(now);
  }
  wire::PfcFrame f;
  const uint64_t bps = s.rate * 8;
  for (unsigned prio = 0; prio < wire::kPfcPriorities; ++prio) {
    const uint32_t seq = p.pfc_seq[prio].load(std::memory_order_acquire);
    if (seq == s.pfc_seq_seen[prio]) continue;
    s.pfc_seq_seen[prio] = seq;
    const uint64_t until = p.pfc_until[prio].load(std::memory_order_relaxed);
    f.enable |= static_cast<uint8_t>(1u << prio);
    if (until > now && bps > 0) {
      const unsigned __int128 bits = static_cast<unsigned __int128>(until - now) * bps;
      const uint64_t den = uint64_t{wire::kPauseQuantumBits} * 1'000'000'000ull;
      const uint64_t q = static_cast<uint64_t>((bits + den - 1) / den);
      f.quanta[prio] = static_cast<uint16_t>(std::min<uint64_t>(q, UINT16_MAX));
    }
  }
  if (f.enable == 0) return;
  std::array<uint8_t, wire::kPfcFrameSize> buf{};
  const size_t n = wire::build_pfc(f, buf);
  if (n == 0) return;
  s.ep->receive(std::span<const uint8_t>(buf.data(), n), now);
  ++s.counters.pfc_applied;
}

// Shard 0, every kLinkPollNs: the port's link state. PFC state lives on
// the link (IEEE 802.1Qbb): when it goes down, every pause on it ends, on
// every shard (Endpoint::link_down; sharded ports through apply_pfc). The
// first reading only sets the state (a memif port may start down).
void poll_link(Shard& s, uint64_t now) {
  s.next_link_poll = now + kLinkPollNs;
  PortState& p = *s.port;
  const std::optional<bool> link = port_link_up(p.port_id);
  if (!link) {
    // A port that cannot tell its link state is up from the start.
    if (!s.link_known) s.ep->announce(now);
    s.link_known = true;
    return;
  }
  const bool up = *link;
  if (s.link_known && s.link_up && !up) {
    ++s.counters.link_downs;
    if (p.sharded()) {
      p.link_downs.fetch_add(1, std::memory_order_release);
      p.pfc_gen.fetch_add(1, std::memory_order_release);
    } else {
      s.ep->link_down(now);
    }
  }
  // The port is up: announce its addresses (a gratuitous ARP, an
  // unsolicited neighbour advertisement), as a host does when its link
  // comes up, so that peers and switches learn where it is.
  const bool came_up = up && (!s.link_known || !s.link_up);
  if (came_up) s.ep->announce(now);
  s.link_known = true;
  s.link_up = up;
  if (came_up) p.link_up_ns.store(std::max<uint64_t>(now, 1), std::memory_order_relaxed);
  // A link that has never been up is not yet plugged in: frames wait for
  // it (flush_held) rather than being discarded.
  p.link_is_down.store(!up && p.link_up_ns.load(std::memory_order_relaxed) != 0,
                       std::memory_order_relaxed);
}

constexpr int kDispatchConsumed = -1;

// Sharded port, on a lcore polling an RX queue: which shard a frame is
// for. Only what finds the BTH destination QP is read (Ethernet, 802.1Q,
// IPv4/IPv6, UDP, an INT header if any); checksums and the ICRC are the
// owning endpoint's job. Not RoCEv2, not well-formed enough to find the
// BTH, an unknown QPN: this shard, whose endpoint counts it as before. PFC:
// shared, consumed.
int dispatch_target(Shard& s, const uint8_t* data, uint32_t len, uint64_t now) {
  const auto self = static_cast<int>(s.index);
  const std::span<const uint8_t> f(data, len);
  if (wire::is_pfc(f)) {
    wire::PfcFrame pfc;
    if (wire::parse_pfc(f, pfc) != wire::PfcParseError::kOk) return self;
    share_pfc(s, pfc, now);
    return kDispatchConsumed;
  }
  wire::IntLocation loc;
  if (wire::int_locate(f, loc) != wire::IntError::kOk) return self;
  const uint32_t bth = loc.bth_offset();
  if (bth + wire::kBthSize > len) return self;
  const uint32_t qpn = wire::load_be24(data + bth + 5);  // BTH DestQP, IBA 9.2
  const auto it = s.dispatch.find(qpn);
  return it == s.dispatch.end() ? self : static_cast<int>(it->second);
}

// One burst from the shard's RX queue. Unsharded: every frame to the
// endpoint in one receive_burst, mbufs freed after (the endpoint copies
// payload into registered memory during it). Sharded: frames of other
// shards' QPs go to their rings.
bool poll_rx(Shard& s, uint64_t now) {
  PortState& p = *s.port;
  const uint16_t n = rte_eth_rx_burst(p.port_id, static_cast<uint16_t>(s.rx_queue), s.rx.data(),
                                      static_cast<uint16_t>(s.rx.size()));
  if (n == 0) return false;
  ++s.counters.rx_bursts;
  s.counters.rx_mbufs += n;
  const bool sharded = p.sharded();
  // Tested once a burst: capture() is a call, and a call per frame showed
  // on the 64 B receive path.
  const bool capturing = p.capture != nullptr;
  size_t nfree = 0;
  size_t mine = 0;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = s.rx[i];
    if (m->nb_segs != 1) {
      ++s.counters.rx_multiseg_dropped;
      s.rx_free[nfree++] = m;
      continue;
    }
    const auto* data = rte_pktmbuf_mtod(m, const uint8_t*);
    if (capturing) capture(s, data, m->data_len);
    if (sharded) {
      const int target = dispatch_target(s, data, m->data_len, now);
      if (target == kDispatchConsumed) {
        s.rx_free[nfree++] = m;
        continue;
      }
      if (target != static_cast<int>(s.index)) {
        s.dispatch_batch[static_cast<size_t>(target)].push_back(m);
        continue;
      }
    }
    s.rx_frames[mine++] = std::span(data, m->data_len);
    s.rx_free[nfree++] = m;
  }
  s.ep->receive_burst(std::span(s.rx_frames.data(), mine), now);
  if (sharded) {
    for (size_t k = 0; k < p.shards.size(); ++k) {
      auto& batch = s.dispatch_batch[k];
      if (batch.empty()) continue;
      // The ring's own mode: single producer with one RX queue, multi with
      // one per shard.
      const unsigned put = rte_ring_enqueue_burst(
          p.shards[k]->rx_ring, reinterpret_cast<void* const*>(batch.data()),
          static_cast<unsigned>(batch.size()), nullptr);
      s.counters.rx_dispatched += put;
      if (put < batch.size()) {
        s.counters.rx_dispatch_dropped += batch.size() - put;
        rte_pktmbuf_free_bulk(batch.data() + put, static_cast<unsigned>(batch.size() - put));
      }
      batch.clear();
    }
  }
  if (nfree) rte_pktmbuf_free_bulk(s.rx_free.data(), static_cast<unsigned>(nfree));
  return true;
}

// The frames shards polling an RX queue handed over to this one.
bool poll_rx_ring(Shard& s, uint64_t now) {
  const unsigned n = rte_ring_sc_dequeue_burst(s.rx_ring, reinterpret_cast<void**>(s.rx.data()),
                                               static_cast<unsigned>(s.rx.size()), nullptr);
  if (n == 0) return false;
  s.counters.rx_from_ring += n;
  for (unsigned i = 0; i < n; ++i) {
    const rte_mbuf* m = s.rx[i];
    s.rx_frames[i] = std::span(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len);
  }
  s.ep->receive_burst(std::span(s.rx_frames.data(), n), now);
  rte_pktmbuf_free_bulk(s.rx.data(), n);
  return true;
}

// Hands frames to the PMD's TX queue, or for a shard without one to the
// ring of the shard that sends for it; returns how many were taken.
size_t hand_over(Shard& s, rte_mbuf** mbufs, size_t n) {
  if (s.tx_queue < 0) {
    const unsigned put = rte_ring_sp_enqueue_burst(
        s.tx_ring, reinterpret_cast<void* const*>(mbufs), static_cast<unsigned>(n), nullptr);
    s.counters.tx_to_ring += put;
    return put;
  }
  const uint16_t sent = rte_eth_tx_burst(s.port->port_id, static_cast<uint16_t>(s.tx_queue),
                                         mbufs, static_cast<uint16_t>(n));
  s.counters.tx_frames += sent;
  return sent;
}

// While the link is down a PMD may take nothing (memif, af_packet): a NIC's
// MAC discards what it is given then, and so do we, counted. Held, the
// frames would stop the QPs' transmissions, and with them the retries
// that end in IBV_WC_RETRY_EXC_ERR: a peer that is gone would never fail.
bool discard_if_link_down(Shard& s, rte_mbuf** mbufs, size_t n) {
  PortState& p = *s.port;
  if (!p.link_is_down.load(std::memory_order_relaxed)) return false;
  // The flag is the last link poll's (every 10 ms): a link that has come
  // up since (a memif peer connecting) carries these frames; a datagram
  // dropped then would be lost for good.
  if (const std::optional<bool> up = port_link_up(p.port_id); !up || *up) {
    p.link_is_down.store(false, std::memory_order_relaxed);
    return false;
  }
  rte_pktmbuf_free_bulk(mbufs, static_cast<unsigned>(n));
  s.counters.tx_link_down += n;
  return true;
}

// hand_over with a few retries; what is still not taken waits in s.held.
void send_burst(Shard& s, rte_mbuf** mbufs, size_t n, uint64_t now) {
  if (discard_if_link_down(s, mbufs, n)) return;
  size_t sent = 0;
  for (uint32_t attempt = 0; sent < n && attempt <= kTxRetries; ++attempt) {
    if (attempt > 0) ++s.counters.tx_retries;
    sent += hand_over(s, mbufs + sent, n - sent);
  }
  if (sent > 0) s.last_tx_ns = now;
  if (sent == n) return;
  if (s.held_n == 0) s.held_since = now;
  s.counters.tx_held += n - sent;
  for (size_t i = sent; i < n; ++i) s.held[s.held_n++] = mbufs[i];
}

// Sends the held frames first; true once none is left. The PMD is offered
// them before the watchdog looks: a queue that takes them now is not stuck.
bool flush_held(Shard& s, uint64_t now) {
  if (s.held_n == 0) return true;
  if (discard_if_link_down(s, s.held.data(), s.held_n)) {
    s.counters.tx_held_ns += now - s.held_since;
    s.held_n = 0;
    return true;
  }
  const size_t sent = hand_over(s, s.held.data(), s.held_n);
  if (sent > 0) {
    s.last_tx_ns = now;
    std::copy(s.held.begin() + static_cast<ptrdiff_t>(sent),
              s.held.begin() + static_cast<ptrdiff_t>(s.held_n), s.held.begin());
    s.held_n -= sent;
  }
  if (s.held_n == 0) {
    s.counters.tx_held_ns += now - s.held_since;
    return true;
  }
  if (!tx_held_too_long(s.held_since, s.last_tx_ns,
                        s.port->link_up_ns.load(std::memory_order_relaxed), now))
    return false;
  rte_pktmbuf_free_bulk(s.held.data(), static_cast<unsigned>(s.held_n));
  s.counters.tx_stuck += s.held_n;
  s.counters.tx_held_ns += now - s.held_since;
  s.held_n = 0;
  return true;
}

// Lets the endpoint fill mbuf data areas, then hands them to the PMD (or,
// for a shard without a TX queue, to the RX lcore's ring).
//
// `join`: this pass is one of the application's own loop and received
// frames, so what it builds now is mostly answers to them (ACKs, READ
// responses), and the application is about to post its own answer (a
// ping-pong's next message). Where each tx_burst is a system call those
// frames wait for the next pass and leave in one burst with it: one call
// on the round trip instead of two. They wait one pass at most; the
// application's loop comes straight back.
bool poll_tx(Shard& s, uint64_t now, bool join) {
  PortState& p = *s.port;
  // Frames still waiting for the queue go first; no new ones until then.
  if (!flush_held(s, now)) return true;
  const size_t burst = s.stash.size();
  if (s.stash_n < burst) {
    if (rte_pktmbuf_alloc_bulk(p.pool, s.stash.data() + s.stash_n,
                               static_cast<unsigned>(burst - s.stash_n)) == 0) {
      s.stash_n = burst;
    } else {
      ++s.counters.tx_mbufs_alloc_failed;
      if (s.stash_n == 0) return false;
    }
  }
  const size_t first = s.joining;
  for (size_t i = first; i < s.stash_n; ++i) {
    rte_mbuf* m = s.stash[i];
    s.bufs[i] = std::span(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_tailroom(m));
  }
  const size_t built = s.ep->transmit(now, std::span(s.bufs.data() + first, s.stash_n - first),
                                      std::span(s.lens.data() + first, s.stash_n - first));
  for (size_t i = first; i < first + built; ++i) {
    rte_mbuf* m = s.stash[i];
    m->data_len = static_cast<uint16_t>(s.lens[i]);
    m->pkt_len = s.lens[i];
    s.counters.tx_bytes += s.lens[i];
    capture(s, rte_pktmbuf_mtod(m, const uint8_t*), s.lens[i]);
  }
  const size_t n = first + built;
  if (n == 0) return false;
  if (join && first == 0 && p.tx_burst_is_syscall) {
    s.joining = n;
    s.counters.tx_joined += n;
    return true;
  }
  // The joined answers go last: the kernel hands a burst's frames to the
  // peer one by one, and the application's new frame (the ping-pong's next
  // message) is the one the peer waits for, an ACK is not.
  if (first > 0 && built > 0)
    std::rotate(s.stash.begin(), s.stash.begin() + first, s.stash.begin() + n);
  s.joining = 0;
  send_burst(s, s.stash.data(), n, now);
  // Keep the unused mbufs at the front of the stash for the next call.
  const size_t left = s.stash_n - n;
  for (size_t i = 0; i < left; ++i) s.stash[i] = s.stash[n + i];
  s.stash_n = left;
  return true;
}

// Shard 0 of a port with one TX queue: sends what the other shards made.
bool poll_tx_rings(Shard& s, uint64_t now) {
  PortState& p = *s.port;
  bool busy = false;
  // What the queue has not taken yet goes first (poll_tx); the other
  // shards' frames wait in their rings meanwhile.
  if (s.held_n > 0) return true;
  for (size_t k = 1; k < p.shards.size(); ++k) {
    rte_ring* r = p.shards[k]->tx_ring;
    if (!r) continue;
    const unsigned n = rte_ring_sc_dequeue_burst(r, reinterpret_cast<void**>(p.tx_from_rings.data()),
                                                 static_cast<unsigned>(p.tx_from_rings.size()),
                                                 nullptr);
    if (n == 0) continue;
    busy = true;
    send_burst(s, p.tx_from_rings.data(), n, now);
    if (s.held_n > 0) break;
  }
  return busy;
}

}  // namespace

// One pass of a worker's data path: commands, then per shard RX and TX
// (which takes the posted work). Returns whether anything was done; `next` gets the earliest
// deadline of its endpoints.
bool worker_step(Worker& w, uint64_t& next, bool app_loop) {
  const uint64_t now = now_ns();  // the one clock read of this pass
  bool busy = false;
  const size_t ncmd = w.commands.pop(w.cmd_buf.data(), w.cmd_buf.size());
  for (size_t k = 0; k < ncmd; ++k) {
    Command& c = w.cmd_buf[k];
    busy = true;
    (*c.fn)();
    w.replies.push(c.seq);
  }
  next = UINT64_MAX;
  for (Shard* s : w.shards) {
    ++s->counters.loops;
    const bool sharded = s->port->sharded();
    if (s->index == 0 && now >= s->next_link_poll) poll_link(*s, now);
    bool received = false;
    if (s->rx_queue >= 0) received |= poll_rx(*s, now);
    if (s->rx_ring) received |= poll_rx_ring(*s, now);
    busy |= received;
    if (sharded) apply_pfc(*s, now);
    // Posted work: the endpoint takes the rung QPs when it transmits.
    busy |= s->ep->doorbells_pending();
    busy |= poll_tx(*s, now, app_loop && received);
    if (sharded && s->index == 0) busy |= poll_tx_rings(*s, now);
    next = std::min(next, s->ep->next_deadline());
  }
  return busy;
}

bool step_for_caller(Worker& w) {
  if (!w.steppable.load(std::memory_order_acquire)) return false;
  if (w.in_step.test_and_set(std::memory_order_acquire)) return false;
  // Looked at again under the flag: Engine::stop() clears `steppable`
  // before it takes the flag, so a caller that got the flag after it sees
  // the worker stopping and leaves.
  if (!w.steppable.load(std::memory_order_acquire)) {
    w.in_step.clear(std::memory_order_release);
    return false;
  }
  uint64_t next;
  const bool busy = worker_step(w, next);
  w.in_step.clear(std::memory_order_release);
  return busy;
}

void worker_loop(Worker& w) {
  w.running.store(true, std::memory_order_release);
  while (!w.stop.load(std::memory_order_acquire)) {
    uint64_t next = UINT64_MAX;
    // A caller in a pass (EngineConfig::callers_step) is doing this
    // worker's work; the next pass is the worker's.
    if (w.in_step.test_and_set(std::memory_order_acquire)) {
      rte_pause();
      continue;
    }
    const bool busy = worker_step(w, next);
    w.in_step.clear(std::memory_order_release);
    if (!busy && w.idle_sleep_us > 0) {
      const uint64_t t = now_ns();
      uint64_t sleep_ns = uint64_t{w.idle_sleep_us} * 1000;
      if (next > t) sleep_ns = std::min(sleep_ns, next - t);
      else sleep_ns = 0;
      if (sleep_ns >= 1000) rte_delay_us_sleep(static_cast<unsigned>(sleep_ns / 1000));
    }
  }
  w.running.store(false, std::memory_order_release);
}

int worker_main(void* arg) {
  worker_loop(*static_cast<Worker*>(arg));
  return 0;
}

}  // namespace droce::engine
