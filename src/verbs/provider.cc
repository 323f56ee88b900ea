// libdroce-verbs: the libibverbs API over an in-process droce engine, for
// unmodified RDMA applications loaded with LD_PRELOAD (docs/VERBS.md).
// The exported functions are the verbs that are not inline in
// <infiniband/verbs.h>; the inline ones (ibv_post_send, ibv_post_recv,
// ibv_poll_cq, ibv_req_notify_cq, ibv_query_port, ibv_query_device_ex,
// ibv_create_qp_ex) reach the context's ops and verbs_context, which
// ibv_open_device fills. Posting and polling go straight into the engine's
// rings from the application's threads; everything else is the engine's
// control plane, one call at a time (Runtime::mu).
#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>
#include <unordered_map>

#include "droce/verbs/translate.h"
#include "objects.h"
#include "runtime.h"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using namespace droce;
using namespace droce::verbs;

// The private libibverbs call ibv_devinfo uses for a GID's type
// (IBVERBS_PRIVATE_34, declared in rdma-core's driver.h, not installed).
enum DroceGidTypeSysfs { kGidTypeSysfsIbRoceV1 = 0, kGidTypeSysfsRoceV2 = 1 };

namespace {

Device g_device;
bool g_device_ready = false;
std::deque<ibv_async_event> g_async;  // taken from the engine, not yet returned (rt.mu)
// The application's CQs and SRQs by engine handle, for asynchronous events (rt.mu).
std::unordered_map<uint32_t, ibv_cq*> g_cqs;
std::unordered_map<uint32_t, ibv_srq*> g_srqs;

Runtime& rt() { return runtime(); }

template <class T>
T* fail_null(int err) {
  errno = err;
  return nullptr;
}

// Runs a control-plane call; an droce::ConfigError (the engine refused
// the request) becomes EINVAL.
template <class F>
int control(F&& f) {
  try {
    return f();
  } catch (const droce::ConfigError& e) {
    std::fprintf(stderr, "libdroce-verbs: %s\n", e.what());
    return EINVAL;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "libdroce-verbs: %s\n", e.what());
    return EIO;
  }
}

PathContext path_context() {
  Runtime& r = rt();
  return PathContext{r.mac, r.gids, r.cfg.neighbours, r.cfg.dscp};
}

bool port_up() {
  if (!rt().cfg.report_link) return true;
  const auto up = engine::port_link_up(rt().port_id);
  return up.value_or(true);
}

// ---- inline verbs (context ops) -------------------------------------------------

// Posts `wrs` with `post`, which returns the verbs error and how many it
// took. A queue the application saw room in (it polled the completion of
// the WQE whose slot it reuses) may still look full for a moment: the
// worker publishes the slot just after it writes the completion, and on a
// busy CPU it may be descheduled in between. So a full queue is tried
// again, yielding the CPU, for a while before ENOMEM is the answer.
template <class Wr, class Post>
int post_all(std::span<const Wr> wrs, size_t* taken, Post post) {
  constexpr auto kFullFor = std::chrono::milliseconds(20);
  size_t done = 0;
  std::chrono::steady_clock::time_point since{};
  for (;;) {
    size_t n = 0;
    const int rc = post(wrs.subspan(done), &n);
    done += n;
    if (rc != ENOMEM || done == wrs.size()) {
      *taken = done;
      return rc;
    }
    const auto now = std::chrono::steady_clock::now();
    if (n > 0 || since == std::chrono::steady_clock::time_point{}) {
      since = now;
    } else if (now - since > kFullFor) {
      *taken = done;
      return ENOMEM;
    }
    sched_yield();
  }
}

