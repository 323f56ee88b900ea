// The application's side of the NIC (docs/ENGINE.md "Work queues"): QPs,
// CQs, SRQs, PDs and MRs, made and destroyed by the control plane on the
// workers that run them; WRs posted into the QPs' rings from any thread,
// with a doorbell; completions polled from the CQs' rings by any thread.
#include <rte_malloc.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <mutex>

#include "droce/cc/registry.h"
#include "engine_impl.h"

namespace droce::engine {

namespace {

// The CQ notifier (transport::CompletionQueue::Notifier): one event on the
// CQ's eventfd, from the worker that pushed the completion.
void signal_cq_event(void* ctx, transport::CompletionQueue&) {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(static_cast<EngineCq*>(ctx)->event_fd, &one, sizeof one);
}

// The CQ's error notifier: a ring overflowed (IBV_EVENT_CQ_ERR).
void signal_cq_error(void* ctx, transport::CompletionQueue&) {
  auto* c = static_cast<EngineCq*>(ctx);
  c->engine->post_event(AsyncEvent{AsyncEvent::Kind::kCqError, {c->id}, {}});
}

}  // namespace

void Engine::Impl::post_event(const AsyncEvent& e) {
  {
    std::lock_guard lock(events_mu);
    events.push_back(e);
  }
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(events_fd, &one, sizeof one);
}

transport::CompletionQueue* Engine::Impl::ring_for(EngineCq& c, Worker& w) {
  std::lock_guard lock(c.poll_lock);
  if (c.rings.size() <= w.index) c.rings.resize(w.index + 1);
  auto& r = c.rings[w.index];
  if (!r) {
    r = std::make_unique<transport::CompletionQueue>(c.depth);
    r->set_notifier(signal_cq_event, &c);
    r->set_error_notifier(signal_cq_error, &c);
    c.active.push_back(r.get());
    if (c.armed) r->arm(c.armed_solicited);
  }
  return r.get();
}

// ---- protection domains ------------------------------------------------------

PdHandle Engine::alloc_pd(PortIndex port) {
  Impl& im = *impl_;
  PortState& p = im.port(port, "pd");
  EnginePd pd{static_cast<uint32_t>(im.pds.size() + 1), &p, {}};
  pd.per_shard.resize(p.shards.size());
  im.run_on_shards(p, [&](Shard& s) { pd.per_shard[s.index] = s.device->alloc_pd(); });
  im.pds.push_back(std::move(pd));
  return PdHandle{im.pds.back().id};
}

int Engine::dealloc_pd(PdHandle h) {
  Impl& im = *impl_;
  EnginePd* pd = im.pd(h);
  if (!pd || pd->per_shard.empty()) return ENOENT;
  if (h == pd->port->pd) return EBUSY;  // the port's own lives with the port
  // Busy on any shard (a QP lives on one, an MR on all): freed on none.
  bool busy = false;
  im.run_on_shards(*pd->port, [&](Shard& s) {
    busy |= s.device->pd_in_use(pd->per_shard[s.index]);
  });
  if (busy) return EBUSY;
  im.run_on_shards(*pd->port,
                   [&](Shard& s) { s.device->dealloc_pd(pd->per_shard[s.index]); });
  pd->per_shard.clear();
  return 0;
}

// ---- completion queues -------------------------------------------------------

CqHandle Engine::create_cq(uint32_t depth) {
  Impl& im = *impl_;
  if (depth == 0) throw ConfigError("cq-depth", "must be at least 1");
  EngineCq& c = im.cqs.emplace_back();
  c.id = static_cast<uint32_t>(im.cqs.size());
  c.engine = &im;
  c.depth = depth;
  c.event_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  im.cq_count.store(im.cqs.size(), std::memory_order_release);
  return CqHandle{c.id};
}

int Engine::destroy_cq(CqHandle h) {
  Impl& im = *impl_;
  EngineCq* c = im.cq(h);
  if (!c || c->destroyed) return ENOENT;
  for (auto& p : im.ports)
    if (p->cq == h) return EBUSY;  // a port's own goes with the port
  if (c->users > 0) return EBUSY;
  std::lock_guard lock(c->poll_lock);
  c->destroyed = true;
  c->active.clear();
  c->rings.clear();
  return 0;
}

void Engine::Impl::step_workers_for_caller() {
  for (auto& w : workers)
    if (!w->shards.empty()) step_for_caller(*w);
}

int Engine::poll_cq(CqHandle h, std::span<transport::WorkCompletion> out) {
  Impl& im = *impl_;
  if (im.cfg.run_to_completion) poll();
  else if (im.cfg.callers_step) im.step_workers_for_caller();
  EngineCq* c = im.cq(h);
  return c ? im.poll_rings(*c, out) : -ENOENT;
}

int Engine::Impl::poll_rings(EngineCq& c, std::span<transport::WorkCompletion> out) {
  std::lock_guard lock(c.poll_lock);
  if (c.destroyed) return -ENOENT;
  const size_t nrings = c.active.size();
  size_t n = 0;
  // Round robin over the workers' rings, starting one further each time,
  // so that one busy worker does not starve another's completions.
  for (size_t k = 0; k < nrings && n < out.size(); ++k) {
    transport::CompletionQueue* r = c.active[(c.next_ring + k) % nrings];
    n += static_cast<size_t>(r->poll(out.subspan(n)));
  }
  if (nrings) c.next_ring = (c.next_ring + 1) % nrings;
  return static_cast<int>(n);
}

int Engine::req_notify_cq(CqHandle h, bool solicited_only) {
  Impl& im = *impl_;
  EngineCq* c = im.cq(h);
  if (!c) return ENOENT;
  std::lock_guard lock(c->poll_lock);
  if (c->destroyed) return ENOENT;
  c->armed = true;
  c->armed_solicited = solicited_only;
  for (transport::CompletionQueue* r : c->active) r->arm(solicited_only);
  return 0;
}

int Engine::cq_event_fd(CqHandle h) const {
  EngineCq* c = impl_->cq(h);
  return c && !c->destroyed ? c->event_fd : -1;
}

// ---- shared receive queues ---------------------------------------------------

SrqHandle Engine::create_srq(PortIndex port, uint32_t max_wr, PdHandle pd_h) {
  Impl& im = *impl_;
  PortState& p = im.port(port, "srq");
  if (max_wr == 0) throw ConfigError("srq", "max_wr must be at least 1");
  EnginePd* pd = im.pd(pd_h.id ? pd_h : p.pd);
  if (!pd || pd->port != &p || pd->per_shard.empty())
    throw ConfigError("pd", fmt::format("no PD {} on port '{}'", pd_h.id, p.name));
  // The SRQ lives on one shard, and its QPs with it: one consumer.
  Shard& s = *p.shards[p.next_shard++ % p.shards.size()];
  EngineSrq& q = im.srqs.emplace_back();
  q.id = static_cast<uint32_t>(im.srqs.size());
  q.engine = &im;
  q.port = &p;
  q.shard = &s;
  q.pd = pd->id;
  im.run_on(*s.worker, [&] {
    q.srq = s.device->create_srq(pd->per_shard[s.index], max_wr);
    q.srq->set_limit_notifier(
        [](void* ctx, transport::SharedReceiveQueue&) {
          auto* e = static_cast<EngineSrq*>(ctx);
          e->engine->post_event(AsyncEvent{AsyncEvent::Kind::kSrqLimitReached, {}, {e->id}});
        },
        &q);
  });
  im.srq_count.store(im.srqs.size(), std::memory_order_release);
  return SrqHandle{q.id};
}

int Engine::destroy_srq(SrqHandle h) {
  Impl& im = *impl_;
  EngineSrq* q = im.srq(h);
  if (!q) return ENOENT;
  std::lock_guard lock(q->post_lock);
  if (!q->srq) return ENOENT;
  int rc = 0;
  im.run_on(*q->shard->worker, [&] { rc = q->shard->device->destroy_srq(q->srq); });
  if (rc == 0) q->srq = nullptr;
  return rc;
}

int Engine::post_srq_recv(SrqHandle h, std::span<const transport::RecvWr> wrs,
                          size_t* posted) {
  if (posted) *posted = 0;
  EngineSrq* q = impl_->srq(h);
  if (!q) return ENOENT;
  std::lock_guard lock(q->post_lock);
  if (!q->srq) return ENOENT;
  for (size_t i = 0; i < wrs.size(); ++i) {
    if (int rc = q->srq->post(wrs[i]); rc != 0) return rc;
    if (posted) *posted = i + 1;
  }
  return 0;
}

int Engine::arm_srq_limit(SrqHandle h, uint32_t limit) {
  EngineSrq* q = impl_->srq(h);
  if (!q) return ENOENT;
  std::lock_guard lock(q->post_lock);
  return q->srq ? q->srq->arm_limit(limit) : ENOENT;
}

std::vector<AsyncEvent> Engine::take_async_events() {
  Impl& im = *impl_;
  uint64_t v;
  [[maybe_unused]] ssize_t n = ::read(im.events_fd, &v, sizeof v);
  std::lock_guard lock(im.events_mu);
  return std::exchange(im.events, {});
}

int Engine::async_event_fd() const { return impl_->events_fd; }

// ---- queue pairs -------------------------------------------------------------

namespace {

// The QPN a new QP of `p` gets: the one asked for, or the next free one
// from 2 up, as a Device would choose (QPNs are unique per port across its
// shards: the RX lcore dispatches by QPN).
uint32_t choose_qpn(PortState& p, const QpSpec& spec) {
  if (spec.qpn) {
    if (*spec.qpn < transport::kFirstQpn || *spec.qpn > transport::kQpnMask)
      throw ConfigError("qpn", fmt::format("{:#x} is out of range: QPNs are {:#x}..{:#x} "
                                           "(0 and 1 are reserved)",
                                           *spec.qpn, transport::kFirstQpn,
                                           transport::kQpnMask));
    if (p.qp_owner.count(*spec.qpn))
      throw ConfigError("qpn", fmt::format("QPN {:#x} is already in use on port '{}'",
                                           *spec.qpn, p.name));
    return *spec.qpn;
  }
  for (uint32_t tries = 0; tries <= transport::kQpnMask; ++tries) {
    const uint32_t c = p.next_qpn;
    p.next_qpn = (p.next_qpn + 1) & transport::kQpnMask;
    if (p.next_qpn < transport::kFirstQpn) p.next_qpn = transport::kFirstQpn;
    if (!p.qp_owner.count(c)) return c;
  }
  throw ConfigError("qpn", "no free QPN");
}

// The shard a new QP runs on: its SRQ's, the one on the lcore asked for,
// or the next, round robin.
Shard& choose_shard(PortState& p, const QpSpec& spec, const EngineSrq* srq) {
  if (srq) return *srq->shard;
  if (spec.lcore < 0) return *p.shards[p.next_shard++ % p.shards.size()];
  std::string lcores;
  for (auto& sh : p.shards) {
    if (!sh->worker->use_thread && sh->worker->lcore == static_cast<unsigned>(spec.lcore))
      return *sh;
    lcores += fmt::format("{}{}", lcores.empty() ? "" : ", ", sh->worker->lcore);
  }
  throw ConfigError("lcore", fmt::format("lcore {} runs no shard of port '{}' (its "
                                         "lcores: {})",
                                         spec.lcore, p.name, lcores));
}

}  // namespace

QpHandle Engine::create_qp(PortIndex port, const QpSpec& spec) {
  Impl& im = *impl_;
  PortState& p = im.port(port);
  const transport::QpCaps& caps = spec.caps;
  if (caps.max_send_wr == 0 || (caps.max_recv_wr == 0 && spec.srq.id == 0))
    throw ConfigError("max-wr", "send and receive queues need at least one entry");
  if (caps.max_inline_data > transport::kMaxInlineData)
    throw ConfigError("max-inline-data", fmt::format("{} bytes is more than {}",
                                                     caps.max_inline_data,
                                                     transport::kMaxInlineData));
  if (caps.max_send_sge > transport::kMaxSge || caps.max_recv_sge > transport::kMaxSge)
    throw ConfigError("max-sge", fmt::format("at most {} SGEs per WR", transport::kMaxSge));
  EngineCq* send_cq = im.cq(spec.send_cq.id ? spec.send_cq : p.cq);
  EngineCq* recv_cq = im.cq(spec.recv_cq.id ? spec.recv_cq : p.cq);
  if (!send_cq || send_cq->destroyed || !recv_cq || recv_cq->destroyed)
    throw ConfigError("cq", fmt::format("no CQ {}", !send_cq || send_cq->destroyed
                                                         ? spec.send_cq.id
                                                         : spec.recv_cq.id));
  EngineSrq* srq = nullptr;
  if (spec.srq.id) {
    srq = im.srq(spec.srq);
    if (!srq || !srq->srq || srq->port != &p)
      throw ConfigError("srq", fmt::format("no SRQ {} on port '{}'", spec.srq.id, p.name));
  }
  EnginePd* pd = im.pd(spec.pd.id ? spec.pd : p.pd);
  if (!pd || pd->port != &p || pd->per_shard.empty())
    throw ConfigError("pd", fmt::format("no PD {} on port '{}'", spec.pd.id, p.name));
  if (srq && srq->pd != pd->id)
    throw ConfigError("srq", "the SRQ belongs to another PD (IBA 10.2.9.1)");
  Shard& shard = choose_shard(p, spec, srq);
  const uint32_t qpn = choose_qpn(p, spec);
  std::unique_ptr<cc::Algorithm> algo;
  try {
    algo = cc::make_algorithm(spec.cc, spec.cc_params, p.line_rate);
  } catch (const std::exception& e) {
    throw ConfigError("cc", e.what());
  }
  transport::QpInitAttr init;
  init.type = spec.type;
  init.pd = pd->per_shard[shard.index];
  init.send_cq = im.ring_for(*send_cq, *shard.worker);
  init.recv_cq = im.ring_for(*recv_cq, *shard.worker);
  init.srq = srq ? srq->srq : nullptr;
  init.caps = caps;
  init.sq_sig_all = spec.sq_sig_all;
  transport::QueuePair* qp = nullptr;
  im.run_on(*shard.worker, [&] {
    qp = shard.device->create_qp(init, qpn);
    if (!qp) return;
    shard.qp_cc[qpn] = spec.cc;
    shard.ep->attach(*qp, std::move(algo));
  });
  if (!qp)
    throw ConfigError("qpn", fmt::format("QPN {:#x} is already in use on port '{}'", qpn,
                                         p.name));
  ++send_cq->users;
  ++recv_cq->users;
  p.qp_owner[qpn] = shard.index;
  QpEntry& e = p.qps.at(qpn);
  {
    std::lock_guard lock(e.lock);
    e.qp = qp;
    e.shard = &shard;
  }
  // Frames for it reach its lcore once each lcore polling an RX queue knows
  // (until then they count as rx_unknown_qpn there, as before the QP
  // existed).
  for (auto& rx : p.shards)
    if (rx.get() != &shard && rx->rx_queue >= 0)
      im.run_on(*rx->worker, [&] { rx->dispatch[qpn] = shard.index; });
  return QpHandle{port, qpn};
}

int Engine::modify_qp(QpHandle h, transport::QpState target, const transport::QpAttr& attr) {
  Impl& im = *impl_;
  PortState& p = im.port(h.port);
  if (target == transport::QpState::kRtr && p.sharded() && wire::is_zero_mac(attr.path.dst_mac) &&
      !p.cfg.endpoint.interface.addresses.empty())
    throw ConfigError("peer_mac",
                      "a sharded port does not resolve peers' addresses: give the peer's MAC");
  QpEntry* e = p.qps.find(h.qpn);
  if (!e) return ENOENT;
  // Posters stay out while the QP changes (transport/qp.h).
  std::lock_guard lock(e->lock);
  if (!e->qp) return ENOENT;
  int rc = 0;
  Shard& s = *e->shard;
  im.run_on(*s.worker, [&] {
    rc = e->qp->modify(target, attr);
    s.ep->notify(h.qpn);
  });
  return rc;
}

int Engine::connect_qp(QpHandle h, const transport::QpAttr& attr) {
  for (auto s : {transport::QpState::kInit, transport::QpState::kRtr,
                 transport::QpState::kRts})
    if (int rc = modify_qp(h, s, attr); rc != 0) return rc;
  return 0;
}

int Engine::destroy_qp(QpHandle h) {
  Impl& im = *impl_;
  PortState& p = im.port(h.port);
  QpEntry* e = p.qps.find(h.qpn);
  if (!e) return ENOENT;
  transport::QueuePair* qp = nullptr;
  Shard* s = nullptr;
  {
    // From here no poster reaches the QP: they find the entry empty.
    std::lock_guard lock(e->lock);
    qp = std::exchange(e->qp, nullptr);
    s = e->shard;
  }
  if (!qp) return ENOENT;
  EngineCq* send_cq = nullptr;
  EngineCq* recv_cq = nullptr;
  for (EngineCq& c : im.cqs)
    for (transport::CompletionQueue* r : c.active) {
      if (r == qp->send_cq()) send_cq = &c;
      if (r == qp->recv_cq()) recv_cq = &c;
    }
  im.run_on(*s->worker, [&] {
    // What was posted and not yet taken is flushed with the rest.
    s->ep->detach(h.qpn);
    s->device->destroy_qp(qp);
    s->qp_cc.erase(h.qpn);
  });
  for (auto& rx : p.shards)
    if (rx.get() != s && rx->rx_queue >= 0)
      im.run_on(*rx->worker, [&] { rx->dispatch.erase(h.qpn); });
  if (send_cq) --send_cq->users;
  if (recv_cq) --recv_cq->users;
  p.qp_owner.erase(h.qpn);
  return 0;
}

// ---- memory regions ----------------------------------------------------------

MrInfo Engine::reg_mr(PortIndex port, const MrSpec& spec) {
  Impl& im = *impl_;
  PortState& p = im.port(port, "mr");
  if (spec.length == 0) throw ConfigError("mr", "length must be at least 1 byte");
  if (spec.length > (uint64_t{1} << 32))
    throw ConfigError("mr", fmt::format("{} bytes is larger than an MR may be (4 GiB)",
                                        spec.length));
  EnginePd* pd = im.pd(spec.pd.id ? spec.pd : p.pd);
  if (!pd || pd->port != &p || pd->per_shard.empty())
    throw ConfigError("mr", fmt::format("no PD {} on port '{}'", spec.pd.id, p.name));
  void* owned = nullptr;
  void* mem = spec.addr;
  if (!mem) {
    owned = mem = rte_zmalloc_socket("droce_mr", spec.length, 64, p.socket);
    if (!mem)
      throw ConfigError("mr", fmt::format("cannot allocate {} bytes of EAL memory for the "
                                          "MR (larger than the memory given with -m or the "
                                          "hugepages?)",
                                          spec.length));
  }
  // Every shard of the port has the MR under the same key (the memory is
  // shared, as one MR serves every QP of a real NIC's PD).
  std::vector<std::pair<Shard*, transport::MemoryRegion*>> done;
  transport::MemoryRegion* first = nullptr;
  for (auto& sh : p.shards) {
    transport::MemoryRegion* mr = nullptr;
    const std::optional<uint32_t> key = first ? std::optional(first->lkey()) : spec.key;
    Shard* s = sh.get();
    im.run_on(*s->worker, [&] {
      mr = s->device->reg_mr(pd->per_shard[s->index], mem, spec.length, spec.access, spec.iova,
                             key);
    });
    if (!mr) break;
    if (!first) first = mr;
    done.emplace_back(s, mr);
  }
  if (done.size() != p.shards.size()) {
    for (auto& [s, mr] : done)
      im.run_on(*s->worker, [&, s = s, mr = mr] { s->device->dereg_mr(mr); });
    rte_free(owned);
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
  im.mrs[{port, first->lkey()}] = EngineMr{&p, owned};
  return MrInfo{port, first->addr(), first->length(), first->lkey(), first->rkey(),
                first->iova()};
}

int Engine::dereg_mr(const MrInfo& info) {
  Impl& im = *impl_;
  if (info.port >= im.ports.size()) return ENOENT;
  auto it = im.mrs.find({info.port, info.lkey});
  if (it == im.mrs.end()) return ENOENT;
  // On each shard's lcore: once its Device has forgotten the key, that
  // lcore's next packet cannot touch the memory (the data path looks the
  // key up per packet), and run_on returns only after it has.
  im.run_on_shards(*it->second.port, [&](Shard& s) {
    if (const transport::MemoryRegion* mr = s.device->find_mr(info.lkey))
      s.device->dereg_mr(const_cast<transport::MemoryRegion*>(mr));
  });
  rte_free(it->second.owned);
  im.mrs.erase(it);
  return 0;
}

// ---- work requests -----------------------------------------------------------

namespace {

// The entry of `h`'s QP, or nullptr for a handle no port knows. Its `qp`
// is looked at under the entry's lock: a destroy may have emptied it.
QpEntry* find_entry(Engine::Impl& im, QpHandle h) {
  if (h.port >= im.ports.size()) return nullptr;
  return im.ports[h.port]->qps.find(h.qpn);
}

// Posts `wrs` to the QP of `h` with `post` (the QP's lock held), then rings
// its doorbell once.
template <class Wr, class Post>
int post_to_qp(Engine::Impl& im, QpHandle h, std::span<const Wr> wrs, size_t* posted,
               Post post) {
  if (posted) *posted = 0;
  QpEntry* e = find_entry(im, h);
  if (!e) return ENOENT;
  int rc = 0;
  size_t n = 0;
  Shard* s = nullptr;
  {
    std::lock_guard lock(e->lock);
    if (!e->qp) return ENOENT;
    s = e->shard;
    rc = post(*e->qp, wrs, &n);
    if (n > 0) s->ep->ring(e->doorbell);
  }
  if (n > 0 && im.cfg.callers_step) step_for_caller(*s->worker);
  if (posted) *posted = n;
  return rc;
}

}  // namespace

int Engine::post_send(QpHandle h, std::span<const transport::SendWr> wrs, size_t* posted) {
  return post_to_qp(*impl_, h, wrs, posted,
                    [](transport::QueuePair& qp, std::span<const transport::SendWr> list,
                       size_t* n) { return qp.post_send(list, n); });
}

int Engine::post_recv(QpHandle h, std::span<const transport::RecvWr> wrs, size_t* posted) {
  return post_to_qp(*impl_, h, wrs, posted,
                    [](transport::QueuePair& qp, std::span<const transport::RecvWr> list,
                       size_t* n) { return qp.post_recv(list, n); });
}

std::optional<transport::QpState> Engine::qp_state(QpHandle h) const {
  QpEntry* e = find_entry(*impl_, h);
  if (!e) return std::nullopt;
  std::lock_guard lock(e->lock);
  if (!e->qp) return std::nullopt;
  return e->qp->posted_state();
}

// ---- polling -----------------------------------------------------------------

bool Engine::poll() {
  Impl& im = *impl_;
  if (!im.started) return false;
  // One thread at a time runs the inline data path; another that asks
  // meanwhile finds it being done.
  if (im.inline_pass.test_and_set(std::memory_order_acquire)) return false;
  bool busy = false;
  for (auto& w : im.workers) {
    if (w->launched || w->shards.empty()) continue;
    uint64_t next;
    busy |= worker_step(*w, next, /*app_loop=*/true);
  }
  im.inline_pass.clear(std::memory_order_release);
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
  else if (im.cfg.callers_step) im.step_workers_for_caller();
  size_t n = 0;
  for (auto& p : im.ports) {
    if (n == out.size()) break;
    const int got = im.poll_rings(*im.cq(p->cq), out.subspan(n));
    for (int i = 0; i < got; ++i, ++n)
      if (n < ports.size()) ports[n] = p->index;
  }
  return n;
}

}  // namespace droce::engine
