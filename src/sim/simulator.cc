// The runner: builds hosts (Device + Endpoint + memory), switches (with
// routes computed by BFS, ECMP groups where several shortest paths exist)
// and link directions from a Scenario, then runs a discrete-event loop over
// the components' next event times (event_queue.h).
#include "droce/sim/simulator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "droce/cc/registry.h"
#include "droce/transport/device.h"
#include "event_queue.h"
#include "flood_tree.h"
#include "link_schedule.h"
#include "sample_log.h"

namespace droce::sim {

namespace {

using fabric::kNever;

// Room for a 4096-byte MTU frame with IPv6 headers, extension headers and
// an echoed INT stack on an ACK.
constexpr size_t kBufBytes = 4096 + 512;
// Messages larger than this are not kept whole: offsets wrap in a window
// of this size and the flow is not verified.
constexpr uint64_t kVerifyWindow = 64ull << 20;
constexpr size_t kTxBatch = 4;
constexpr uint32_t kPacerSlots = 256;

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The lines a host reads first of a frame it receives: the headers (up to
// a RETH) and the ICRC at the end, which parse() loads before the ICRC
// check streams through the rest. A frame bound for a host has usually
// waited in a switch queue (over a MiB of frames in the 16-to-1 incast
// bench), long enough to leave L2; perf put a fifth of a virtual-payload
// run on those first loads. Asked for one delivery ahead, when the frame
// before it on the same link is handed over.
void prefetch_headers(const fabric::Packet& p) {
  const uint8_t* b = p.bytes.data();
  const size_t n = p.size();
  if (n < 4) return;
  __builtin_prefetch(b, 0, 3);
  __builtin_prefetch(b + 64, 0, 3);
  __builtin_prefetch(b + n - 4, 0, 3);
}

// A QP's class marks: the DSCP, and where switches classify by PCP
// (`classifier = "pcp"`) a priority tag (802.1Q, VLAN 0) whose PCP is the
// same class, DSCP >> 3, as a RoCE NIC set to tag its traffic does.
// Untagged frames would all land in class 0 there, while the endpoint
// pauses and resumes the QP on its DSCP's priority.
void set_class_marks(wire::PathSpec& path, uint8_t dscp, bool pcp_tagged) {
  path.dscp = dscp;
  if (!pcp_tagged) return;
  path.vlan = true;
  path.vlan_id = 0;
  path.pcp = static_cast<uint8_t>(dscp >> 3);
}

// The source pattern of flow `f`: a deterministic byte stream.
void fill_pattern(std::vector<uint8_t>& mem, uint64_t f) {
  uint64_t s = mix(0xD0CE, f);
  for (size_t i = 0; i < mem.size(); i += 8) {
    s = mix(s, i);
    const size_t n = std::min<size_t>(8, mem.size() - i);
    std::memcpy(mem.data() + i, &s, n);
  }
}

ibv_mtu to_ibv_mtu(uint32_t mtu) {
  switch (mtu) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    default: return IBV_MTU_4096;
  }
}

// Brings `qp` on host `h` to RTS toward `peer_qp` on `peer` and attaches it
// to h's endpoint with its own CC instance at `line_rate_bytes`: the one
// set-up of scenario flows and Simulator::connect, whose options (`o`: a
// FlowSpec or QpOptions) carry the same transport fields. Refusals throw
// ScenarioError naming `who`. Host is Simulator::Impl::Host, deduced.
template <class Host, class Options>
void bring_up(Host& h, const Host& peer, transport::QueuePair& qp,
              const transport::QueuePair& peer_qp, const Options& o, bool pcp_tagged,
              uint64_t line_rate_bytes, const std::string& who) {
  transport::QpAttr attr;
  attr.path.src_mac = h.mac;
  // Zero: the endpoint resolves the peer's IP (run.resolve_macs).
  attr.path.dst_mac = h.resolve_macs ? wire::MacAddress{} : peer.mac;
  attr.path.src_ip = h.ip;
  attr.path.dst_ip = peer.ip;
  set_class_marks(attr.path, o.dscp, pcp_tagged);
  attr.path.udp_src_port = wire::udp_src_port_entropy(qp.qpn(), peer_qp.qpn());
  attr.dest_qpn = peer_qp.qpn();
  attr.path_mtu = to_ibv_mtu(o.mtu);
  attr.recovery = o.recovery;
  attr.timeout = o.timeout;
  attr.retry_cnt = o.retry_cnt;
  attr.ack_every_n = o.ack_every_n;
  std::unique_ptr<cc::Algorithm> algo;
  try {
    algo = cc::make_algorithm(o.cc, o.cc_params, line_rate_bytes);
  } catch (const cc::ConfigError& err) {
    throw ScenarioError(who + ": cc: " + err.what());
  }
  // The DCQCN notification point (this QP as a receiver) paces CNPs by the
  // algorithm's np_min_time_between_cnps; 0 keeps the QP default.
  if (const uint64_t np = algo->np_min_time_between_cnps_ns())
    attr.np_min_time_between_cnps_ns = np;
  if (qp.modify(transport::QpState::kInit, attr) || qp.modify(transport::QpState::kRtr, attr) ||
      qp.modify(transport::QpState::kRts, attr))
    throw ScenarioError(who + ": QP setup refused");
  h.ep->attach(qp, std::move(algo));
}

uint64_t percentile(std::vector<uint64_t> v, double p) {
  if (v.empty()) return 0;
  // Nearest rank: the smallest value with at least p of the samples <= it.
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size());
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(rank - 1), v.end());
  return v[rank - 1];
}

enum class Kind : uint8_t { kHost, kSwitch };
struct NodeRef {
  Kind kind = Kind::kHost;
  uint32_t index = 0;
  uint16_t port = 0;  // switch port
};

}  // namespace

struct Simulator::Impl {
  struct Host {
    transport::Device device;
    std::unique_ptr<endpoint::Endpoint> ep;
    transport::ProtectionDomain* pd = nullptr;
    transport::CompletionQueue* cq = nullptr;
    // Completions of QPs made by Simulator::connect (created on first use).
    transport::CompletionQueue* wcq = nullptr;
    uint32_t out_link = 0;
    wire::MacAddress mac{};
    wire::IpAddress ip;
    bool resolve_macs = false;  // QPs name peers by IP only
    // qpn -> (flow << 1) | is_initiator; -1 when unknown.
    std::vector<int64_t> qp_role;
  };
  struct Sw {
    std::unique_ptr<fabric::Switch> sw;
    std::vector<uint32_t> out_link;  // per port
    std::vector<std::string> peer;   // per port
  };
  struct Dir {
    fabric::Link link;
    uint64_t rate_bps = 0;
    NodeRef to;
    std::string name;
    // Serialisation time of what was sent, for the utilisation samples: a
    // frame counts in the interval its bits left in, not whole in the one
    // it arrived in (that read up to a frame per interval above 1).
    uint64_t busy_ns = 0;
    uint64_t last_start = 0, last_end = 0;  // the latest frame on the wire
    explicit Dir(const fabric::LinkConfig& c) : link(c) {}
    void send(fabric::Packet&& p, uint64_t start, uint64_t end) {
      // A down link carries no bits: the frame is lost (Link counts it)
      // and the interval shows no utilisation.
      if (!link.up()) {
        link.send(std::move(p), end);
        return;
      }
      busy_ns += end - start;
      last_start = start;
      last_end = end;
      link.send(std::move(p), end);
    }
    // Serialisation time up to `t`: one frame at most is still going out.
    uint64_t busy_by(uint64_t t) const {
      return last_end > t ? busy_ns - (last_end - std::max(t, last_start)) : busy_ns;
    }
  };
  struct Flow {
    const FlowSpec* spec = nullptr;
    uint32_t src = 0, dst = 0, initiator = 0;
    transport::QueuePair* src_qp = nullptr;
    transport::QueuePair* dst_qp = nullptr;
    std::vector<uint8_t> src_mem, dst_mem;
    transport::MemoryRegion* src_mr = nullptr;
    transport::MemoryRegion* dst_mr = nullptr;
    uint64_t msg = 0;       // bytes per message (the last may be shorter)
    uint64_t slots = 1;     // messages the window holds
    uint64_t recvs_posted = 0;
    bool whole = true;      // the window holds the whole flow
  };

