#include "testbed.h"

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "droce/cc/registry.h"
#include "droce/sim/topology.h"

namespace droce::pktgen_app {

// also the simulator's spellings (MB, ...).
bool parse_size(const std::string& s, uint64_t& out) {
  return pktgen::parse_size(s, out) || sim::parse_bytes(s, out);
}

bool parse_probability(std::string s, double& out) {
  bool pct = !s.empty() && s.back() == '%';
  if (pct) s.pop_back();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  out = pct ? v / 100 : v;
  return out >= 0 && out < 1;
}

std::string fmt_rate(uint64_t bps) { return fmt::format("{:g}G", static_cast<double>(bps) / 1e9); }

std::string topology_toml(const std::string& kind, uint32_t ranks, uint64_t link_bps,
                          uint64_t delay_ns, uint32_t hosts_per_leaf, uint32_t spines,
                          double oversub, bool pfc, bool int_on, uint64_t seed,
                          uint64_t interval_ns) {
  std::string t;
  t += fmt::format("[run]\nseed = {}\ncsv_interval = {}\nstop_when_done = false\nduration = \"1s\"\n",
                   seed, interval_ns);
  t += fmt::format("[switch]\npfc.enabled = {}\nint.enabled = {}\n", pfc ? "true" : "false",
                   int_on ? "true" : "false");
  // ECN marks well before PFC pauses: RED from 100 KiB to 400 KiB at
  // 100 G (the HPCC paper's DCQCN setting), scaled with the link rate. The
  // simulator's own defaults (400 KiB..1.6 MiB at 100 G) sit above what
  // 96 KiB of XOFF per ingress lets build, so DCQCN never saw a mark.
  const uint64_t kmin = std::max<uint64_t>(link_bps / 1'000'000'000 * 1024, 4096);
  t += fmt::format("ecn.kmin = {}\necn.kmax = {}\n", kmin, 4 * kmin);
  t += fmt::format("[link]\nrate = {}\ndelay = {}\n", link_bps, delay_ns);
  if (kind == "single_switch") {
    for (uint32_t r = 0; r < ranks; ++r) t += fmt::format("[[hosts]]\nname = \"h{}\"\n", r);
    t += "[[switches]]\nname = \"s0\"\n";
    for (uint32_t r = 0; r < ranks; ++r) t += fmt::format("[[links]]\na = \"h{}\"\nb = \"s0\"\n", r);
  } else {
    // The scenario's own leaf-spine generator (sim/topology.h); the last
    // leaf takes the ranks left over.
    const uint32_t leaves = (ranks + hosts_per_leaf - 1) / hosts_per_leaf;
    t += fmt::format(
        "[topology]\nkind = \"leaf_spine\"\nleaves = {}\nspines = {}\nhosts_per_leaf = {}\n"
        "hosts = {}\nspine_rate = {}\n",
        leaves, spines, hosts_per_leaf, ranks,
        sim::leaf_spine_uplink_rate(hosts_per_leaf, link_bps, spines, oversub));
  }
  return t;
}

bool int_and_acks(const Setup& st, const std::string& cc, bool& int_on, uint32_t& ack_every_n) {
  int_on = st.int_mode == "on" || (st.int_mode == "auto" && cc::find_algorithm(cc)->needs_int);
  if (st.ack_every == "auto") {
    ack_every_n = int_on ? 1 : 0;  // INT feedback on every ACK, as HPCC's receivers send
    return true;
  }
  uint64_t n = 0;
  if (!parse_size(st.ack_every, n) || n > (1u << 20)) return false;
  ack_every_n = static_cast<uint32_t>(n);
  return true;
}

sim::Scenario make_testbed(const Setup& st, const sim::QpOptions& qo, bool int_on) {
  const pktgen::CollectiveConfig& c = st.c;
  sim::Scenario sc;
  if (st.topology == "single_switch" || st.topology == "leaf_spine") {
    sc = sim::parse_scenario(topology_toml(st.topology, c.ranks, st.link_bps, st.delay_ns,
                                           st.hosts_per_leaf, st.spines, st.oversub, st.pfc,
                                           int_on, st.sim_seed, st.interval_ns),
                             "--topology " + st.topology);
  } else {
    sc = sim::load_scenario(st.topology);
    sc.run.stop_when_done = false;
    sc.run.csv_interval_ns = st.interval_ns;
    sc.run.seed = st.sim_seed;
    // The file's own INT setting stands unless --int says otherwise.
    if (st.int_mode != "auto" || int_on)
      for (auto& sw : sc.switches) sw.cfg.int_cfg.enabled = int_on;
  }
  if (st.loss > 0)
    for (auto& l : sc.links) l.link.impairments.loss = st.loss;
  for (const Straggler& sg : st.strag) {
    const std::string& name = sc.hosts.at(sg.rank).name;
    if (sg.rate_bps) sc.hosts[sg.rank].rate_bps = sg.rate_bps;
    for (auto& l : sc.links)
      if (l.a == name || l.b == name) {
        if (sg.rate_bps) l.rate_bps = sg.rate_bps;
        if (sg.loss) l.link.impairments.loss = *sg.loss;
      }
  }
  for (size_t i = 0; i < st.bgs.size(); ++i) {
    sim::FlowSpec f;
    f.name = fmt::format("bg{}", i);
    f.src = sc.hosts.at(st.bgs[i].src).name;
    f.dst = sc.hosts.at(st.bgs[i].dst).name;
    f.bytes = st.bgs[i].bytes;
    f.message_bytes = 1 << 20;
    f.max_outstanding = 4;
    f.cc = qo.cc;
    f.cc_params = qo.cc_params;
    f.recovery = qo.recovery;
    f.mtu = st.mtu;
    f.ack_every_n = qo.ack_every_n;
    f.verify = false;
    sc.flows.push_back(f);
  }
  return sc;
}

}  // namespace droce::pktgen_app
