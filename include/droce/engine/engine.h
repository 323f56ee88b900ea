// The DPDK shell around endpoints (docs/DESIGN.md "Layers"): EAL, ports,
// mempools whose mbuf data areas are the endpoint's packet buffers, one
// run-to-completion worker per lcore, and the control plane that talks to
// the workers only through Boost.Lockfree spsc_queues.
//
// Threading model:
//  - Work queues are shared with the application, as a NIC's are with its
//    host (docs/ENGINE.md "Work queues"): post_send, post_recv,
//    post_srq_recv, poll_cq and req_notify_cq may be called from any
//    thread, for any QP or CQ, at the same time; two threads posting to
//    one QP are serialised by that QP's lock alone. Posting writes the WRs
//    into the QP's rings and rings its doorbell; the QP's worker takes
//    them in batches from there. Completions are written by the workers
//    into the CQ the QP was created with and polled from it.
//  - Every other method (setup, destroy, stats, start/stop) is the control
//    plane: one thread at a time. Each worker has a command queue (control
//    -> worker) and a reply queue, single-producer / single-consumer.
//  - Before start() the control thread sets ports, QPs and MRs up directly
//    (no worker runs yet); after start() the same calls go through the
//    worker's command queue and wait for its reply.
//  - A port is polled for RX by one worker lcore (round robin over the
//    worker lcores, or PortConfig::lcore). Its QPs live on that lcore, or,
//    with PortConfig::shards > 1, are sharded over several worker lcores:
//    each shard (one per (port, lcore)) has its own transport Device,
//    endpoint and CQ, QPNs stay unique per port, MRs are registered on every
//    shard. The polling lcore reads the BTH destination QP of each frame and
//    hands frames of other shards' QPs to them through a single-producer /
//    single-consumer rte_ring; a shard transmits on a TX queue of its own
//    or, where the PMD has one TX queue, through a ring back to the polling
//    lcore. docs/ENGINE.md "Sharding" has the details and the limits.
//  - With no worker lcore (e.g. `-l 0`) one data-plane thread is started
//    and registered as an EAL thread (rte_thread_register).
//  - DPDK telemetry handlers run on DPDK's telemetry thread: they read the
//    latest stats snapshot under a mutex; they never touch a worker.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "droce/cc/params.h"
#include "droce/config_error.h"
#include "droce/endpoint/counters.h"
#include "droce/endpoint/endpoint.h"
#include "droce/transport/counters.h"
#include "droce/transport/qp.h"
#include "droce/transport/wqe.h"