  Scenario sc;
  std::vector<std::unique_ptr<Host>> hosts;
  std::vector<Sw> sws;
  std::vector<std::unique_ptr<Dir>> dirs;
  std::vector<Flow> flows;
  std::vector<transport::QueuePair*> workload_qps;  // made by connect()
  std::vector<size_t> start_order;  // flows by start time
  size_t next_start = 0;
  EventQueue events;
  uint32_t id_switch0 = 0, id_link0 = 0, id_link_state = 0, id_workload = 0, id_sampler = 0,
           id_reroute = 0;
  LinkSchedule link_schedule;  // [[links]] down
  // The graph routes are computed on: per node (hosts, then switches) its
  // neighbours, through which of its ports (0 for a host) and which link.
  struct Adj {
    uint32_t node;
    uint16_t port;
    uint32_t link;
  };
  std::vector<std::vector<Adj>> adj;
  std::deque<uint64_t> reroutes;  // run.reconverge: when routes are recomputed

  // Shortest-path routes over the links that are up: for every host, BFS
  // distances over switches; each switch routes the host to every port
  // whose neighbour is one hop closer (an ECMP group; one port without
  // ECMP). A host no switch can reach gets no route there (no_route drops).
  std::vector<fabric::RouteTable> compute_routes() const {
    const size_t H = hosts.size(), S = sws.size();
    std::vector<fabric::RouteTable> tables(S);
    const auto up = [&](const Adj& a) { return dirs[2 * a.link]->link.up(); };
    for (size_t h = 0; h < H; ++h) {
      std::vector<uint32_t> dist(H + S, UINT32_MAX);
      std::deque<uint32_t> q{static_cast<uint32_t>(h)};
      dist[h] = 0;
      while (!q.empty()) {
        const uint32_t n = q.front();
        q.pop_front();
        if (n < H && n != h) continue;  // hosts do not forward
        for (const Adj& a : adj[n]) {
          if (up(a) && dist[a.node] == UINT32_MAX) {
            dist[a.node] = dist[n] + 1;
            q.push_back(a.node);
          }
        }
      }
      for (size_t s = 0; s < S; ++s) {
        if (dist[H + s] == UINT32_MAX) continue;
        std::vector<uint16_t> ports;
        for (const Adj& a : adj[H + s]) {
          if (!up(a) || dist[a.node] + 1 != dist[H + s] || (a.node < H && a.node != h)) continue;
          ports.push_back(a.port);
          if (!sc.ecmp) break;  // without ECMP the first shortest path alone
        }
        if (!ports.empty()) tables[s].add(hosts[h]->ip, 32, ports);
      }
    }
    return tables;
  }
  bool pcp_tagged = false;     // some switch classifies by PCP: hosts tag (set_class_marks)
  std::vector<uint8_t> tracked_tcs;

  // The time series, as changes (sample_log.h). Cumulative counters are
  // stored and the per-interval deltas taken when rows are rebuilt.
  std::vector<uint64_t> sample_times;
  std::vector<ChangeSeries> flow_tx, flow_done, flow_cc;  // per flow
  std::vector<ChangeSeries> queue_len;  // per (switch, port, class), flattened
  std::vector<ChangeSeries> link_bytes, link_busy;  // per link direction
  // tracked_tcs from an instant on (connect() may add a class mid-run).
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> tracked_from;
  // How far the public rows have been rebuilt, and the replay state.
  struct Replay {
    uint32_t instants = 0;
    std::vector<ChangeSeries::Reader> a, b, c;
    std::vector<uint64_t> prev_a, prev_b;
  };
  Replay flow_rows, queue_rows, link_rows;
  bool stopped = false;

  std::vector<fabric::Packet> pool;
  std::array<fabric::Packet, kTxBatch> staging;
  std::array<std::span<uint8_t>, kTxBatch> spans;
  std::array<uint32_t, kTxBatch> lens{};
  std::array<transport::WorkCompletion, 64> wcs;

  // Pooled packets are kept at kBufBytes so the endpoint can write a frame
  // straight into one; a frame is then only shrunk to its length. Growing
  // it back when it returns to the pool writes nothing (FrameBytes). A new
  // buffer is zeroed once: with payload = "virtual" nothing writes the
  // payload bytes, and they must still be defined (the ICRC reads them;
  // runs must not depend on what the heap held).
  static fabric::Packet fresh() {
    fabric::Packet p;
    p.bytes.assign(kBufBytes, 0);
    return p;
  }
  fabric::Packet take() {
    if (pool.empty()) return fresh();
    fabric::Packet p = std::move(pool.back());
    pool.pop_back();
    return p;
  }
  void give(fabric::Packet&& p) {
    if (p.bytes.capacity() < kBufBytes) return;  // e.g. a switch's PFC frame
    p.bytes.resize(kBufBytes);
    pool.push_back(std::move(p));
  }

  // Never later than an event already filed (a spurious wake-up is harmless,
  // a lost one is not).
  void wake(uint32_t id, uint64_t t) { schedule(id, std::min(t, events.at(id))); }

  void schedule(uint32_t id, uint64_t t) { events.set(id, t); }
};

