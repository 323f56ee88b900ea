// The engine's internals, shared by its files (src/engine/*.cc): the
// data path's per-port and per-shard state, the workers, the application's
// queue objects and Engine::Impl. Not installed; nothing outside
// src/engine includes it.
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include <array>
#include <atomic>
#include <boost/lockfree/spsc_queue.hpp>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "droce/telemetry/pcap_writer.h"
#include "droce/endpoint/doorbell.h"
#include "droce/engine/engine.h"
#include "droce/transport/device.h"
#include "droce/wire/pfc.h"

namespace droce::engine {

struct Worker;
struct PortState;

// A spin lock for the few instructions a poster holds it: posters of one
// QP, pollers of one CQ.
class SpinLock {
 public:
  void lock() {
    while (flag_.test_and_set(std::memory_order_acquire))
      while (flag_.test(std::memory_order_relaxed)) {
      }
  }
  void unlock() { flag_.clear(std::memory_order_release); }

 private:
  std::atomic_flag flag_ = ATOMIC_FLAG_INIT;
};

// What posters on any thread need of a QP: its transport object, its
// shard (whose endpoint the doorbell rings) and the lock that serialises
// them. Entries live as long as the engine (a QPN used again reuses its
// entry), so a poster holding one never holds freed memory; `qp` is
// cleared under the lock before the QP goes.
struct QpEntry {
  SpinLock lock;
  transport::QueuePair* qp = nullptr;  // null: no QP (any more)
  struct Shard* shard = nullptr;
  endpoint::DoorbellNode doorbell;
};

// QPN -> QpEntry in two levels of 4096, the second allocated when a QPN in
// it is first used: lookups are two loads, with no lock, from any thread.
class QpTable {
 public:
  static constexpr uint32_t kChunkBits = 12;
  static constexpr uint32_t kChunk = 1u << kChunkBits;
  QpTable() = default;
  QpTable(const QpTable&) = delete;
  ~QpTable() {
    for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
  }
  // Any thread; null when no QP ever had this QPN.
  QpEntry* find(uint32_t qpn) const {
    if (qpn > transport::kQpnMask) return nullptr;
    QpEntry* c = chunks_[qpn >> kChunkBits].load(std::memory_order_acquire);
    return c ? &c[qpn & (kChunk - 1)] : nullptr;
  }
  // The control thread.
  QpEntry& at(uint32_t qpn) {
    auto& slot = chunks_[qpn >> kChunkBits];
    QpEntry* c = slot.load(std::memory_order_relaxed);
    if (!c) {
      c = new QpEntry[kChunk];
      for (uint32_t i = 0; i < kChunk; ++i) c[i].doorbell.qpn = (qpn & ~(kChunk - 1)) | i;
      slot.store(c, std::memory_order_release);
    }
    return c[qpn & (kChunk - 1)];
  }