namespace droce::engine {

// rte_eal_init on [EAL options] -- [app options]. Returns the index in argv
// of the app's arguments: argv[ret] is the program name, followed by the
// options after "--" (so CLI11 can parse (argc - ret, argv + ret)). Throws
// ConfigError("EAL", ...) when EAL refuses its options.
int init_eal(int argc, char** argv);
// rte_eal_cleanup (if init_eal succeeded); call once after the Engine is
// destroyed.
void cleanup_eal();

// TSC -> nanoseconds since the engine's epoch (the one clock of the data path).
uint64_t now_ns();

// How often the data path reads its ports' link state (the engine's
// shard 0 of each port, droce-switch): PFC state lives on the link, so a
// link going down ends the pauses on it (IEEE 802.1Qbb).
constexpr uint64_t kLinkPollNs = 10'000'000;
// A DPDK port's link (rte_eth_link_get_nowait, which does not wait);
// nullopt when the PMD cannot tell.
std::optional<bool> port_link_up(uint16_t port_id);
// Waits, checking every 10 ms, until the port's link is up; false when it
// is not within `timeout_s`. A memif's link comes up once its peer has
// connected, a real NIC's after autonegotiation: what is sent before is
// refused or lost, so a program waits here before its clock starts.
bool wait_for_link_up(uint16_t port_id, double timeout_s);

struct PortConfig {
  // A port name as ethdev knows it ("net_pcap0", "0000:3b:00.0", a vdev
  // given with --vdev) or a decimal port id ("0").
  std::string name;
  uint16_t rx_desc = 1024;
  uint16_t tx_desc = 1024;
  uint16_t burst = 32;
  // Mbufs in this port's pool; 0 = sized from descriptors, burst and cache.
  uint32_t mbufs = 0;
  uint32_t mempool_cache = 256;
  // Bytes of packet an mbuf holds (data room minus headroom). The default
  // fits a 4096-byte-MTU RoCEv2 frame with IPv6, VLAN and every extension
  // header.
  uint32_t mbuf_data_bytes = 4096 + 256;
  // Worker lcore of the port's first shard, which polls RX queue 0 (the
  // only one unless shard_rx gives each shard its own); -1 = next worker,
  // round robin.
  int lcore = -1;
  // Shard the port's QPs over this many worker lcores: the polling lcore
  // first, then the next workers in EAL order (wrapping). 1 = no sharding.
  // At most the number of worker lcores; ConfigError("shards") otherwise.
  uint32_t shards = 1;
  // Or name the shard lcores: lcores[0] is the first shard's (overrides
  // `lcore` and `shards`). Each must be a distinct worker lcore.
  std::vector<int> lcores;
  // How a shard other than the polling one transmits. kAuto: a TX queue of
  // its own when the PMD offers one per shard (dev_info.max_tx_queues) and
  // is not a point-to-point vdev whose TX queue i is the peer's RX queue i
  // (net_memif, net_ring: a peer polling one RX queue would never see
  // queue 1); else through a ring to the polling lcore. kQueues insists on
  // queues (ConfigError("shards") when the PMD has too few); kRing never
  // uses them.
  enum class ShardTx : uint8_t { kAuto, kQueues, kRing };
  ShardTx shard_tx = ShardTx::kAuto;
  // How received frames reach the shards. kAuto: an RX queue per shard
  // where the PMD offers RSS on the UDP ports (flow_type_rss_offloads) and
  // enough RX queues, i.e. NICs; RSS is then configured on the UDP ports
  // (RoCEv2 senders put flow entropy in the source port). Elsewhere one RX
  // queue, polled by the first shard's lcore. kQueues insists on an RX
  // queue per shard, spread however the PMD spreads them (RSS, the fanout
  // hash of net_af_packet with qpairs=N, one rx_pcap file per queue of
  // net_pcap, the peer's TX queue i on net_memif); ConfigError("shards")
  // when the PMD has too few. kOne: one RX queue. Either way each lcore
  // polling a queue hands frames for other shards' QPs over by ring, since
  // a hash does not choose the shard a QP was put on.
  enum class ShardRx : uint8_t { kAuto, kQueues, kOne };
  ShardRx shard_rx = ShardRx::kAuto;
  // The endpoint's link emulation (port rate cap, pacer granularity). The
  // loop reads its clock once per iteration, so the port and the pacers may
  // be booked up to 2 us ahead of it (EndpointConfig::tx_run_ahead_ns);
  // booked exactly, a port or QP sent one frame per iteration. A loop late
  // by more than that (descheduled) makes up to 100 us of the link time it
  // lost while frames waited (EndpointConfig::tx_catch_up_ns).
  // A QP sends up to 16 frames in a row (EndpointConfig::tx_frames_per_turn),
  // built in one go with their ICRCs computed together.
  endpoint::EndpointConfig endpoint = [] {
    endpoint::EndpointConfig c;
    c.tx_run_ahead_ns = 2000;
    c.tx_catch_up_ns = 100'000;
    c.tx_frames_per_turn = 16;
    return c;
  }();
  // The port's own completion queue: that of every QP created without
  // one (send and receive), read by poll_completions.
  uint32_t cq_depth = 65536;
  // Enable promiscuous mode (vdevs and tests; real NICs usually need it
  // unless the port MAC is the QP's source MAC).
  bool promiscuous = true;
  // The port's IP interface is endpoint.interface: its addresses (none:
  // no ARP, ND or ICMP answers, and every QP needs its peer's MAC), its
  // VLAN; its MAC is the port's unless given. A sharded port's first shard
  // answers; QPs on a sharded port need their peer's MAC.
  // pcap file of every frame the port sends and receives ("" = none).
  std::string capture;
};

// Per-port engine counters (what happened to mbufs around the endpoint).
#define DROCE_PORT_COUNTERS(X)                                                \
  X(rx_bursts)          /* rx_burst calls that returned frames */             \
  X(rx_mbufs)                                                                 \
  X(rx_multiseg_dropped) /* frames in chained mbufs: not handled */           \
  X(tx_mbufs_alloc_failed) /* transmit skipped: pool empty */                 \
  X(tx_frames)          /* frames the PMD took */                             \
  X(tx_bytes)                                                                 \
  X(tx_retries)         /* tx_burst calls that took less than offered */      \
  X(tx_held)            /* frames the TX queue did not take at once: kept */  \
  X(tx_held_ns)         /* time frames waited for the TX queue to take them */ \
  X(tx_joined)          /* answers that waited a pass of the application's loop to leave with its next frames */ \
  X(tx_dropped)         /* frames still waiting when the port closed: freed */ \
  X(tx_link_down)       /* frames sent while the link was down: discarded */ \
  X(tx_stuck)           /* frames the TX queue took none of for 200 ms: discarded */ \
  X(loops)              /* worker loop iterations over this port */           \
  X(captured)           /* frames written to the capture file */              \
  X(cq_overflows)       /* completions lost: the port's CQ was full */       \
  X(rx_dispatched)      /* sharded: frames the RX lcore handed to a shard */  \
  X(rx_dispatch_dropped) /* sharded: the shard's ring was full: freed */      \
  X(rx_from_ring)       /* sharded: frames this shard took from its ring */   \
  X(tx_to_ring)         /* sharded: frames given to the RX lcore to send */   \
  X(pfc_shared)         /* sharded: PFC frames shared with every shard */     \
  X(pfc_applied)        /* sharded: PFC updates fed to this shard */        \
  X(link_downs)         /* the port's link went down: its PFC pauses ended */

struct PortCounters {
#define DROCE_DECLARE_PORT_COUNTER(name) uint64_t name = 0;
  DROCE_PORT_COUNTERS(DROCE_DECLARE_PORT_COUNTER)
#undef DROCE_DECLARE_PORT_COUNTER
  PortCounters& operator+=(const PortCounters& o) {
#define DROCE_ADD_PORT_COUNTER(name) name += o.name;
    DROCE_PORT_COUNTERS(DROCE_ADD_PORT_COUNTER)
#undef DROCE_ADD_PORT_COUNTER
    return *this;
  }
  template <class F>
  void for_each(F&& f) const {
#define DROCE_VISIT_PORT_COUNTER(name) f(std::string_view(#name), name);
    DROCE_PORT_COUNTERS(DROCE_VISIT_PORT_COUNTER)
#undef DROCE_VISIT_PORT_COUNTER
  }
};

// Index into Engine's ports, in add_port order (not the DPDK port id).
using PortIndex = uint32_t;

struct QpHandle {
  PortIndex port = 0;
  uint32_t qpn = 0;
  bool operator==(const QpHandle&) const = default;
};
// Completion queues, shared receive queues and protection domains, by
// number (0 is none). A destroyed object's number is never given again, so
// a stale handle is an error, never another object.
struct CqHandle {
  uint32_t id = 0;
  bool operator==(const CqHandle&) const = default;
};
struct SrqHandle {
  uint32_t id = 0;
  bool operator==(const SrqHandle&) const = default;
};
struct PdHandle {
  uint32_t id = 0;
  bool operator==(const PdHandle&) const = default;
};

// Asynchronous events (ibv_get_async_event's): a CQ that overflowed (its
// QPs went to the error state as their completions failed to fit), an SRQ
// that fell below its armed limit.
struct AsyncEvent {
  enum class Kind : uint8_t { kCqError, kSrqLimitReached };
  Kind kind = Kind::kCqError;
  CqHandle cq;
  SrqHandle srq;
};

struct QpSpec {
  transport::QpType type = transport::QpType::kRc;
  transport::QpCaps caps;
  bool sq_sig_all = false;
  // The CQs its send and receive completions go to (none: the port's own,
  // which poll_completions reads), its SRQ (none: a receive queue of its
  // own, max_recv_wr deep) and its PD (none: the port's).
  CqHandle send_cq;
  CqHandle recv_cq;
  SrqHandle srq;
  PdHandle pd;
  // Ask for this QPN (config files choose them); fails if taken.
  std::optional<uint32_t> qpn;
  // Congestion control (cc::make_algorithm); line rate = the port's rate.
  std::string cc = "none";
  cc::ParamMap cc_params;
  // Sharded port: the worker lcore the QP runs on (one of the port's shard
  // lcores; ConfigError("lcore") otherwise). -1 = the port's shards round
  // robin.
  int lcore = -1;
};

struct MrSpec {
  // The application's memory, registered where it is (no copy; it must
  // stay valid until dereg_mr returns). nullptr: the engine allocates
  // `length` zeroed bytes on the port's socket and frees them at dereg.
  void* addr = nullptr;
  PdHandle pd;  // none: the port's
  size_t length = 0;
  uint32_t access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  std::optional<uint32_t> key;   // ask for this lkey/rkey
  std::optional<uint64_t> iova;  // default: the host address
};

// Registered memory. The app may read and write [addr, addr + length)
// between its own WRs, as with a real RDMA NIC.
struct MrInfo {
  PortIndex port = 0;
  uint8_t* addr = nullptr;
  size_t length = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint64_t iova = 0;
};

struct QpSnapshot {
  PortIndex port = 0;
  uint32_t qpn = 0;
  transport::QpType type = transport::QpType::kRc;
  transport::QpState state = transport::QpState::kReset;
  uint32_t dest_qpn = 0;
  uint32_t next_send_psn = 0;
  uint32_t expected_psn = 0;
  uint32_t send_queue_depth = 0;
  uint32_t recv_queue_depth = 0;
  std::string cc;
  uint64_t cc_rate_bytes_per_sec = 0;
  unsigned lcore = 0;  // the worker lcore the QP runs on
  transport::QpCounters counters;
};

// One shard of a port: the QPs one worker lcore runs for it.
struct ShardSnapshot {
  uint32_t index = 0;  // 0 = the lcore that polls RX queue 0
  unsigned lcore = 0;
  uint32_t qps = 0;
  // TX queue the shard transmits on; -1: through the ring to shard 0.
  int tx_queue = 0;
  // RX queue the shard polls; -1: it gets frames only through its ring.
  int rx_queue = 0;
  uint64_t rate_bytes_per_sec = 0;  // its share of the port rate (0 = none)
  endpoint::EndpointCounters endpoint;
  PortCounters port;
};

struct NeighbourSnapshot {
  std::string ip;
  std::string mac;
  std::string state;  // endpoint::NeighbourState, as to_string names it
};

struct PortSnapshot {
  PortIndex index = 0;
  uint16_t port_id = 0;
  std::string name;
  unsigned lcore = 0;  // the lcore that polls RX (shard 0)
  // Summed over the shards.
  endpoint::EndpointCounters endpoint;
  PortCounters port;
  // One entry per shard (one for an unsharded port), by index.
  std::vector<ShardSnapshot> shards;
  // rte_eth_stats_get.
  uint64_t eth_ipackets = 0, eth_opackets = 0, eth_ibytes = 0, eth_obytes = 0,
           eth_imissed = 0, eth_ierrors = 0, eth_oerrors = 0, eth_rx_nombuf = 0;
  uint32_t mempool_size = 0;
  uint32_t mempool_avail = 0;  // mbufs in the pool (and its caches)
  // The link at the last poll (every 10 ms, rte_eth_link_get_nowait); a
  // vdev without link state reports up.
  bool link_up = true;
  // Endpoint::next_deadline(): UINT64_MAX when the port has nothing due
  // until a frame arrives or a WR is posted.
  uint64_t next_deadline_ns = UINT64_MAX;
  // The IP interface's neighbour cache (the first shard's), by address.
  std::vector<NeighbourSnapshot> neighbours;
};

struct Snapshot {
  uint64_t taken_ns = 0;  // now_ns() when the workers filled it
  std::vector<PortSnapshot> ports;
  std::vector<QpSnapshot> qps;
};

struct EngineConfig {
  // Worker sleeps this long when it has nothing due and RX was empty
  // (0 = busy poll, what a testbed wants; > 0 shares a CPU).
  uint32_t idle_sleep_us = 0;
  // Run to completion (DPDK's and eRPC's model): a port with no worker
  // lcore of its own gets no worker thread; the application's thread runs
  // the data path itself, in poll() and poll_completions(). A worker
  // thread next to the application's on one CPU gets the CPU only when
  // the scheduler preempts one for the other, which turned every round
  // trip into milliseconds; driven from the application's loop it takes
  // microseconds. Every wait of the application must then call poll().
  bool run_to_completion = false;
  // Workers run, and the application's calls lend them a hand: a post runs
  // one pass of its QP's worker's data path after ringing the doorbell,
  // and poll_cq / poll_completions one pass of every worker before they
  // look, each only when no other thread is in that worker's pass. A
  // posted WR then leaves from the poster's thread and an arriving answer
  // completes in the poller's, without waiting for a worker that sleeps
  // when idle or shares a CPU with the application; and an application
  // that polls without pause spends that CPU on the NIC's work instead of
  // on spinning beside it. The worker still runs the data path whenever
  // the application calls nothing (servers that only wait).
  bool callers_step = false;
  // How often the workers refresh the stats snapshot telemetry reads.
  uint64_t stats_period_ns = 100'000'000;
  // Register /droce/* DPDK telemetry commands.
  bool telemetry = true;
  size_t command_queue_depth = 4096;
};

class Engine {
 public:
  // EAL must be initialised (init_eal). At most one Engine per process.
  explicit Engine(const EngineConfig& config = {});
  ~Engine();  // stop(), then release QPs, MRs, ports and pools
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // ---- setup (before or after start)
  // Configures and (at start) starts the port with one RX queue, one TX
  // queue (or one per shard, see PortConfig::shard_tx) and its own
  // mempool. ConfigError("shards", ...) / ("lcore", ...) for shard lcores
  // that are not distinct worker lcores. Throws ConfigError("port", ...) for a port that
  // does not exist, ConfigError("mbufs", ...) when the pool cannot be made.
  PortIndex add_port(const PortConfig& config);
  size_t port_count() const;
  uint16_t port_id(PortIndex port) const;
  // The port's MAC address.
  std::array<uint8_t, 6> port_mac(PortIndex port) const;
  // The largest IP packet the port carries: the device's MTU (for memif
  // and ring, what a port's mbuf holds; for memif also what one of its
  // descriptor slots holds, the vdev's bsize), and for a PMD over a kernel
  // interface (net_af_packet, net_tap: the device info names its ifindex)
  // no more than that interface's MTU, which frames beyond it do not pass.
  uint32_t port_mtu(PortIndex port) const;