Simulator::Simulator(const Scenario& scenario) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.sc = scenario;
  const Scenario& sc = m.sc;

  // Switch ports and link directions, in link order.
  m.sws.resize(sc.switches.size());
  std::vector<fabric::SwitchConfig> cfgs(sc.switches.size());
  const std::vector<bool> flood =
      sc.run.resolve_macs ? flood_links(sc) : std::vector<bool>(sc.links.size(), false);
  for (size_t s = 0; s < sc.switches.size(); ++s) {
    cfgs[s] = sc.switches[s].cfg;
    cfgs[s].ports.clear();
    cfgs[s].node_id = static_cast<uint32_t>(s + 1);
    cfgs[s].seed = mix(sc.run.seed, 0x5317C4 + s);
    m.pcp_tagged |= cfgs[s].classifier == fabric::Classifier::kPcp;
  }
  m.hosts.resize(sc.hosts.size());
  for (size_t h = 0; h < sc.hosts.size(); ++h) {
    auto host = std::make_unique<Impl::Host>();
    // MR keys from the run's seed: the same scenario and seed give the
    // same keys, so the same bytes on the wire.
    host->device.seed_mr_keys(mix(sc.run.seed, 0x4D4B0000 + h));
    host->mac = {0x02, 0x00, 0x00, 0x00, static_cast<uint8_t>(h >> 8), static_cast<uint8_t>(h)};
    host->ip = wire::IpAddress::v4(0x0A000001u + static_cast<uint32_t>(h));
    endpoint::EndpointConfig ec;
    ec.port_rate_bytes_per_sec = sc.hosts[h].rate_bps / 8;
    // Fewer wheel slots: next_deadline() scans them, and the runner asks
    // after every event; entries beyond the horizon are parked, not lost.
    ec.pacer_slots = kPacerSlots;
    if (sc.run.resolve_macs) {
      host->resolve_macs = true;
      ec.interface.mac = host->mac;
      ec.interface.addresses = {host->ip};
      ec.interface.seed = mix(sc.run.seed, 0x4E454947 + h);
    }
    host->ep = std::make_unique<endpoint::Endpoint>(host->device, ec);
    host->pd = host->device.alloc_pd();
    // Every message and receive buffer a flow may have outstanding, both
    // ends (counted below), plus slack.
    uint64_t cqes = 64;
    for (const auto& f : sc.flows)
      if (f.src == sc.hosts[h].name || f.dst == sc.hosts[h].name) cqes += 2 * f.max_outstanding + 8;
    host->cq = host->device.create_cq(static_cast<uint32_t>(std::min<uint64_t>(cqes, 1 << 20)));
    m.hosts[h] = std::move(host);
  }
  auto node_of = [&](const std::string& name) {
    int i = sc.host_index(name);
    if (i >= 0) return NodeRef{Kind::kHost, static_cast<uint32_t>(i), 0};
    return NodeRef{Kind::kSwitch, static_cast<uint32_t>(sc.switch_index(name)), 0};
  };
  const size_t H = sc.hosts.size(), S = sc.switches.size();
  m.adj.assign(H + S, {});
  auto flat = [&](const NodeRef& n) { return n.kind == Kind::kHost ? n.index : H + n.index; };
  for (size_t l = 0; l < sc.links.size(); ++l) {
    const LinkSpec& ls = sc.links[l];
    NodeRef a = node_of(ls.a), b = node_of(ls.b);
    for (NodeRef* n : {&a, &b}) {
      if (n->kind != Kind::kSwitch) continue;
      fabric::PortConfig pc;
      const SwitchSpec& ss = sc.switches[n->index];
      pc.rate_bps = ls.rate_bps;
      pc.flood = flood[l];
      pc.buffer_bytes = ss.port_buffer_bytes;
      pc.scheduler = ss.scheduler;
      pc.ecn = ss.ecn_auto ? fabric::ecn_defaults_for_rate(ls.rate_bps, ss.ecn.mode) : ss.ecn;
      if (ss.ecn_auto) pc.ecn.point = ss.ecn.point;
      if (ss.ecn_auto && ss.ecn.pmax != fabric::EcnConfig{}.pmax) pc.ecn.pmax = ss.ecn.pmax;
      pc.mac = {0x02, 0x5C, static_cast<uint8_t>(n->index >> 8), static_cast<uint8_t>(n->index),
                static_cast<uint8_t>(cfgs[n->index].ports.size() >> 8),
                static_cast<uint8_t>(cfgs[n->index].ports.size())};
      n->port = static_cast<uint16_t>(cfgs[n->index].ports.size());
      cfgs[n->index].ports.push_back(pc);
    }
    for (int d = 0; d < 2; ++d) {
      const NodeRef& from = d == 0 ? a : b;
      const NodeRef& to = d == 0 ? b : a;
      fabric::LinkConfig lc = ls.link;
      lc.seed = mix(sc.run.seed, 0x11C0 + 2 * l + static_cast<uint64_t>(d));
      auto dir = std::make_unique<Impl::Dir>(lc);
      dir->rate_bps = ls.rate_bps;
      dir->to = to;
      dir->name = (d == 0 ? ls.a + "->" + ls.b : ls.b + "->" + ls.a);
      const uint32_t id = static_cast<uint32_t>(m.dirs.size());
      if (from.kind == Kind::kHost) {
        m.hosts[from.index]->out_link = id;
      } else {
        auto& sw = m.sws[from.index];
        if (sw.out_link.size() <= from.port) {
          sw.out_link.resize(from.port + 1);
          sw.peer.resize(from.port + 1);
        }
        sw.out_link[from.port] = id;
        sw.peer[from.port] = d == 0 ? ls.b : ls.a;
        m.adj[flat(from)].push_back(
            {static_cast<uint32_t>(flat(to)), from.port, static_cast<uint32_t>(l)});
      }
      m.dirs.push_back(std::move(dir));
    }
    if (a.kind == Kind::kHost)
      m.adj[flat(a)].push_back({static_cast<uint32_t>(flat(b)), 0, static_cast<uint32_t>(l)});
    if (b.kind == Kind::kHost)
      m.adj[flat(b)].push_back({static_cast<uint32_t>(flat(a)), 0, static_cast<uint32_t>(l)});
  }
  // Routes over the whole graph (every link is up at time 0).
  std::vector<fabric::RouteTable> tables = m.compute_routes();
  for (size_t s = 0; s < S; ++s) cfgs[s].routes = std::move(tables[s]);
  for (size_t s = 0; s < S; ++s) {
    if (cfgs[s].ports.empty())
      throw ScenarioError(sc.file + ": switches." + sc.switches[s].name + ": has no links");
    try {
      m.sws[s].sw = std::make_unique<fabric::Switch>(cfgs[s]);
    } catch (const std::invalid_argument& e) {
      throw ScenarioError(sc.file + ": switches." + sc.switches[s].name + ": " + e.what());
    }
  }

  // Flows: a QP pair each, memory on both hosts.
  for (size_t f = 0; f < sc.flows.size(); ++f) {
    const FlowSpec& fs = sc.flows[f];
    Impl::Flow fl;
    fl.spec = &fs;
    fl.src = static_cast<uint32_t>(sc.host_index(fs.src));
    fl.dst = static_cast<uint32_t>(sc.host_index(fs.dst));
    fl.initiator = fs.opcode == Opcode::kRead ? fl.dst : fl.src;
    fl.msg = fs.message_bytes ? std::min(fs.message_bytes, fs.bytes)
                              : std::min<uint64_t>(fs.bytes, transport::kMaxMessageBytes);
    // Unverified flows only need one message's worth of memory.
    const uint64_t full = (fs.bytes + fl.msg - 1) / fl.msg * fl.msg;
    const uint64_t window = !fs.verify             ? fl.msg
                            : full <= kVerifyWindow ? full
                                                    : std::max(fl.msg, kVerifyWindow / fl.msg * fl.msg);
    fl.slots = window / fl.msg;
    fl.whole = window >= fs.bytes;
    fl.src_mem.resize(window);
    fl.dst_mem.resize(window);
    fill_pattern(fl.src_mem, f);
    auto& hs = *m.hosts[fl.src];
    auto& hd = *m.hosts[fl.dst];
    constexpr uint32_t kAccess =
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    fl.src_mr = hs.device.reg_mr(hs.pd, fl.src_mem.data(), fl.src_mem.size(), kAccess);
    fl.dst_mr = hd.device.reg_mr(hd.pd, fl.dst_mem.data(), fl.dst_mem.size(), kAccess);
    if (!fl.src_mr || !fl.dst_mr)
      throw ScenarioError(sc.file + ": flow " + fs.name + ": cannot register memory");
    fl.src_mr->set_virtual_payload(fs.virtual_payload());
    fl.dst_mr->set_virtual_payload(fs.virtual_payload());
    transport::QpInitAttr init;
    init.caps.max_send_wr = fs.max_outstanding + 4;
    init.caps.max_recv_wr = fs.max_outstanding + 4;
    init.pd = hs.pd;
    init.send_cq = init.recv_cq = hs.cq;
    fl.src_qp = hs.device.create_qp(init);
    init.pd = hd.pd;
    init.send_cq = init.recv_cq = hd.cq;
    fl.dst_qp = hd.device.create_qp(init);
    struct End {
      Impl::Host* host;
      transport::QueuePair* qp;
      Impl::Host* peer;
      transport::QueuePair* peer_qp;
    };
    for (End e : {End{&hs, fl.src_qp, &hd, fl.dst_qp}, End{&hd, fl.dst_qp, &hs, fl.src_qp}}) {
      bring_up(*e.host, *e.peer, *e.qp, *e.peer_qp, fs, m.pcp_tagged,
               m.dirs[e.host->out_link]->rate_bps / 8, sc.file + ": flow " + fs.name);
      const uint32_t qpn = e.qp->qpn();
      if (e.host->qp_role.size() <= qpn) e.host->qp_role.resize(qpn + 1, -1);
      const bool initiator = e.host == m.hosts[fl.initiator].get();
      e.host->qp_role[qpn] = static_cast<int64_t>(f << 1 | (initiator ? 1 : 0));
    }
    m.flows.push_back(std::move(fl));
    FlowState st;
    st.messages = (fs.bytes + m.flows.back().msg - 1) / m.flows.back().msg;
    flows_.push_back(st);
  }
  m.start_order.resize(m.flows.size());
  std::iota(m.start_order.begin(), m.start_order.end(), size_t{0});
  std::stable_sort(m.start_order.begin(), m.start_order.end(), [&](size_t a, size_t b) {
    return sc.flows[a].start_ns < sc.flows[b].start_ns;
  });

  // Queues sampled: the classes the flows use, and the CNP class.
  std::vector<bool> used(fabric::kNumClasses, false);
  for (const auto& f : sc.flows) used[f.dscp >> 3] = true;
  for (size_t c = 0; c < fabric::kNumClasses; ++c)
    if (used[c]) m.tracked_tcs.push_back(static_cast<uint8_t>(c));
  size_t queues = 0;
  for (auto& s : m.sws) queues += s.sw->num_ports() * fabric::kNumClasses;
  m.queue_len.resize(queues);
  m.flow_tx.resize(m.flows.size());
  m.flow_done.resize(m.flows.size());
  m.flow_cc.resize(m.flows.size());
  m.link_bytes.resize(m.dirs.size());
  m.link_busy.resize(m.dirs.size());

  // Component ids: hosts, switches, link directions, link state changes,
  // workload, sampler. Link state changes come after every host, switch and
  // link event at the same time: a frame arriving when its link goes down
  // is delivered, one sent then is lost.
  m.id_switch0 = static_cast<uint32_t>(H);
  m.id_link0 = static_cast<uint32_t>(H + S);
  m.id_link_state = static_cast<uint32_t>(H + S + m.dirs.size());
  m.id_workload = m.id_link_state + 1;
  m.id_sampler = m.id_workload + 1;
  m.id_reroute = m.id_sampler + 1;
  m.events.resize(m.id_reroute + 1);
  // The packet pool grows to what is in flight, mostly frames queued in
  // switch buffers; grown during the run, each new packet was an
  // allocation, a zero fill and page faults inside the measured loop. So
  // fill it now for the switches' buffers at the smallest MTU (up to 8192
  // packets, ~37 MB; beyond that it still grows on demand).
  uint64_t buffered = 0;
  for (size_t s = 0; s < m.sws.size(); ++s) {
    const fabric::SwitchConfig& c = sc.switches[s].cfg;
    buffered += c.buffer_mode == fabric::BufferMode::kShared
                    ? c.shared_buffer_bytes
                    : sc.switches[s].port_buffer_bytes * m.sws[s].sw->num_ports();
  }
  uint32_t min_mtu = 4096;
  for (const auto& f : sc.flows) min_mtu = std::min(min_mtu, f.mtu);
  const uint64_t prefill = std::min<uint64_t>(buffered / (min_mtu + 64), 8192);
  m.pool.reserve(prefill);
  for (uint64_t i = 0; i < prefill; ++i) m.pool.push_back(Impl::fresh());
  for (size_t i = 0; i < kTxBatch; ++i) {
    m.staging[i] = m.take();
    m.spans[i] = m.staging[i].bytes;
  }
  m.link_schedule = LinkSchedule(sc.links);
  m.schedule(m.id_link_state, m.link_schedule.next_time());
  if (!m.flows.empty()) m.schedule(m.id_workload, sc.flows[m.start_order[0]].start_ns);
  if (sc.run.resolve_macs) {
    // The ports come up: each host announces its address, which also
    // teaches the switches where every host is.
    for (uint32_t h = 0; h < m.hosts.size(); ++h) {
      m.hosts[h]->ep->announce(0);
      m.schedule(h, 0);
    }
  }
  if (sc.run.csv_interval_ns) {
    m.schedule(m.id_sampler, sc.run.csv_interval_ns);
  }
}