int op_post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad) {
  Qp* q = reinterpret_cast<Qp*>(ibqp);
  engine::Engine* eng = engine_fast();
  if (!eng) {
    *bad = wr;
    return ENODEV;
  }
  constexpr size_t kBatch = 16;
  std::array<transport::SendWr, kBatch> wrs;
  std::array<std::array<transport::Sge, transport::kMaxSge>, kBatch> sges;
  std::array<ibv_send_wr*, kBatch> src;
  while (wr) {
    size_t n = 0;
    int rc = 0;
    for (; wr && n < kBatch; wr = wr->next, ++n) {
      if ((rc = to_send_wr(*wr, sges[n], wrs[n])) != 0) break;
      if (q->type == transport::QpType::kUd) {
        if (!wr->wr.ud.ah) {
          rc = EINVAL;
          break;
        }
        wrs[n].ud_path = &reinterpret_cast<Ah*>(wr->wr.ud.ah)->path;
        wrs[n].ud_remote_qpn = wr->wr.ud.remote_qpn;
        // IBA 10.2.5: a Q_Key with its high bit set means the QP's own.
        wrs[n].ud_remote_qkey =
            (wr->wr.ud.remote_qkey & 0x80000000u) ? q->stored.qkey : wr->wr.ud.remote_qkey;
      }
      if (q->sq_sig_all) wrs[n].send_flags |= IBV_SEND_SIGNALED;
      src[n] = wr;
    }
    size_t posted = 0;
    if (n > 0) {
      const int prc = post_all(std::span<const transport::SendWr>(wrs.data(), n), &posted,
                               [&](std::span<const transport::SendWr> w, size_t* p) {
                                 return eng->post_send(q->h, w, p);
                               });
      if (prc != 0) {
        *bad = src[posted];
        return prc;
      }
    }
    if (rc != 0) {
      *bad = wr;
      return rc;
    }
  }
  return 0;
}

template <class Post>
int post_recv_chain(ibv_recv_wr* wr, ibv_recv_wr** bad, Post post) {
  constexpr size_t kBatch = 16;
  std::array<transport::RecvWr, kBatch> wrs;
  std::array<std::array<transport::Sge, transport::kMaxSge>, kBatch> sges;
  std::array<ibv_recv_wr*, kBatch> src;
  while (wr) {
    size_t n = 0;
    int rc = 0;
    for (; wr && n < kBatch; wr = wr->next, ++n) {
      if ((rc = to_recv_wr(*wr, sges[n], wrs[n])) != 0) break;
      src[n] = wr;
    }
    size_t posted = 0;
    if (n > 0) {
      const int prc = post_all(std::span<const transport::RecvWr>(wrs.data(), n), &posted, post);
      if (prc != 0) {
        *bad = src[posted];
        return prc;
      }
    }
    if (rc != 0) {
      *bad = wr;
      return rc;
    }
  }
  return 0;
}

int op_post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Qp* q = reinterpret_cast<Qp*>(ibqp);
  engine::Engine* eng = engine_fast();
  if (!eng) {
    *bad = wr;
    return ENODEV;
  }
  if (q->qp.srq) {
    *bad = wr;
    return EINVAL;  // its receives come from the SRQ
  }
  return post_recv_chain(wr, bad, [&](std::span<const transport::RecvWr> w, size_t* p) {
    return eng->post_recv(q->h, w, p);
  });
}

int op_post_srq_recv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Srq* s = reinterpret_cast<Srq*>(ibsrq);
  engine::Engine* eng = engine_fast();
  if (!eng) {
    *bad = wr;
    return ENODEV;
  }
  return post_recv_chain(wr, bad, [&](std::span<const transport::RecvWr> w, size_t* p) {
    return eng->post_srq_recv(s->h, w, p);
  });
}

// Applications wait for completions by polling in a loop (perftest does
// nothing else). On a CPU it shares with the worker, such a loop takes the
// time the worker needs to make the completions: after a run of empty
// polls the thread yields its CPU once.
thread_local uint32_t t_empty_polls = 0;
constexpr uint32_t kEmptyPollsBeforeYield = 64;

int op_poll_cq(ibv_cq* ibcq, int num, ibv_wc* wc) {
  Cq* c = reinterpret_cast<Cq*>(ibcq);
  engine::Engine* eng = engine_fast();
  if (!eng || num < 0) return -1;
  std::array<transport::WorkCompletion, 32> buf;
  int done = 0;
  while (done < num) {
    const size_t want = std::min<size_t>(buf.size(), static_cast<size_t>(num - done));
    const int got = eng->poll_cq(c->h, std::span(buf.data(), want));
    if (got < 0) return done > 0 ? done : -1;
    for (int i = 0; i < got; ++i) to_ibv_wc(buf[i], wc[done + i]);
    done += got;
    if (static_cast<size_t>(got) < want) break;
  }
  if (done > 0) {
    t_empty_polls = 0;
  } else if (++t_empty_polls == kEmptyPollsBeforeYield) {
    t_empty_polls = 0;
    sched_yield();
  }
  return done;
}

int op_req_notify_cq(ibv_cq* ibcq, int solicited_only) {
  Cq* c = reinterpret_cast<Cq*>(ibcq);
  engine::Engine* eng = engine_fast();
  if (!eng) return ENODEV;
  return eng->req_notify_cq(c->h, solicited_only != 0);
}

