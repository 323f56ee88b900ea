// droce-pktgen: collective replay (issue 7). --mode sim (default) runs a
// pktgen::Schedule over RC QPs in the deterministic virtual-time simulator:
// endpoints, an emulated switch fabric, CC and loss recovery in the loop.
// --mode dpdk|stream is droce-pktgen-dpdk's (docs/PKTGEN.md "Modes"): this
// program execs it with the same arguments.
//
//   droce-pktgen --pattern ring --ranks 8 -b 1M -e 64M -f 2 --cc dcqcn --verify
//
// Output: nccl-tests' table, tail latencies, a simulator summary; --json,
// --csv DIR (time series), --plot (PNGs from the CSVs via matplotlib).
// Bad options: a message naming the option, exit 2.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "droce/cc/registry.h"
#include "droce/pktgen/busbw.h"
#include "droce/pktgen/config.h"
#include "droce/pktgen/report.h"
#include "droce/pktgen/schedule.h"
#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"
#include "sim_executor.h"

#ifndef DROCE_SOURCE_ROOT
#define DROCE_SOURCE_ROOT "."
#endif

namespace {

using namespace droce;
using pktgen::SimExecutor;

constexpr int kUsage = 2;
constexpr uint32_t kMaxSimRanks = 1024;
constexpr uint64_t kMaxVerifyBytes = 4ull << 30;

int fail(const std::string& option, const std::string& message) {
  std::cerr << "droce-pktgen: " << option << ": " << message << "\n";
  return kUsage;
}

// --mode dpdk|stream: hand over to droce-pktgen-dpdk next to this binary.
int exec_dpdk(char** argv, const std::string& mode) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::filesystem::path dir = n > 0 ? std::filesystem::path(std::string(self, n)).parent_path()
                                    : std::filesystem::path(".");
  const std::string target = (dir / "droce-pktgen-dpdk").string();
  if (access(target.c_str(), X_OK) == 0) {
    argv[0] = const_cast<char*>(target.c_str());
    execv(target.c_str(), argv);
    return fail("--mode", mode + ": cannot run " + target);
  }
  return fail("--mode", mode +
                            " is not built (no droce-pktgen-dpdk next to droce-pktgen; "
                            "configure with DPDK)");
}

// nccl-tests' sizes: plain bytes or K/M/G (powers of 1024); also the
// simulator's spellings (KiB, MB, ...).
bool parse_size(const std::string& s, uint64_t& out) {
  if (s.empty()) return false;
  size_t pos = 0;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
  if (pos == 0) return false;
  const std::string unit = s.substr(pos);
  uint64_t mult = 1;
  if (unit.empty()) {
    mult = 1;
  } else if (unit == "K" || unit == "k") {
    mult = 1ull << 10;
  } else if (unit == "M" || unit == "m") {
    mult = 1ull << 20;
  } else if (unit == "G" || unit == "g") {
    mult = 1ull << 30;
  } else {
    return sim::parse_bytes(s, out);
  }
  try {
    out = std::stoull(s.substr(0, pos)) * mult;
  } catch (...) {
    return false;
  }
  return true;
}

// "1%", "0.01" -> 0.01; must be in [0, 1).
bool parse_probability(std::string s, double& out) {
  bool pct = !s.empty() && s.back() == '%';
  if (pct) s.pop_back();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  out = pct ? v / 100 : v;
  return out >= 0 && out < 1;
}

struct Straggler {
  uint32_t rank = 0;
  uint64_t rate_bps = 0;  // 0: unchanged
  std::optional<double> loss;
};

struct Background {
  uint32_t src = 0, dst = 0;
  uint64_t bytes = 1ull << 40;
};

std::string fmt_rate(uint64_t bps) { return fmt::format("{:g}G", static_cast<double>(bps) / 1e9); }