Simulator::~Simulator() = default;

const FlowSpec& Simulator::flow_spec(size_t f) const { return impl_->sc.flows.at(f); }
const FlowState& Simulator::flow(size_t f) const { return flows_.at(f); }
size_t Simulator::num_hosts() const { return impl_->hosts.size(); }
endpoint::Endpoint& Simulator::host_endpoint(size_t h) { return *impl_->hosts.at(h)->ep; }
size_t Simulator::num_switches() const { return impl_->sws.size(); }
const fabric::Switch& Simulator::switch_at(size_t s) const { return *impl_->sws.at(s).sw; }
const std::string& Simulator::port_peer(size_t s, uint16_t p) const {
  return impl_->sws.at(s).peer.at(p);
}
size_t Simulator::num_links() const { return impl_->dirs.size(); }
const fabric::Link& Simulator::link_at(size_t l) const { return impl_->dirs.at(l)->link; }
const std::string& Simulator::link_name(size_t l) const { return impl_->dirs.at(l)->name; }
std::span<const uint8_t> Simulator::source_memory(size_t f) const {
  return impl_->flows.at(f).src_mem;
}
std::span<const uint8_t> Simulator::sink_memory(size_t f) const {
  return impl_->flows.at(f).dst_mem;
}
const transport::QueuePair& Simulator::source_qp(size_t f) const {
  return *impl_->flows.at(f).src_qp;
}
const transport::QueuePair& Simulator::sink_qp(size_t f) const {
  return *impl_->flows.at(f).dst_qp;
}

uint64_t Simulator::flow_tx_bytes(size_t f) const {
  return impl_->flows.at(f).src_qp->counters().tx_bytes;
}