struct ibv_mw* op_alloc_mw(ibv_pd*, ibv_mw_type) { return fail_null<ibv_mw>(EOPNOTSUPP); }
int op_bind_mw(ibv_qp*, ibv_mw*, ibv_mw_bind*) { return EOPNOTSUPP; }
int op_dealloc_mw(ibv_mw*) { return EOPNOTSUPP; }

// ---- verbs_context ops ---------------------------------------------------------

int op_query_port(ibv_context*, uint8_t port_num, ibv_port_attr* attr, size_t len) {
  if (port_num != 1) return EINVAL;
  ibv_port_attr a;
  fill_port_attr(a, rt().mtu, port_up(), rt().cfg.port_rate_gbps);
  std::memset(attr, 0, len);
  std::memcpy(attr, &a, std::min(len, sizeof a));
  return 0;
}

int op_query_device_ex(ibv_context*, const ibv_query_device_ex_input* input,
                       ibv_device_attr_ex* attr, size_t size) {
  if (input && input->comp_mask) return EINVAL;
  ibv_device_attr_ex a{};
  fill_device_attr(a.orig_attr, rt().mac);
  a.max_dm_size = 0;
  std::memset(attr, 0, size);
  std::memcpy(attr, &a, std::min(size, sizeof a));
  return 0;
}

ibv_qp* op_create_qp_ex(ibv_context* ctx, ibv_qp_init_attr_ex* attr) {
  // Only what ibv_create_qp takes: a PD, and nothing of the extended API
  // (send_ops_flags, ibv_wr_*), which droce does not implement.
  constexpr uint32_t kBasic = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  if ((attr->comp_mask & ~kBasic) != 0 || !(attr->comp_mask & IBV_QP_INIT_ATTR_PD) ||
      ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags != 0))
    return fail_null<ibv_qp>(EOPNOTSUPP);
  (void)ctx;
  return ibv_create_qp(attr->pd, reinterpret_cast<ibv_qp_init_attr*>(attr));
}

void fill_context(Context& c) {
  std::memset(&c, 0, sizeof c);
  ibv_context* ctx = c.ctx();
  ctx->device = &g_device.dev;
  ctx->ops.poll_cq = op_poll_cq;
  ctx->ops.req_notify_cq = op_req_notify_cq;
  ctx->ops.post_send = op_post_send;
  ctx->ops.post_recv = op_post_recv;
  ctx->ops.post_srq_recv = op_post_srq_recv;
  ctx->ops.alloc_mw = op_alloc_mw;
  ctx->ops.bind_mw = op_bind_mw;
  ctx->ops.dealloc_mw = op_dealloc_mw;
  ctx->cmd_fd = -1;
  ctx->async_fd = rt().eng->async_event_fd();
  ctx->num_comp_vectors = 1;
  pthread_mutex_init(&ctx->mutex, nullptr);
  ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
  c.vctx.sz = sizeof(verbs_context);
  c.vctx.query_port = op_query_port;
  c.vctx.query_device_ex = op_query_device_ex;
  c.vctx.create_qp_ex = op_create_qp_ex;
}

void init_device(const Config& cfg) {
  if (g_device_ready) return;
  std::memset(&g_device, 0, sizeof g_device);
  ibv_device& d = g_device.dev;
  d.node_type = IBV_NODE_CA;
  d.transport_type = IBV_TRANSPORT_IB;
  std::snprintf(d.name, sizeof d.name, "%s", cfg.device.c_str());
  std::snprintf(d.dev_name, sizeof d.dev_name, "uverbs_%s", cfg.device.c_str());
  std::snprintf(d.dev_path, sizeof d.dev_path, "/sys/class/infiniband_verbs/uverbs_%s",
                cfg.device.c_str());
  std::snprintf(d.ibdev_path, sizeof d.ibdev_path, "/sys/class/infiniband/%s",
                cfg.device.c_str());
  g_device_ready = true;
}

Context* checked(ibv_context* c) { return c ? context_of(c) : nullptr; }

bool gid_index_of(const ibv_gid& gid, uint8_t& index) {
  const auto& gids = rt().gids;
  for (size_t i = 0; i < gids.size(); ++i)
    if (std::memcmp(gids[i].raw, gid.raw, 16) == 0) {
      index = static_cast<uint8_t>(i);
      return true;
    }
  return false;
}

}  // namespace

