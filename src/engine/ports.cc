// Ports: bring-up (queues, pool, shards, capture) and shutdown.
// rte_intr_instance_alloc & co. (run_on_interrupt_thread) are still
// experimental in DPDK 22.11.
#ifndef ALLOW_EXPERIMENTAL_API
#define ALLOW_EXPERIMENTAL_API
#endif

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <net/if.h>
#include <rte_malloc.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "droce/options/device_args.h"
#include "engine_impl.h"

namespace droce::engine {

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

namespace {

// memif and ring: a software link to one peer, handing it whole mbufs.
bool is_point_to_point(std::string_view driver) {
  return driver == "net_memif" || driver == "net_ring";
}

// memif: a frame handed to the PMD waits in memory shared with the peer
// until the peer reads it, and closing the port unmaps that memory.
bool peer_reads_tx_in_place(std::string_view driver) { return driver == "net_memif"; }

// af_packet and tap: each TX burst is a system call (sendto, write).
bool tx_burst_is_syscall(std::string_view driver) {
  return driver == "net_af_packet" || driver == "net_tap";
}

}  // namespace

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

namespace {

// The ethdev `config.name` names (its name, or its id), once per engine,
// with the port's own options checked.
void open_port(Engine::Impl& im, PortState& port, const PortConfig& config) {
  PortState* p = &port;
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

}

// Worker lcores for the port's shards: the one polling RX first, then the
// other shards'.
std::vector<Worker*> shard_workers_for(Engine::Impl& im, const PortConfig& config) {
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
  return shard_workers;

}

// The device configured with its queues (a TX and an RX queue per shard
// where PortConfig::shard_tx / shard_rx ask for them and the PMD has them);
// the descriptor counts it takes are returned in rx_desc / tx_desc.
void configure_device(PortState& port, const PortConfig& config, size_t nshards,
                      uint16_t& rx_desc, uint16_t& tx_desc) {
  PortState* p = &port;
  const uint16_t id = p->port_id;
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
  const bool point_to_point = is_point_to_point(driver);
  p->tx_burst_is_syscall = tx_burst_is_syscall(driver);
  p->peer_reads_tx_in_place = peer_reads_tx_in_place(driver);
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
  rx_desc = config.rx_desc;
  tx_desc = config.tx_desc;
  rte_eth_dev_adjust_nb_rx_tx_desc(id, &rx_desc, &tx_desc);
  p->socket = rte_eth_dev_socket_id(id);
  if (p->socket < 0) p->socket = SOCKET_ID_ANY;

}

// The port's mbuf pool and its queues set up from it. Returns the size of
// the shards' rings.
uint32_t create_pool_and_queues(PortState& port, const PortConfig& config, size_t nshards,
                                uint16_t rx_desc, uint16_t tx_desc) {
  PortState* p = &port;
  const uint16_t id = p->port_id;
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
    try {
      p->capture = std::make_unique<telemetry::PcapWriter>(config.capture);
    } catch (const std::runtime_error& e) {
      throw ConfigError("capture", e.what());
    }
  }

  return ring_size;
}

// Shard k of the port: its endpoint, buffers, and the rings that carry its
// frames to and from the lcore that polls the port (docs/ENGINE.md
// "Sharding").
std::unique_ptr<Shard> make_shard(PortState& port, const PortConfig& config,
                                  const endpoint::EndpointConfig& ep_cfg, size_t k,
                                  size_t nshards, Worker* worker, uint32_t ring_size) {
  PortState* p = &port;
  auto sh = std::make_unique<Shard>();
  sh->port = p;
  sh->index = static_cast<uint32_t>(k);
  sh->worker = worker;
  sh->rate = ep_cfg.port_rate_bytes_per_sec;
  sh->device = std::make_unique<transport::Device>();
  sh->ep = std::make_unique<endpoint::Endpoint>(*sh->device, ep_cfg);
  sh->pd = sh->device->alloc_pd();
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
  return sh;
}

}  // namespace