 private:
  std::array<std::atomic<QpEntry*>, (transport::kQpnMask >> kChunkBits) + 1> chunks_{};
};

// An application's completion queue: one ring per worker whose QPs feed
// it (each ring has one producer, its worker), polled in turn by whoever
// polls. Kept after destroy_cq (marked destroyed) so a stale handle finds
// it and is refused.
struct EngineCq {
  uint32_t id = 0;
  Engine::Impl* engine = nullptr;
  uint32_t depth = 0;
  SpinLock poll_lock;           // pollers, and the rings' list
  std::vector<std::unique_ptr<transport::CompletionQueue>> rings;  // by worker index
  std::vector<transport::CompletionQueue*> active;  // the rings made, in order
  size_t next_ring = 0;         // where the next poll starts (fairness)
  int event_fd = -1;            // req_notify_cq's events
  uint32_t users = 0;           // QPs (control thread)
  bool destroyed = false;       // under poll_lock
  // The last req_notify_cq, for a worker's ring made after it: it is armed
  // the same way (a spurious event is harmless, a missing one hangs).
  bool armed = false;
  bool armed_solicited = false;
};

// An application's shared receive queue, on one shard (its QPs go there).
struct EngineSrq {
  uint32_t id = 0;
  Engine::Impl* engine = nullptr;
  PortState* port = nullptr;
  struct Shard* shard = nullptr;
  SpinLock post_lock;
  transport::SharedReceiveQueue* srq = nullptr;  // null once destroyed
  uint32_t pd = 0;
};

// A protection domain: the transport PD of each of its port's shards.
struct EnginePd {
  uint32_t id = 0;
  PortState* port = nullptr;
  std::vector<transport::ProtectionDomain*> per_shard;  // empty once freed
};

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
  // The port's PD on this shard's Device.
  transport::ProtectionDomain* pd = nullptr;
  std::unordered_map<uint32_t, std::string> qp_cc;  // qpn -> CC name
  PortCounters counters;
  // Pre-allocated mbufs whose data areas the endpoint may fill: kept across
  // loop iterations so that an idle port does not allocate and free.
  std::vector<rte_mbuf*> stash;
  size_t stash_n = 0;
  // The first `joining` of the stash are frames built in the previous
  // pass of an application's own loop, waiting to leave with what it
  // posts in answer (poll_tx).
  size_t joining = 0;
  // Frames the TX queue (or the ring to shard 0) did not take yet, in
  // order: they go first on the next pass, and until they have gone the
  // endpoint makes no new ones, so the QPs wait. A NIC whose ring is full
  // waits; it never drops its own frames. At most a burst of this shard's
  // and a burst from the other shards' rings.
  std::vector<rte_mbuf*> held;
  size_t held_n = 0;
  uint64_t held_since = 0;  // when the oldest held frame began to wait
  uint64_t last_tx_ns = 0;  // when the PMD last took frames from this shard
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
  // Every tx_burst is a system call (net_af_packet's sendto, net_tap's
  // write): worth joining an answer with the application's next frames.
  bool tx_burst_is_syscall = false;
  // The peer reads sent frames from memory the close unmaps (net_memif):
  // the port lingers before it closes (Engine::close_ports).
  bool peer_reads_tx_in_place = false;
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
  // The link is down now, having been up (shard 0 reads it; every shard
  // that sends checks it): frames sent then are discarded, as a NIC's MAC
  // discards them.
  std::atomic<bool> link_is_down{false};
  // When shard 0 last saw the link come up (now_ns), 0 until it first has:
  // before that, frames wait for the link instead of being discarded, and
  // a held frame's stuck time counts from it (flush_held).
  std::atomic<uint64_t> link_up_ns{0};
  std::mutex capture_mu;  // shards transmit on several lcores
  std::unique_ptr<telemetry::PcapWriter> capture;  // --capture
  bool started = false;
  bool closed = false;
  bool sharded() const { return shards.size() > 1; }
  unsigned lcore() const;
  // The port's own CQ and PD (QpSpec/MrSpec without one).
  CqHandle cq;
  PdHandle pd;
  // Every QP of the port by QPN, for posters on any thread.
  QpTable qps;
};

enum class CmdType : uint8_t { kRun };

struct Command {
  CmdType type = CmdType::kRun;
  uint64_t seq = 0;
  std::function<void()>* fn = nullptr;  // lives on the waiting control thread
};

struct Worker {
  Worker(size_t index_, unsigned lcore_id, bool thread, const EngineConfig& c)
      : index(index_),
        lcore(lcore_id),
        use_thread(thread),
        commands(c.command_queue_depth),
        replies(64) {}
  size_t index;  // in Impl::workers
  unsigned lcore;
  bool use_thread;  // no worker lcore: a registered non-EAL thread
  std::vector<Shard*> shards;
  boost::lockfree::spsc_queue<Command> commands;
  boost::lockfree::spsc_queue<uint64_t> replies;
  std::atomic<bool> stop{false};
  std::atomic<bool> running{false};
  bool launched = false;
  // One pass of the data path at a time: the worker's own, or a caller's
  // (EngineConfig::callers_step), which takes it only when it is free and
  // only while `steppable` (the worker running; cleared before it stops).
  std::atomic_flag in_step = ATOMIC_FLAG_INIT;
  std::atomic<bool> steppable{false};
  std::thread thread;
  // Commands are taken from the queue up to 64 at a time: one exchange of
  // the queue's indices per batch, not per command.
  std::vector<Command> cmd_buf = std::vector<Command>(64);
  uint32_t idle_sleep_us = 0;
};