  // Throws ConfigError("qpn", ...) for a requested QPN that is out of
  // range or taken, ConfigError("cc", ...) for CC errors,
  // ConfigError("cq"/"srq"/"pd"/"max-inline-data"/"max-sge", ...) for a
  // CQ, SRQ or PD that does not exist or capabilities beyond the limits.
  QpHandle create_qp(PortIndex port, const QpSpec& spec);
  // With traffic flowing: the QP's outstanding WRs complete with
  // IBV_WC_WR_FLUSH_ERR in its CQs, then it is gone. 0, or ENOENT for a
  // QP that does not exist (any more). Posting to it afterwards: ENOENT.
  int destroy_qp(QpHandle qp);
  // Protection domains: objects of one PD cannot use another's MRs (IBA
  // 10.2.3). Every port has one of its own (the default in specs).
  // dealloc_pd: 0, EBUSY while a QP, SRQ or MR uses it, ENOENT.
  PdHandle alloc_pd(PortIndex port);
  int dealloc_pd(PdHandle pd);

  // Completion queues (ibv_create_cq): `depth` completions; QPs of any
  // port may feed it. Throws ConfigError("cq-depth") for 0.
  CqHandle create_cq(uint32_t depth);
  // 0, EBUSY while a QP sends or receives into it, ENOENT.
  int destroy_cq(CqHandle cq);
  // Any thread: up to out.size() completions, oldest first per QP; -ENOENT
  // for a CQ that does not exist. A CQ that overflowed keeps what it held
  // and takes nothing more (AsyncEvent kCqError).
  int poll_cq(CqHandle cq, std::span<transport::WorkCompletion> out);
  // Any thread: arm the CQ (ibv_req_notify_cq); the next completion (with
  // `solicited_only`, the next solicited or unsuccessful one) makes
  // cq_event_fd() readable (an eventfd: read 8 bytes to consume). Poll
  // once more after arming: a completion that came before is not an event.
  int req_notify_cq(CqHandle cq, bool solicited_only);
  int cq_event_fd(CqHandle cq) const;  // -1 for no such CQ