uint64_t Simulator::flow_cc_rate_bps(size_t f) const {
  const Impl::Flow& fl = impl_->flows.at(f);
  const transport::QueuePair* qp = fl.initiator == fl.src ? fl.src_qp : fl.dst_qp;
  endpoint::CcBinding* b = impl_->hosts[fl.initiator]->ep->cc_of(qp->qpn());
  return b ? b->algorithm().rate_bytes_per_sec() * 8 : 0;
}

// The public rows, rebuilt from the changes up to the latest instant:
// what recording a full row per value at each sample gave.
const std::vector<FlowSample>& Simulator::flow_samples() const {
  Impl& m = *impl_;
  Impl::Replay& r = m.flow_rows;
  const size_t F = m.flows.size();
  r.a.resize(F), r.b.resize(F), r.c.resize(F), r.prev_a.resize(F);
  const uint64_t iv = m.sc.run.csv_interval_ns;
  for (; r.instants < m.sample_times.size(); ++r.instants) {
    const uint32_t k = r.instants;
    for (size_t f = 0; f < F; ++f) {
      const uint64_t tx = r.a[f].at(m.flow_tx[f], k);
      flow_samples_.push_back(FlowSample{m.sample_times[k], static_cast<uint32_t>(f), tx,
                                         (tx - r.prev_a[f]) * 8 * 1'000'000'000ull / iv,
                                         r.b[f].at(m.flow_done[f], k),
                                         r.c[f].at(m.flow_cc[f], k)});
      r.prev_a[f] = tx;
    }
  }
  return flow_samples_;
}

const std::vector<QueueSample>& Simulator::queue_samples() const {
  Impl& m = *impl_;
  Impl::Replay& r = m.queue_rows;
  r.a.resize(m.queue_len.size());
  size_t epoch = 0;  // tracked_from entry in force
  for (; r.instants < m.sample_times.size(); ++r.instants) {
    const uint32_t k = r.instants;
    while (epoch + 1 < m.tracked_from.size() && m.tracked_from[epoch + 1].first <= k) ++epoch;
    const std::vector<uint8_t>& tcs = m.tracked_from[epoch].second;
    size_t qh = 0;
    for (size_t s = 0; s < m.sws.size(); ++s) {
      const uint16_t ports = static_cast<uint16_t>(m.sws[s].sw->num_ports());
      for (uint16_t p = 0; p < ports; ++p) {
        for (uint8_t c : tcs) {
          const size_t q = qh + p * fabric::kNumClasses + c;
          queue_samples_.push_back(QueueSample{m.sample_times[k], static_cast<uint32_t>(s), p, c,
                                               r.a[q].at(m.queue_len[q], k)});
        }
      }
      qh += ports * fabric::kNumClasses;
    }
  }
  return queue_samples_;
}

const std::vector<LinkSample>& Simulator::link_samples() const {
  Impl& m = *impl_;
  Impl::Replay& r = m.link_rows;
  const size_t L = m.dirs.size();
  r.a.resize(L), r.b.resize(L), r.prev_a.resize(L), r.prev_b.resize(L);
  const uint64_t iv = m.sc.run.csv_interval_ns;
  for (; r.instants < m.sample_times.size(); ++r.instants) {
    const uint32_t k = r.instants;
    for (size_t l = 0; l < L; ++l) {
      const uint64_t bytes = r.a[l].at(m.link_bytes[l], k);
      const uint64_t busy = r.b[l].at(m.link_busy[l], k);
      link_samples_.push_back(LinkSample{
          m.sample_times[k], static_cast<uint32_t>(l), bytes - r.prev_a[l],
          static_cast<double>(busy - r.prev_b[l]) / static_cast<double>(iv)});
      r.prev_a[l] = bytes;
      r.prev_b[l] = busy;
    }
  }
  return link_samples_;
}

bool Simulator::verify(size_t f) const { return verification(f) == Verification::kMatched; }

Simulator::Verification Simulator::verification(size_t f) const {
  const Impl::Flow& fl = impl_->flows.at(f);
  if (!fl.spec->verify)
    return fl.spec->virtual_payload() ? Verification::kOffVirtual : Verification::kOff;
  if (!fl.whole) return Verification::kTooLarge;
  if (!flows_[f].done() || flows_[f].failed) return Verification::kNotDone;
  const bool same =
      std::equal(fl.src_mem.begin(), fl.src_mem.begin() + static_cast<ptrdiff_t>(fl.spec->bytes),
                 fl.dst_mem.begin());
  return same ? Verification::kMatched : Verification::kCorrupt;
}

QpPairRef Simulator::connect(size_t host_a, size_t host_b, const QpOptions& o) {
  Impl& m = *impl_;
  if (host_a >= m.hosts.size() || host_b >= m.hosts.size() || host_a == host_b)
    throw ScenarioError("connect: hosts " + std::to_string(host_a) + " and " +
                        std::to_string(host_b) + ": need two different hosts below " +
                        std::to_string(m.hosts.size()));
  Impl::Host* ends[2] = {m.hosts[host_a].get(), m.hosts[host_b].get()};
  transport::QueuePair* qps[2] = {nullptr, nullptr};
  for (int i = 0; i < 2; ++i) {
    Impl::Host& h = *ends[i];
    if (!h.wcq) h.wcq = h.device.create_cq(std::max(o.cq_entries, o.max_send_wr + o.max_recv_wr));
    transport::QpInitAttr init;
    init.caps.max_send_wr = o.max_send_wr;
    init.caps.max_recv_wr = o.max_recv_wr;
    init.pd = h.pd;
    init.send_cq = init.recv_cq = h.wcq;
    qps[i] = h.device.create_qp(init);
    if (!qps[i]) throw ScenarioError("connect: the transport refused a QP");
    m.workload_qps.push_back(qps[i]);
  }
  for (int i = 0; i < 2; ++i)
    bring_up(*ends[i], *ends[1 - i], *qps[i], *qps[1 - i], o, m.pcp_tagged,
             m.dirs[ends[i]->out_link]->rate_bps / 8, "connect");
  // Sample the queues of the class these QPs use.
  const uint8_t tc = static_cast<uint8_t>(o.dscp >> 3);
  if (std::find(m.tracked_tcs.begin(), m.tracked_tcs.end(), tc) == m.tracked_tcs.end()) {
    m.tracked_tcs.push_back(tc);
    std::sort(m.tracked_tcs.begin(), m.tracked_tcs.end());
  }
  return QpPairRef{qps[0], qps[1]};
}

transport::MemoryRegion* Simulator::reg_mr(size_t host, void* addr, size_t length) {
  Impl::Host& h = *impl_->hosts.at(host);
  constexpr uint32_t kAccess =
      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  return h.device.reg_mr(h.pd, addr, length, kAccess);
}

int Simulator::dereg_mr(size_t host, transport::MemoryRegion* mr) {
  return impl_->hosts.at(host)->device.dereg_mr(mr);
}

int Simulator::post_send(size_t host, transport::QueuePair& qp, const transport::SendWr& wr) {
  Impl& m = *impl_;
  Impl::Host& h = *m.hosts.at(host);
  const int rc = h.ep->post_send(qp, wr);
  m.wake(static_cast<uint32_t>(host), std::max(h.ep->next_deadline(), now_));
  return rc;
}