inline unsigned PortState::lcore() const { return shards.front()->worker->lcore; }

// A registered region: which shards' Devices have it, and whether the
// engine allocated its memory.
struct EngineMr {
  PortState* port = nullptr;
  void* owned = nullptr;  // rte_malloc'ed by reg_mr, freed by dereg_mr
};

struct Engine::Impl {
  EngineConfig cfg;
  std::vector<std::unique_ptr<PortState>> ports;
  std::vector<std::unique_ptr<Worker>> workers;
  size_t next_worker = 0;
  bool started = false;
  bool ports_closed = false;
  uint64_t seq = 0;
  // Registered regions by (port, key).
  std::map<std::pair<PortIndex, uint32_t>, EngineMr> mrs;
  // CQs, SRQs and PDs by id - 1; ids are never reused. Read by any thread
  // (post, poll): a deque keeps elements where they are as it grows, and
  // `*_count` (release) says how many a reader may look at.
  std::deque<EngineCq> cqs;
  std::atomic<size_t> cq_count{0};
  std::deque<EngineSrq> srqs;
  std::atomic<size_t> srq_count{0};
  std::deque<EnginePd> pds;
  // Asynchronous events, written by workers.
  std::mutex events_mu;
  std::vector<AsyncEvent> events;
  int events_fd = -1;
  // Run to completion: one thread at a time runs the data path inline.
  std::atomic_flag inline_pass = ATOMIC_FLAG_INIT;
  Snapshot latest;
  std::mutex latest_mu;  // latest is read by the telemetry thread
  bool have_latest = false;
  uint64_t rtc_snapshot_ns = 0;  // run to completion: poll() took a snapshot

  // Runs fn on the worker (inline before start) and waits.
  void run_on(Worker& w, std::function<void()> fn);
  // Runs fn on every shard of `p`, each on its worker.
  void run_on_shards(PortState& p, const std::function<void(Shard&)>& fn);
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
  EngineCq* cq(CqHandle h) {
    return h.id == 0 || h.id > cq_count.load(std::memory_order_acquire) ? nullptr
                                                                         : &cqs[h.id - 1];
  }
  EngineSrq* srq(SrqHandle h) {
    return h.id == 0 || h.id > srq_count.load(std::memory_order_acquire) ? nullptr
                                                                          : &srqs[h.id - 1];
  }
  EnginePd* pd(PdHandle h) { return h.id == 0 || h.id > pds.size() ? nullptr : &pds[h.id - 1]; }
  // The ring of `cq` that worker `w` writes, made on first use.
  transport::CompletionQueue* ring_for(EngineCq& cq, Worker& w);
  // EngineConfig::callers_step: a pass of each running worker's data
  // path that no other thread is in.
  void step_workers_for_caller();
  void post_event(const AsyncEvent& e);
  // poll_cq without the inline data path pass.
  int poll_rings(EngineCq& c, std::span<transport::WorkCompletion> out);
  void start_port(PortState& p);
  void fill_snapshot(Worker& w, std::vector<PortSnapshot>& ports, std::vector<QpSnapshot>& qps);
  void drain_rings();
};

// ---- shared between the engine's files

// The engine running (telemetry reads its snapshot).
extern Engine::Impl* g_engine;
extern std::mutex g_engine_mu;
void register_telemetry();
// "name (id), ..." of every ethdev port, for error messages.
std::string port_names();
uint16_t queues_for_shards(std::string_view dir, uint16_t available, size_t nshards,
                           bool insist, bool want, const std::string& port,
                           std::string_view driver);
// One pass of a worker's data path; `next` gets the earliest deadline.
// `app_loop`: the pass is one of the application's own loop
// (Engine::poll), which comes back for the next one.
bool worker_step(Worker& w, uint64_t& next, bool app_loop = false);
// A caller's pass of a running worker's data path (EngineConfig::
// callers_step): false without doing anything when the worker is not
// running or another thread is in a pass.
bool step_for_caller(Worker& w);
void worker_loop(Worker& w);
int worker_main(void* arg);

}  // namespace droce::engine
