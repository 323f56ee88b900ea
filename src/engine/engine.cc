// rte_intr_instance_alloc & co. (run_on_interrupt_thread) are still
// experimental in DPDK 22.11.
#ifndef ALLOW_EXPERIMENTAL_API
#define ALLOW_EXPERIMENTAL_API
#endif

#include "droce/engine/engine.h"

#include <fmt/format.h>
#include <pcap/pcap.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_interrupts.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_telemetry.h>
#include <sys/eventfd.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <boost/lockfree/spsc_queue.hpp>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "droce/cc/registry.h"
#include "droce/engine/options.h"
#include "droce/transport/device.h"
#include "droce/wire/bytes.h"
#include "droce/wire/int.h"
#include "droce/wire/packet.h"
#include "droce/wire/pfc.h"

namespace droce::engine {

namespace {

uint64_t g_tsc_base = 0;
// Nanoseconds per TSC tick in 32.32 fixed point: now_ns() multiplies rather
// than divides (a 128-bit division was most of now_ns(), which the control
// thread calls on every poll).
uint64_t g_ns_per_tick_q32 = uint64_t{1} << 32;
bool g_eal_up = false;

constexpr uint32_t kTxRetries = 8;

}  // namespace

int init_eal(int argc, char** argv) {
  const int ret = rte_eal_init(argc, argv);
  if (ret < 0)
    throw ConfigError("EAL", fmt::format("rte_eal_init failed: {} (see the EAL "
                                         "message above)",
                                         rte_strerror(rte_errno)));
  const uint64_t hz = rte_get_tsc_hz();
  g_ns_per_tick_q32 = static_cast<uint64_t>((static_cast<unsigned __int128>(1'000'000'000u) << 32) /
                                            (hz ? hz : 1'000'000'000u));
  g_tsc_base = rte_get_tsc_cycles();
  g_eal_up = true;
  return ret;
}

void cleanup_eal() {
  if (g_eal_up) rte_eal_cleanup();
  g_eal_up = false;
}

uint64_t now_ns() {
  const uint64_t c = rte_get_tsc_cycles() - g_tsc_base;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(c) * g_ns_per_tick_q32) >> 32);
}

std::optional<bool> port_link_up(uint16_t port_id) {
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(port_id, &link) != 0) return std::nullopt;
  return link.link_status == RTE_ETH_LINK_UP;
}

// ---------------------------------------------------------------------------

struct Worker;

namespace {

struct PortState;

// One shard: the QPs of one port that one worker lcore runs, with their
// own transport Device, endpoint and CQ (the endpoint and the Device are
// single-threaded). An unsharded port has one shard, on its RX lcore.
struct Shard {
  PortState* port = nullptr;
  uint32_t index = 0;  // 0 = the lcore that polls RX queue 0
  Worker* worker = nullptr;
  uint64_t rate = 0;   // the endpoint's port rate: its share (0 = none)
  std::unique_ptr<transport::Device> device;
  std::unique_ptr<endpoint::Endpoint> ep;
  transport::ProtectionDomain* pd = nullptr;
  transport::CompletionQueue* cq = nullptr;
  std::unordered_map<uint32_t, std::string> qp_cc;  // qpn -> CC name
  PortCounters counters;
  // Pre-allocated mbufs whose data areas the endpoint may fill: kept across
  // loop iterations so that an idle port does not allocate and free.
  std::vector<rte_mbuf*> stash;
  size_t stash_n = 0;
  // Frames the TX queue (or the ring to shard 0) did not take yet, in
  // order: they go first on the next pass, and until they have gone the
  // endpoint makes no new ones, so the QPs wait. A NIC whose ring is full
  // waits; it never drops its own frames. At most a burst of this shard's
  // and a burst from the other shards' rings.
  std::vector<rte_mbuf*> held;
  size_t held_n = 0;
  uint64_t held_since = 0;  // when the oldest held frame began to wait
  std::vector<rte_mbuf*> rx;
  std::vector<std::span<const uint8_t>> rx_frames;  // this shard's, for receive_burst
  std::vector<std::span<uint8_t>> bufs;
  std::vector<uint32_t> lens;
  // TX queue this shard transmits on; -1: through tx_ring to shard 0.
  int tx_queue = 0;
  // RX queue this shard polls; -1: it only gets frames through rx_ring.
  int rx_queue = 0;
  // Frames that shards polling an RX queue hand over to this one: from
  // shard 0 alone (one RX queue, single producer) or from every shard (an
  // RX queue each, multi-producer). None on a shard nobody hands to.
  rte_ring* rx_ring = nullptr;
  rte_ring* tx_ring = nullptr;  // this shard -> shard 0 (tx_queue < 0)
  // Shards with an RX queue, on their own lcore (changed through run_on):
  // QPN -> owning shard for the QPs of other shards, and per-shard batches
  // of the frames for them.
  std::unordered_map<uint32_t, uint32_t> dispatch;
  std::vector<std::vector<rte_mbuf*>> dispatch_batch;
  std::vector<rte_mbuf*> rx_free;
  // PFC updates already fed to the endpoint (PortState::pfc_*).
  uint32_t pfc_gen_seen = 0;
  std::array<uint32_t, wire::kPfcPriorities> pfc_seq_seen{};
  // Link state (shard 0 polls it, poll_link) and, on every shard of a
  // sharded port, the link-down events already given to the endpoint.
  uint64_t next_link_poll = 0;
  bool link_known = false;
  bool link_up = true;
  uint32_t link_downs_seen = 0;
};

// What the data path does for one port: its DPDK port, its pool, and its
// shards.
struct PortState {
  PortIndex index = 0;
  uint16_t port_id = 0;
  std::string name;
  PortConfig cfg;
  int socket = SOCKET_ID_ANY;
  uint64_t line_rate = 0;
  uint16_t tx_queues = 1;
  uint16_t rx_queues = 1;  // 1, or one per shard (PortConfig::shard_rx)
  rte_mempool* pool = nullptr;
  std::vector<std::unique_ptr<Shard>> shards;
  // Control thread only: QPN -> shard index (where create/modify/post go).
  std::unordered_map<uint32_t, uint32_t> qp_owner;
  uint32_t next_qpn = transport::kFirstQpn;
  uint32_t next_shard = 0;
  std::vector<rte_mbuf*> tx_from_rings;
  // PFC state received on the port, for every shard (sharded ports): the
  // end of the pause per priority (ns, the engine clock), a sequence number
  // per priority bumped after each update, and one generation number so
  // that a shard tests one atomic per loop.
  std::array<std::atomic<uint64_t>, wire::kPfcPriorities> pfc_until{};
  std::array<std::atomic<uint32_t>, wire::kPfcPriorities> pfc_seq{};
  std::atomic<uint32_t> pfc_gen{0};
  // Sharded ports: link-down events shard 0 saw (pfc_gen moves with it).
  std::atomic<uint32_t> link_downs{0};
  std::mutex capture_mu;  // shards transmit on several lcores
  pcap_t* pcap_dead = nullptr;
  pcap_dumper_t* dumper = nullptr;
  bool started = false;
  bool closed = false;
  bool sharded() const { return shards.size() > 1; }
  unsigned lcore() const;
};

enum class CmdType : uint8_t { kRun, kPostSend, kPostRecv };

struct Command {
  CmdType type = CmdType::kRun;
  uint64_t seq = 0;
  std::function<void()>* fn = nullptr;  // kRun: lives on the waiting control thread
  Shard* shard = nullptr;
  uint32_t qpn = 0;
  transport::SendWr send{};
  transport::RecvWr recv{};
  std::array<transport::Sge, transport::kMaxSge> sge{};
  uint32_t num_sge = 0;
  wire::PathSpec ud_path{};
  bool has_ud_path = false;
};

struct Completion {
  PortIndex port = 0;
  transport::WorkCompletion wc;
};

}  // namespace

struct Worker {
  Worker(unsigned lcore_id, bool thread, const EngineConfig& c)
      : lcore(lcore_id),
        use_thread(thread),
        commands(c.command_queue_depth),
        replies(64),
        completions(c.completion_queue_depth) {}
  unsigned lcore;
  bool use_thread;  // no worker lcore: a registered non-EAL thread
  std::vector<Shard*> shards;
  boost::lockfree::spsc_queue<Command> commands;
  boost::lockfree::spsc_queue<uint64_t> replies;
  boost::lockfree::spsc_queue<Completion> completions;
  std::atomic<bool> stop{false};
  std::atomic<bool> running{false};
  bool launched = false;
  std::thread thread;
  std::vector<transport::WorkCompletion> wc_buf;
  // Commands are taken from the queue up to 64 at a time: one exchange of
  // the queue's indices per batch, not per command (each is a cache line
  // the control thread's CPU wrote).
  std::vector<Command> cmd_buf = std::vector<Command>(64);
  uint32_t idle_sleep_us = 0;
};

namespace {
unsigned PortState::lcore() const { return shards.front()->worker->lcore; }
}  // namespace

struct Engine::Impl {
  EngineConfig cfg;
  std::vector<std::unique_ptr<PortState>> ports;
  std::vector<std::unique_ptr<Worker>> workers;
  size_t next_worker = 0;
  bool started = false;
  bool ports_closed = false;
  uint64_t seq = 0;
  std::vector<void*> mr_memory;
  Snapshot latest;
  std::mutex latest_mu;  // latest is read by the telemetry thread
  bool have_latest = false;
  uint64_t rtc_snapshot_ns = 0;  // run to completion: poll() took a snapshot

  // Runs fn on the worker (inline before start) and waits.
  void run_on(Worker& w, std::function<void()> fn);
  PortState& port(PortIndex i, const char* option = "port") {
    if (i >= ports.size())
      throw ConfigError(option, fmt::format("no port with index {}", i));
    return *ports[i];
  }
  // The shard a QP of `p` runs on (shard 0 for a QPN the port does not
  // know: the call then fails there as it would unsharded).
  Shard& owner(PortState& p, uint32_t qpn) {
    auto it = p.qp_owner.find(qpn);
    return *p.shards[it == p.qp_owner.end() ? 0 : it->second];
  }
  // Queues commands for w in order, in one push; before start() (or for a
  // worker that never launched) runs them inline. Returns how many were
  // taken, from the front.
  size_t enqueue(Worker& w, std::span<Command> cmds);
  // What post_send and post_recv share: the SGE limit, the QP's shard, and
  // a copy of the SGEs (the caller's list need not outlive the call). Fills
  // and returns c, one of post_batch: value-initialising a ~350-byte
  // Command per WR (rep stos) was a fifth of droce-perf's control thread.
  // Only the control thread posts, so reused commands serve.
  Command& post_command(QpHandle h, CmdType type, std::span<const transport::Sge> sges,
                        std::string_view verb, Command& c);
  // The commands of the WRs being posted, pushed in one call; grows to the
  // longest list posted.
  std::vector<Command> post_batch = std::vector<Command>(1);
  void start_port(PortState& p);
  void fill_snapshot(Worker& w, std::vector<PortSnapshot>& ports, std::vector<QpSnapshot>& qps);
  void drain_rings();
};

// ---- the data path ----------------------------------------------------------

namespace {

void push_error_completion(Worker& w, Shard& s, uint32_t qpn, uint64_t wr_id, int err) {
  ++s.counters.post_errors;
  Completion c;
  c.port = s.port->index;
  c.wc.wr_id = wr_id;
  c.wc.status = IBV_WC_GENERAL_ERR;
  c.wc.vendor_err = static_cast<uint32_t>(err);
  c.wc.qp_num = qpn;
  // The completion queue is sized by the app; if it is full the error is
  // still counted in post_errors.
  w.completions.push(c);
}

void execute_post(Worker& w, Command& c) {
  Shard& s = *c.shard;
  transport::QueuePair* qp = s.device->find_qp(c.qpn);
  const uint64_t wr_id = c.type == CmdType::kPostSend ? c.send.wr_id : c.recv.wr_id;
  if (!qp) {
    push_error_completion(w, s, c.qpn, wr_id, ENOENT);
    return;
  }
  const std::span<const transport::Sge> sg(c.sge.data(), c.num_sge);
  int rc = 0;
  if (c.type == CmdType::kPostSend) {
    c.send.sg_list = sg;
    c.send.ud_path = c.has_ud_path ? &c.ud_path : nullptr;
    rc = s.ep->post_send(*qp, c.send);
  } else {
    c.recv.sg_list = sg;
    rc = qp->post_recv(c.recv);
    s.ep->notify(c.qpn);
  }
  if (rc != 0) push_error_completion(w, s, c.qpn, wr_id, rc);
}

// Moves completions from the shard's CQ to the control plane, as many as
// the queue has room for (the rest stay in the CQ: back-pressure, no loss).
void drain_cq(Worker& w, Shard& s) {
  if (s.cq->empty()) return;
  size_t room = w.completions.write_available();
  if (room == 0) return;
  if (w.wc_buf.size() < 64) w.wc_buf.resize(64);
  while (room > 0 && !s.cq->empty()) {
    const size_t n = std::min(room, w.wc_buf.size());
    const int got = s.cq->poll(std::span(w.wc_buf.data(), n));
    for (int i = 0; i < got; ++i)
      w.completions.push(Completion{s.port->index, w.wc_buf[i]});
    room -= static_cast<size_t>(got);
    if (got == 0) break;
  }
  s.counters.cq_overflows = s.cq->overflow_count();
}

void capture(Shard& s, const uint8_t* data, uint32_t len) {
  PortState& p = *s.port;
  if (!p.dumper) return;
  pcap_pkthdr h{};
  gettimeofday(&h.ts, nullptr);
  h.caplen = len;
  h.len = len;
  if (p.sharded()) {
    std::lock_guard lock(p.capture_mu);
    pcap_dump(reinterpret_cast<u_char*>(p.dumper), &h, data);
  } else {
    pcap_dump(reinterpret_cast<u_char*>(p.dumper), &h, data);
  }
  ++s.counters.captured;
}

// Queues in one direction ("TX" or "RX") for a port's shards: one per
// shard when insisted on (too few is a ConfigError naming "shards") or when
// automatic and the PMD has enough; else one.
uint16_t queues_for_shards(std::string_view dir, uint16_t available, size_t nshards,
                           bool insist, bool automatic, const std::string& port,
                           std::string_view driver) {
  if (nshards <= 1) return 1;
  if (insist && available < nshards)
    throw ConfigError("shards", fmt::format("port '{}' ({}) has {} {} queue(s), {} shards "
                                            "asked for one {} queue each",
                                            port, driver, available, dir, nshards, dir));
  return (insist || automatic) && available >= nshards ? static_cast<uint16_t>(nshards) : 1;
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
  if (up && (!s.link_known || !s.link_up)) s.ep->announce(now);
  s.link_known = true;
  s.link_up = up;
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
  const bool capturing = p.dumper != nullptr;
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

// hand_over with a few retries; what is still not taken waits in s.held.
void send_burst(Shard& s, rte_mbuf** mbufs, size_t n, uint64_t now) {
  size_t sent = 0;
  for (uint32_t attempt = 0; sent < n && attempt <= kTxRetries; ++attempt) {
    if (attempt > 0) ++s.counters.tx_retries;
    sent += hand_over(s, mbufs + sent, n - sent);
  }
  if (sent == n) return;
  if (s.held_n == 0) s.held_since = now;
  s.counters.tx_held += n - sent;
  for (size_t i = sent; i < n; ++i) s.held[s.held_n++] = mbufs[i];
}

// Sends the held frames first; true once none is left.
bool flush_held(Shard& s, uint64_t now) {
  if (s.held_n == 0) return true;
  const size_t sent = hand_over(s, s.held.data(), s.held_n);
  std::copy(s.held.begin() + static_cast<ptrdiff_t>(sent),
            s.held.begin() + static_cast<ptrdiff_t>(s.held_n), s.held.begin());
  s.held_n -= sent;
  if (s.held_n > 0) return false;
  s.counters.tx_held_ns += now - s.held_since;
  return true;
}

// Lets the endpoint fill mbuf data areas, then hands them to the PMD (or,
// for a shard without a TX queue, to the RX lcore's ring).
bool poll_tx(Shard& s, uint64_t now) {
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
  for (size_t i = 0; i < s.stash_n; ++i) {
    rte_mbuf* m = s.stash[i];
    s.bufs[i] = std::span(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_tailroom(m));
  }
  const size_t n = s.ep->transmit(now, std::span(s.bufs.data(), s.stash_n),
                                  std::span(s.lens.data(), s.stash_n));
  if (n == 0) return false;
  for (size_t i = 0; i < n; ++i) {
    rte_mbuf* m = s.stash[i];
    m->data_len = static_cast<uint16_t>(s.lens[i]);
    m->pkt_len = s.lens[i];
    s.counters.tx_bytes += s.lens[i];
    capture(s, rte_pktmbuf_mtod(m, const uint8_t*), s.lens[i]);
  }
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

// One pass of a worker's data path: commands, then per shard RX, TX and
// completions. Returns whether anything was done; `next` gets the earliest
// deadline of its endpoints.
bool worker_step(Worker& w, uint64_t& next) {
  const uint64_t now = now_ns();  // the one clock read of this pass
  bool busy = false;
  const size_t ncmd = w.commands.pop(w.cmd_buf.data(), w.cmd_buf.size());
  for (size_t k = 0; k < ncmd; ++k) {
    Command& c = w.cmd_buf[k];
    busy = true;
    if (c.type == CmdType::kRun) {
      (*c.fn)();
      w.replies.push(c.seq);
    } else {
      execute_post(w, c);
    }
  }
  next = UINT64_MAX;
  for (Shard* s : w.shards) {
    ++s->counters.loops;
    const bool sharded = s->port->sharded();
    if (s->index == 0 && now >= s->next_link_poll) poll_link(*s, now);
    if (s->rx_queue >= 0) busy |= poll_rx(*s, now);
    if (s->rx_ring) busy |= poll_rx_ring(*s, now);
    if (sharded) apply_pfc(*s, now);
    busy |= poll_tx(*s, now);
    if (sharded && s->index == 0) busy |= poll_tx_rings(*s, now);
    drain_cq(w, *s);
    next = std::min(next, s->ep->next_deadline());
  }
  return busy;
}

void worker_loop(Worker& w) {
  w.running.store(true, std::memory_order_release);
  while (!w.stop.load(std::memory_order_acquire)) {
    uint64_t next = UINT64_MAX;
    const bool busy = worker_step(w, next);
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

}  // namespace

// ---- control plane ----------------------------------------------------------

void Engine::Impl::run_on(Worker& w, std::function<void()> fn) {
  if (!started || !w.launched) {
    fn();
    return;
  }
  Command c;
  c.type = CmdType::kRun;
  c.seq = ++seq;
  c.fn = &fn;
  while (!w.commands.push(c)) rte_pause();
  uint64_t got = 0;
  for (;;) {
    if (w.replies.pop(got) && got == c.seq) return;
    if (!w.running.load(std::memory_order_acquire) && w.stop.load())
      throw std::runtime_error("engine: worker stopped while a command was pending");
    std::this_thread::sleep_for(std::chrono::microseconds(5));
  }
}

size_t Engine::Impl::enqueue(Worker& w, std::span<Command> cmds) {
  if (!started || !w.launched) {
    for (Command& c : cmds) execute_post(w, c);
    return cmds.size();
  }
  return w.commands.push(cmds.data(), cmds.size());
}

namespace {

Engine::Impl* g_engine = nullptr;
std::mutex g_engine_mu;

std::string port_names() {
  std::string out;
  uint16_t id;
  RTE_ETH_FOREACH_DEV(id) {
    char name[RTE_ETH_NAME_MAX_LEN];
    if (rte_eth_dev_get_name_by_port(id, name) != 0) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} ({})", name, id);
  }
  return out.empty() ? "none (give a PCI device or --vdev)" : out;
}

void add_endpoint_counters(rte_tel_data* d, const endpoint::EndpointCounters& c) {
  c.for_each([d](std::string_view name, uint64_t v) {
    // Parse errors only when they happened, to keep the dictionary short.
    if (v == 0 && name.starts_with("rx_error_")) return;
    rte_tel_data_add_dict_u64(d, std::string(name).c_str(), v);
  });
}

// A telemetry callback reading the engine's latest snapshot under its
// locks; -EINVAL while no engine is up.
template <int (*Read)(const Snapshot&, const char* params, rte_tel_data*)>
int on_latest(const char*, const char* params, rte_tel_data* d) {
  std::lock_guard lock(g_engine_mu);
  if (!g_engine) return -EINVAL;
  std::lock_guard lock2(g_engine->latest_mu);
  return Read(g_engine->latest, params, d);
}

// /droce/stats: totals over every port and QP.
int tel_stats(const Snapshot& s, const char*, rte_tel_data* d) {
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_u64(d, "taken_ns", s.taken_ns);
  rte_tel_data_add_dict_u64(d, "ports", s.ports.size());
  rte_tel_data_add_dict_u64(d, "qps", s.qps.size());
  endpoint::EndpointCounters ep;
  PortCounters pc;
  // Per worker lcore: the QPs it runs and what its shards received and
  // sent, summed over the ports (shows sharding at work).
  std::map<unsigned, std::array<uint64_t, 3>> per_lcore;
  for (const PortSnapshot& p : s.ports) {
    ep += p.endpoint;
    pc += p.port;
    for (const ShardSnapshot& sh : p.shards) {
      auto& v = per_lcore[sh.lcore];
      v[0] += sh.qps;
      v[1] += sh.endpoint.rx_delivered;
      v[2] += sh.endpoint.tx_frames;
    }
  }
  rte_tel_data_add_dict_u64(d, "lcores", per_lcore.size());
  for (const auto& [lcore, v] : per_lcore) {
    rte_tel_data_add_dict_u64(d, fmt::format("lcore{}_qps", lcore).c_str(), v[0]);
    rte_tel_data_add_dict_u64(d, fmt::format("lcore{}_rx_delivered", lcore).c_str(), v[1]);
    rte_tel_data_add_dict_u64(d, fmt::format("lcore{}_tx_frames", lcore).c_str(), v[2]);
  }
  add_endpoint_counters(d, ep);
  pc.for_each([&](std::string_view name, uint64_t v) {
    const std::string key = fmt::format("port_{}", name);
    rte_tel_data_add_dict_u64(d, key.c_str(), v);
  });
  transport::QpCounters qc;
  for (const QpSnapshot& q : s.qps) qc += q.counters;
  qc.for_each([&](std::string_view name, uint64_t v) {
    if (v == 0) return;  // the dict holds 256 entries at most
    const std::string key = fmt::format("qp_{}", name);
    rte_tel_data_add_dict_u64(d, key.c_str(), v);
  });
  return 0;
}

// The port a telemetry parameter names by index, or null.
const PortSnapshot* port_named(const Snapshot& s, const char* params) {
  char* end = nullptr;
  const unsigned long idx = std::strtoul(params, &end, 0);
  if (end == params || *end != '\0') return nullptr;
  for (const PortSnapshot& p : s.ports)
    if (p.index == idx) return &p;
  return nullptr;
}

// /droce/port[,<index>]: without a parameter, the list of port indexes.
int tel_port(const Snapshot& s, const char* params, rte_tel_data* d) {
  if (!params || !*params) {
    rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
    for (const PortSnapshot& p : s.ports) rte_tel_data_add_array_int(d, static_cast<int>(p.index));
    return 0;
  }
  const PortSnapshot* found = port_named(s, params);
  if (!found) return -EINVAL;
  const PortSnapshot& p = *found;
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_string(d, "name", p.name.c_str());
  rte_tel_data_add_dict_u64(d, "port_id", p.port_id);
  rte_tel_data_add_dict_u64(d, "lcore", p.lcore);
  rte_tel_data_add_dict_u64(d, "shards", p.shards.size());
  for (const ShardSnapshot& sh : p.shards) {
    const auto key = [&](std::string_view what) {
      return fmt::format("shard{}_{}", sh.index, what);
    };
    rte_tel_data_add_dict_u64(d, key("lcore").c_str(), sh.lcore);
    rte_tel_data_add_dict_u64(d, key("qps").c_str(), sh.qps);
    rte_tel_data_add_dict_int(d, key("tx_queue").c_str(), sh.tx_queue);
    rte_tel_data_add_dict_int(d, key("rx_queue").c_str(), sh.rx_queue);
    rte_tel_data_add_dict_u64(d, key("rx_delivered").c_str(), sh.endpoint.rx_delivered);
    rte_tel_data_add_dict_u64(d, key("tx_frames").c_str(), sh.endpoint.tx_frames);
  }
  add_endpoint_counters(d, p.endpoint);
  p.port.for_each([&](std::string_view name, uint64_t v) {
    const std::string key = fmt::format("port_{}", name);
    rte_tel_data_add_dict_u64(d, key.c_str(), v);
  });
  rte_tel_data_add_dict_u64(d, "eth_ipackets", p.eth_ipackets);
  rte_tel_data_add_dict_u64(d, "eth_opackets", p.eth_opackets);
  rte_tel_data_add_dict_u64(d, "eth_ibytes", p.eth_ibytes);
  rte_tel_data_add_dict_u64(d, "eth_obytes", p.eth_obytes);
  rte_tel_data_add_dict_u64(d, "eth_imissed", p.eth_imissed);
  rte_tel_data_add_dict_u64(d, "eth_ierrors", p.eth_ierrors);
  rte_tel_data_add_dict_u64(d, "eth_oerrors", p.eth_oerrors);
  rte_tel_data_add_dict_u64(d, "eth_rx_nombuf", p.eth_rx_nombuf);
  rte_tel_data_add_dict_u64(d, "mempool_size", p.mempool_size);
  rte_tel_data_add_dict_u64(d, "mempool_avail", p.mempool_avail);
  rte_tel_data_add_dict_u64(d, "link_up", p.link_up ? 1 : 0);
  rte_tel_data_add_dict_u64(d, "neighbours", p.neighbours.size());
  return 0;
}

// /droce/neighbours,<port>: the port's neighbour cache, address -> "MAC state".
int tel_neighbours(const Snapshot& s, const char* params, rte_tel_data* d) {
  if (!params || !*params) return -EINVAL;
  const PortSnapshot* p = port_named(s, params);
  if (!p) return -EINVAL;
  rte_tel_data_start_dict(d);
  for (const NeighbourSnapshot& n : p->neighbours) {
    const std::string v = n.mac + " " + n.state;
    rte_tel_data_add_dict_string(d, n.ip.c_str(), v.c_str());
  }
  return 0;
}

// /droce/qp[,<qpn> | ,<port>:<qpn>]: without a parameter, the list of QPNs.
int tel_qp(const Snapshot& s, const char* params, rte_tel_data* d) {
  if (!params || !*params) {
    rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
    for (const QpSnapshot& q : s.qps) rte_tel_data_add_array_int(d, static_cast<int>(q.qpn));
    return 0;
  }
  std::optional<unsigned long> port;
  const char* p = params;
  char* end = nullptr;
  unsigned long v = std::strtoul(p, &end, 0);
  if (end == p) return -EINVAL;
  if (*end == ':') {
    port = v;
    p = end + 1;
    v = std::strtoul(p, &end, 0);
    if (end == p) return -EINVAL;
  }
  if (*end != '\0') return -EINVAL;
  for (const QpSnapshot& q : s.qps) {
    if (q.qpn != v || (port && q.port != *port)) continue;
    rte_tel_data_start_dict(d);
    rte_tel_data_add_dict_u64(d, "port", q.port);
    rte_tel_data_add_dict_u64(d, "qpn", q.qpn);
    rte_tel_data_add_dict_u64(d, "lcore", q.lcore);
    rte_tel_data_add_dict_string(d, "type", std::string(transport::to_string(q.type)).c_str());
    rte_tel_data_add_dict_string(d, "state", std::string(transport::to_string(q.state)).c_str());
    rte_tel_data_add_dict_u64(d, "dest_qpn", q.dest_qpn);
    rte_tel_data_add_dict_u64(d, "next_send_psn", q.next_send_psn);
    rte_tel_data_add_dict_u64(d, "expected_psn", q.expected_psn);
    rte_tel_data_add_dict_u64(d, "send_queue_depth", q.send_queue_depth);
    rte_tel_data_add_dict_u64(d, "recv_queue_depth", q.recv_queue_depth);
    rte_tel_data_add_dict_string(d, "cc", q.cc.c_str());
    rte_tel_data_add_dict_u64(d, "cc_rate_bytes_per_sec", q.cc_rate_bytes_per_sec);
    q.counters.for_each([&](std::string_view name, uint64_t val) {
      const std::string key(name);
      rte_tel_data_add_dict_u64(d, key.c_str(), val);
    });
    return 0;
  }
  return -EINVAL;
}

void register_telemetry() {
  static bool done = false;  // commands cannot be unregistered: once per process
  if (done) return;
  done = true;
  rte_telemetry_register_cmd("/droce/stats", on_latest<tel_stats>,
                             "droce totals: endpoint, port and QP counters. No parameters");
  rte_telemetry_register_cmd("/droce/port", on_latest<tel_port>,
                             "droce port counters. Parameter: port index (none: list)");
  rte_telemetry_register_cmd("/droce/neighbours", on_latest<tel_neighbours>,
                             "The port's neighbour cache (address: MAC state). Parameter: port index");
  rte_telemetry_register_cmd("/droce/qp", on_latest<tel_qp>,
                             "droce QP state and counters. Parameter: QPN or port:QPN "
                             "(none: list)");
}

}  // namespace

Engine::Engine(const EngineConfig& config) : impl_(std::make_unique<Impl>()) {
  impl_->cfg = config;
  unsigned lcore;
  RTE_LCORE_FOREACH_WORKER(lcore) {
    impl_->workers.push_back(std::make_unique<Worker>(lcore, false, config));
  }
  if (impl_->workers.empty())
    impl_->workers.push_back(std::make_unique<Worker>(rte_lcore_id(), true, config));
  for (auto& w : impl_->workers) w->idle_sleep_us = config.idle_sleep_us;
  {
    std::lock_guard lock(g_engine_mu);
    g_engine = impl_.get();
  }
  if (config.telemetry) register_telemetry();
}

Engine::~Engine() {
  stop();
  if (!impl_->ports_closed) close_ports();
  {
    std::lock_guard lock(g_engine_mu);
    if (g_engine == impl_.get()) g_engine = nullptr;
  }
  for (auto& p : impl_->ports) {
    for (auto& sh : p->shards) {
      sh->ep.reset();
      sh->device.reset();
      rte_ring_free(sh->rx_ring);
      rte_ring_free(sh->tx_ring);
    }
    if (p->pool) rte_mempool_free(p->pool);
  }
  for (void* m : impl_->mr_memory) rte_free(m);
}

PortIndex Engine::add_port(const PortConfig& config) {
  Impl& im = *impl_;
  auto p = std::make_unique<PortState>();
  p->index = static_cast<PortIndex>(im.ports.size());
  p->cfg = config;
  uint16_t id = 0;
  if (rte_eth_dev_get_port_by_name(config.name.c_str(), &id) != 0) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(config.name.c_str(), &end, 10);
    if (config.name.empty() || *end != '\0' || v > UINT16_MAX ||
        !rte_eth_dev_is_valid_port(static_cast<uint16_t>(v)))
      throw ConfigError("port", fmt::format("no port '{}'; available: {}", config.name,
                                            port_names()));
    id = static_cast<uint16_t>(v);
  }
  for (auto& q : im.ports)
    if (q->port_id == id)
      throw ConfigError("port", fmt::format("port '{}' given twice", config.name));
  p->port_id = id;
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  rte_eth_dev_get_name_by_port(id, name);
  p->name = name;
  if (config.burst == 0 || config.burst > 512)
    throw ConfigError("burst", fmt::format("{} is out of range 1..512", config.burst));
  if (config.mbuf_data_bytes < 128 ||
      config.mbuf_data_bytes + RTE_PKTMBUF_HEADROOM > UINT16_MAX)
    throw ConfigError("mbuf-data-bytes",
                      fmt::format("{} is out of range 128..{}", config.mbuf_data_bytes,
                                  UINT16_MAX - RTE_PKTMBUF_HEADROOM));
  if (config.cq_depth == 0) throw ConfigError("cq-depth", "must be at least 1");

  // Worker lcores: the one polling RX first, then the other shards'.
  const auto worker_at = [&](int lcore, const char* option) -> size_t {
    for (size_t i = 0; i < im.workers.size(); ++i)
      if (!im.workers[i]->use_thread && im.workers[i]->lcore == static_cast<unsigned>(lcore))
        return i;
    throw ConfigError(option, fmt::format("lcore {} is not an EAL worker lcore (give "
                                          "it in -l/--lcores, not as the main lcore)",
                                          lcore));
  };
  const bool threaded = im.workers.front()->use_thread;
  const size_t real_workers = threaded ? 0 : im.workers.size();
  std::vector<Worker*> shard_workers;
  if (!config.lcores.empty()) {
    for (int l : config.lcores) {
      Worker* x = im.workers[worker_at(l, "lcores")].get();
      if (std::find(shard_workers.begin(), shard_workers.end(), x) != shard_workers.end())
        throw ConfigError("lcores", fmt::format("lcore {} is given twice: each shard needs "
                                                "its own worker lcore", l));
      shard_workers.push_back(x);
    }
  } else {
    if (config.shards == 0)
      throw ConfigError("shards", "0 is out of range: at least 1 (1 = no sharding)");
    if (config.shards > 1 && config.shards > real_workers)
      throw ConfigError("shards", fmt::format("{} shards need {} worker lcores; EAL has {} "
                                              "(give more with -l, e.g. -l 0-{}; lcores may "
                                              "share cores)",
                                              config.shards, config.shards, real_workers,
                                              config.shards));
    const size_t first = config.lcore >= 0 ? worker_at(config.lcore, "lcore")
                                           : im.next_worker++ % im.workers.size();
    for (size_t k = 0; k < config.shards; ++k)
      shard_workers.push_back(im.workers[(first + k) % im.workers.size()].get());
  }
  const size_t nshards = shard_workers.size();

  // Device and queues.
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(id, &info); rc != 0)
    throw ConfigError("port", fmt::format("'{}': cannot read device info: {}", p->name,
                                          rte_strerror(-rc)));
  rte_eth_conf conf{};
  const uint32_t want_mtu = config.mbuf_data_bytes - RTE_ETHER_HDR_LEN - 4;
  conf.rxmode.mtu = std::min<uint32_t>(std::max<uint32_t>(want_mtu, RTE_ETHER_MTU),
                                       info.max_mtu ? info.max_mtu : RTE_ETHER_MTU);
  // Some PMDs (memif, af_packet) report max_mtu = UINT16_MAX but a smaller
  // max_rx_pktlen, and rte_eth_dev_configure refuses an MTU whose frame
  // exceeds it: clamp to what the device accepts.
  if (info.max_rx_pktlen > RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN)
    conf.rxmode.mtu = std::min<uint32_t>(
        conf.rxmode.mtu, info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN);
  if (conf.rxmode.mtu < info.min_mtu) conf.rxmode.mtu = info.min_mtu;
  // A TX queue per shard when the PMD has them (PortConfig::shard_tx). On
  // net_memif and net_ring a TX queue is the peer's RX queue of the same
  // index: a peer that polls one RX queue would miss the others.
  const std::string_view driver = info.driver_name ? info.driver_name : "";
  const bool point_to_point = driver == "net_memif" || driver == "net_ring";
  p->tx_queues = queues_for_shards(
      "TX", info.max_tx_queues, nshards, config.shard_tx == PortConfig::ShardTx::kQueues,
      config.shard_tx == PortConfig::ShardTx::kAuto && !point_to_point, p->name, driver);
  // An RX queue per shard (PortConfig::shard_rx): by default only where the
  // PMD spreads frames by RSS on the UDP ports (RoCEv2 senders put the flow
  // entropy in the source port); asked for, wherever the PMD has the queues.
  const uint64_t rss_udp = info.flow_type_rss_offloads &
                           (RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_NONFRAG_IPV6_UDP);
  p->rx_queues = queues_for_shards(
      "RX", info.max_rx_queues, nshards, config.shard_rx == PortConfig::ShardRx::kQueues,
      config.shard_rx == PortConfig::ShardRx::kAuto && rss_udp != 0, p->name, driver);
  if (p->rx_queues > 1 && rss_udp != 0) {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = rss_udp;  // the PMD's default key
  }
  if (int rc = rte_eth_dev_configure(id, p->rx_queues, p->tx_queues, &conf); rc != 0)
    throw ConfigError("port", fmt::format("'{}': rte_eth_dev_configure: {}", p->name,
                                          rte_strerror(-rc)));
  uint16_t rx_desc = config.rx_desc, tx_desc = config.tx_desc;
  rte_eth_dev_adjust_nb_rx_tx_desc(id, &rx_desc, &tx_desc);
  p->socket = rte_eth_dev_socket_id(id);
  if (p->socket < 0) p->socket = SOCKET_ID_ANY;

  // Pool: descriptors on both rings, the RX burst, the TX stash, and the
  // per-lcore caches, plus slack; per extra shard its TX queue or ring,
  // its RX ring (or queue and ring) and its own burst and stash.
  const uint32_t cache = std::min<uint32_t>(config.mempool_cache, RTE_MEMPOOL_CACHE_MAX_SIZE);
  const uint32_t ring_size = rte_align32pow2(std::max<uint32_t>(rx_desc, 2u * config.burst));
  const uint32_t need = rx_desc + tx_desc + 2u * config.burst +
                        cache * (rte_lcore_count() + 1) + 256 +
                        static_cast<uint32_t>(nshards - 1) *
                            (ring_size + std::max<uint32_t>(tx_desc, ring_size) +
                             2u * config.burst) +
                        static_cast<uint32_t>(p->rx_queues - 1) * rx_desc +
                        (p->rx_queues > 1 ? ring_size : 0);  // shard 0's ring
  const uint32_t n = config.mbufs ? config.mbufs : need;
  if (n < rx_desc + tx_desc + 2u * config.burst)
    throw ConfigError("mbufs", fmt::format("{} mbufs cannot fill {} RX + {} TX descriptors "
                                           "and two bursts of {}; give at least {}",
                                           n, rx_desc, tx_desc, config.burst,
                                           rx_desc + tx_desc + 2u * config.burst));
  const uint32_t pool_cache = cache * 3 / 2 <= n ? cache : 0;
  const std::string pool_name = fmt::format("droce_p{}", p->index);
  p->pool = rte_pktmbuf_pool_create(
      pool_name.c_str(), n, pool_cache, 0,
      static_cast<uint16_t>(config.mbuf_data_bytes + RTE_PKTMBUF_HEADROOM), p->socket);
  if (!p->pool)
    throw ConfigError("mbufs", fmt::format("cannot create a pool of {} mbufs of {} bytes "
                                           "for port '{}': {} (more EAL memory: -m)",
                                           n, config.mbuf_data_bytes, p->name,
                                           rte_strerror(rte_errno)));
  for (uint16_t q = 0; q < p->rx_queues; ++q)
    if (int rc = rte_eth_rx_queue_setup(id, q, rx_desc, p->socket, nullptr, p->pool); rc != 0)
      throw ConfigError("port", fmt::format("'{}': RX queue {} setup: {}", p->name, q,
                                            rte_strerror(-rc)));
  for (uint16_t q = 0; q < p->tx_queues; ++q)
    if (int rc = rte_eth_tx_queue_setup(id, q, tx_desc, p->socket, nullptr); rc != 0)
      throw ConfigError("port", fmt::format("'{}': TX queue {} setup: {}", p->name, q,
                                            rte_strerror(-rc)));

  if (!config.capture.empty()) {
    p->pcap_dead = pcap_open_dead(DLT_EN10MB, 65535);
    p->dumper = pcap_dump_open(p->pcap_dead, config.capture.c_str());
    if (!p->dumper) {
      const std::string err = pcap_geterr(p->pcap_dead);
      pcap_close(p->pcap_dead);
      p->pcap_dead = nullptr;
      throw ConfigError("capture", fmt::format("cannot write '{}': {}", config.capture, err));
    }
  }

  p->line_rate = config.endpoint.port_rate_bytes_per_sec
                     ? config.endpoint.port_rate_bytes_per_sec
                     : 400'000'000'000ull / 8;
  // Shards. The port rate cap holds for the port as a whole: each shard's
  // endpoint paces to an equal share of it (rounded down).
  endpoint::EndpointConfig ep_cfg = config.endpoint;
  ep_cfg.port_rate_bytes_per_sec = config.endpoint.port_rate_bytes_per_sec / nshards;
  if (wire::is_zero_mac(ep_cfg.interface.mac)) {
    rte_ether_addr mac{};
    rte_eth_macaddr_get(id, &mac);
    std::copy(mac.addr_bytes, mac.addr_bytes + 6, ep_cfg.interface.mac.begin());
  }
  for (size_t k = 0; k < nshards; ++k) {
    // The first shard is the port's IP interface: frames that are not
    // RoCEv2 stay on the lcore that polls them, which is its lcore unless
    // every shard polls a queue of its own.
    if (k == 1) ep_cfg.interface.addresses.clear();
    auto sh = std::make_unique<Shard>();
    sh->port = p.get();
    sh->index = static_cast<uint32_t>(k);
    sh->worker = shard_workers[k];
    sh->rate = ep_cfg.port_rate_bytes_per_sec;
    sh->device = std::make_unique<transport::Device>();
    sh->ep = std::make_unique<endpoint::Endpoint>(*sh->device, ep_cfg);
    sh->pd = sh->device->alloc_pd();
    sh->cq = sh->device->create_cq(config.cq_depth);
    sh->stash.assign(config.burst, nullptr);
    sh->held.assign(2 * size_t{config.burst}, nullptr);
    sh->rx.assign(config.burst, nullptr);
    sh->rx_frames.assign(config.burst, {});
    sh->bufs.assign(config.burst, {});
    sh->lens.assign(config.burst, 0);
    sh->tx_queue = k < p->tx_queues ? static_cast<int>(k) : -1;
    sh->rx_queue = k < p->rx_queues ? static_cast<int>(k) : -1;
    if (sh->rx_queue >= 0) {
      sh->rx_free.assign(config.burst, nullptr);
      sh->dispatch_batch.resize(nshards > 1 ? nshards : 0);
      for (auto& b : sh->dispatch_batch) b.reserve(config.burst);
    }
    if (k > 0 || p->rx_queues > 1) {
      constexpr unsigned kSpSc = RING_F_SP_ENQ | RING_F_SC_DEQ;
      const std::string rx_name = fmt::format("droce_p{}s{}_rx", p->index, k);
      sh->rx_ring = rte_ring_create(rx_name.c_str(), ring_size, p->socket,
                                    p->rx_queues > 1 ? RING_F_SC_DEQ : kSpSc);
      if (k > 0 && sh->tx_queue < 0) {
        const std::string tx_name = fmt::format("droce_p{}s{}_tx", p->index, k);
        sh->tx_ring = rte_ring_create(tx_name.c_str(), ring_size, p->socket, kSpSc);
      }
      if (!sh->rx_ring || (k > 0 && sh->tx_queue < 0 && !sh->tx_ring)) {
        rte_ring_free(sh->rx_ring);
        rte_ring_free(sh->tx_ring);
        throw ConfigError("shards", fmt::format("cannot create the rings of shard {} of port "
                                                "'{}': {} (more EAL memory: -m)",
                                                k, p->name, rte_strerror(rte_errno)));
      }
    }
    p->shards.push_back(std::move(sh));
  }
  p->tx_from_rings.assign(config.burst, nullptr);

  PortState* raw = p.get();
  im.ports.push_back(std::move(p));
  if (im.started) im.start_port(*raw);
  for (auto& sh : raw->shards) {
    Worker* w = sh->worker;
    Shard* sp = sh.get();
    if (im.started) im.run_on(*w, [&] { w->shards.push_back(sp); });
    else w->shards.push_back(sp);
  }
  return raw->index;
}

void Engine::Impl::start_port(PortState& p) {
  if (p.started) return;
  if (int rc = rte_eth_dev_start(p.port_id); rc != 0)
    throw ConfigError("port", fmt::format("'{}': rte_eth_dev_start: {}", p.name,
                                          rte_strerror(-rc)));
  if (p.cfg.promiscuous) rte_eth_promiscuous_enable(p.port_id);  // ENOTSUP is fine
  p.started = true;
}

size_t Engine::port_count() const { return impl_->ports.size(); }
uint16_t Engine::port_id(PortIndex port) const { return impl_->port(port).port_id; }

std::array<uint8_t, 6> Engine::port_mac(PortIndex port) const {
  rte_ether_addr a{};
  rte_eth_macaddr_get(impl_->port(port).port_id, &a);
  std::array<uint8_t, 6> out{};
  std::copy(a.addr_bytes, a.addr_bytes + 6, out.begin());
  return out;
}

QpHandle Engine::create_qp(PortIndex port, const QpSpec& spec) {
  Impl& im = *impl_;
  PortState& p = im.port(port);
  if (spec.qpn && (*spec.qpn < transport::kFirstQpn || *spec.qpn > transport::kQpnMask))
    throw ConfigError("qpn", fmt::format("{:#x} is out of range: QPNs are {:#x}..{:#x} "
                                         "(0 and 1 are reserved)",
                                         *spec.qpn, transport::kFirstQpn,
                                         transport::kQpnMask));
  if (spec.caps.max_send_wr == 0 || spec.caps.max_recv_wr == 0)
    throw ConfigError("max-wr", "send and receive queues need at least one entry");
  // The shard: the one on the lcore asked for, or the next, round robin.
  Shard* shard = nullptr;
  if (spec.lcore >= 0) {
    std::string lcores;
    for (auto& sh : p.shards) {
      if (!sh->worker->use_thread && sh->worker->lcore == static_cast<unsigned>(spec.lcore))
        shard = sh.get();
      lcores += fmt::format("{}{}", lcores.empty() ? "" : ", ", sh->worker->lcore);
    }
    if (!shard)
      throw ConfigError("lcore", fmt::format("lcore {} runs no shard of port '{}' (its "
                                             "lcores: {})",
                                             spec.lcore, p.name, lcores));
  } else {
    shard = p.shards[p.next_shard++ % p.shards.size()].get();
  }
  // QPNs are unique per port across its shards (the RX lcore dispatches by
  // QPN): the engine chooses them, from 2 up, as a Device would.
  uint32_t qpn = 0;
  if (spec.qpn) {
    if (p.qp_owner.count(*spec.qpn))
      throw ConfigError("qpn", fmt::format("QPN {:#x} is already in use on port '{}'",
                                           *spec.qpn, p.name));
    qpn = *spec.qpn;
  } else {
    for (uint32_t tries = 0; tries <= transport::kQpnMask; ++tries) {
      const uint32_t c = p.next_qpn;
      p.next_qpn = (p.next_qpn + 1) & transport::kQpnMask;
      if (p.next_qpn < transport::kFirstQpn) p.next_qpn = transport::kFirstQpn;
      if (!p.qp_owner.count(c)) {
        qpn = c;
        break;
      }
    }
    if (qpn == 0) throw ConfigError("qpn", "no free QPN");
  }
  std::unique_ptr<cc::Algorithm> algo;
  try {
    algo = cc::make_algorithm(spec.cc, spec.cc_params, p.line_rate);
  } catch (const std::exception& e) {
    throw ConfigError("cc", e.what());
  }
  bool taken = false;
  im.run_on(*shard->worker, [&] {
    transport::QpInitAttr init;
    init.type = spec.type;
    init.pd = shard->pd;
    init.send_cq = shard->cq;
    init.recv_cq = shard->cq;
    init.caps = spec.caps;
    init.sq_sig_all = spec.sq_sig_all;
    transport::QueuePair* qp = shard->device->create_qp(init, qpn);
    if (!qp) {
      taken = true;
      return;
    }
    shard->qp_cc[qpn] = spec.cc;
    shard->ep->attach(*qp, std::move(algo));
  });
  if (taken)
    throw ConfigError("qpn", fmt::format("QPN {:#x} is already in use on port '{}'", qpn,
                                         p.name));
  p.qp_owner[qpn] = shard->index;
  // Frames for it reach its lcore once each lcore polling an RX queue knows
  // (until then they count as rx_unknown_qpn there, as before the QP
  // existed).
  for (auto& rx : p.shards)
    if (rx.get() != shard && rx->rx_queue >= 0)
      im.run_on(*rx->worker, [&] { rx->dispatch[qpn] = shard->index; });
  return QpHandle{port, qpn};
}

int Engine::modify_qp(QpHandle h, transport::QpState target, const transport::QpAttr& attr) {
  Impl& im = *impl_;
  PortState& p = im.port(h.port);
  Shard& s = im.owner(p, h.qpn);
  int rc = ENOENT;
  if (target == transport::QpState::kRtr && p.sharded() && wire::is_zero_mac(attr.path.dst_mac) &&
      !p.cfg.endpoint.interface.addresses.empty())
    throw ConfigError("peer_mac",
                      "a sharded port does not resolve peers' addresses: give the peer's MAC");
  im.run_on(*s.worker, [&] {
    transport::QueuePair* qp = s.device->find_qp(h.qpn);
    if (!qp) return;
    rc = qp->modify(target, attr);
    s.ep->notify(h.qpn);
  });
  return rc;
}

void Engine::ping(PortIndex port, const wire::IpAddress& dst, uint16_t sequence) {
  Impl& im = *impl_;
  Shard& s = *im.port(port).shards.front();
  im.run_on(*s.worker, [&] { s.ep->ping(dst, sequence, now_ns()); });
}

std::vector<endpoint::IpInterface::PingReply> Engine::ping_replies(PortIndex port) {
  Impl& im = *impl_;
  Shard& s = *im.port(port).shards.front();
  std::vector<endpoint::IpInterface::PingReply> out;
  im.run_on(*s.worker, [&] { s.ep->take_ping_replies(out); });
  return out;
}

int Engine::connect_qp(QpHandle h, const transport::QpAttr& attr) {
  for (auto s : {transport::QpState::kInit, transport::QpState::kRtr,
                 transport::QpState::kRts})
    if (int rc = modify_qp(h, s, attr); rc != 0) return rc;
  return 0;
}

MrInfo Engine::reg_mr(PortIndex port, const MrSpec& spec) {
  Impl& im = *impl_;
  PortState& p = im.port(port, "mr");
  if (spec.length == 0) throw ConfigError("mr", "length must be at least 1 byte");
  if (spec.length > (uint64_t{1} << 32))
    throw ConfigError("mr", fmt::format("{} bytes is larger than an MR may be (4 GiB)",
                                        spec.length));
  void* mem = rte_zmalloc_socket("droce_mr", spec.length, 64, p.socket);
  if (!mem)
    throw ConfigError("mr", fmt::format("cannot allocate {} bytes of EAL memory for the "
                                        "MR (larger than the memory given with -m or the "
                                        "hugepages?)",
                                        spec.length));
  // Every shard of the port has the MR under the same key (the memory is
  // shared, as one MR serves every QP of a real NIC's PD).
  std::vector<std::pair<Shard*, transport::MemoryRegion*>> done;
  transport::MemoryRegion* first = nullptr;
  for (auto& sh : p.shards) {
    transport::MemoryRegion* mr = nullptr;
    const std::optional<uint32_t> key = first ? std::optional(first->lkey()) : spec.key;
    Shard* s = sh.get();
    im.run_on(*s->worker, [&] {
      mr = s->device->reg_mr(s->pd, mem, spec.length, spec.access, spec.iova, key);
    });
    if (!mr) break;
    if (!first) first = mr;
    done.emplace_back(s, mr);
  }
  if (done.size() != p.shards.size()) {
    for (auto& [s, mr] : done) im.run_on(*s->worker, [&, s = s, mr = mr] { s->device->dereg_mr(mr); });
    rte_free(mem);
    if (first)
      throw ConfigError("mr", fmt::format("key {:#x} is taken on another shard of port '{}'",
                                          first->lkey(), p.name));
    throw ConfigError("mr", spec.key ? fmt::format("key {:#x} is taken or out of range "
                                                   "(slot = key >> 8 must be <= {:#x})",
                                                   *spec.key,
                                                   transport::kMaxRequestedKeySlot)
                                     : std::string("access flags refused (remote write or "
                                                   "atomic need local write)"));
  }
  im.mr_memory.push_back(mem);
  return MrInfo{port, first->addr(), first->length(), first->lkey(), first->rkey(),
                first->iova()};
}

Command& Engine::Impl::post_command(QpHandle h, CmdType type,
                                    std::span<const transport::Sge> sges,
                                    std::string_view verb, Command& c) {
  if (sges.size() > transport::kMaxSge)
    throw std::invalid_argument(
        fmt::format("{}: {} SGEs, at most {}", verb, sges.size(), transport::kMaxSge));
  c.type = type;
  c.has_ud_path = false;
  c.shard = &owner(port(h.port), h.qpn);
  c.qpn = h.qpn;
  c.num_sge = static_cast<uint32_t>(sges.size());
  std::copy_n(sges.begin(), c.num_sge, c.sge.begin());
  return c;
}

bool Engine::post_send(QpHandle h, const transport::SendWr& wr) {
  return post_send(h, std::span(&wr, 1)) == 1;
}

size_t Engine::post_send(QpHandle h, std::span<const transport::SendWr> wrs) {
  Impl& im = *impl_;
  if (wrs.empty()) return 0;
  if (im.post_batch.size() < wrs.size()) im.post_batch.resize(wrs.size());
  for (size_t i = 0; i < wrs.size(); ++i) {
    Command& c = im.post_command(h, CmdType::kPostSend, wrs[i].sg_list, "post_send",
                                 im.post_batch[i]);
    c.send = wrs[i];
    if (wrs[i].ud_path) {
      c.ud_path = *wrs[i].ud_path;
      c.has_ud_path = true;
    }
  }
  return im.enqueue(*im.post_batch[0].shard->worker, std::span(im.post_batch.data(), wrs.size()));
}

bool Engine::post_recv(QpHandle h, const transport::RecvWr& wr) {
  Impl& im = *impl_;
  Command& c = im.post_command(h, CmdType::kPostRecv, wr.sg_list, "post_recv", im.post_batch[0]);
  c.recv = wr;
  return im.enqueue(*c.shard->worker, std::span(&c, 1)) == 1;
}

bool Engine::poll() {
  Impl& im = *impl_;
  if (!im.started) return false;
  bool busy = false;
  for (auto& w : im.workers) {
    if (w->launched || w->shards.empty()) continue;
    uint64_t next;
    busy |= worker_step(*w, next);
  }
  // Telemetry reads the latest snapshot; no worker refreshes it here.
  if (im.cfg.run_to_completion && im.cfg.telemetry) {
    const uint64_t now = now_ns();
    if (now - im.rtc_snapshot_ns >= im.cfg.stats_period_ns) {
      im.rtc_snapshot_ns = now;
      stats_now();
    }
  }
  return busy;
}

size_t Engine::poll_completions(std::span<transport::WorkCompletion> out,
                                std::span<PortIndex> ports) {
  Impl& im = *impl_;
  if (im.cfg.run_to_completion) poll();
  size_t n = 0;
  for (auto& w : im.workers) {
    // Before start nobody else moves completions. After it, a worker that
    // was not launched runs to completion, and poll() just drained it.
    if (!im.started)
      for (Shard* s : w->shards) drain_cq(*w, *s);
    Completion c;
    while (n < out.size() && w->completions.pop(c)) {
      out[n] = c.wc;
      if (n < ports.size()) ports[n] = c.port;
      ++n;
    }
  }
  return n;
}

void Engine::start() {
  Impl& im = *impl_;
  if (im.started) return;
  if (im.ports_closed) throw std::logic_error("engine: start() after close_ports()");
  for (auto& p : im.ports) im.start_port(*p);
  im.started = true;
  for (auto& w : im.workers) {
    if (w->shards.empty()) continue;
    w->stop.store(false);
    // Run to completion: the application's thread drives it (poll()).
    if (w->use_thread && im.cfg.run_to_completion) continue;
    if (w->use_thread) {
      Worker* wp = w.get();
      w->thread = std::thread([wp] {
        // An EAL thread id lets the worker use the pools' per-lcore caches.
        const bool registered = rte_thread_register() == 0;
        worker_loop(*wp);
        if (registered) rte_thread_unregister();
      });
    } else if (int rc = rte_eal_remote_launch(worker_main, w.get(), w->lcore); rc != 0) {
      throw std::runtime_error(fmt::format("engine: cannot launch lcore {}: {}", w->lcore,
                                           rte_strerror(-rc)));
    }
    w->launched = true;
  }
}

void Engine::Impl::drain_rings() {
  std::array<void*, 64> tmp;
  for (auto& p : ports)
    for (auto& sh : p->shards)
      for (rte_ring* r : {sh->rx_ring, sh->tx_ring}) {
        if (!r) continue;
        unsigned n;
        while ((n = rte_ring_sc_dequeue_burst(r, tmp.data(), tmp.size(), nullptr)) > 0)
          rte_pktmbuf_free_bulk(reinterpret_cast<rte_mbuf**>(tmp.data()), n);
      }
}

void Engine::stop() {
  Impl& im = *impl_;
  if (!im.started) return;
  for (auto& w : im.workers) {
    if (!w->launched) continue;
    w->stop.store(true, std::memory_order_release);
    if (w->use_thread) {
      if (w->thread.joinable()) w->thread.join();
    } else {
      rte_eal_wait_lcore(w->lcore);
    }
    w->launched = false;
  }
  im.started = false;
  // Workers are stopped: leftover commands run here so that no posted WR
  // is silently lost, then the final snapshot.
  for (auto& w : im.workers) {
    Command c;
    while (w->commands.pop(c))
      if (c.type != CmdType::kRun) execute_post(*w, c);
  }
  // Frames in flight between a port's lcores are dropped (their mbufs go
  // back to the pool): the shards that would have handled them are stopped.
  im.drain_rings();
}

bool Engine::running() const { return impl_->started; }

void Engine::Impl::fill_snapshot(Worker& w, std::vector<PortSnapshot>& parts,
                                 std::vector<QpSnapshot>& qps) {
  for (Shard* sh : w.shards) {
    PortState* p = sh->port;
    // One part per shard; stats_now() merges the parts of a port.
    PortSnapshot ps;
    ps.index = p->index;
    ps.port_id = p->port_id;
    ps.name = p->name;
    ps.lcore = p->lcore();
    ps.endpoint = sh->ep->counters();
    ps.port = sh->counters;
    ShardSnapshot ss;
    ss.index = sh->index;
    ss.lcore = w.lcore;
    ss.tx_queue = sh->tx_queue;
    ss.rx_queue = sh->rx_queue;
    ss.rate_bytes_per_sec = sh->rate;
    ss.endpoint = ps.endpoint;
    ss.port = ps.port;
    if (sh->index == 0) {
      if (!p->closed) {
        rte_eth_stats st{};
        if (rte_eth_stats_get(p->port_id, &st) == 0) {
          ps.eth_ipackets = st.ipackets;
          ps.eth_opackets = st.opackets;
          ps.eth_ibytes = st.ibytes;
          ps.eth_obytes = st.obytes;
          ps.eth_imissed = st.imissed;
          ps.eth_ierrors = st.ierrors;
          ps.eth_oerrors = st.oerrors;
          ps.eth_rx_nombuf = st.rx_nombuf;
        }
      }
      ps.mempool_size = p->pool->size;
      ps.mempool_avail = rte_mempool_avail_count(p->pool);
      ps.link_up = sh->link_up;
      ps.neighbours.clear();
      sh->ep->interface().neighbours().for_each([&](const endpoint::Neighbour& n) {
        ps.neighbours.push_back({format_ip(n.ip), format_mac(n.mac), endpoint::to_string(n.state)});
      });
    }
    ps.next_deadline_ns = sh->ep->next_deadline();
    sh->device->for_each_qp([&](transport::QueuePair& qp) {
      QpSnapshot q;
      q.port = p->index;
      q.qpn = qp.qpn();
      q.type = qp.type();
      q.state = qp.state();
      q.dest_qpn = qp.attr().dest_qpn;
      q.next_send_psn = qp.next_send_psn();
      q.expected_psn = qp.expected_psn();
      q.send_queue_depth = qp.send_queue_depth();
      q.recv_queue_depth = qp.recv_queue_depth();
      if (auto it = sh->qp_cc.find(qp.qpn()); it != sh->qp_cc.end()) q.cc = it->second;
      if (endpoint::CcBinding* b = sh->ep->cc_of(qp.qpn()))
        q.cc_rate_bytes_per_sec = b->algorithm().rate_bytes_per_sec();
      q.lcore = w.lcore;
      q.counters = qp.counters();
      qps.push_back(std::move(q));
      ++ss.qps;
    });
    ps.shards.push_back(std::move(ss));
    parts.push_back(std::move(ps));
  }
}

Snapshot Engine::stats_now() {
  Impl& im = *impl_;
  Snapshot s;
  std::vector<PortSnapshot> parts;
  for (auto& w : im.workers) {
    std::vector<PortSnapshot> wp;
    std::vector<QpSnapshot> wq;
    im.run_on(*w, [&] { im.fill_snapshot(*w, wp, wq); });
    for (auto& p : wp) parts.push_back(std::move(p));
    for (auto& q : wq) s.qps.push_back(std::move(q));
  }
  // A port's shards, summed: counters add up, the port-wide figures (eth_*,
  // mempool) come from shard 0's part alone.
  std::sort(parts.begin(), parts.end(), [](const PortSnapshot& a, const PortSnapshot& b) {
    return a.index != b.index ? a.index < b.index
                              : a.shards.front().index < b.shards.front().index;
  });
  for (PortSnapshot& part : parts) {
    if (s.ports.empty() || s.ports.back().index != part.index) {
      s.ports.push_back(std::move(part));
      continue;
    }
    PortSnapshot& ps = s.ports.back();
    ps.endpoint += part.endpoint;
    ps.port += part.port;
    ps.next_deadline_ns = std::min(ps.next_deadline_ns, part.next_deadline_ns);
    for (auto& sh : part.shards) ps.shards.push_back(std::move(sh));
  }
  std::sort(s.qps.begin(), s.qps.end(), [](const QpSnapshot& a, const QpSnapshot& b) {
    return a.port != b.port ? a.port < b.port : a.qpn < b.qpn;
  });
  s.taken_ns = now_ns();
  {
    std::lock_guard lock(im.latest_mu);
    im.latest = s;
    im.have_latest = true;
  }
  return s;
}

Snapshot Engine::stats() {
  Impl& im = *impl_;
  {
    std::lock_guard lock(im.latest_mu);
    if (im.have_latest && im.started && now_ns() - im.latest.taken_ns < im.cfg.stats_period_ns)
      return im.latest;
  }
  return stats_now();
}

namespace {

struct InterruptThreadCall {
  const std::function<void()>* fn = nullptr;
  int fd = -1;
  std::atomic<bool> done{false};
};

void interrupt_thread_call(void* arg) {
  auto* call = static_cast<InterruptThreadCall*>(arg);
  uint64_t v = 0;
  if (::read(call->fd, &v, sizeof(v)) != sizeof(v) || call->done.load()) return;
  (*call->fn)();
  call->done.store(true, std::memory_order_release);
}

// Runs fn on DPDK's interrupt thread and waits for it. Some PMDs run their
// control path there: memif handles its peer's disconnect on it,
// unmapping the rings and freeing the queues' state, and
// rte_eth_dev_stop/close on the control thread at the same moment races
// with that (a use-after-free: SIGSEGV on the interrupt thread, or "EAL:
// Error: Invalid memory" from a double free). On the interrupt thread the
// two are serialised. The call is an eventfd interrupt source of our own
// (process-private handle, removed before rte_eal_cleanup); an EAL alarm
// was tried first, but once one has been set rte_eal_cleanup apparently wakes the
// interrupt thread, which then walks memif's leftover listener source
// while DPDK memory is unmapped (SIGSEGV in rte_intr_fd_get seen under
// gdb). If the source cannot be set up, fn runs here.
void run_on_interrupt_thread(const std::function<void()>& fn) {
  InterruptThreadCall call;
  call.fn = &fn;
  rte_intr_handle* h = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
  call.fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  const auto cleanup = [&] {
    if (call.fd >= 0) ::close(call.fd);
    if (h) rte_intr_instance_free(h);
  };
  const uint64_t one = 1;
  if (!h || call.fd < 0 || rte_intr_fd_set(h, call.fd) != 0 ||
      rte_intr_type_set(h, RTE_INTR_HANDLE_EXT) != 0 ||
      rte_intr_callback_register(h, interrupt_thread_call, &call) != 0) {
    cleanup();
    fn();
    return;
  }
  if (::write(call.fd, &one, sizeof(one)) != sizeof(one)) {
    rte_intr_callback_unregister_sync(h, interrupt_thread_call, &call);
    cleanup();
    fn();
    return;
  }
  // A wedged interrupt thread must not hang the shutdown: after 10 s the
  // source is removed (waiting for a callback that just started) and fn
  // runs here if it has not run there.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!call.done.load(std::memory_order_acquire) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  // Also waits while the callback is still returning.
  rte_intr_callback_unregister_sync(h, interrupt_thread_call, &call);
  if (!call.done.load(std::memory_order_acquire)) fn();
  cleanup();
}

}  // namespace

void Engine::close_ports() {
  Impl& im = *impl_;
  stop();
  if (im.ports_closed) return;
  stats_now();  // the final numbers, while the ports still answer
  for (auto& p : im.ports) {
    for (auto& sh : p->shards) {
      if (sh->stash_n)
        rte_pktmbuf_free_bulk(sh->stash.data(), static_cast<unsigned>(sh->stash_n));
      sh->stash_n = 0;
      // Frames still waiting for a queue that will never take them now.
      if (sh->held_n) {
        sh->counters.tx_dropped += sh->held_n;
        rte_pktmbuf_free_bulk(sh->held.data(), static_cast<unsigned>(sh->held_n));
      }
      sh->held_n = 0;
    }
    PortState& port = *p;
    run_on_interrupt_thread([&port] {
      if (port.started) rte_eth_dev_stop(port.port_id);
      rte_eth_dev_close(port.port_id);
    });
    p->closed = true;
    p->started = false;
    if (p->dumper) {
      pcap_dump_close(p->dumper);
      p->dumper = nullptr;
    }
    if (p->pcap_dead) {
      pcap_close(p->pcap_dead);
      p->pcap_dead = nullptr;
    }
  }
  im.ports_closed = true;
  // Mempool counts after closing (the snapshot above was taken before).
  std::lock_guard lock(im.latest_mu);
  for (auto& ps : im.latest.ports)
    ps.mempool_avail = rte_mempool_avail_count(im.ports[ps.index]->pool);
}

std::vector<uint32_t> Engine::mbufs_missing() {
  std::vector<uint32_t> out;
  for (auto& p : impl_->ports) {
    const uint32_t avail = rte_mempool_avail_count(p->pool);
    out.push_back(p->pool->size > avail ? p->pool->size - avail : 0);
  }
  return out;
}

}  // namespace droce::engine