int Simulator::post_recv(size_t host, transport::QueuePair& qp, const transport::RecvWr& wr) {
  Impl& m = *impl_;
  Impl::Host& h = *m.hosts.at(host);
  const int rc = qp.post_recv(wr);
  h.ep->notify(qp.qpn());
  m.wake(static_cast<uint32_t>(host), std::max(h.ep->next_deadline(), now_));
  return rc;
}

uint64_t Simulator::host_tx_bytes(size_t h) const {
  const Impl& m = *impl_;
  return m.dirs.at(m.hosts.at(h)->out_link)->link.counters().delivered_bytes;
}

bool Simulator::run_until(uint64_t t) {
  Impl& m = *impl_;
  const Scenario& sc = m.sc;
  const uint32_t H = m.id_switch0;
  const uint32_t L0 = m.id_link0;

  auto reschedule_host = [&](uint32_t h) { m.schedule(h, std::max(m.hosts[h]->ep->next_deadline(), now_)); };
  auto reschedule_switch = [&](uint32_t s) {
    m.schedule(H + s, std::max(m.sws[s].sw->next_event_time(), now_));
  };
  auto reschedule_link = [&](uint32_t l) {
    m.schedule(L0 + l, m.dirs[l]->link.next_event_time());
  };
  // Posts what the flow's window allows: messages on the initiator, and for
  // SEND the matching receive buffers on the sink.
  auto post_more = [&](size_t f, FlowState& st) {
    auto& fl = m.flows[f];
    const FlowSpec& fs = *fl.spec;
    auto& host = *m.hosts[fl.initiator];
    while (st.posted < st.messages && st.posted - st.completed - st.failed < fs.max_outstanding) {
      const uint64_t i = st.posted;
      const uint64_t off = (i % fl.slots) * fl.msg;
      const uint32_t len = static_cast<uint32_t>(std::min(fl.msg, fs.bytes - i * fl.msg));
      transport::Sge sge;
      transport::SendWr wr;
      wr.wr_id = i;
      wr.send_flags = IBV_SEND_SIGNALED;
      if (fs.opcode == Opcode::kRead) {
        sge = {reinterpret_cast<uint64_t>(fl.dst_mem.data() + off), len, fl.dst_mr->lkey()};
        wr.opcode = IBV_WR_RDMA_READ;
        wr.remote_addr = reinterpret_cast<uint64_t>(fl.src_mem.data() + off);
        wr.rkey = fl.src_mr->rkey();
      } else {
        sge = {reinterpret_cast<uint64_t>(fl.src_mem.data() + off), len, fl.src_mr->lkey()};
        wr.opcode = fs.opcode == Opcode::kSend ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
        wr.remote_addr = reinterpret_cast<uint64_t>(fl.dst_mem.data() + off);
        wr.rkey = fl.dst_mr->rkey();
      }
      wr.sg_list = {&sge, 1};
      if (fs.opcode == Opcode::kSend) {
        // Receive buffers in the same order the messages will consume them.
        const uint64_t r = fl.recvs_posted;
        const uint64_t roff = (r % fl.slots) * fl.msg;
        transport::Sge rsge{reinterpret_cast<uint64_t>(fl.dst_mem.data() + roff),
                            static_cast<uint32_t>(fl.msg), fl.dst_mr->lkey()};
        transport::RecvWr rwr;
        rwr.wr_id = r;
        rwr.sg_list = {&rsge, 1};
        if (fl.dst_qp->post_recv(rwr) != 0) break;
        ++fl.recvs_posted;
        m.hosts[fl.dst]->ep->notify(fl.dst_qp->qpn());
      }
      const transport::QueuePair& qp = fl.initiator == fl.src ? *fl.src_qp : *fl.dst_qp;
      if (host.ep->post_send(const_cast<transport::QueuePair&>(qp), wr) != 0) break;
      ++st.posted;
    }
  };

  auto poll_cq = [&](uint32_t h) {
    Impl::Host& host = *m.hosts[h];
    if (host.wcq) {
      for (;;) {
        const size_t n = static_cast<size_t>(host.wcq->poll(m.wcs));
        for (size_t i = 0; i < n; ++i)
          if (on_completion_) on_completion_(h, m.wcs[i]);
        if (n < m.wcs.size()) break;
      }
    }
    for (;;) {
      const size_t n = host.cq->poll(m.wcs);
      for (size_t i = 0; i < n; ++i) {
        const transport::WorkCompletion& wc = m.wcs[i];
        if (wc.qp_num >= host.qp_role.size() || host.qp_role[wc.qp_num] < 0) continue;
        const size_t f = static_cast<size_t>(host.qp_role[wc.qp_num] >> 1);
        const bool initiator = host.qp_role[wc.qp_num] & 1;
        FlowState& st = flows_[f];
        if (!initiator) continue;  // receive completions: buffers are pre-posted
        if (wc.opcode == IBV_WC_RECV || wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) continue;
        const bool was_done = st.done();
        if (wc.status == IBV_WC_SUCCESS) {
          ++st.completed;
          const auto& fl = m.flows[f];
          st.completed_bytes += std::min(fl.msg, fl.spec->bytes - wc.wr_id * fl.msg);
        } else {
          ++st.failed;
        }
        if (st.done() && !was_done) {
          st.finish_ns = now_;
          ++flows_done_;
        } else {
          post_more(f, st);
        }
      }
      if (n < m.wcs.size()) break;
    }
  };

  pause_ = false;
  while (!m.events.empty() && !m.stopped && !pause_) {
    const struct {
      uint64_t time;
      uint32_t id;
    } e{m.events.top_time(), m.events.top_id()};
    if (e.time > t) break;
    m.events.take_top();  // settled below, usually by the component's own reschedule
    now_ = e.time;

    if (e.id < H) {
      // Endpoint: timers and transmission.
      Impl::Host& host = *m.hosts[e.id];
      Impl::Dir& out = *m.dirs[host.out_link];
      const uint64_t rate = out.rate_bps / 8;
      for (;;) {
        // The endpoint writes into pooled packets (staging) directly.
        const size_t n = host.ep->transmit(now_, m.spans, m.lens);
        for (size_t i = 0; i < n; ++i) {
          fabric::Packet p = std::move(m.staging[i]);
          p.bytes.resize(m.lens[i]);
          m.staging[i] = m.take();
          m.spans[i] = m.staging[i].bytes;
          // The endpoint paces its port at `rate`: each frame starts once
          // the previous one has left, so it ends one frame time after now.
          const uint64_t wire = m.lens[i] + fabric::kEthWireOverhead;
          const uint64_t end = now_ + wire * 1'000'000'000ull / rate;
          out.send(std::move(p), now_, end);
        }
        events_ += n;
        if (n < kTxBatch) break;
      }
      poll_cq(e.id);
      uint64_t next = host.ep->next_deadline();
      if (next <= now_) next = now_ + 1;  // nothing more can happen at now
      m.schedule(e.id, next);
      reschedule_link(host.out_link);
    } else if (e.id < L0) {
      const uint32_t s = e.id - H;
      Impl::Sw& sw = m.sws[s];
      sw.sw->advance(now_, [&](fabric::Departure&& d) {
        ++events_;
        const uint32_t l = sw.out_link[d.port];
        m.dirs[l]->send(std::move(d.packet), d.start_time, d.time);
        reschedule_link(l);
      });
      uint64_t next = sw.sw->next_event_time();
      if (next <= now_) next = now_ + 1;
      m.schedule(e.id, next);
    } else if (e.id < m.id_link_state) {
      const uint32_t l = e.id - L0;
      Impl::Dir& dir = *m.dirs[l];
      const NodeRef to = dir.to;
      dir.link.advance(now_, [&](fabric::Packet&& p, uint64_t arrival) {
        ++events_;
        if (to.kind == Kind::kSwitch) {
          m.sws[to.index].sw->receive(to.port, std::move(p), arrival);
        } else {
          if (const fabric::Packet* next = dir.link.next_arrival()) prefetch_headers(*next);
          m.hosts[to.index]->ep->receive(p.bytes, arrival);
          m.give(std::move(p));
        }
      });
      reschedule_link(l);
      if (to.kind == Kind::kSwitch) {
        reschedule_switch(to.index);
      } else {
        poll_cq(to.index);
        reschedule_host(to.index);
      }
    } else if (e.id == m.id_link_state) {
      // A cable goes down or comes back: both directions (frames in flight
      // are lost while down, as Link::set_up does it) and, at a switch end,
      // the port (queues flushed, arrivals for it dropped, ECMP avoids it:
      // Switch::set_port_up, which also ends PFC on the link). A host end
      // only loses its PFC pauses (Endpoint::link_down): what it sends
      // while down is lost, and RC retransmission recovers.
      m.link_schedule.pop_due(now_, [&](const LinkChange& c) {
        for (uint32_t l : {2 * c.link, 2 * c.link + 1}) {
          Impl::Dir& dir = *m.dirs[l];
          dir.link.set_up(c.up);
          reschedule_link(l);
          // Each direction's receiving end: between the two, both ends.
          if (dir.to.kind == Kind::kSwitch) {
            m.sws[dir.to.index].sw->set_port_up(dir.to.port, c.up, now_);
            reschedule_switch(dir.to.index);
          } else if (!c.up) {
            m.hosts[dir.to.index]->ep->link_down(now_);
            reschedule_host(dir.to.index);
          }
        }
        // run.reconverge: the routing protocol learns of it that much later.
        if (sc.run.reconverge_ns) {
          if (m.reroutes.empty()) m.schedule(m.id_reroute, now_ + *sc.run.reconverge_ns);
          m.reroutes.push_back(now_ + *sc.run.reconverge_ns);
        }
      });
      m.schedule(e.id, m.link_schedule.next_time());
    } else if (e.id == m.id_reroute) {
      // Routes over the links up now, installed in every switch at once
      // (packets already queued stay where they are).
      while (!m.reroutes.empty() && m.reroutes.front() <= now_) m.reroutes.pop_front();
      std::vector<fabric::RouteTable> tables = m.compute_routes();
      for (size_t s = 0; s < m.sws.size(); ++s) m.sws[s].sw->routes() = std::move(tables[s]);
      ++route_updates_;
      m.schedule(e.id, m.reroutes.empty() ? kNever : m.reroutes.front());
    } else if (e.id == m.id_workload) {
      while (m.next_start < m.start_order.size() &&
             sc.flows[m.start_order[m.next_start]].start_ns <= now_) {
        const size_t f = m.start_order[m.next_start++];
        flows_[f].start_ns = now_;
        post_more(f, flows_[f]);
        reschedule_host(m.flows[f].initiator);
        reschedule_host(m.flows[f].dst);
      }
      if (m.next_start < m.start_order.size())
        m.schedule(e.id, sc.flows[m.start_order[m.next_start]].start_ns);
    } else {
      // Sampler: only changes are stored (sample_log.h).
      const uint64_t iv = sc.run.csv_interval_ns;
      const uint32_t k = static_cast<uint32_t>(m.sample_times.size());
      m.sample_times.push_back(now_);
      for (size_t f = 0; f < m.flows.size(); ++f) {
        m.flow_tx[f].record(k, flow_tx_bytes(f));
        m.flow_done[f].record(k, flows_[f].completed_bytes);
        m.flow_cc[f].record(k, flow_cc_rate_bps(f));
      }
      size_t qh = 0;
      for (size_t s = 0; s < m.sws.size(); ++s) {
        const fabric::Switch& sw = *m.sws[s].sw;
        for (uint16_t p = 0; p < sw.num_ports(); ++p)
          for (uint8_t c = 0; c < fabric::kNumClasses; ++c)
            m.queue_len[qh++].record(k, sw.queue_bytes(p, c));
      }
      if (m.tracked_from.empty() || m.tracked_from.back().second != m.tracked_tcs)
        m.tracked_from.emplace_back(k, m.tracked_tcs);
      for (size_t l = 0; l < m.dirs.size(); ++l) {
        const Impl::Dir& d = *m.dirs[l];
        m.link_bytes[l].record(k, d.link.counters().delivered_bytes);
        m.link_busy[l].record(k, d.busy_by(now_));
      }
      m.schedule(e.id, now_ + iv);
      if (hook_) hook_(now_);
    }
    m.events.settle();
    if (sc.run.stop_when_done && !flows_.empty() && all_done()) m.stopped = true;
  }
  if (pause_) return true;
  if (!m.stopped) now_ = std::max(now_, t);
  // Nothing left but the sampler: the run is over.
  bool only_sampler = true;
  for (uint32_t id = 0; id < m.id_sampler; ++id) only_sampler &= m.events.at(id) == kNever;
  return !m.stopped && !only_sampler;
}