// The generated topologies as scenario text (docs/SIM.md), so switches and
// links get the simulator's documented defaults.
std::string topology_toml(const std::string& kind, uint32_t ranks, uint64_t link_bps,
                          uint64_t delay_ns, uint32_t hosts_per_leaf, uint32_t spines,
                          double oversub, bool pfc, bool int_on, uint64_t seed,
                          uint64_t interval_ns) {
  std::string t;
  t += fmt::format("[run]\nseed = {}\ncsv_interval = {}\nstop_when_done = false\nduration = \"1s\"\n",
                   seed, interval_ns);
  t += fmt::format("[switch]\npfc.enabled = {}\nint.enabled = {}\n", pfc ? "true" : "false",
                   int_on ? "true" : "false");
  t += fmt::format("[link]\nrate = {}\ndelay = {}\n", link_bps, delay_ns);
  for (uint32_t r = 0; r < ranks; ++r) t += fmt::format("[[hosts]]\nname = \"h{}\"\n", r);
  if (kind == "single_switch") {
    t += "[[switches]]\nname = \"s0\"\n";
    for (uint32_t r = 0; r < ranks; ++r) t += fmt::format("[[links]]\na = \"h{}\"\nb = \"s0\"\n", r);
  } else {
    const uint32_t leaves = (ranks + hosts_per_leaf - 1) / hosts_per_leaf;
    for (uint32_t l = 0; l < leaves; ++l) t += fmt::format("[[switches]]\nname = \"leaf{}\"\n", l);
    for (uint32_t s = 0; s < spines; ++s) t += fmt::format("[[switches]]\nname = \"spine{}\"\n", s);
    for (uint32_t r = 0; r < ranks; ++r)
      t += fmt::format("[[links]]\na = \"h{}\"\nb = \"leaf{}\"\n", r, r / hosts_per_leaf);
    const double up = static_cast<double>(link_bps) * hosts_per_leaf / spines / oversub;
    for (uint32_t l = 0; l < leaves; ++l)
      for (uint32_t s = 0; s < spines; ++s)
        t += fmt::format("[[links]]\na = \"leaf{}\"\nb = \"spine{}\"\nrate = {}\n", l, s,
                         static_cast<uint64_t>(up));
  }
  return t;
}

