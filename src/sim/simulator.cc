// The runner's construction: hosts (Device + Endpoint), switches (routes
// from fabric::shortest_path_routes) and link directions from a Scenario,
// the flows (workload.cc), the time series (sampler.cc) and the event
// queue's first times; and the accessors of what was built.
#include "droce/sim/simulator.h"

#include <stdexcept>

#include "flood_tree.h"
#include "simulator_impl.h"

namespace droce::sim {

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Each switch's configuration from the scenario, without ports (the links
// add them) and with its own seed.
std::vector<fabric::SwitchConfig> Simulator::Impl::switch_configs() {
  sws.resize(sc.switches.size());
  std::vector<fabric::SwitchConfig> cfgs(sc.switches.size());
  for (size_t s = 0; s < sc.switches.size(); ++s) {
    cfgs[s] = sc.switches[s].cfg;
    cfgs[s].ports.clear();
    cfgs[s].node_id = static_cast<uint32_t>(s + 1);
    cfgs[s].seed = mix(sc.run.seed, 0x5317C4 + s);
    pcp_tagged |= cfgs[s].classifier == fabric::Classifier::kPcp;
  }
  return cfgs;
}

void Simulator::Impl::build_hosts() {
  hosts.resize(sc.hosts.size());
  // Completion queue entries per host: every message and receive buffer a
  // flow may have outstanding, both ends, plus slack.
  std::vector<uint64_t> cqes(sc.hosts.size(), 64);
  for (const auto& f : sc.flows)
    for (int i : {sc.host_index(f.src), sc.host_index(f.dst)})
      if (i >= 0) cqes[static_cast<size_t>(i)] += 2 * f.max_outstanding + 8;
  for (size_t h = 0; h < sc.hosts.size(); ++h) {
    auto host = std::make_unique<Host>(mix(sc.run.seed, 0x4D4B0000 + h));
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
    host->cq = host->device.create_cq(static_cast<uint32_t>(std::min<uint64_t>(cqes[h], 1 << 20)));
    watch_cq(*host, *host->cq);
    hosts[h] = std::move(host);
  }
}

namespace {

// A switch port on a link of `rate_bps`, with the switch's ECN, scheduler
// and buffer settings; its MAC names the switch and the port.
fabric::PortConfig port_config(const SwitchSpec& ss, uint32_t sw, size_t port, uint64_t rate_bps,
                               bool flood) {
  fabric::PortConfig pc;
  pc.rate_bps = rate_bps;
  pc.flood = flood;
  pc.buffer_bytes = ss.port_buffer_bytes;
  pc.scheduler = ss.scheduler;
  pc.ecn = ss.ecn_auto ? fabric::ecn_defaults_for_rate(rate_bps, ss.ecn.mode) : ss.ecn;
  if (ss.ecn_auto) pc.ecn.point = ss.ecn.point;
  if (ss.ecn_auto && ss.ecn.pmax != fabric::EcnConfig{}.pmax) pc.ecn.pmax = ss.ecn.pmax;
  pc.mac = {0x02, 0x5C, static_cast<uint8_t>(sw >> 8), static_cast<uint8_t>(sw),
            static_cast<uint8_t>(port >> 8), static_cast<uint8_t>(port)};
  return pc;
}

}  // namespace

// Switch ports, link directions (two per link, a->b then b->a) and the
// graph routes are computed on, in link order.
void Simulator::Impl::build_links(std::vector<fabric::SwitchConfig>& cfgs) {
  const std::vector<bool> flood =
      sc.run.resolve_macs ? flood_links(sc) : std::vector<bool>(sc.links.size(), false);
  auto node_of = [&](const std::string& name) {
    int i = sc.host_index(name);
    if (i >= 0) return NodeRef{Kind::kHost, static_cast<uint32_t>(i), 0};
    return NodeRef{Kind::kSwitch, static_cast<uint32_t>(sc.switch_index(name)), 0};
  };
  const size_t H = sc.hosts.size();
  graph = fabric::FabricGraph(H, sc.switches.size());
  auto flat = [&](const NodeRef& n) {
    return static_cast<uint32_t>(n.kind == Kind::kHost ? n.index : H + n.index);
  };
  for (size_t l = 0; l < sc.links.size(); ++l) {
    const LinkSpec& ls = sc.links[l];
    NodeRef a = node_of(ls.a), b = node_of(ls.b);
    for (NodeRef* n : {&a, &b}) {
      if (n->kind != Kind::kSwitch) continue;
      std::vector<fabric::PortConfig>& ports = cfgs[n->index].ports;
      n->port = static_cast<uint16_t>(ports.size());
      ports.push_back(port_config(sc.switches[n->index], n->index, ports.size(), ls.rate_bps,
                                  flood[l]));
    }
    for (int d = 0; d < 2; ++d) {
      const NodeRef& from = d == 0 ? a : b;
      const NodeRef& to = d == 0 ? b : a;
      fabric::LinkConfig lc = ls.link;
      lc.seed = mix(sc.run.seed, 0x11C0 + 2 * l + static_cast<uint64_t>(d));
      auto dir = std::make_unique<Dir>(lc);
      dir->rate_bps = ls.rate_bps;
      dir->to = to;
      dir->name = (d == 0 ? ls.a + "->" + ls.b : ls.b + "->" + ls.a);
      const uint32_t id = static_cast<uint32_t>(dirs.size());
      if (from.kind == Kind::kHost) {
        hosts[from.index]->out_link = id;
      } else {
        auto& sw = sws[from.index];
        if (sw.out_link.size() <= from.port) {
          sw.out_link.resize(from.port + 1);
          sw.peer.resize(from.port + 1);
        }
        sw.out_link[from.port] = id;
        sw.peer[from.port] = d == 0 ? ls.b : ls.a;
        graph.add_edge(flat(from), from.port, flat(to), static_cast<uint32_t>(l));
      }
      dirs.push_back(std::move(dir));
    }
    // A host's edge after its switch's: the order shortest_path_routes
    // sees them in does not matter for hosts, which have one link.
    if (a.kind == Kind::kHost) graph.add_edge(flat(a), 0, flat(b), static_cast<uint32_t>(l));
    if (b.kind == Kind::kHost) graph.add_edge(flat(b), 0, flat(a), static_cast<uint32_t>(l));
  }
}

std::vector<fabric::RouteTable> Simulator::Impl::compute_routes() const {
  std::vector<wire::IpAddress> ips(hosts.size());
  for (size_t h = 0; h < hosts.size(); ++h) ips[h] = hosts[h]->ip;
  std::vector<bool> up(sc.links.size());
  for (size_t l = 0; l < up.size(); ++l) up[l] = dirs[2 * l]->link.up();
  return fabric::shortest_path_routes(graph, ips, sc.ecmp, up);
}

// The switches, with routes over the whole graph (every link is up at
// time 0).
void Simulator::Impl::build_switches(std::vector<fabric::SwitchConfig>& cfgs) {
  std::vector<fabric::RouteTable> tables = compute_routes();
  for (size_t s = 0; s < cfgs.size(); ++s) {
    cfgs[s].routes = std::move(tables[s]);
    if (cfgs[s].ports.empty())
      throw ScenarioError(sc.file + ": switches." + sc.switches[s].name + ": has no links");
    try {
      sws[s].sw = std::make_unique<fabric::Switch>(cfgs[s]);
    } catch (const std::invalid_argument& e) {
      throw ScenarioError(sc.file + ": switches." + sc.switches[s].name + ": " + e.what());
    }
  }
}

// The packet pool grows to what is in flight, mostly frames queued in
// switch buffers; grown during the run, each new packet was an allocation,
// a zero fill and page faults inside the measured loop. So fill it now for
// the switches' buffers at the smallest MTU (up to 8192 packets, ~37 MB;
// beyond that it still grows on demand).
void Simulator::Impl::prefill_pool() {
  uint64_t buffered = 0;
  for (size_t s = 0; s < sws.size(); ++s) {
    const fabric::SwitchConfig& c = sc.switches[s].cfg;
    buffered += c.buffer_mode == fabric::BufferMode::kShared
                    ? c.shared_buffer_bytes
                    : sc.switches[s].port_buffer_bytes * sws[s].sw->num_ports();
  }
  uint32_t min_mtu = 4096;
  for (const auto& f : sc.flows) min_mtu = std::min(min_mtu, f.mtu);
  const uint64_t prefill = std::min<uint64_t>(buffered / (min_mtu + 64), 8192);
  pool.reserve(prefill);
  for (uint64_t i = 0; i < prefill; ++i) pool.push_back(fresh());
  whole.assign(kBufBytes, 0);  // defined bytes, as fresh() gives
  for (size_t i = 0; i < kTxBatch; ++i) {
    staging[i] = take();
    spans[i] = staging[i].bytes;
  }
}

// Component ids: hosts, switches, link directions, link state changes,
// workload, sampler, route updates. Link state changes come after every
// host, switch and link event at the same time: a frame arriving when its
// link goes down is delivered, one sent then is lost. Then the first times.
void Simulator::Impl::schedule_start() {
  id_switch0 = static_cast<uint32_t>(hosts.size());
  id_link0 = static_cast<uint32_t>(hosts.size() + sws.size());
  id_link_state = static_cast<uint32_t>(id_link0 + dirs.size());
  id_workload = id_link_state + 1;
  id_sampler = id_workload + 1;
  id_reroute = id_sampler + 1;
  events.resize(id_reroute + 1);
  link_schedule = LinkSchedule(sc.links);
  schedule(id_link_state, link_schedule.next_time());
  if (!flows.empty()) schedule(id_workload, sc.flows[start_order[0]].start_ns);
  if (sc.run.resolve_macs) {
    // The ports come up: each host announces its address, which also
    // teaches the switches where every host is.
    for (uint32_t h = 0; h < hosts.size(); ++h) {
      hosts[h]->ep->announce(0);
      schedule(h, 0);
    }
  }
  if (sc.run.csv_interval_ns) schedule(id_sampler, sc.run.csv_interval_ns);
}

Simulator::Simulator(const Scenario& scenario) : impl_(std::make_unique<Impl>(*this)) {
  Impl& m = *impl_;
  m.sc = scenario;
  std::vector<fabric::SwitchConfig> cfgs = m.switch_configs();
  m.build_hosts();
  m.build_links(cfgs);
  m.build_switches(cfgs);
  m.build_flows();
  m.build_series();
  m.prefill_pool();
  m.schedule_start();
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

uint64_t Simulator::host_tx_bytes(size_t h) const {
  const Impl& m = *impl_;
  return m.dirs.at(m.hosts.at(h)->out_link)->link.counters().delivered_bytes;
}

}  // namespace droce::sim