extern "C" {

// ---- devices --------------------------------------------------------------------

ibv_device** ibv_get_device_list(int* num_devices) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (num_devices) *num_devices = 0;
  if (!ensure_config(r)) return nullptr;
  init_device(r.cfg);
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  if (!list) return fail_null<ibv_device*>(ENOMEM);
  list[0] = &g_device.dev;
  if (num_devices) *num_devices = 1;
  return list;
}

void ibv_free_device_list(ibv_device** list) { std::free(list); }

const char* ibv_get_device_name(ibv_device* device) { return device ? device->name : nullptr; }

int ibv_get_device_index(ibv_device*) { return 0; }

__be64 ibv_get_device_guid(ibv_device*) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (!ensure_engine(r)) return 0;
  return node_guid_be(r.mac);
}

ibv_context* ibv_open_device(ibv_device* device) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  if (device != &g_device.dev) return fail_null<ibv_context>(ENODEV);
  if (!ensure_engine(r)) return nullptr;
  auto* c = static_cast<Context*>(std::calloc(1, sizeof(Context)));
  if (!c) return fail_null<ibv_context>(ENOMEM);
  fill_context(*c);
  return c->ctx();
}

ibv_context* ibv_import_device(int) { return fail_null<ibv_context>(EOPNOTSUPP); }

int ibv_close_device(ibv_context* ctx) {
  Context* c = checked(ctx);
  if (!c) return EINVAL;
  pthread_mutex_destroy(&ctx->mutex);
  std::free(c);
  return 0;
}

int ibv_query_device(ibv_context*, ibv_device_attr* attr) {
  fill_device_attr(*attr, rt().mac);
  return 0;
}

// The old entry point (applications built against a verbs.h without the
// query_port macro); its struct is the ibv_port_attr up to port_cap_flags2.
int ibv_query_port(ibv_context* ctx, uint8_t port_num, _compat_ibv_port_attr* attr) {
  return op_query_port(ctx, port_num, reinterpret_cast<ibv_port_attr*>(attr),
                       offsetof(ibv_port_attr, port_cap_flags2));
}

int ibv_query_gid(ibv_context*, uint8_t port_num, int index, ibv_gid* gid) {
  const auto& gids = rt().gids;
  if (port_num != 1 || index < 0 || index >= kGidTableLen) return -1;
  // Entries past the configured addresses are empty (zero), as on a NIC.
  *gid = static_cast<size_t>(index) < gids.size() ? gids[static_cast<size_t>(index)] : ibv_gid{};
  return 0;
}

int ibv_query_gid_type(ibv_context*, uint8_t port_num, unsigned int index,
                       DroceGidTypeSysfs* type) {
  if (port_num != 1 || index >= rt().gids.size()) {
    errno = EINVAL;
    return -1;
  }
  *type = kGidTypeSysfsRoceV2;
  return 0;
}

int _ibv_query_gid_ex(ibv_context*, uint32_t port_num, uint32_t gid_index,
                      ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  const auto& gids = rt().gids;
  if (flags || port_num != 1 || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  if (gid_index >= gids.size()) return ENODATA;
  *entry = ibv_gid_entry{gids[gid_index], gid_index, 1, IBV_GID_TYPE_ROCE_V2, 0};
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context*, ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_size) {
  const auto& gids = rt().gids;
  if (flags || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  if (max_entries < gids.size()) return -EINVAL;
  for (uint32_t i = 0; i < gids.size(); ++i)
    entries[i] = ibv_gid_entry{gids[i], i, 1, IBV_GID_TYPE_ROCE_V2, 0};
  return static_cast<ssize_t>(gids.size());
}

int ibv_query_pkey(ibv_context*, uint8_t port_num, int index, __be16* pkey) {
  if (port_num != 1 || index != 0) return -1;
  *pkey = htobe16(0xffff);  // the default partition, full member (IBA 10.9.1.2)
  return 0;
}

int ibv_get_pkey_index(ibv_context*, uint8_t port_num, __be16 pkey) {
  if (port_num != 1 || (be16toh(pkey) & 0x7fff) != 0x7fff) return -EINVAL;
  return 0;
}

// ---- protection domains and memory ----------------------------------------------

ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  auto* p = new Pd{};
  const int rc = control([&] {
    p->h = r.eng->alloc_pd(r.port);
    return 0;
  });
  if (rc) {
    delete p;
    return fail_null<ibv_pd>(rc);
  }
  p->pd.context = ctx;
  p->pd.handle = p->h.id;
  return &p->pd;
}

ibv_pd* ibv_import_pd(ibv_context*, uint32_t) { return fail_null<ibv_pd>(EOPNOTSUPP); }
void ibv_unimport_pd(ibv_pd*) {}

int ibv_dealloc_pd(ibv_pd* pd) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  Pd* p = reinterpret_cast<Pd*>(pd);
  const int rc = control([&] { return r.eng->dealloc_pd(p->h); });
  if (rc == 0) delete p;
  return rc;
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
  Runtime& r = rt();
  uint32_t acc = 0;
  if (int rc = mr_access(access, acc); rc != 0) return fail_null<ibv_mr>(rc);
  if (length == 0 || !addr) return fail_null<ibv_mr>(EINVAL);
  std::lock_guard lock(r.mu);
  auto* m = new Mr{};
  const int rc = control([&] {
    engine::MrSpec spec;
    spec.addr = addr;
    spec.pd = reinterpret_cast<Pd*>(pd)->h;
    spec.length = length;
    spec.access = acc;
    spec.iova = iova;
    m->info = r.eng->reg_mr(r.port, spec);
    return 0;
  });
  if (rc) {
    delete m;
    return fail_null<ibv_mr>(rc);
  }
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = m->info.lkey;
  m->mr.lkey = m->info.lkey;
  m->mr.rkey = m->info.rkey;
  return &m->mr;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
                          static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return fail_null<ibv_mr>(EOPNOTSUPP);
}

ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) { return fail_null<ibv_mr>(EOPNOTSUPP); }
void ibv_unimport_mr(ibv_mr*) {}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) { return fail_null<ibv_dm>(EOPNOTSUPP); }
void ibv_unimport_dm(ibv_dm*) {}