void write_csvs(const std::string& dir, const sim::Simulator& s, uint32_t ranks, uint64_t interval_ns,
                const std::vector<std::pair<uint64_t, pktgen::SizeRun>>& runs) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  auto open = [&](const char* name) {
    std::ofstream o(fs::path(dir) / name, std::ios::binary);
    if (!o) throw std::runtime_error(dir + "/" + name + ": cannot write");
    return o;
  };
  {
    auto o = open("iterations.csv");
    pktgen::CsvWriter w(o, {"iteration", "bytes", "warmup", "start_ns", "end_ns", "jct_ns", "wrong"});
    for (const auto& [bytes, run] : runs)
      for (const auto& it : run.iterations)
        // wrong is -1 for iterations that were not checked.
        w.row(std::vector<double>{static_cast<double>(it.iteration), static_cast<double>(bytes),
                                  it.warmup ? 1.0 : 0.0, static_cast<double>(it.start_ns),
                                  static_cast<double>(it.end_ns), static_cast<double>(it.jct_ns()),
                                  static_cast<double>(it.wrong)});
  }
  {
    auto o = open("transfers.csv");
    pktgen::CsvWriter w(o, {"bytes", "step", "latency_ns"});
    for (const auto& [bytes, run] : runs)
      for (const auto& [step, ns] : run.transfer_latencies) w.row(std::vector<uint64_t>{bytes, step, ns});
  }
  {
    // Each rank's transmit throughput: its host link (hK->...) per interval.
    std::map<size_t, uint32_t> rank_of_link;
    for (size_t l = 0; l < s.num_links(); ++l)
      for (uint32_t r = 0; r < ranks; ++r)
        if (s.link_name(l).rfind(fmt::format("h{}->", r), 0) == 0) rank_of_link[l] = r;
    auto o = open("throughput.csv");
    o << "time_ns,rank,tx_bytes,tx_gbps,utilisation\n";
    for (const sim::LinkSample& x : s.link_samples()) {
      auto it = rank_of_link.find(x.link);
      if (it == rank_of_link.end()) continue;
      o << fmt::format("{},{},{},{:.3f},{:.4f}\n", x.time_ns, it->second, x.bytes,
                       static_cast<double>(x.bytes) * 8 / static_cast<double>(interval_ns),
                       x.utilisation);
    }
  }
  {
    auto o = open("queues.csv");
    o << "time_ns,switch,port,peer,tc,bytes\n";
    for (const sim::QueueSample& q : s.queue_samples())
      o << q.time_ns << ",s" << q.sw << ',' << q.port << ',' << s.port_peer(q.sw, q.port) << ','
        << int{q.tc} << ',' << q.bytes << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  // --mode dpdk|stream belongs to droce-pktgen-dpdk: hand over before parsing.
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], mode;
    if (a == "--mode" && i + 1 < argc) mode = argv[i + 1];
    if (a.rfind("--mode=", 0) == 0) mode = a.substr(7);
    if (mode == "dpdk" || mode == "stream") return exec_dpdk(argv, mode);
  }

  pktgen::PktgenConfig cfg;
  pktgen::CollectiveConfig& c = cfg.collective;
  std::string mode = "sim", minb = "32M", maxb = "32M", stepb = "0", chunk = "0";
  std::string link_rate = "100G", delay = "500ns", cc_name = "none", recovery = "gbn";
  std::string topology = "single_switch", loss_text = "0", interval = "10us";
  std::string int_mode = "auto", ack_every = "auto";
  std::vector<std::string> cc_params, stragglers, backgrounds;
  uint32_t hosts_per_leaf = 4, spines = 2, mtu = 4096;
  double oversub = 1;
  bool verify = false, pfc = false, plot = false, quiet = false;
  uint64_t sim_seed = 1;
  std::string json_file, csv_dir;

  CLI::App app{"droce-pktgen: collective replay over RoCEv2 RC QPs in virtual time"};
  app.add_option("--mode", mode, "sim (default); dpdk|stream run droce-pktgen-dpdk");
  app.add_option("--pattern", c.pattern, "ring|halving_doubling|tree|all_gather|reduce_scatter|"
                                         "all_to_all|incast|permutation");
  app.add_option("--ranks", c.ranks, "number of ranks, 2..1024");
  app.add_option("-b,--minbytes", minb, "smallest size (B, or K/M/G)");
  app.add_option("-e,--maxbytes", maxb, "largest size");
  app.add_option("-f,--stepfactor", c.step_factor, "size multiplication factor");
  app.add_option("-i,--stepbytes", stepb, "size increment when -f is 1");
  app.add_option("-n,--iters", c.iters, "timed iterations per size");
  app.add_option("-w,--warmup_iters", c.warmup_iters, "warm-up iterations per size");
  app.add_option("--channels", c.channels, "QPs per rank pair");
  app.add_option("--chunk", chunk, "pipelining chunk per channel (0: one per step)");
  app.add_option("--root", c.root, "incast root rank");
  app.add_option("--seed", c.seed, "permutation seed");
  app.add_flag("--verify", verify, "real float32 data; #wrong checked on the last iteration of each size");
  app.add_option("--link-rate", link_rate, "host link rate (100G)");
  app.add_option("--delay", delay, "propagation delay per link (500ns)");
  app.add_option("--cc", cc_name, "congestion control: " + cc::algorithm_names());
  app.add_option("--cc-param", cc_params, "KEY=VALUE of the algorithm, repeatable");
  app.add_option("--recovery", recovery, "gbn|sr (go-back-N or selective repeat)");
  app.add_option("--mtu", mtu, "path MTU 256..4096");
  app.add_option("--topology", topology, "single_switch|leaf_spine|FILE.toml");
  app.add_option("--hosts-per-leaf", hosts_per_leaf, "leaf_spine: hosts per leaf (4)");
  app.add_option("--spines", spines, "leaf_spine: spine switches (2)");
  app.add_option("--oversubscription", oversub, "leaf_spine: host/uplink bandwidth (1)");
  app.add_flag("--pfc", pfc, "PFC on priority 3 in every switch");
  app.add_option("--int", int_mode,
                 "INT stamping in every switch: auto (on when the CC steers by INT: hpcc), on, off");
  app.add_option("--ack-every", ack_every,
                 "responder ACKs every N packets (0: only when asked, AckReq); auto: 1 when "
                 "INT is on, else 0");
  app.add_option("--loss", loss_text, "packet loss on every link (0.01 or 1%)");
  app.add_option("--straggler", stragglers, "RANK:rate=25G or RANK:loss=1% (repeatable)");
  app.add_option("--background", backgrounds, "SRC-DST[:BYTES]: a competing WRITE flow (repeatable)");
  app.add_option("--sim-seed", sim_seed, "simulator seed (links, switches)");
  app.add_option("--sample-interval", interval, "time series interval (10us)");
  app.add_option("--json", json_file, "write results as JSON ('-' = stdout, table to stderr)");
  app.add_option("--csv", csv_dir, "write time series CSVs into DIR");
  app.add_flag("--plot", plot, "PNG plots into the --csv DIR (matplotlib)");
  app.add_flag("-q,--quiet", quiet, "no progress lines on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kUsage;
  }

  // ---- Validation: everything is checked before anything runs ----------
  if (mode != "sim") return fail("--mode", "'" + mode + "': accepted: sim, dpdk, stream");
  if (!parse_size(minb, c.min_bytes)) return fail("-b/--minbytes", "'" + minb + "' is not a size");
  if (!parse_size(maxb, c.max_bytes)) return fail("-e/--maxbytes", "'" + maxb + "' is not a size");
  if (!parse_size(stepb, c.step_bytes)) return fail("-i/--stepbytes", "'" + stepb + "' is not a size");
  if (!parse_size(chunk, c.chunk_bytes)) return fail("--chunk", "'" + chunk + "' is not a size");
  if (c.ranks > kMaxSimRanks)
    return fail("--ranks", fmt::format("{} is more than --mode sim runs (2..{})", c.ranks, kMaxSimRanks));
  if (const auto errs = pktgen::validate(cfg); !errs.empty()) {
    for (const auto& e : errs) std::cerr << "droce-pktgen: " << e.to_string() << "\n";
    return kUsage;
  }
  uint64_t link_bps = 0, delay_ns = 0, interval_ns = 0;
  if (!sim::parse_rate_bps(link_rate, link_bps) || link_bps < 1'000'000 ||
      link_bps > 1'600'000'000'000ull)
    return fail("--link-rate", "'" + link_rate + "': a rate 1M..1.6T (100G, 25Gbps)");
  if (!sim::parse_time_ns(delay, delay_ns)) return fail("--delay", "'" + delay + "' is not a time");
  if (!sim::parse_time_ns(interval, interval_ns) || interval_ns < 1000)
    return fail("--sample-interval", "'" + interval + "': a time of at least 1us");
  double loss = 0;
  if (!parse_probability(loss_text, loss))
    return fail("--loss", "'" + loss_text + "': a probability in [0, 1) (0.01 or 1%)");
  sim::QpOptions qo;
  qo.cc = cc_name;
  qo.mtu = mtu;
  if (mtu != 256 && mtu != 512 && mtu != 1024 && mtu != 2048 && mtu != 4096)
    return fail("--mtu", fmt::format("{}: accepted 256, 512, 1024, 2048, 4096", mtu));
  if (recovery == "gbn" || recovery == "go_back_n") {
    qo.recovery = transport::Recovery::kGoBackN;
  } else if (recovery == "sr" || recovery == "selective_repeat") {
    qo.recovery = transport::Recovery::kSelectiveRepeat;
  } else {
    return fail("--recovery", "'" + recovery + "': accepted gbn, sr");
  }
  for (const std::string& kv : cc_params) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return fail("--cc-param", "'" + kv + "': KEY=VALUE");
    qo.cc_params[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  try {
    (void)cc::make_algorithm(qo.cc, qo.cc_params, link_bps / 8);
  } catch (const std::exception& e) {
    return fail(cc_params.empty() ? "--cc" : "--cc/--cc-param", e.what());
  }
  const bool cc_needs_int = cc::find_algorithm(qo.cc)->needs_int;
  bool int_on = cc_needs_int;
  if (int_mode == "on") int_on = true;
  else if (int_mode == "off") int_on = false;
  else if (int_mode != "auto") return fail("--int", "'" + int_mode + "': accepted auto, on, off");
  if (ack_every == "auto") {
    qo.ack_every_n = int_on ? 1 : 0;  // INT feedback on every ACK, as HPCC's receivers send
  } else {
    uint64_t n = 0;
    if (!parse_size(ack_every, n) || n > (1u << 20))
      return fail("--ack-every", "'" + ack_every + "': auto or a packet count 0..1048576");
    qo.ack_every_n = static_cast<uint32_t>(n);
  }
  std::vector<Straggler> strag;
  for (const std::string& sarg : stragglers) {
    const auto colon = sarg.find(':');
    Straggler st;
    uint64_t r = 0;
    if (colon == std::string::npos || !parse_size(sarg.substr(0, colon), r) || r >= c.ranks)
      return fail("--straggler", "'" + sarg + "': RANK:rate=25G or RANK:loss=1% with RANK < --ranks");
    st.rank = static_cast<uint32_t>(r);
    const std::string what = sarg.substr(colon + 1);
    if (what.rfind("rate=", 0) == 0) {
      if (!sim::parse_rate_bps(what.substr(5), st.rate_bps) || st.rate_bps < 1'000'000)
        return fail("--straggler", "'" + sarg + "': rate=RATE (25G)");
      if (st.rate_bps > link_bps)
        return fail("--straggler", fmt::format("'{}': rate {} is above the line rate {} (--link-rate)",
                                               sarg, fmt_rate(st.rate_bps), fmt_rate(link_bps)));
    } else if (what.rfind("loss=", 0) == 0) {
      double p = 0;
      if (!parse_probability(what.substr(5), p))
        return fail("--straggler", "'" + sarg + "': loss=P with P in [0, 1) (0.01 or 1%)");
      st.loss = p;
    } else {
      return fail("--straggler", "'" + sarg + "': RANK:rate=25G or RANK:loss=1%");
    }
    strag.push_back(st);
  }
  std::vector<Background> bgs;
  for (const std::string& b : backgrounds) {
    Background bg;
    uint64_t s = 0, d = 0;
    const auto dash = b.find('-');
    const auto colon = b.find(':');
    const std::string dst = b.substr(dash == std::string::npos ? 0 : dash + 1,
                                     colon == std::string::npos ? std::string::npos : colon - dash - 1);
    if (dash == std::string::npos || !parse_size(b.substr(0, dash), s) || !parse_size(dst, d) ||
        s >= c.ranks || d >= c.ranks || s == d ||
        (colon != std::string::npos && !parse_size(b.substr(colon + 1), bg.bytes)) || bg.bytes == 0)
      return fail("--background", "'" + b + "': SRC-DST[:BYTES], two different ranks < --ranks");
    bg.src = static_cast<uint32_t>(s);
    bg.dst = static_cast<uint32_t>(d);
    bgs.push_back(bg);
  }
  if (plot && csv_dir.empty()) return fail("--plot", "needs --csv DIR (the plots go there)");
  if (hosts_per_leaf < 1 || hosts_per_leaf > 256) return fail("--hosts-per-leaf", "1..256");
  if (spines < 1 || spines > 256) return fail("--spines", "1..256");
  if (!(oversub >= 1 && oversub <= 64)) return fail("--oversubscription", "1..64");

  // ---- The testbed ------------------------------------------------------
  sim::Scenario sc;
  try {
    if (topology == "single_switch" || topology == "leaf_spine") {
      sc = sim::parse_scenario(topology_toml(topology, c.ranks, link_bps, delay_ns, hosts_per_leaf,
                                             spines, oversub, pfc, int_on, sim_seed, interval_ns),
                               "--topology " + topology);
    } else if (topology.size() > 5 && topology.substr(topology.size() - 5) == ".toml") {
      sc = sim::load_scenario(topology);
      sc.run.stop_when_done = false;
      sc.run.csv_interval_ns = interval_ns;
      sc.run.seed = sim_seed;
      // The file's own INT setting stands unless --int says otherwise.
      if (int_mode != "auto" || int_on)
        for (auto& sw : sc.switches) sw.cfg.int_cfg.enabled = int_on;
      if (sc.hosts.size() < c.ranks)
        return fail("--topology", fmt::format("{} has {} hosts, --ranks asks for {}", topology,
                                              sc.hosts.size(), c.ranks));
    } else {
      return fail("--topology", "'" + topology + "': single_switch, leaf_spine or a FILE.toml");
    }
  } catch (const sim::ScenarioError& e) {
    return fail("--topology", e.what());
  }
  if (loss > 0)
    for (auto& l : sc.links) l.link.impairments.loss = loss;
  for (const Straggler& st : strag) {
    const std::string& name = sc.hosts[st.rank].name;
    if (st.rate_bps) sc.hosts[st.rank].rate_bps = st.rate_bps;
    for (auto& l : sc.links)
      if (l.a == name || l.b == name) {
        if (st.rate_bps) l.rate_bps = st.rate_bps;
        if (st.loss) l.link.impairments.loss = *st.loss;
      }
  }
  for (size_t i = 0; i < bgs.size(); ++i) {
    sim::FlowSpec f;
    f.name = fmt::format("bg{}", i);
    f.src = sc.hosts[bgs[i].src].name;
    f.dst = sc.hosts[bgs[i].dst].name;
    f.bytes = bgs[i].bytes;
    f.message_bytes = 1 << 20;
    f.max_outstanding = 4;
    f.cc = qo.cc;
    f.cc_params = qo.cc_params;
    f.recovery = qo.recovery;
    f.mtu = mtu;
    f.ack_every_n = qo.ack_every_n;
    f.verify = false;
    sc.flows.push_back(f);
  }

  const auto sizes = pktgen::sweep_sizes(c);
  const auto pattern = *pktgen::pattern_from_string(c.pattern);
  if (verify) {
    // Every rank holds its whole buffer ([data | staging | recv]) in verify
    // mode; refuse sweeps that would not fit rather than swap or die.
    const uint64_t top = *std::max_element(sizes.begin(), sizes.end());
    uint64_t total = 0;
    const pktgen::Schedule big =
        pktgen::make_schedule({pattern, c.ranks, top, c.channels, c.chunk_bytes, c.root, c.seed});
    for (const auto& l : big.layout) total += l.total_bytes();
    if (total > kMaxVerifyBytes)
      return fail("--verify", fmt::format("{} ranks at {} B need {:.1f} GiB of buffers (limit {} GiB); "
                                          "use a smaller -e/--maxbytes or drop --verify",
                                          c.ranks, top, static_cast<double>(total) / (1 << 30),
                                          kMaxVerifyBytes >> 30));
  }
  std::ostream& out = json_file == "-" ? std::cerr : std::cout;
  const auto wall0 = std::chrono::steady_clock::now();
  std::unique_ptr<sim::Simulator> simr;
  try {
    simr = std::make_unique<sim::Simulator>(sc);
  } catch (const sim::ScenarioError& e) {
    return fail("--topology", e.what());
  }
  std::vector<uint32_t> rank_host(c.ranks);
  for (uint32_t r = 0; r < c.ranks; ++r) rank_host[r] = r;
  pktgen::SimExecutorOptions eo;
  eo.qp = qo;
  eo.verify = verify;
  eo.iters = c.iters;
  eo.warmup = c.warmup_iters;
  SimExecutor ex(*simr, rank_host, eo);

  const pktgen::Collective coll = pktgen::collective_of(pattern);
  out << fmt::format("# droce-pktgen --mode sim: {} ({}), {} ranks, {} channel(s), chunk {}\n",
                     pktgen::to_string(pattern), pktgen::to_string(coll), c.ranks, c.channels,
                     c.chunk_bytes ? std::to_string(c.chunk_bytes) : "whole step");
  out << fmt::format("# testbed: {}, links {} {}ns{}, cc {}, recovery {}, mtu {}, pfc {}, int {}, "
                     "acks {}, {}{} background flow(s)\n",
                     topology, fmt_rate(link_bps), delay_ns,
                     loss > 0 ? fmt::format(", loss {:g}", loss) : "", qo.cc,
                     qo.recovery == transport::Recovery::kGoBackN ? "go-back-N" : "selective repeat",
                     mtu, pfc ? "on" : "off", int_on ? "on" : "off",
                     qo.ack_every_n ? fmt::format("every {} packet(s)", qo.ack_every_n)
                                    : std::string("on AckReq"),
                     strag.empty() ? "" : fmt::format("{} straggler(s), ", strag.size()), bgs.size());
  out << fmt::format("# iterations: {} timed + {} warm-up per size, verify {}\n", c.iters,
                     c.warmup_iters, verify ? "on" : "off");
  out << pktgen::table_header();
  out.flush();

  std::vector<pktgen::CollectiveResult> rows;
  std::vector<std::pair<uint64_t, pktgen::SizeRun>> runs;
  nlohmann::json extra = nlohmann::json::array();
  bool stalled = false;
  for (uint64_t bytes : sizes) {
    pktgen::ScheduleParams sp;
    sp.pattern = pattern;
    sp.ranks = c.ranks;
    sp.bytes = bytes;
    sp.channels = c.channels;
    sp.chunk_bytes = c.chunk_bytes;
    sp.root = c.root;
    sp.seed = c.seed;
    const auto t0 = std::chrono::steady_clock::now();
    pktgen::Schedule sched = pktgen::make_schedule(sp);
    pktgen::SizeRun run;
    try {
      run = ex.run(sched);
    } catch (const std::invalid_argument& e) {
      return fail("-b/-e", e.what());
    }
    const pktgen::CollectiveResult r = pktgen::make_result(sp, run.stats, run.wrong);
    out << pktgen::table_row(r);
    out.flush();
    rows.push_back(r);
    extra.push_back({{"size", bytes},
                     {"virtual_ns", run.end_ns - run.start_ns},
                     {"failed_wrs", run.failed_wrs},
                     {"imm_received", run.imm_received},
                     {"imm_bad", run.imm_bad},
                     {"stalled", run.stalled},
                     {"transfers", sched.transfers.size()}});
    if (!quiet)
      std::cerr << fmt::format(
          "droce-pktgen: {} B: {} iterations in {:.3f} ms virtual, {:.2f} s wall, busbw {:.2f} GB/s{}\n",
          bytes, run.iterations.size(), static_cast<double>(run.end_ns - run.start_ns) / 1e6,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), r.busbw_gbps,
          run.stalled ? " STALLED" : "");
    stalled = stalled || run.stalled || run.failed_wrs;
    runs.emplace_back(bytes, std::move(run));
    if (stalled) break;
  }
  out << pktgen::average_busbw_line(rows);
  out << "#\n# tail latencies (virtual time): JCT per timed iteration, worst step's p99 transfer latency\n";
  out << pktgen::latency_header();
  for (const auto& r : rows) out << pktgen::latency_row(r);
  const sim::Summary sum = simr->summary();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  out << fmt::format(
      "#\n# sim: {:.3f} ms virtual in {:.1f} s wall, {} packet events; switch drops {}, link "
      "losses {}, ECN marks {}, CNPs {}, retransmits {}, timeouts {}, max queue {} B\n",
      static_cast<double>(simr->now()) / 1e6, wall, sum.packet_events, sum.switch_drops,
      sum.link_losses, sum.ecn_marks, sum.cnps, sum.retransmits, sum.timeouts,
      sum.max_queue_bytes);
  if (const std::string w = sim::missing_int_warning(sum); !w.empty())
    std::cerr << "droce-pktgen: " << w << "\n";

  pktgen::ScheduleParams p0;
  p0.pattern = pattern;
  p0.ranks = c.ranks;
  p0.channels = c.channels;
  p0.chunk_bytes = c.chunk_bytes;
  p0.root = c.root;
  p0.seed = c.seed;
  int rc = 0;
  try {
    if (!json_file.empty()) {
      nlohmann::json j = pktgen::results_json(p0, c.iters, c.warmup_iters, rows);
      j["mode"] = "sim";
      j["verify"] = verify;
      j["testbed"] = {{"topology", topology},   {"link_rate_bps", link_bps},
                      {"delay_ns", delay_ns},   {"loss", loss},
                      {"cc", qo.cc},            {"recovery", recovery},
                      {"mtu", mtu},             {"pfc", pfc},
                      {"int", int_on},          {"ack_every_n", qo.ack_every_n},
                      {"seed", sim_seed},       {"stragglers", stragglers},
                      {"background", backgrounds}};
      j["runs"] = extra;
      j["sim"] = {{"virtual_ns", simr->now()},      {"packet_events", sum.packet_events},
                  {"switch_drops", sum.switch_drops}, {"link_losses", sum.link_losses},
                  {"ecn_marks", sum.ecn_marks},     {"cnps", sum.cnps},
                  {"retransmits", sum.retransmits}, {"timeouts", sum.timeouts},
                  {"max_queue_bytes", sum.max_queue_bytes}};
      if (json_file == "-") {
        std::cout << j.dump(2) << "\n";
      } else {
        std::ofstream o(json_file);
        if (!o) throw std::runtime_error(json_file + ": cannot write");
        o << j.dump(2) << "\n";
        out << "# wrote " << json_file << "\n";
      }
    }
    if (!csv_dir.empty()) {
      write_csvs(csv_dir, *simr, c.ranks, interval_ns, runs);
      out << "# wrote " << csv_dir
          << "/{iterations,transfers,throughput,queues}.csv\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "droce-pktgen: " << e.what() << "\n";
    return 1;
  }
  if (plot) {
    const std::string cmd = fmt::format("/usr/bin/python3 '{}/scripts/pktgen-plot' '{}'",
                                        DROCE_SOURCE_ROOT, csv_dir);
    out.flush();
    if (std::system(cmd.c_str()) != 0) {
      std::cerr << "droce-pktgen: --plot: plotting failed (needs python3-matplotlib)\n";
      rc = 1;
    }
  }
  if (stalled) {
    std::cerr << "droce-pktgen: a collective stalled or a work request failed (see the sim line)\n";
    rc = 1;
  }
  const int64_t wrong = [&] {
    int64_t w = 0;
    for (const auto& r : rows) w += std::max<int64_t>(r.wrong, 0);
    return w;
  }();
  if (wrong > 0) rc = 1;
  return rc;
}