uint64_t Simulator::run() {
  run_until(impl_->sc.run.duration_ns);
  return now_;
}

Summary Simulator::summary() const {
  const Impl& m = *impl_;
  Summary s;
  s.end_ns = now_;
  s.all_done = all_done();
  s.packet_events = events_;
  std::vector<uint64_t> fcts;
  for (size_t f = 0; f < flows_.size(); ++f) {
    const FlowState& st = flows_[f];
    if (st.done() && st.failed == 0) {
      ++s.flows_completed;
      fcts.push_back(st.fct_ns());
    }
    if (st.failed) ++s.flows_failed;
    const Verification v = verification(f);
    if (v == Verification::kMatched) ++s.flows_verified;
    if (v == Verification::kCorrupt) ++s.flows_corrupt;
    const auto& c = m.flows[f].src_qp->counters();
    const auto& d = m.flows[f].dst_qp->counters();
    s.retransmits += c.tx_retransmit_packets + d.tx_retransmit_packets;
    s.timeouts += c.retransmit_timeouts + d.retransmit_timeouts;
    s.cnps += c.cnps_received + d.cnps_received;
  }
  for (const transport::QueuePair* qp : m.workload_qps) {
    const auto& c = qp->counters();
    s.retransmits += c.tx_retransmit_packets;
    s.timeouts += c.retransmit_timeouts;
    s.cnps += c.cnps_received;
  }
  s.fct_p50_ns = percentile(fcts, 0.5);
  s.fct_p99_ns = percentile(fcts, 0.99);
  s.fct_max_ns = fcts.empty() ? 0 : *std::max_element(fcts.begin(), fcts.end());
  size_t qh = 0;
  for (size_t sw = 0; sw < m.sws.size(); ++sw) {
    const fabric::Switch& x = *m.sws[sw].sw;
    for (uint16_t p = 0; p < x.num_ports(); ++p) {
      const fabric::PortCounters& pc = x.counters(p);
      s.xoff_sent += pc.tx_xoff;
      s.xon_sent += pc.tx_xon;
      s.pfc_rx_switches += pc.rx_pfc;
      for (uint8_t c = 0; c < fabric::kNumClasses; ++c) {
        const fabric::QueueCounters& q = pc.queues[c];
        s.switch_drops += q.drops + q.watchdog_drops;
        s.ecn_marks += q.ecn_marked;
        s.switch_paused_ns += x.paused_ns(p, c, now_);
        s.max_queue_bytes = std::max(s.max_queue_bytes, q.max_bytes);
        if (q.enq_packets == 0 && q.drops == 0) continue;
        QueueSummary qs{static_cast<uint32_t>(sw), p, c, q.max_bytes,
                        percentile(m.queue_len[qh + p * fabric::kNumClasses + c].expand(
                                       static_cast<uint32_t>(m.sample_times.size())),
                                   0.99),
                        q.drops + q.watchdog_drops, q.ecn_marked};
        s.p99_queue_bytes = std::max(s.p99_queue_bytes, qs.p99_bytes);
        s.queues.push_back(qs);
      }
      s.switch_drops += pc.down_drops + pc.no_route;
    }
    qh += x.num_ports() * fabric::kNumClasses;
  }
  for (const auto& d : m.dirs) {
    const auto& lc = d->link.counters();
    s.link_losses += lc.lost_random + lc.lost_burst + lc.lost_down;
  }
  for (const auto& h : m.hosts) {
    for (size_t p = 0; p < wire::kPfcPriorities; ++p)
      s.host_paused_ns += h->ep->paused_ns(static_cast<uint8_t>(p), now_);
    s.acks_without_int += h->ep->counters().cc_acks_without_int;
  }
  return s;
}