  // Shared receive queues (ibv_create_srq) of `pd` on `port`: QPs created
  // with it take their receive WQEs from it. Throws ConfigError("srq").
  SrqHandle create_srq(PortIndex port, uint32_t max_wr, PdHandle pd = {});
  // 0, EBUSY while a QP uses it, ENOENT.
  int destroy_srq(SrqHandle srq);
  // Any thread: as post_recv.
  int post_srq_recv(SrqHandle srq, std::span<const transport::RecvWr> wrs,
                    size_t* posted = nullptr);
  // ibv_modify_srq(IBV_SRQ_LIMIT): an AsyncEvent kSrqLimitReached when
  // fewer than `limit` WQEs are left, once per arming. EINVAL beyond its
  // depth.
  int arm_srq_limit(SrqHandle srq, uint32_t limit);

  // Asynchronous events since the last call; async_event_fd() (an
  // eventfd) is readable while there are some.
  std::vector<AsyncEvent> take_async_events();
  int async_event_fd() const;
  // 0 or the transport's errno (EINVAL for a refused transition).
  int modify_qp(QpHandle qp, transport::QpState target, const transport::QpAttr& attr);
  // RESET -> INIT -> RTR -> RTS (UD too) with one attribute set.
  int connect_qp(QpHandle qp, const transport::QpAttr& attr);
  // Any thread: the state the QP is in now, its own moves included (to
  // ERR on a failed WR, IBA 10.3.1), as ibv_query_qp reports it; nullopt
  // for a QP that does not exist.
  std::optional<transport::QpState> qp_state(QpHandle qp) const;
  // MrSpec::addr, or memory from rte_malloc on the port's socket, zeroed.
  // Throws ConfigError("mr", ...) when there is no memory for it, the key
  // is refused or the PD does not exist.
  MrInfo reg_mr(PortIndex port, const MrSpec& spec);
  // When it returns, no packet reads or writes the region any more
  // (requests naming it are NAKed, WRs naming it fail). 0, or ENOENT.
  int dereg_mr(const MrInfo& mr);