int ibv_rereg_mr(ibv_mr*, int, ibv_pd*, void*, size_t, int) {
  errno = EOPNOTSUPP;
  return IBV_REREG_MR_ERR_INPUT;
}

int ibv_dereg_mr(ibv_mr* mr) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  Mr* m = reinterpret_cast<Mr*>(mr);
  const int rc = control([&] { return r.eng->dereg_mr(m->info); });
  if (rc == 0) delete m;
  return rc;
}

// ---- completion queues -----------------------------------------------------------

ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
  auto* ch = new CompChannel{};
  ch->ch.context = ctx;
  ch->ch.fd = epoll_create1(EPOLL_CLOEXEC);
  if (ch->ch.fd < 0) {
    const int err = errno;
    delete ch;
    return fail_null<ibv_comp_channel>(err);
  }
  return &ch->ch;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  auto* ch = reinterpret_cast<CompChannel*>(channel);
  if (ch->ch.refcnt > 0) return EBUSY;
  ::close(ch->ch.fd);
  delete ch;
  return 0;
}

ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  Runtime& r = rt();
  if (cqe < 1 || cqe > kMaxCqe || comp_vector < 0 || comp_vector >= 1)
    return fail_null<ibv_cq>(EINVAL);
  std::lock_guard lock(r.mu);
  auto* c = new Cq{};
  const int rc = control([&] {
    c->h = r.eng->create_cq(static_cast<uint32_t>(cqe));
    return 0;
  });
  if (rc) {
    delete c;
    return fail_null<ibv_cq>(rc);
  }
  c->event_fd = r.eng->cq_event_fd(c->h);
  if (channel) {
    c->channel = reinterpret_cast<CompChannel*>(channel);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c;
    if (epoll_ctl(channel->fd, EPOLL_CTL_ADD, c->event_fd, &ev) != 0) {
      const int err = errno;
      r.eng->destroy_cq(c->h);
      delete c;
      return fail_null<ibv_cq>(err);
    }
    ++channel->refcnt;
  }
  c->cq.context = ctx;
  c->cq.channel = channel;
  c->cq.cq_context = cq_context;
  c->cq.handle = c->h.id;
  c->cq.cqe = cqe;
  pthread_mutex_init(&c->cq.mutex, nullptr);
  pthread_cond_init(&c->cq.cond, nullptr);
  g_cqs[c->h.id] = &c->cq;
  return &c->cq;
}

int ibv_resize_cq(ibv_cq*, int) { return EOPNOTSUPP; }