PortIndex Engine::add_port(const PortConfig& config) {
  Impl& im = *impl_;
  auto p = std::make_unique<PortState>();
  p->index = static_cast<PortIndex>(im.ports.size());
  p->cfg = config;
  open_port(im, *p, config);
  const std::vector<Worker*> shard_workers = shard_workers_for(im, config);
  const size_t nshards = shard_workers.size();
  uint16_t rx_desc = 0, tx_desc = 0;
  configure_device(*p, config, nshards, rx_desc, tx_desc);
  const uint32_t ring_size = create_pool_and_queues(*p, config, nshards, rx_desc, tx_desc);
  const uint16_t id = p->port_id;
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
    p->shards.push_back(make_shard(*p, config, ep_cfg, k, nshards, shard_workers[k], ring_size));
  }
  p->tx_from_rings.assign(config.burst, nullptr);

  PortState* raw = p.get();
  // The port's own PD (the shards' first) and CQ.
  im.pds.push_back(EnginePd{static_cast<uint32_t>(im.pds.size() + 1), raw, {}});
  for (auto& sh : raw->shards) im.pds.back().per_shard.push_back(sh->pd);
  raw->pd = PdHandle{im.pds.back().id};
  im.ports.push_back(std::move(p));
  raw->cq = create_cq(config.cq_depth);
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

uint32_t Engine::port_mtu(PortIndex port) const {
  const PortState& p = impl_->port(port);
  uint16_t mtu = RTE_ETHER_MTU;
  rte_eth_dev_get_mtu(p.port_id, &mtu);
  uint32_t out = mtu;
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(p.port_id, &info) != 0) return out;
  // memif and ring hand whole mbufs to their peer: what an mbuf holds is
  // the limit, whatever MTU their device info claims (memif's 1500).
  const std::string_view driver = info.driver_name ? info.driver_name : "";
  if (is_point_to_point(driver))
    out = p.cfg.mbuf_data_bytes - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN;
  // A memif frame longer than one descriptor slot (the vdev's bsize)
  // spans slots, and the PMD's copy path marks a slot "continued" without
  // clearing the mark when the slot next carries the start of a frame: a
  // short frame on such a slot reaches the peer joined to what follows
  // (chained mbufs, dropped as rx_multiseg_dropped; then a receiver that
  // reads past the ring's head). Frames of one slot at most never meet it.
  if (driver == "net_memif" && info.device != nullptr) {
    const rte_devargs* da = rte_dev_devargs(info.device);
    const uint32_t slot =
        options::memif_slot_bytes(da != nullptr && da->args != nullptr ? da->args : "");
    // A slot holds the Ethernet header, a VLAN tag and the IP packet.
    if (slot > RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN)
      out = std::min<uint32_t>(out, slot - RTE_ETHER_HDR_LEN - RTE_VLAN_HLEN);
  }
  char name[IF_NAMESIZE] = {};
  if (info.if_index != 0 && if_indextoname(info.if_index, name) != nullptr) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq req{};
    std::memcpy(req.ifr_name, name, IF_NAMESIZE);  // both IF_NAMESIZE, NUL-terminated
    if (fd >= 0 && ::ioctl(fd, SIOCGIFMTU, &req) == 0 && req.ifr_mtu > 0)
      out = std::min<uint32_t>(out, static_cast<uint32_t>(req.ifr_mtu));
    if (fd >= 0) ::close(fd);
  }
  return out;
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

// A frame sent is on the wire: a NIC's peer receives it even if the sender
// closes right after (a ping-pong's last answer, then exit). On memif the
// wire is the shared ring, which the close takes away from a peer that has
// not read it yet (its worker asleep or descheduled). So a port whose last
// frames went out less than this long ago stays open until then.
constexpr uint64_t kLingerNs = 100'000'000;

void linger_for_the_last_frames(const std::vector<std::unique_ptr<PortState>>& ports) {
  uint64_t last = 0;
  for (const auto& p : ports) {
    if (!p->started || !p->peer_reads_tx_in_place || p->link_is_down.load()) continue;
    for (const auto& sh : p->shards) last = std::max(last, sh->last_tx_ns);
  }
  if (last == 0) return;
  const uint64_t now = now_ns();
  if (now < last + kLingerNs)
    std::this_thread::sleep_for(std::chrono::nanoseconds(last + kLingerNs - now));
}

}  // namespace

void Engine::close_ports() {
  Impl& im = *impl_;
  stop();
  if (im.ports_closed) return;
  // Answers built in the application's last pass, waiting for one more
  // (poll_tx): that pass will not come.
  for (auto& p : im.ports)
    for (auto& sh : p->shards) {
      sh->counters.tx_dropped += sh->joining;
      sh->joining = 0;
    }
  stats_now();  // the final numbers, while the ports still answer
  linger_for_the_last_frames(im.ports);
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
    if (p->capture) p->capture->close();
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
