// droce-pktgen: collective replay. --mode sim (default) runs a
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
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

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

#include "droce/cc/profile.h"
#include "droce/cc/registry.h"
#include "droce/pktgen/busbw.h"
#include "droce/pktgen/config.h"
#include "droce/pktgen/report.h"
#include "droce/pktgen/schedule.h"
#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"
#include "droce/sim/topology.h"
#include "sim_executor.h"
#include "cli_error.h"

#ifndef DROCE_SOURCE_ROOT
#define DROCE_SOURCE_ROOT "."
#endif

namespace {

using namespace droce;
using pktgen::SimExecutor;

constexpr int kUsage = 2;
constexpr uint32_t kMaxSimRanks = 8192;
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

// nccl-tests' sizes (pktgen::parse_size, as droce-pktgen-dpdk takes them);
// also the simulator's spellings (MB, ...).
bool parse_size(const std::string& s, uint64_t& out) {
  return pktgen::parse_size(s, out) || sim::parse_bytes(s, out);
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

// Everything a run takes from the command line, validated.
struct Setup {
  pktgen::CollectiveConfig c;
  std::vector<std::string> ccs;  // one run each, in order
  sim::QpOptions qo;             // cc and INT-dependent fields set per run
  std::string int_mode = "auto", ack_every = "auto", topology, recovery;
  uint64_t link_bps = 0, delay_ns = 0, interval_ns = 0, sim_seed = 1;
  uint32_t hosts_per_leaf = 4, spines = 2, mtu = 4096;
  double oversub = 1, loss = 0;
  bool verify = false, pfc = false, quiet = false;
  std::vector<Straggler> strag;
  std::vector<Background> bgs;
  std::vector<std::string> stragglers, backgrounds;  // as given, for JSON
};

// One CC's run of the whole sweep.
struct CcRun {
  std::string cc;
  bool int_on = false;
  uint32_t ack_every_n = 0;
  std::vector<pktgen::CollectiveResult> rows;
  std::vector<std::pair<uint64_t, pktgen::SizeRun>> runs;
  nlohmann::json extra = nlohmann::json::array();
  sim::Summary sum;
  uint64_t virtual_ns = 0;
  bool stalled = false;
  int64_t wrong = 0;
};

// INT and ACK coalescing for `cc` as --int and --ack-every say; false when
// --ack-every is not a count (reported by the caller).
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

// The testbed for one run: generated or from a file, with the stragglers,
// loss and background flows applied. Throws sim::ScenarioError.
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

// Runs the sweep under `cc`, printing nccl-tests' table and the tail
// latencies to `out`, and the time series into `csv_dir` unless empty.
// Throws sim::ScenarioError, std::invalid_argument, or std::runtime_error
// when a CSV cannot be written.
CcRun run_cc(const Setup& st, const std::string& cc, const std::string& csv_dir,
             std::ostream& out) {
  const pktgen::CollectiveConfig& c = st.c;
  CcRun r;
  r.cc = cc;
  sim::QpOptions qo = st.qo;
  qo.cc = cc;
  int_and_acks(st, cc, r.int_on, r.ack_every_n);
  qo.ack_every_n = r.ack_every_n;
  sim::Simulator simr(make_testbed(st, qo, r.int_on));
  std::vector<uint32_t> rank_host(c.ranks);
  for (uint32_t i = 0; i < c.ranks; ++i) rank_host[i] = i;
  pktgen::SimExecutorOptions eo;
  eo.qp = qo;
  eo.verify = st.verify;
  eo.iters = c.iters;
  eo.warmup = c.warmup_iters;
  SimExecutor ex(simr, rank_host, eo);

  const auto pattern = *pktgen::pattern_from_string(c.pattern);
  const pktgen::Collective coll = pktgen::collective_of(pattern);
  const auto wall0 = std::chrono::steady_clock::now();
  out << fmt::format("# droce-pktgen --mode sim: {} ({}), {} ranks, {} channel(s), chunk {}\n",
                     pktgen::to_string(pattern), pktgen::to_string(coll), c.ranks, c.channels,
                     pktgen::chunk_label(pattern, c.chunk_bytes));
  out << fmt::format("# testbed: {}, links {} {}ns{}, cc {}, recovery {}, mtu {}, pfc {}, int {}, "
                     "acks {}, {}{} background flow(s)\n",
                     st.topology, fmt_rate(st.link_bps), st.delay_ns,
                     st.loss > 0 ? fmt::format(", loss {:g}", st.loss) : "", cc,
                     qo.recovery == transport::Recovery::kGoBackN ? "go-back-N" : "selective repeat",
                     st.mtu, st.pfc ? "on" : "off", r.int_on ? "on" : "off",
                     r.ack_every_n ? fmt::format("every {} packet(s)", r.ack_every_n)
                                   : std::string("on AckReq"),
                     st.strag.empty() ? "" : fmt::format("{} straggler(s), ", st.strag.size()),
                     st.bgs.size());
  out << fmt::format("# iterations: {} timed + {} warm-up per size, verify {}\n", c.iters,
                     c.warmup_iters, st.verify ? "on" : "off");
  out << pktgen::table_header();
  out.flush();

  for (uint64_t bytes : pktgen::sweep_sizes(c)) {
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
    pktgen::SizeRun run = ex.run(sched);
    const pktgen::CollectiveResult row = pktgen::make_result(sp, run.stats, run.wrong);
    out << pktgen::table_row(row);
    out.flush();
    r.rows.push_back(row);
    r.extra.push_back({{"size", bytes},
                       {"virtual_ns", run.end_ns - run.start_ns},
                       {"failed_wrs", run.failed_wrs},
                       {"imm_received", run.imm_received},
                       {"imm_bad", run.imm_bad},
                       {"stalled", run.stalled},
                       {"transfers", sched.transfers.size()}});
    if (!st.quiet)
      std::cerr << fmt::format(
          "droce-pktgen: {} B: {} iterations in {:.3f} ms virtual, {:.2f} s wall, busbw {:.2f} GB/s{}\n",
          bytes, run.iterations.size(), static_cast<double>(run.end_ns - run.start_ns) / 1e6,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
          row.busbw_gbps, run.stalled ? " STALLED" : "");
    r.stalled = r.stalled || run.stalled || run.failed_wrs;
    r.wrong += std::max<int64_t>(row.wrong, 0);
    r.runs.emplace_back(bytes, std::move(run));
    if (r.stalled) break;
  }
  out << pktgen::average_busbw_line(r.rows);
  out << "#\n# tail latencies (virtual time): JCT per timed iteration, worst step's p99 transfer latency\n";
  out << pktgen::latency_header();
  for (const auto& row : r.rows) out << pktgen::latency_row(row);
  r.sum = simr.summary();
  r.virtual_ns = simr.now();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  out << fmt::format(
      "#\n# sim: {:.3f} ms virtual in {:.1f} s wall, {} packet events; switch drops {}, link "
      "losses {}, ECN marks {}, CNPs {}, PFC pauses {:.1f} us, retransmits {}, timeouts {}, "
      "max queue {} B\n",
      static_cast<double>(r.virtual_ns) / 1e6, wall, r.sum.packet_events, r.sum.switch_drops,
      r.sum.link_losses, r.sum.ecn_marks, r.sum.cnps,
      static_cast<double>(r.sum.host_paused_ns) / 1e3, r.sum.retransmits, r.sum.timeouts,
      r.sum.max_queue_bytes);
  if (const std::string w = sim::missing_int_warning(r.sum); !w.empty())
    std::cerr << "droce-pktgen: " << w << "\n";
  if (!csv_dir.empty()) {
    write_csvs(csv_dir, simr, c.ranks, st.interval_ns, r.runs);
    out << "# wrote " << csv_dir << "/{iterations,transfers,throughput,queues}.csv\n";
  }
  return r;
}

// The runs side by side: per CC and size, JCT and busbw, and what the
// fabric saw.
void print_comparison(const std::vector<CcRun>& runs, std::ostream& out) {
  out << "#\n# congestion control side by side (same testbed and schedule; JCT over the "
         "timed iterations, virtual time)\n";
  out << fmt::format("# {:>8} {:>10} {:>7} {:>11} {:>11} {:>11} {:>7} {:>9} {:>8} {:>10} "
                     "{:>9} {:>6}\n",
                     "cc", "size(B)", "busbw", "jct_p50_us", "jct_p99_us", "jct_max_us",
                     "#wrong", "ecn_marks", "cnps", "paused_us", "maxq_KiB", "retx");
  for (const CcRun& r : runs)
    for (const auto& row : r.rows)
      out << fmt::format(
          "  {:>8} {:>10} {:>7.2f} {:>11.1f} {:>11.1f} {:>11.1f} {:>7} {:>9} {:>8} {:>10.1f} "
          "{:>9.1f} {:>6}\n",
          r.cc, row.bytes, row.busbw_gbps, row.jct_p50_ns / 1e3, row.jct_p99_ns / 1e3, row.jct_max_ns / 1e3,
          row.wrong < 0 ? std::string("N/A") : std::to_string(row.wrong), r.sum.ecn_marks,
          r.sum.cnps, static_cast<double>(r.sum.host_paused_ns) / 1e3,
          static_cast<double>(r.sum.max_queue_bytes) / 1024, r.sum.retransmits);
}

nlohmann::json run_json(const Setup& st, const CcRun& r) {
  const pktgen::CollectiveConfig& c = st.c;
  pktgen::ScheduleParams p0;
  p0.pattern = *pktgen::pattern_from_string(c.pattern);
  p0.ranks = c.ranks;
  p0.channels = c.channels;
  p0.chunk_bytes = c.chunk_bytes;
  p0.root = c.root;
  p0.seed = c.seed;
  nlohmann::json j = pktgen::results_json(p0, c.iters, c.warmup_iters, r.rows);
  j["mode"] = "sim";
  j["verify"] = st.verify;
  j["testbed"] = {{"topology", st.topology}, {"link_rate_bps", st.link_bps},
                  {"delay_ns", st.delay_ns}, {"loss", st.loss},
                  {"cc", r.cc},              {"recovery", st.recovery},
                  {"mtu", st.mtu},           {"pfc", st.pfc},
                  {"int", r.int_on},         {"ack_every_n", r.ack_every_n},
                  {"seed", st.sim_seed},     {"stragglers", st.stragglers},
                  {"background", st.backgrounds}};
  j["runs"] = r.extra;
  const sim::Summary& sum = r.sum;
  j["sim"] = {{"virtual_ns", r.virtual_ns},       {"packet_events", sum.packet_events},
              {"switch_drops", sum.switch_drops}, {"link_losses", sum.link_losses},
              {"ecn_marks", sum.ecn_marks},       {"cnps", sum.cnps},
              {"host_paused_ns", sum.host_paused_ns},
              {"retransmits", sum.retransmits},   {"timeouts", sum.timeouts},
              {"max_queue_bytes", sum.max_queue_bytes}};
  return j;
}

// scripts/pktgen-plot DIR, with an argument vector (no shell, so any
// character in DIR is safe). Returns a message on failure, empty on success.
std::string plot(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path script = fs::path(DROCE_SOURCE_ROOT) / "scripts" / "pktgen-plot";
  if (!fs::exists(script)) return script.string() + " not found";
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = fork();
  if (pid < 0) return "cannot start the plotter";
  if (pid == 0) {
    // Run as its #! line says: Debian's python3, where python3-matplotlib is.
    const std::string s = script.string();
    char* args[] = {const_cast<char*>(s.c_str()), const_cast<char*>(dir.c_str()), nullptr};
    execv(s.c_str(), args);
    std::perror(("droce-pktgen: --plot: " + s).c_str());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  if (WIFSIGNALED(status))
    return fmt::format("{} was killed by signal {} (out of memory?)", script.string(),
                       WTERMSIG(status));
  return fmt::format("{} exited with status {}", script.string(), WEXITSTATUS(status));
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
  Setup st;
  std::string mode = "sim", minb = "32M", maxb = "32M", stepb = "0", chunk = "0";
  std::string link_rate = "100G", delay = "500ns", cc_name = "none", recovery = "gbn";
  std::string topology = "single_switch", loss_text = "0", interval = "10us";
  std::vector<std::string> cc_params, stragglers, backgrounds;
  std::string cc_profile;
  bool plot_pngs = false, list_profiles = false;
  std::string json_file, csv_dir;

  CLI::App app{"droce-pktgen: collective replay over RoCEv2 RC QPs in virtual time"};
  app.add_option("--mode", mode, "sim (default); dpdk|stream run droce-pktgen-dpdk");
  app.add_option("--pattern", c.pattern, "ring|halving_doubling|tree|all_gather|reduce_scatter|"
                                         "all_to_all|incast|permutation");
  app.add_option("--ranks", c.ranks, "number of ranks, 2..8192");
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
  app.add_flag("--verify", st.verify, "real float32 data; #wrong checked on the last iteration of each size");
  app.add_option("--link-rate", link_rate, "host link rate (100G)");
  app.add_option("--delay", delay, "propagation delay per link (500ns)");
  app.add_option("--cc", cc_name,
                 "congestion control: " + cc::algorithm_names() +
                     "; several (dcqcn,hpcc) or all: one run each, then a table side by side");
  auto* cc_opt = app.get_option("--cc");
  app.add_option("--cc-profile", cc_profile,
                 "a named CC profile (--list-cc-profiles) or a profile file: its algorithm and "
                 "parameters, before --cc-param");
  app.add_flag("--list-cc-profiles", list_profiles, "list the named CC profiles and exit");
  app.add_option("--cc-param", cc_params, "KEY=VALUE of the algorithm, repeatable");
  app.add_option("--recovery", recovery, "gbn|sr (go-back-N or selective repeat)");
  app.add_option("--mtu", st.mtu, "path MTU 256..4096");
  app.add_option("--topology", topology, "single_switch|leaf_spine|FILE.toml");
  app.add_option("--hosts-per-leaf", st.hosts_per_leaf, "leaf_spine: hosts per leaf (4)");
  app.add_option("--spines", st.spines, "leaf_spine: spine switches (2)");
  app.add_option("--oversubscription", st.oversub, "leaf_spine: host/uplink bandwidth (1)");
  app.add_flag("--pfc", st.pfc, "PFC on priority 3 in every switch");
  app.add_option("--int", st.int_mode,
                 "INT stamping in every switch: auto (on when the CC steers by INT: hpcc), on, off");
  app.add_option("--ack-every", st.ack_every,
                 "responder ACKs every N packets (0: only when asked, AckReq); auto: 1 when "
                 "INT is on, else 0");
  app.add_option("--loss", loss_text, "packet loss on every link (0.01 or 1%)");
  app.add_option("--straggler", stragglers, "RANK:rate=25G or RANK:loss=1% (repeatable)");
  app.add_option("--background", backgrounds, "SRC-DST[:BYTES]: a competing WRITE flow (repeatable)");
  app.add_option("--sim-seed", st.sim_seed, "simulator seed (links, switches)");
  app.add_option("--sample-interval", interval, "time series interval (10us)");
  app.add_option("--json", json_file, "write results as JSON ('-' = stdout, table to stderr)");
  app.add_option("--csv", csv_dir, "write time series CSVs into DIR (DIR/CC/ for several --cc)");
  app.add_flag("--plot", plot_pngs, "PNG plots into the --csv DIR (matplotlib)");
  app.add_flag("-q,--quiet", st.quiet, "no progress lines on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return apps::cli_exit(app, e, "droce-pktgen");
  }

  if (list_profiles) {
    try {
      std::cout << cc::describe_profiles(cc::list_profiles());
    } catch (const droce::ConfigError& e) {
      return fail("--list-cc-profiles", e.what());
    }
    return 0;
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
  st.c = c;
  if (!sim::parse_rate_bps(link_rate, st.link_bps) || st.link_bps < 1'000'000 ||
      st.link_bps > 1'600'000'000'000ull)
    return fail("--link-rate", "'" + link_rate + "': a rate 1M..1.6T (100G, 25Gbps)");
  if (!sim::parse_time_ns(delay, st.delay_ns)) return fail("--delay", "'" + delay + "' is not a time");
  if (!sim::parse_time_ns(interval, st.interval_ns) || st.interval_ns < 1000)
    return fail("--sample-interval", "'" + interval + "': a time of at least 1us");
  if (!parse_probability(loss_text, st.loss))
    return fail("--loss", "'" + loss_text + "': a probability in [0, 1) (0.01 or 1%)");
  sim::QpOptions& qo = st.qo;
  qo.mtu = st.mtu;
  if (st.mtu != 256 && st.mtu != 512 && st.mtu != 1024 && st.mtu != 2048 && st.mtu != 4096)
    return fail("--mtu", fmt::format("{}: accepted 256, 512, 1024, 2048, 4096", st.mtu));
  st.recovery = recovery;
  if (recovery == "gbn" || recovery == "go_back_n") {
    qo.recovery = transport::Recovery::kGoBackN;
  } else if (recovery == "sr" || recovery == "selective_repeat") {
    qo.recovery = transport::Recovery::kSelectiveRepeat;
  } else {
    return fail("--recovery", "'" + recovery + "': accepted gbn, sr");
  }
  if (!cc_profile.empty()) {
    try {
      const cc::Profile p = cc::load_profile(cc_profile);
      if (cc_opt->count() > 0 && cc_name != p.algorithm)
        return fail("--cc-profile", "profile '" + p.name + "' is for " + p.algorithm +
                                        ", not --cc " + cc_name);
      cc_name = p.algorithm;
      qo.cc_params = p.params;
    } catch (const droce::ConfigError& e) {
      return fail("--cc-profile", e.what());
    }
  }
  for (const std::string& kv : cc_params) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return fail("--cc-param", "'" + kv + "': KEY=VALUE");
    qo.cc_params[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (cc_name == "all") {
    for (const cc::AlgorithmInfo* info : cc::algorithms()) st.ccs.emplace_back(info->name);
  } else {
    for (size_t from = 0;;) {
      const size_t comma = cc_name.find(',', from);
      st.ccs.push_back(cc_name.substr(from, comma - from));
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  }
  if (st.ccs.size() > 1 && !cc_params.empty())
    return fail("--cc-param", "applies to one --cc, not to several");
  for (const std::string& name : st.ccs) {
    if (std::count(st.ccs.begin(), st.ccs.end(), name) > 1)
      return fail("--cc", "'" + name + "' is named twice");
    try {
      (void)cc::make_algorithm(name, qo.cc_params, st.link_bps / 8);
    } catch (const std::exception& e) {
      return fail(cc_params.empty() ? "--cc" : "--cc/--cc-param", e.what());
    }
  }
  if (st.int_mode != "auto" && st.int_mode != "on" && st.int_mode != "off")
    return fail("--int", "'" + st.int_mode + "': accepted auto, on, off");
  {
    bool int_on;
    uint32_t n;
    if (!int_and_acks(st, st.ccs[0], int_on, n))
      return fail("--ack-every", "'" + st.ack_every + "': auto or a packet count 0..1048576");
  }
  st.stragglers = stragglers;
  for (const std::string& sarg : stragglers) {
    const auto colon = sarg.find(':');
    Straggler sg;
    uint64_t r = 0;
    if (colon == std::string::npos || !parse_size(sarg.substr(0, colon), r) || r >= c.ranks)
      return fail("--straggler", "'" + sarg + "': RANK:rate=25G or RANK:loss=1% with RANK < --ranks");
    sg.rank = static_cast<uint32_t>(r);
    const std::string what = sarg.substr(colon + 1);
    if (what.rfind("rate=", 0) == 0) {
      if (!sim::parse_rate_bps(what.substr(5), sg.rate_bps) || sg.rate_bps < 1'000'000)
        return fail("--straggler", "'" + sarg + "': rate=RATE (25G)");
      if (sg.rate_bps > st.link_bps)
        return fail("--straggler", fmt::format("'{}': rate {} is above the line rate {} (--link-rate)",
                                               sarg, fmt_rate(sg.rate_bps), fmt_rate(st.link_bps)));
    } else if (what.rfind("loss=", 0) == 0) {
      double p = 0;
      if (!parse_probability(what.substr(5), p))
        return fail("--straggler", "'" + sarg + "': loss=P with P in [0, 1) (0.01 or 1%)");
      sg.loss = p;
    } else {
      return fail("--straggler", "'" + sarg + "': RANK:rate=25G or RANK:loss=1%");
    }
    st.strag.push_back(sg);
  }
  st.backgrounds = backgrounds;
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
    st.bgs.push_back(bg);
  }
  if (plot_pngs && csv_dir.empty()) return fail("--plot", "needs --csv DIR (the plots go there)");
  if (st.hosts_per_leaf < 1 || st.hosts_per_leaf > 256) return fail("--hosts-per-leaf", "1..256");
  if (st.spines < 1 || st.spines > 256) return fail("--spines", "1..256");
  if (!(st.oversub >= 1 && st.oversub <= 64)) return fail("--oversubscription", "1..64");
  st.topology = topology;
  const bool generated = topology == "single_switch" || topology == "leaf_spine";
  const bool file = topology.size() > 5 && topology.substr(topology.size() - 5) == ".toml";
  if (!generated && !file)
    return fail("--topology", "'" + topology + "': single_switch, leaf_spine or a FILE.toml");
  // The testbed is built (and checked) once before anything runs.
  try {
    const sim::Scenario sc = make_testbed(st, qo, false);
    if (sc.hosts.size() < c.ranks)
      return fail("--topology", fmt::format("{} has {} hosts, --ranks asks for {}", topology,
                                            sc.hosts.size(), c.ranks));
    sim::Simulator check(sc);
  } catch (const sim::ScenarioError& e) {
    return fail("--topology", e.what());
  } catch (const std::out_of_range&) {
    return fail("--topology", "fewer hosts than --straggler/--background name");
  }

  const auto sizes = pktgen::sweep_sizes(c);
  if (st.verify) {
    // Every rank holds its whole buffer ([data | staging | recv]) in verify
    // mode; refuse sweeps that would not fit rather than swap or die.
    const uint64_t top = *std::max_element(sizes.begin(), sizes.end());
    uint64_t total = 0;
    const pktgen::Schedule big = pktgen::make_schedule(
        {*pktgen::pattern_from_string(c.pattern), c.ranks, top, c.channels, c.chunk_bytes, c.root,
         c.seed});
    for (const auto& l : big.layout) total += l.total_bytes();
    if (total > kMaxVerifyBytes)
      return fail("--verify", fmt::format("{} ranks at {} B need {:.1f} GiB of buffers (limit {} GiB); "
                                          "use a smaller -e/--maxbytes or drop --verify",
                                          c.ranks, top, static_cast<double>(total) / (1 << 30),
                                          kMaxVerifyBytes >> 30));
  }

  // ---- The runs ----------------------------------------------------------
  std::ostream& out = json_file == "-" ? std::cerr : std::cout;
  std::vector<CcRun> runs;
  for (const std::string& name : st.ccs) {
    if (!runs.empty()) out << "#\n";
    const std::string dir = csv_dir.empty() || st.ccs.size() == 1 ? csv_dir : csv_dir + "/" + name;
    try {
      runs.push_back(run_cc(st, name, dir, out));
    } catch (const std::invalid_argument& e) {
      return fail("-b/-e", e.what());
    } catch (const std::exception& e) {
      std::cerr << "droce-pktgen: " << e.what() << "\n";
      return 1;
    }
  }
  const bool several = runs.size() > 1;
  if (several) print_comparison(runs, out);

  int rc = 0;
  try {
    if (!json_file.empty()) {
      nlohmann::json j;
      if (several) {
        j = {{"mode", "sim"}, {"comparison", nlohmann::json::array()}};
        for (const CcRun& r : runs) j["comparison"].push_back(run_json(st, r));
      } else {
        j = run_json(st, runs[0]);
      }
      if (json_file == "-") {
        std::cout << j.dump(2) << "\n";
      } else {
        std::ofstream o(json_file);
        if (!o) throw std::runtime_error(json_file + ": cannot write");
        o << j.dump(2) << "\n";
        out << "# wrote " << json_file << "\n";
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "droce-pktgen: " << e.what() << "\n";
    return 1;
  }
  if (plot_pngs) {
    out.flush();
    if (const std::string why = plot(csv_dir); !why.empty()) {
      std::cerr << "droce-pktgen: --plot: plotting failed: " << why << "\n";
      rc = 1;
    }
  }
  for (const CcRun& r : runs) {
    if (r.stalled) {
      std::cerr << "droce-pktgen: " << r.cc
                << ": a collective stalled or a work request failed (see the sim line)\n";
      rc = 1;
    }
    if (r.wrong > 0) rc = 1;
  }
  return rc;
}