int ibv_destroy_cq(ibv_cq* cq) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  Cq* c = reinterpret_cast<Cq*>(cq);
  const int rc = control([&] { return r.eng->destroy_cq(c->h); });
  if (rc) return rc;
  if (c->channel) {
    epoll_ctl(c->channel->ch.fd, EPOLL_CTL_DEL, c->event_fd, nullptr);
    --c->channel->ch.refcnt;
  }
  pthread_mutex_destroy(&c->cq.mutex);
  pthread_cond_destroy(&c->cq.cond);
  g_cqs.erase(c->h.id);
  delete c;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  const int flags = fcntl(channel->fd, F_GETFL);
  const int timeout = (flags >= 0 && (flags & O_NONBLOCK)) ? 0 : -1;
  for (;;) {
    epoll_event ev{};
    const int n = epoll_wait(channel->fd, &ev, 1, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) {
      errno = EAGAIN;
      return -1;
    }
    Cq* c = static_cast<Cq*>(ev.data.ptr);
    uint64_t v;
    if (::read(c->event_fd, &v, sizeof v) != sizeof v) {
      if (timeout == 0) {
        errno = EAGAIN;
        return -1;
      }
      continue;  // another thread took it
    }
    *cq = &c->cq;
    *cq_context = c->cq.cq_context;
    return 0;
  }
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

// ---- shared receive queues -------------------------------------------------------

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  Runtime& r = rt();
  if (attr->attr.max_wr == 0 || attr->attr.max_wr > static_cast<uint32_t>(kMaxSrqWr) ||
      attr->attr.max_sge > transport::kMaxSge)
    return fail_null<ibv_srq>(EINVAL);
  std::lock_guard lock(r.mu);
  auto* s = new Srq{};
  const int rc = control([&] {
    s->h = r.eng->create_srq(r.port, attr->attr.max_wr, reinterpret_cast<Pd*>(pd)->h);
    if (attr->attr.srq_limit) return r.eng->arm_srq_limit(s->h, attr->attr.srq_limit);
    return 0;
  });
  if (rc) {
    delete s;
    return fail_null<ibv_srq>(rc);
  }
  attr->attr.max_sge = transport::kMaxSge;
  s->attr = attr->attr;
  s->srq.context = pd->context;
  s->srq.srq_context = attr->srq_context;
  s->srq.pd = pd;
  s->srq.handle = s->h.id;
  pthread_mutex_init(&s->srq.mutex, nullptr);
  pthread_cond_init(&s->srq.cond, nullptr);
  g_srqs[s->h.id] = &s->srq;
  return &s->srq;
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  Runtime& r = rt();
  Srq* s = reinterpret_cast<Srq*>(srq);
  if (mask & IBV_SRQ_MAX_WR) return EOPNOTSUPP;  // resizing
  if (mask & ~IBV_SRQ_LIMIT) return EINVAL;
  if (!(mask & IBV_SRQ_LIMIT)) return 0;
  std::lock_guard lock(r.mu);
  const int rc = r.eng->arm_srq_limit(s->h, attr->srq_limit);
  if (rc == 0) s->attr.srq_limit = attr->srq_limit;
  return rc;
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  *attr = reinterpret_cast<Srq*>(srq)->attr;
  return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  Srq* s = reinterpret_cast<Srq*>(srq);
  const int rc = control([&] { return r.eng->destroy_srq(s->h); });
  if (rc) return rc;
  g_srqs.erase(s->h.id);
  delete s;
  return 0;
}