std::string missing_int_warning(const Summary& s) {
  if (s.acks_without_int == 0) return {};
  return "warning: the congestion control steers by INT, but " +
         std::to_string(s.acks_without_int) +
         " ACK(s) carried no INT records (switch INT off: [switch] int.enabled); it ran on "
         "its initial window";
}

std::string Simulator::summary_json() const {
  const Impl& m = *impl_;
  const Summary s = summary();
  nlohmann::ordered_json j;
  j["scenario"] = m.sc.file;
  j["seed"] = m.sc.run.seed;
  j["end_ns"] = s.end_ns;
  j["all_done"] = s.all_done;
  j["packet_events"] = s.packet_events;
  j["flows_completed"] = s.flows_completed;
  j["flows_failed"] = s.flows_failed;
  j["flows_verified"] = s.flows_verified;
  j["flows_corrupt"] = s.flows_corrupt;
  j["fct_ns"] = {{"p50", s.fct_p50_ns}, {"p99", s.fct_p99_ns}, {"max", s.fct_max_ns}};
  j["drops"] = {{"switch", s.switch_drops}, {"link", s.link_losses}};
  j["ecn_marks"] = s.ecn_marks;
  j["pfc"] = {{"xoff_sent", s.xoff_sent},
              {"xon_sent", s.xon_sent},
              {"rx_by_switches", s.pfc_rx_switches},
              {"switch_paused_ns", s.switch_paused_ns},
              {"host_paused_ns", s.host_paused_ns}};
  j["retransmits"] = s.retransmits;
  j["timeouts"] = s.timeouts;
  j["cnps"] = s.cnps;
  j["queue_bytes"] = {{"max", s.max_queue_bytes}, {"p99", s.p99_queue_bytes}};
  auto& flows = j["flows"] = nlohmann::ordered_json::array();
  for (size_t f = 0; f < flows_.size(); ++f) {
    const FlowState& st = flows_[f];
    const FlowSpec& fs = *m.flows[f].spec;
    flows.push_back({{"name", fs.name},
                     {"src", fs.src},
                     {"dst", fs.dst},
                     {"opcode", std::string(to_string(fs.opcode))},
                     {"cc", fs.cc},
                     {"bytes", fs.bytes},
                     {"start_ns", st.start_ns},
                     {"finish_ns", st.finish_ns},
                     {"fct_ns", st.fct_ns()},
                     {"done", st.done()},
                     {"failed", st.failed},
                     {"verified", verify(f)},
                     {"retransmits", m.flows[f].src_qp->counters().tx_retransmit_packets +
                                         m.flows[f].dst_qp->counters().tx_retransmit_packets}});
  }
  auto& queues = j["queues"] = nlohmann::ordered_json::array();
  for (const QueueSummary& q : s.queues)
    queues.push_back({{"switch", m.sc.switches[q.sw].name},
                      {"port", q.port},
                      {"peer", m.sws[q.sw].peer[q.port]},
                      {"tc", q.tc},
                      {"max_bytes", q.max_bytes},
                      {"p99_bytes", q.p99_bytes},
                      {"drops", q.drops},
                      {"ecn_marked", q.ecn_marked}});
  return j.dump(2) + "\n";
}

void Simulator::write_outputs(const std::string& dir, OutputFiles files) const {
  const Impl& m = *impl_;
  std::filesystem::create_directories(dir);
  auto open = [&](const std::string& name) {
    std::ofstream o(std::filesystem::path(dir) / name, std::ios::binary);
    if (!o) throw std::runtime_error(dir + "/" + name + ": cannot write");
    return o;
  };
  char buf[256];
  if (files.flows) {
    auto o = open("flows.csv");
    o << "time_ns,flow,tx_bytes,tx_rate_bps,done_bytes,cc_rate_bps\n";
    for (const FlowSample& s : flow_samples())
      o << s.time_ns << ',' << m.flows[s.flow].spec->name << ',' << s.tx_bytes << ','
        << s.tx_rate_bps << ',' << s.done_bytes << ',' << s.cc_rate_bps << '\n';
  }
  {
    auto o = open("queues.csv");
    o << "time_ns,switch,port,peer,tc,bytes\n";
    for (const QueueSample& s : queue_samples())
      o << s.time_ns << ',' << m.sc.switches[s.sw].name << ',' << s.port << ','
        << m.sws[s.sw].peer[s.port] << ',' << int{s.tc} << ',' << s.bytes << '\n';
  }
  if (files.links) {
    auto o = open("links.csv");
    o << "time_ns,link,bytes,utilisation\n";
    for (const LinkSample& s : link_samples()) {
      std::snprintf(buf, sizeof buf, "%.6f", s.utilisation);
      o << s.time_ns << ',' << m.dirs[s.link]->name << ',' << s.bytes << ',' << buf << '\n';
    }
  }
  {
    auto o = open("fct.csv");
    o << "flow,src,dst,bytes,start_ns,finish_ns,fct_ns,status\n";
    for (size_t f = 0; f < flows_.size(); ++f) {
      const FlowState& st = flows_[f];
      const FlowSpec& fs = *m.flows[f].spec;
      o << fs.name << ',' << fs.src << ',' << fs.dst << ',' << fs.bytes << ',' << st.start_ns
        << ',' << st.finish_ns << ',' << st.fct_ns() << ','
        << (st.failed ? "failed" : st.done() ? "done" : "running") << '\n';
    }
  }
  open("summary.json") << summary_json();
}

}  // namespace droce::sim
