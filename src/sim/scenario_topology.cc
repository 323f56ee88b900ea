// [topology]: "custom" (only what [[hosts]], [[switches]] and [[links]]
// give), or a generated one, "incast" or "leaf_spine" (topology.h), its
// nodes and links added before the explicit ones.
#include <algorithm>
#include <stdexcept>

#include "droce/sim/topology.h"
#include "scenario_reader.h"

namespace droce::sim {

namespace {

std::string name_at(const std::string& prefix, uint64_t i) { return prefix + std::to_string(i); }

// Receiver h0 and senders h1..hN on switch s0; flows f1..fN into h0 when
// flow_bytes is given.
void read_incast(ScenarioParse& p, const toml::table& topo, int line) {
  const Reader& r = p.r;
  Scenario& sc = p.sc;
  r.check_keys(topo, "topology", {"kind", "senders", "rate", "delay", "flow_bytes", "start"});
  uint64_t senders = 2;
  r.integer(topo, "senders", "topology", senders, 1, 65535);
  uint64_t rate = p.link_default.rate_bps;
  r.rate(topo, "rate", "topology", rate);
  r.time(topo, "delay", "topology", p.link_default.link.propagation_ns, 1'000'000'000);
  uint64_t flow_bytes = 0, start = p.flow_default.start_ns;
  r.bytes(topo, "flow_bytes", "topology", flow_bytes);
  r.time(topo, "start", "topology", start);
  SwitchSpec s = p.switch_default;
  s.name = "s0";
  sc.switches.push_back(s);
  for (uint64_t i = 0; i <= senders; ++i) {
    sc.hosts.push_back(HostSpec{name_at("h", i), rate, line});
    LinkSpec l = p.link_default;
    l.a = name_at("h", i);
    l.b = "s0";
    l.rate_bps = rate;
    l.line = line;
    sc.links.push_back(std::move(l));
  }
  for (uint64_t i = 1; flow_bytes && i <= senders; ++i) {
    FlowSpec f = p.flow_default;
    f.name = name_at("f", i);
    f.line = line;
    f.src = name_at("h", i);
    f.dst = "h0";
    f.bytes = flow_bytes;
    f.start_ns = start;
    sc.flows.push_back(std::move(f));
  }
}

void read_leaf_spine(ScenarioParse& p, const toml::table& topo, int line) {
  const Reader& r = p.r;
  r.check_keys(topo, "topology", {"kind", "leaves", "spines", "hosts_per_leaf", "hosts",
                                  "host_rate", "spine_rate", "oversubscription", "delay"});
  uint64_t leaves = 2, spines = 2, hpl = 4, hosts = 0;
  r.integer(topo, "leaves", "topology", leaves, 1, 8192);
  r.integer(topo, "spines", "topology", spines, 1, 256);
  r.integer(topo, "hosts_per_leaf", "topology", hpl, 1, 256);
  // Host addresses and MACs number hosts in 16 bits.
  if (leaves * hpl > 65536 && !topo.contains("hosts"))
    r.fail(topo.source(), "topology", "leaves x hosts_per_leaf is at most 65536 hosts");
  if (r.integer(topo, "hosts", "topology", hosts, 1, std::min<uint64_t>(leaves * hpl, 65536)) &&
      hosts <= (leaves - 1) * hpl)
    r.fail(topo.get("hosts")->source(), "topology.hosts",
           "leaves a leaf without hosts: more than (leaves - 1) x hosts_per_leaf = " +
               std::to_string((leaves - 1) * hpl));
  LeafSpineShape shape;
  shape.leaves = static_cast<uint32_t>(leaves);
  shape.spines = static_cast<uint32_t>(spines);
  shape.hosts_per_leaf = static_cast<uint32_t>(hpl);
  shape.hosts = static_cast<uint32_t>(hosts);
  shape.host_rate_bps = p.link_default.rate_bps;
  r.rate(topo, "host_rate", "topology", shape.host_rate_bps);
  double over = 1;
  const bool has_over = r.number(topo, "oversubscription", "topology", over, 0.01, 1000);
  shape.spine_rate_bps = 0;
  if (r.rate(topo, "spine_rate", "topology", shape.spine_rate_bps) && has_over)
    r.fail(topo.source(), "topology.spine_rate", "give spine_rate or oversubscription, not both");
  if (!shape.spine_rate_bps) {
    // Oversubscription = host bandwidth into a leaf / its uplink bandwidth.
    shape.spine_rate_bps =
        leaf_spine_uplink_rate(shape.hosts_per_leaf, shape.host_rate_bps, shape.spines, over);
    if (shape.spine_rate_bps < kMinRate || shape.spine_rate_bps > kMaxRate)
      r.fail(topo.get("oversubscription") ? topo.get("oversubscription")->source()
                                          : topo.source(),
             "topology.oversubscription",
             "gives a spine link rate of " + std::to_string(shape.spine_rate_bps) +
                 " bit/s, outside 1 Mb/s .. 1.6 Tb/s");
  }
  r.time(topo, "delay", "topology", p.link_default.link.propagation_ns, 1'000'000'000);
  add_leaf_spine(p.sc, shape, p.switch_default, p.link_default, line);
}

}  // namespace

void read_topology(ScenarioParse& p) {
  const Reader& r = p.r;
  std::string kind = "custom";
  const toml::table* topo = r.table(p.root, "topology", "");
  int line = 0;
  if (topo) {
    line = static_cast<int>(topo->source().begin.line);
    r.str(*topo, "kind", "topology", kind);
  }
  if (kind == "incast") {
    read_incast(p, *topo, line);
  } else if (kind == "leaf_spine") {
    read_leaf_spine(p, *topo, line);
  } else if (kind == "custom") {
    if (topo) r.check_keys(*topo, "topology", {"kind"});
  } else {
    r.fail(topo->get("kind")->source(), "topology.kind",
           "\"" + kind + "\" is not one of: incast, leaf_spine, custom");
  }
}

}  // namespace droce::sim