// ---- queue pairs -------------------------------------------------------------------

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  Runtime& r = rt();
  transport::QpType type;
  if (int rc = qp_type(attr->qp_type, type); rc != 0) return fail_null<ibv_qp>(rc);
  ibv_qp_cap cap = attr->cap;
  if (cap.max_send_wr > static_cast<uint32_t>(kMaxQpWr) ||
      cap.max_recv_wr > static_cast<uint32_t>(kMaxQpWr) || cap.max_send_sge > transport::kMaxSge ||
      cap.max_recv_sge > transport::kMaxSge || cap.max_inline_data > transport::kMaxInlineData ||
      !attr->send_cq || !attr->recv_cq)
    return fail_null<ibv_qp>(EINVAL);
  // As NICs round queues up, droce gives at least what was asked: one
  // entry, every SGE it has, and 64 bytes of inline data.
  cap.max_send_wr = std::max<uint32_t>(cap.max_send_wr, 1);
  cap.max_recv_wr = attr->srq ? 0 : std::max<uint32_t>(cap.max_recv_wr, 1);
  cap.max_send_sge = transport::kMaxSge;
  cap.max_recv_sge = attr->srq ? 0 : transport::kMaxSge;
  cap.max_inline_data = std::max<uint32_t>(cap.max_inline_data, 64);
  std::lock_guard lock(r.mu);
  auto* q = new Qp{};
  const int rc = control([&] {
    engine::QpSpec spec;
    spec.type = type;
    spec.caps.max_send_wr = cap.max_send_wr;
    spec.caps.max_recv_wr = cap.max_recv_wr;
    spec.caps.max_send_sge = cap.max_send_sge;
    spec.caps.max_recv_sge = attr->srq ? transport::kMaxSge : cap.max_recv_sge;
    spec.caps.max_inline_data = cap.max_inline_data;
    // Signalling is decided per WR at post (op_post_send), as sq_sig_all
    // says; the transport completes what the WR asks for.
    spec.sq_sig_all = false;
    spec.send_cq = reinterpret_cast<Cq*>(attr->send_cq)->h;
    spec.recv_cq = reinterpret_cast<Cq*>(attr->recv_cq)->h;
    if (attr->srq) spec.srq = reinterpret_cast<Srq*>(attr->srq)->h;
    spec.pd = reinterpret_cast<Pd*>(pd)->h;
    spec.cc = r.cfg.cc;
    for (const auto& [k, v] : r.cfg.cc_params) spec.cc_params[k] = v;
    q->h = r.eng->create_qp(r.port, spec);
    return 0;
  });
  if (rc) {
    delete q;
    return fail_null<ibv_qp>(rc);
  }
  attr->cap = cap;
  q->type = type;
  q->cap = cap;
  q->sq_sig_all = attr->sq_sig_all != 0;
  q->stored.qp_state = IBV_QPS_RESET;
  q->stored.port_num = 1;
  q->stored.cap = cap;
  q->qp.context = pd->context;
  q->qp.qp_context = attr->qp_context;
  q->qp.pd = pd;
  q->qp.send_cq = attr->send_cq;
  q->qp.recv_cq = attr->recv_cq;
  q->qp.srq = attr->srq;
  q->qp.handle = q->h.qpn;
  q->qp.qp_num = q->h.qpn;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_type = attr->qp_type;
  pthread_mutex_init(&q->qp.mutex, nullptr);
  pthread_cond_init(&q->qp.cond, nullptr);
  return &q->qp;
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp*) { return fail_null<ibv_qp_ex>(EOPNOTSUPP); }

int ibv_modify_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int mask) {
  Runtime& r = rt();
  Qp* q = reinterpret_cast<Qp*>(ibqp);
  if (int rc = check_qp_mask(mask); rc != 0) return rc;
  if ((mask & IBV_QP_PORT) && attr->port_num != 1) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index != 0) return EINVAL;
  std::lock_guard lock(r.mu);
  ibv_qp_attr merged = q->stored;
  merge_qp_attr(merged, *attr, mask);
  if (!(mask & IBV_QP_STATE)) {
    q->stored = merged;  // kept for the next transition
    return 0;
  }
  const transport::QpState from = qp_state(q->stored.qp_state);
  const transport::QpState to = qp_state(attr->qp_state);
  if (int rc = check_required_attrs(q->type, from, to, mask); rc != 0) return rc;
  wire::PathSpec path = q->path;
  if ((mask & IBV_QP_AV) && q->type != transport::QpType::kUd)
    if (int rc = path_from_ah(attr->ah_attr, path_context(), path); rc != 0) return rc;
  const transport::QpAttr ta = to_transport_attr(merged, r.mtu, path);
  const int rc = control([&] { return r.eng->modify_qp(q->h, to, ta); });
  if (rc) return rc;
  q->stored = merged;
  q->path = path;
  q->qp.state = attr->qp_state;
  return 0;
}

int ibv_query_qp(ibv_qp* ibqp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
  Runtime& r = rt();
  Qp* q = reinterpret_cast<Qp*>(ibqp);
  *attr = q->stored;
  // The QP's own moves (to ERR on a failed WR) are the engine's to tell.
  if (const auto now = r.eng->qp_state(q->h)) attr->qp_state = to_ibv_state(*now);
  attr->cur_qp_state = attr->qp_state;
  attr->cap = q->cap;
  if (init) {
    *init = ibv_qp_init_attr{};
    init->qp_context = q->qp.qp_context;
    init->send_cq = q->qp.send_cq;
    init->recv_cq = q->qp.recv_cq;
    init->srq = q->qp.srq;
    init->cap = q->cap;
    init->qp_type = q->qp.qp_type;
    init->sq_sig_all = q->sq_sig_all;
  }
  return 0;
}

int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) { return 0; }

int ibv_destroy_qp(ibv_qp* ibqp) {
  Runtime& r = rt();
  std::lock_guard lock(r.mu);
  Qp* q = reinterpret_cast<Qp*>(ibqp);
  const int rc = control([&] { return r.eng->destroy_qp(q->h); });
  if (rc) return rc;
  pthread_mutex_destroy(&q->qp.mutex);
  pthread_cond_destroy(&q->qp.cond);
  delete q;
  return 0;
}