  // ICMP echo from the port's IP interface (its first shard) to `dst`,
  // resolving its MAC first if need be; the replies that came back since
  // the last call, with their round trips.
  void ping(PortIndex port, const wire::IpAddress& dst, uint16_t sequence);
  std::vector<endpoint::IpInterface::PingReply> ping_replies(PortIndex port);

  // ---- work requests (any thread)
  // A list of WRs for one QP, as ibv_post_send takes a chain: written into
  // the QP's send queue in order, then one doorbell. Returns 0, or the
  // verbs error of the first WR not queued (*posted tells how many were,
  // from the front): ENOMEM the queue is full (poll, post the rest again),
  // EINVAL a bad WR (opcode for the QP type, too many SGEs, a bad lkey or
  // range, too long, inline data beyond max_inline_data, the QP's state),
  // ENOENT no such QP.
  int post_send(QpHandle qp, std::span<const transport::SendWr> wrs,
                size_t* posted = nullptr);
  int post_recv(QpHandle qp, std::span<const transport::RecvWr> wrs,
                size_t* posted = nullptr);
  // Completions in the ports' own CQs (QPs created without a CQ), oldest
  // first per QP. The port index of each completion is written to
  // ports[i] when given.
  // Run to completion (EngineConfig::run_to_completion): one pass of the
  // data path (RX, timers, TX, completions) of every port without a worker
  // thread; poll_completions() makes one too. Returns whether it did
  // anything. A no-op for ports that have a worker.
  bool poll();
  size_t poll_completions(std::span<transport::WorkCompletion> out,
                          std::span<PortIndex> ports = {});

  // ---- running
  void start();  // starts ports and launches workers
  // Asks workers to stop and waits; drains nothing. Idempotent.
  void stop();
  bool running() const;

  // The latest snapshot the workers produced (at most stats_period old);
  // before start() it is taken directly.
  Snapshot stats();
  // Refresh now (waits for every worker's reply).
  Snapshot stats_now();
  // Mbufs missing from each port's pool; valid after stop() has been
  // called and the ports closed (close_ports()). Empty vector = no port.
  std::vector<uint32_t> mbufs_missing();
  // Stops and closes every port (flushes pcap vdev output). After this only
  // stats()/mbufs_missing() may be called.
  void close_ports();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Console helpers shared by apps.
// One line per port per call ("--stats-interval"): rates since `prev`.
std::string format_live_stats(const Snapshot& prev, const Snapshot& cur);
// Everything in a snapshot, human readable: endpoint, port and per-QP
// counters (zeros omitted when `skip_zero`).
std::string format_counters(const Snapshot& s, bool skip_zero = true);
// Snapshot as JSON (for --json output and telemetry).
std::string to_json(const Snapshot& s);

}  // namespace droce::engine
