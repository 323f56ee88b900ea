// The engine's core: EAL and the clock, the Engine's life (workers
// started and stopped), and the control plane's way to a worker (run_on).
// Ports are in ports.cc, the data path in datapath.cc, the application's
// queue objects in queues.cc, stats in snapshot.cc, DPDK telemetry in
// telemetry.cc.
#include "droce/engine/engine.h"

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "engine_impl.h"

namespace droce::engine {

namespace {

uint64_t g_tsc_base = 0;
// Nanoseconds per TSC tick in 32.32 fixed point: now_ns() multiplies rather
// than divides (a 128-bit division was most of now_ns(), which the control
// thread calls on every poll).
uint64_t g_ns_per_tick_q32 = uint64_t{1} << 32;
bool g_eal_up = false;

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

bool wait_for_link_up(uint16_t port_id, double timeout_s) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (port_link_up(port_id) != true) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

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

void Engine::Impl::run_on_shards(PortState& p, const std::function<void(Shard&)>& fn) {
  for (auto& sh : p.shards) {
    Shard* s = sh.get();
    run_on(*s->worker, [&] { fn(*s); });
  }
}

Engine::Engine(const EngineConfig& config) : impl_(std::make_unique<Impl>()) {
  impl_->cfg = config;
  unsigned lcore;
  RTE_LCORE_FOREACH_WORKER(lcore) {
    impl_->workers.push_back(
        std::make_unique<Worker>(impl_->workers.size(), lcore, false, config));
  }
  if (impl_->workers.empty())
    impl_->workers.push_back(std::make_unique<Worker>(0, rte_lcore_id(), true, config));
  impl_->events_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
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
  for (auto& [key, mr] : impl_->mrs) rte_free(mr.owned);
  for (EngineCq& cq : impl_->cqs)
    if (cq.event_fd >= 0) ::close(cq.event_fd);
  if (impl_->events_fd >= 0) ::close(impl_->events_fd);
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
    w->steppable.store(im.cfg.callers_step, std::memory_order_release);
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
    // No caller starts a pass from here on; one in a pass finishes it.
    w->steppable.store(false, std::memory_order_release);
    while (w->in_step.test_and_set(std::memory_order_acquire)) std::this_thread::yield();
    w->in_step.clear(std::memory_order_release);
    w->stop.store(true, std::memory_order_release);
    if (w->use_thread) {
      if (w->thread.joinable()) w->thread.join();
    } else {
      rte_eal_wait_lcore(w->lcore);
    }
    w->launched = false;
  }
  im.started = false;
  // Frames in flight between a port's lcores are dropped (their mbufs go
  // back to the pool): the shards that would have handled them are stopped.
  im.drain_rings();
}

bool Engine::running() const { return impl_->started; }

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

}  // namespace droce::engine