int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }

int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }
int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }

// ---- address handles ---------------------------------------------------------------

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (attr->port_num != 1) return fail_null<ibv_ah>(EINVAL);
  auto* a = new Ah{};
  if (int rc = path_from_ah(*attr, path_context(), a->path); rc != 0) {
    delete a;
    return fail_null<ibv_ah>(rc);
  }
  a->ah.context = pd->context;
  a->ah.pd = pd;
  return &a->ah;
}

int ibv_init_ah_from_wc(ibv_context*, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                        ibv_ah_attr* ah_attr) {
  if (port_num != 1 || !(wc->wc_flags & IBV_WC_GRH) || !grh) return EINVAL;
  ibv_gid sgid, dgid;
  uint8_t tc = 0, hop = 0;
  uint32_t flow = 0;
  if (!gids_of_grh(std::span<const uint8_t, 40>(reinterpret_cast<const uint8_t*>(grh), 40),
                   sgid, dgid, tc, hop, flow))
    return EINVAL;
  uint8_t index = 0;
  if (!gid_index_of(dgid, index)) return EINVAL;  // not sent to one of our GIDs
  *ah_attr = ibv_ah_attr{};
  ah_attr->is_global = 1;
  ah_attr->port_num = port_num;
  ah_attr->sl = wc->sl;
  ah_attr->grh.dgid = sgid;  // answer the sender
  ah_attr->grh.sgid_index = index;
  ah_attr->grh.flow_label = flow;
  ah_attr->grh.hop_limit = 0xff;
  ah_attr->grh.traffic_class = tc;
  return 0;
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  ibv_ah_attr attr;
  if (int rc = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr); rc != 0)
    return fail_null<ibv_ah>(rc);
  return ibv_create_ah(pd, &attr);
}

int ibv_destroy_ah(ibv_ah* ah) {
  delete reinterpret_cast<Ah*>(ah);
  return 0;
}

int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr* attr, uint8_t eth_mac[6],
                                uint16_t* vid) {
  wire::PathSpec p;
  if (int rc = path_from_ah(*attr, path_context(), p); rc != 0) return rc;
  if (wire::is_zero_mac(p.dst_mac)) return EHOSTUNREACH;
  std::memcpy(eth_mac, p.dst_mac.data(), 6);
  if (vid) *vid = 0xffff;  // untagged
  return 0;
}

// ---- asynchronous events -------------------------------------------------------------

int ibv_get_async_event(ibv_context* ctx, ibv_async_event* event) {
  Runtime& r = rt();
  for (;;) {
    {
      std::lock_guard lock(r.mu);
      for (const engine::AsyncEvent& e : r.eng->take_async_events()) {
        ibv_async_event ev{};
        // The application's CQ or SRQ object is found by its handle.
        if (e.kind == engine::AsyncEvent::Kind::kCqError) {
          ev.event_type = IBV_EVENT_CQ_ERR;
          auto it = g_cqs.find(e.cq.id);
          if (it == g_cqs.end()) continue;  // destroyed since
          ev.element.cq = it->second;
        } else {
          ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
          auto it = g_srqs.find(e.srq.id);
          if (it == g_srqs.end()) continue;
          ev.element.srq = it->second;
        }
        g_async.push_back(ev);
      }
      if (!g_async.empty()) {
        *event = g_async.front();
        g_async.pop_front();
        return 0;
      }
    }
    // Blocks until the engine posts one (its fd is an eventfd).
    pollfd p{ctx->async_fd, POLLIN, 0};
    if (poll(&p, 1, -1) < 0 && errno != EINTR) return -1;
  }
}

void ibv_ack_async_event(ibv_async_event*) {}

// ---- librdmacm ------------------------------------------------------------------------

// rdma_cm needs the kernel's connection manager (/dev/infiniband/rdma_cm),
// which a user-space device does not have: refused with a message that says
// what to do instead.
void* rdma_create_event_channel() {
  // Once: libraries that probe every transport (UCX) ask more than once.
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    std::fprintf(stderr,
                 "libdroce-verbs: rdma_cm (librdmacm) is not supported on droce devices; "
                 "exchange the QP attributes out of band instead (perftest: leave out "
                 "-R/--rdma_cm)\n");
  errno = EOPNOTSUPP;
  return nullptr;
}

}  // extern "C"
