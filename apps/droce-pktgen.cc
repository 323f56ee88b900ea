// droce-pktgen: collective replay. --mode sim (default) runs a
// pktgen::Schedule over RC QPs in the deterministic virtual-time simulator:
// endpoints, an emulated switch fabric, CC and loss recovery in the loop.
// --mode dpdk|stream is droce-pktgen-dpdk's (docs/PKTGEN.md "Modes"): this
// program execs it with the same arguments.
//
//   droce-pktgen --pattern ring --ranks 8 -b 1M -e 64M -f 2 --cc dcqcn --verify
//   mpirun -np 2 droce-pktgen ... --trigger receiver   (split over processes)
//
// Output: nccl-tests' table, tail latencies, a simulator summary; --json,
// --csv DIR (time series), --plot (PNGs from the CSVs via matplotlib).
// Bad options: a message naming the option, exit 2.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cli_error.h"
#include "droce/cc/profile.h"
#include "droce/cc/registry.h"
#include "droce/pktgen/busbw.h"
#include "droce/pktgen/config.h"
#include "droce/pktgen/report.h"
#include "droce/pktgen/schedule.h"
#include "droce/sim/output_file.h"
#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"
#include "droce/sim/topology.h"
#include "droce/sim_mpi/mpi_comm.h"
#include "pktgen_sim/testbed.h"
#include "replay_memory.h"
#include "sim_executor.h"

#ifndef DROCE_SOURCE_ROOT
#define DROCE_SOURCE_ROOT "."
#endif

namespace {

using namespace droce;
using pktgen::SimExecutor;
using namespace pktgen_app;

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


void write_csvs(const std::string& dir, const sim::Simulator& s, uint32_t ranks, uint64_t interval_ns,
                const std::vector<std::pair<uint64_t, pktgen::SizeRun>>& runs) {
  std::filesystem::create_directories(dir);
  {
    sim::OutputFile o(dir, "iterations.csv");
    pktgen::CsvWriter w(o.stream(), {"iteration", "bytes", "warmup", "start_ns", "end_ns",
                                     "jct_ns", "wrong"});
    for (const auto& [bytes, run] : runs)
      for (const auto& it : run.iterations)
        // wrong is -1 for iterations that were not checked.
        w.row(std::vector<double>{static_cast<double>(it.iteration), static_cast<double>(bytes),
                                  it.warmup ? 1.0 : 0.0, static_cast<double>(it.start_ns),
                                  static_cast<double>(it.end_ns), static_cast<double>(it.jct_ns()),
                                  static_cast<double>(it.wrong)});
    o.close();
  }
  {
    sim::OutputFile o(dir, "transfers.csv");
    pktgen::CsvWriter w(o.stream(), {"bytes", "step", "latency_ns"});
    for (const auto& [bytes, run] : runs)
      for (const auto& [step, ns] : run.transfer_latencies) w.row(std::vector<uint64_t>{bytes, step, ns});
    o.close();
  }
  {
    // Each rank's transmit throughput: its host link (hK->...) per interval.
    std::unordered_map<std::string, uint32_t> rank_of_host;
    for (uint32_t r = 0; r < ranks; ++r) rank_of_host.emplace(fmt::format("h{}", r), r);
    std::vector<int64_t> rank_of_link(s.num_links(), -1);
    for (size_t l = 0; l < s.num_links(); ++l) {
      const std::string& name = s.link_name(l);
      const auto it = rank_of_host.find(name.substr(0, name.find("->")));
      if (it != rank_of_host.end()) rank_of_link[l] = it->second;
    }
    sim::OutputFile o(dir, "throughput.csv");
    o.text("time_ns,rank,tx_bytes,tx_gbps,utilisation\n");
    s.each_link_sample([&](const sim::LinkSample& x) {
      if (rank_of_link[x.link] < 0) return;
      o.row("{},{},{},{:.3f},{:.4f}", x.time_ns, rank_of_link[x.link], x.bytes,
            static_cast<double>(x.bytes) * 8 / static_cast<double>(interval_ns), x.utilisation);
    });
    o.close();
  }
  sim::OutputFile o(dir, "queues.csv");
  o.text("time_ns,switch,port,peer,tc,bytes\n");
  s.each_queue_sample([&](const sim::QueueSample& q) {
    o.row("{},s{},{},{},{},{}", q.time_ns, q.sw, q.port, s.port_peer(q.sw, q.port), q.tc, q.bytes);
  });
  o.close();
}

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
  eo.keep_transfer_latencies = !csv_dir.empty();  // for transfers.csv alone
  eo.trigger = st.receiver_trigger ? pktgen::Trigger::kReceiver : pktgen::Trigger::kSender;
  eo.comm = st.comm;
  if (st.comm) simr.enter_partition(*st.comm);
  SimExecutor ex(simr, rank_host, eo);

  const auto pattern = *pktgen::pattern_from_string(c.pattern);
  const pktgen::Collective coll = pktgen::collective_of(pattern);
  const auto wall0 = std::chrono::steady_clock::now();
  out << fmt::format("# droce-pktgen --mode sim: {} ({}), {} ranks, {} channel(s), chunk {}{}\n",
                     pktgen::to_string(pattern), pktgen::to_string(coll), c.ranks, c.channels,
                     pktgen::chunk_label(pattern, c.chunk_bytes),
                     c.window ? fmt::format(", window {}", c.window) : std::string());
  out << fmt::format("# testbed: {}, links {} {}ns{}, cc {}, recovery {}, mtu {}, pfc {}, int {}, "
                     "acks {}, {}{}{} background flow(s)\n",
                     st.topology, fmt_rate(st.link_bps), st.delay_ns,
                     st.loss > 0 ? fmt::format(", loss {:g}", st.loss) : "", cc,
                     qo.recovery == transport::Recovery::kGoBackN ? "go-back-N" : "selective repeat",
                     st.mtu, st.pfc ? "on" : "off", r.int_on ? "on" : "off",
                     r.ack_every_n ? fmt::format("every {} packet(s)", r.ack_every_n)
                                   : std::string("on AckReq"),
                     st.receiver_trigger ? "trigger receiver, " : "",
                     st.strag.empty() ? "" : fmt::format("{} straggler(s), ", st.strag.size()),
                     st.bgs.size());
  out << fmt::format("# iterations: {} timed + {} warm-up per size, verify {}\n", c.iters,
                     c.warmup_iters, st.verify ? "on" : "off");
  out << pktgen::table_header();
  out.flush();

  for (uint64_t bytes : pktgen::sweep_sizes(c)) {
    const pktgen::ScheduleParams sp = pktgen::schedule_params(c, bytes);
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
                       {"credits", run.credits},
                       {"stalled", run.stalled},
                       {"transfers", sched.transfers.size()}});
    if (c.window) {
      r.extra.back()["connections"] = run.connections;
      r.extra.back()["connections_open_max"] = run.connections_open_max;
    }
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
  simr.merge_partitions();  // split: partition 0 now has the whole run
  r.sum = simr.summary();
  r.virtual_ns = simr.now();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  out << fmt::format(
      "#\n# sim: {:.3f} ms virtual in {:.1f} s wall{}, {} packet events; switch drops {}, link "
      "losses {}, ECN marks {}, CNPs {}, PFC pauses {:.1f} us, retransmits {}, timeouts {}, "
      "max queue {} B\n",
      static_cast<double>(r.virtual_ns) / 1e6, wall,
      st.comm ? fmt::format(" ({} processes)", st.comm->count()) : std::string(),
      r.sum.packet_events, r.sum.switch_drops,
      r.sum.link_losses, r.sum.ecn_marks, r.sum.cnps,
      static_cast<double>(r.sum.host_paused_ns) / 1e3, r.sum.retransmits, r.sum.timeouts,
      r.sum.max_queue_bytes);
  if (const std::string w = sim::missing_int_warning(r.sum); !w.empty())
    std::cerr << "droce-pktgen: " << w << "\n";
  if (!csv_dir.empty() && (!st.comm || st.comm->index() == 0)) {
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
  nlohmann::json j =
      pktgen::results_json(pktgen::schedule_params(c, 0), c.iters, c.warmup_iters, r.rows);
  j["mode"] = "sim";
  j["verify"] = st.verify;
  j["testbed"] = {{"topology", st.topology}, {"link_rate_bps", st.link_bps},
                  {"delay_ns", st.delay_ns}, {"loss", st.loss},
                  {"cc", r.cc},              {"recovery", st.recovery},
                  {"mtu", st.mtu},           {"pfc", st.pfc},
                  {"int", r.int_on},         {"ack_every_n", r.ack_every_n},
                  {"seed", st.sim_seed},     {"stragglers", st.stragglers},
                  {"trigger", st.receiver_trigger ? "receiver" : "sender"},
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

// The command line as given, and the Setup checked from it.
struct Args {
  pktgen::PktgenConfig cfg;
  Setup st;
  std::string mode = "sim", minb = "32M", maxb = "32M", stepb = "0", chunk = "0";
  std::string link_rate = "100G", delay = "500ns", cc_name = "none", recovery = "gbn";
  std::string topology = "single_switch", loss_text = "0", interval = "10us";
  std::string trigger = "sender";
  std::vector<std::string> cc_params, stragglers, backgrounds;
  std::string cc_profile;
  bool plot_pngs = false, list_profiles = false;
  std::string json_file, csv_dir;
  std::string max_memory;
  CLI::Option* cc_opt = nullptr;
};

// What a check returns to let main() go on; anything else is the exit status.
constexpr int kGoOn = -1;

void add_options(CLI::App& app, Args& a) {
  pktgen::CollectiveConfig& c = a.cfg.collective;
  Setup& st = a.st;
  app.add_option("--mode", a.mode, "sim (default); dpdk|stream run droce-pktgen-dpdk");
  app.add_option("--pattern", c.pattern, "ring|halving_doubling|tree|all_gather|reduce_scatter|"
                                         "all_to_all|incast|permutation");
  app.add_option("--ranks", c.ranks, "number of ranks, 2..8192");
  app.add_option("-b,--minbytes", a.minb, "smallest size (B, or K/M/G)");
  app.add_option("-e,--maxbytes", a.maxb, "largest size");
  app.add_option("-f,--stepfactor", c.step_factor, "size multiplication factor");
  app.add_option("-i,--stepbytes", a.stepb, "size increment when -f is 1");
  app.add_option("-n,--iters", c.iters, "timed iterations per size");
  app.add_option("-w,--warmup_iters", c.warmup_iters, "warm-up iterations per size");
  app.add_option("--channels", c.channels, "QPs per rank pair");
  app.add_option("--chunk", a.chunk, "pipelining a.chunk per channel (0: one per step)");
  app.add_option("--root", c.root, "incast root rank");
  app.add_option("--seed", c.seed, "permutation seed");
  app.add_option("--window", c.window,
                 "all_to_all: messages each rank keeps in flight, each over a connection of its "
                 "own made for it (0: all at once over kept connections)");
  app.add_flag("--verify", st.verify, "real float32 data; #wrong checked on the last iteration of each size");
  app.add_option("--link-rate", a.link_rate, "host link rate (100G)");
  app.add_option("--delay", a.delay, "propagation a.delay per link (500ns)");
  app.add_option("--cc", a.cc_name,
                 "congestion control: " + cc::algorithm_names() +
                     "; several (dcqcn,hpcc) or all: one run each, then a table side by side");
  a.cc_opt = app.get_option("--cc");
  app.add_option("--cc-profile", a.cc_profile,
                 "a named CC profile (--list-cc-profiles) or a profile file: its algorithm and "
                 "parameters, before --cc-param");
  app.add_flag("--list-cc-profiles", a.list_profiles, "list the named CC profiles and exit");
  app.add_option("--cc-param", a.cc_params, "KEY=VALUE of the algorithm, repeatable");
  app.add_option("--recovery", a.recovery, "gbn|sr (go-back-N or selective repeat)");
  app.add_option("--mtu", st.mtu, "path MTU 256..4096");
  app.add_option("--topology", a.topology, "single_switch|leaf_spine|FILE.toml");
  app.add_option("--hosts-per-leaf", st.hosts_per_leaf, "leaf_spine: hosts per leaf (4)");
  app.add_option("--spines", st.spines, "leaf_spine: spine switches (2)");
  app.add_option("--oversubscription", st.oversub, "leaf_spine: host/uplink bandwidth (1)");
  app.add_flag("--pfc", st.pfc, "PFC on priority 3 in every switch");
  app.add_option("--int", st.int_mode,
                 "INT stamping in every switch: auto (on when the CC steers by INT: hpcc), on, off");
  app.add_option("--ack-every", st.ack_every,
                 "responder ACKs every N packets (0: only when asked, AckReq); auto: 1 when "
                 "INT is on, else 0");
  app.add_option("--loss", a.loss_text, "packet loss on every link (0.01 or 1%)");
  app.add_option("--straggler", a.stragglers, "RANK:rate=25G or RANK:loss=1% (repeatable)");
  app.add_option("--background", a.backgrounds, "SRC-DST[:BYTES]: a competing WRITE flow (repeatable)");
  app.add_option("--trigger", a.trigger,
                 "what starts a rank's next transfer: sender (the transfers it waits for "
                 "completed at their senders), receiver (only what reached this rank: its own "
                 "completions, arrivals, the destination's credits; needed under mpirun)");
  app.add_option("--sim-seed", st.sim_seed, "simulator seed (links, switches)");
  app.add_option("--sample-interval", a.interval, "time series a.interval (10us)");
  app.add_option("--json", a.json_file, "write results as JSON ('-' = stdout, table to stderr)");
  app.add_option("--csv", a.csv_dir, "write time series CSVs into DIR (DIR/CC/ for several --cc)");
  app.add_flag("--plot", a.plot_pngs, "PNG plots into the --csv DIR (matplotlib)");
  app.add_flag("-q,--quiet", st.quiet, "no progress lines on stderr");
  app.add_option("--max-memory", a.max_memory,
                 "refuse a run that needs more memory per process (default: this machine's, "
                 "shared by its processes of the run)");
}

// Sizes, ranks, rates, times, loss, MTU, recovery.
int check_run_options(Args& a) {
  [[maybe_unused]] pktgen::PktgenConfig& cfg = a.cfg;
  [[maybe_unused]] pktgen::CollectiveConfig& c = cfg.collective;
  [[maybe_unused]] Setup& st = a.st;
  [[maybe_unused]] sim::QpOptions& qo = st.qo;
  if (a.mode != "sim") return fail("--mode", "'" + a.mode + "': accepted: sim, dpdk, stream");
  if (a.trigger != "sender" && a.trigger != "receiver")
    return fail("--trigger", "'" + a.trigger + "': accepted sender, receiver");
  st.receiver_trigger = a.trigger == "receiver";
  // Split over processes, a rank cannot learn of another host's completion
  // in the same nanosecond: no lookahead allows it.
  if (st.comm && !st.receiver_trigger)
    return fail("--trigger", fmt::format("a replay split over processes (started by an MPI "
                                         "launcher, {} processes) needs --trigger receiver",
                                         st.comm->count()));
  if (c.window && (st.comm || st.receiver_trigger))
    return fail("--window", st.comm ? "its connections are made as the run goes, which processes "
                                      "of a split replay cannot agree on: run it in one process"
                                    : "needs --trigger sender");
  if (!parse_size(a.minb, c.min_bytes)) return fail("-b/--minbytes", "'" + a.minb + "' is not a size");
  if (!parse_size(a.maxb, c.max_bytes)) return fail("-e/--maxbytes", "'" + a.maxb + "' is not a size");
  if (!parse_size(a.stepb, c.step_bytes)) return fail("-i/--stepbytes", "'" + a.stepb + "' is not a size");
  if (!parse_size(a.chunk, c.chunk_bytes)) return fail("--chunk", "'" + a.chunk + "' is not a size");
  if (c.ranks > kMaxSimRanks)
    return fail("--ranks",
                fmt::format("{} is more than --mode sim runs (2..{})", c.ranks, kMaxSimRanks));
  if (const auto errs = pktgen::validate(cfg); !errs.empty()) {
    for (const auto& e : errs) std::cerr << "droce-pktgen: " << e.to_string() << "\n";
    return kUsage;
  }
  st.c = c;
  if (!sim::parse_rate_bps(a.link_rate, st.link_bps) || st.link_bps < 1'000'000 ||
      st.link_bps > 1'600'000'000'000ull)
    return fail("--link-rate", "'" + a.link_rate + "': a rate 1M..1.6T (100G, 25Gbps)");
  if (!sim::parse_time_ns(a.delay, st.delay_ns)) return fail("--delay", "'" + a.delay + "' is not a time");
  if (!sim::parse_time_ns(a.interval, st.interval_ns) || st.interval_ns < 1000)
    return fail("--sample-interval", "'" + a.interval + "': a time of at least 1us");
  // The time series feed the CSV files alone: without --csv nothing is
  // sampled (every link and queue each interval: a fifth of a 512-rank
  // ring's memory over five iterations).
  if (a.csv_dir.empty()) st.interval_ns = 0;
  if (!parse_probability(a.loss_text, st.loss))
    return fail("--loss", "'" + a.loss_text + "': a probability in [0, 1) (0.01 or 1%)");
  qo.mtu = st.mtu;
  if (st.mtu != 256 && st.mtu != 512 && st.mtu != 1024 && st.mtu != 2048 && st.mtu != 4096)
    return fail("--mtu", fmt::format("{}: accepted 256, 512, 1024, 2048, 4096", st.mtu));
  st.recovery = a.recovery;
  if (a.recovery == "gbn" || a.recovery == "go_back_n") {
    qo.recovery = transport::Recovery::kGoBackN;
  } else if (a.recovery == "sr" || a.recovery == "selective_repeat") {
    qo.recovery = transport::Recovery::kSelectiveRepeat;
  } else {
    return fail("--recovery", "'" + a.recovery + "': accepted gbn, sr");
  }
  return kGoOn;
}

// The CC runs: a profile, parameters, one or several algorithms, INT and ACKs.
int check_cc(Args& a) {
  [[maybe_unused]] pktgen::PktgenConfig& cfg = a.cfg;
  [[maybe_unused]] pktgen::CollectiveConfig& c = cfg.collective;
  [[maybe_unused]] Setup& st = a.st;
  [[maybe_unused]] sim::QpOptions& qo = st.qo;
  if (!a.cc_profile.empty()) {
    try {
      const cc::Profile p = cc::load_profile(a.cc_profile);
      if (a.cc_opt->count() > 0 && a.cc_name != p.algorithm)
        return fail("--cc-profile", "profile '" + p.name + "' is for " + p.algorithm +
                                        ", not --cc " + a.cc_name);
      a.cc_name = p.algorithm;
      qo.cc_params = p.params;
    } catch (const droce::ConfigError& e) {
      return fail("--cc-profile", e.what());
    }
  }
  for (const std::string& kv : a.cc_params) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return fail("--cc-param", "'" + kv + "': KEY=VALUE");
    qo.cc_params[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (a.cc_name == "all") {
    for (const cc::AlgorithmInfo* info : cc::algorithms()) st.ccs.emplace_back(info->name);
  } else {
    for (size_t from = 0;;) {
      const size_t comma = a.cc_name.find(',', from);
      st.ccs.push_back(a.cc_name.substr(from, comma - from));
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  }
  if (st.ccs.size() > 1 && !a.cc_params.empty())
    return fail("--cc-param", "applies to one --cc, not to several");
  for (const std::string& name : st.ccs) {
    if (std::count(st.ccs.begin(), st.ccs.end(), name) > 1)
      return fail("--cc", "'" + name + "' is named twice");
    try {
      (void)cc::make_algorithm(name, qo.cc_params, st.link_bps / 8);
    } catch (const std::exception& e) {
      return fail(a.cc_params.empty() ? "--cc" : "--cc/--cc-param", e.what());
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
  return kGoOn;
}

// --straggler and --background.
int check_stragglers_and_backgrounds(Args& a) {
  [[maybe_unused]] pktgen::PktgenConfig& cfg = a.cfg;
  [[maybe_unused]] pktgen::CollectiveConfig& c = cfg.collective;
  [[maybe_unused]] Setup& st = a.st;
  [[maybe_unused]] sim::QpOptions& qo = st.qo;
  st.stragglers = a.stragglers;
  for (const std::string& sarg : a.stragglers) {
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
  st.backgrounds = a.backgrounds;
  for (const std::string& b : a.backgrounds) {
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
  return kGoOn;
}

// A run whose schedule, executor state and QPs cannot fit in memory
// (pktgen/replay_memory.h) is refused before any of it is made.
int check_memory(Args& a, const pktgen::ScheduleParams& top, const pktgen::ScheduleSize& size,
                 uint64_t hosts) {
  const pktgen::CollectiveConfig& c = a.cfg.collective;
  const uint32_t here = sim_mpi::launched_local_size();
  uint64_t limit = 0;
  if (!a.max_memory.empty()) {
    if (!parse_size(a.max_memory, limit) || limit == 0)
      return fail("--max-memory", "'" + a.max_memory + "' is not a size");
  } else {
    limit = pktgen::memory_for_this_process(here);
    // Every process must come to the same answer, or one would stop while
    // the others wait for it.
    if (a.st.comm) {
      const std::vector<uint64_t> all = a.st.comm->allgather(std::span(&limit, 1));
      limit = *std::min_element(all.begin(), all.end());
    }
  }
  const uint32_t kept = a.csv_dir.empty() ? 0 : c.iters;  // transfers.csv's latencies
  const uint64_t need = pktgen::replay_memory_floor(top, size, kept, hosts);
  if (need <= limit) return kGoOn;
  const auto amount = [](uint64_t bytes) {
    return bytes >= (uint64_t{1} << 30)
               ? fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1 << 30))
               : fmt::format("{} MiB", bytes >> 20);
  };
  const std::string whose = !a.max_memory.empty() ? "--max-memory"
                            : here > 1 ? fmt::format("this machine's, shared by {} processes", here)
                                       : "this machine's";
  return fail("--ranks",
              fmt::format("{} over {} ranks at {} B is {} transfers between {} rank pairs: at "
                          "least {} per process, where it may have {} ({}). Fewer --ranks or "
                          "--channels fit{}; droce-sim's [collective] runs ring and all-to-all at "
                          "thousands of ranks without storing a schedule (docs/SIM.md)",
                          c.pattern, c.ranks, top.bytes, size.transfers, size.rank_pairs,
                          amount(need), amount(limit), whose,
                          c.pattern == "all_to_all" && c.window == 0
                              ? ", or a --window (a QP pair per message in flight, not per rank "
                                "pair)"
                              : ""));
}

// The topology, built and checked once before anything runs, and the
// memory the run and --verify need.
int check_testbed(Args& a) {
  [[maybe_unused]] pktgen::PktgenConfig& cfg = a.cfg;
  [[maybe_unused]] pktgen::CollectiveConfig& c = cfg.collective;
  [[maybe_unused]] Setup& st = a.st;
  [[maybe_unused]] sim::QpOptions& qo = st.qo;
  if (a.plot_pngs && a.csv_dir.empty()) return fail("--plot", "needs --csv DIR (the plots go there)");
  if (st.hosts_per_leaf < 1 || st.hosts_per_leaf > 256) return fail("--hosts-per-leaf", "1..256");
  if (st.spines < 1 || st.spines > 256) return fail("--spines", "1..256");
  if (!(st.oversub >= 1 && st.oversub <= 64)) return fail("--oversubscription", "1..64");
  st.topology = a.topology;
  const bool generated = a.topology == "single_switch" || a.topology == "leaf_spine";
  const bool file = a.topology.size() > 5 && a.topology.substr(a.topology.size() - 5) == ".toml";
  if (!generated && !file)
    return fail("--topology", "'" + a.topology + "': single_switch, leaf_spine or a FILE.toml");
  // The testbed is described and checked once before anything runs. A
  // file's fabric is also built, which is what finds its switches' faults;
  // a generated one is valid by construction (its sizes are checked
  // above), and building 1024 hosts only to drop them cost a tenth of a
  // short run.
  uint64_t hosts = 0;
  try {
    const sim::Scenario sc = make_testbed(st, qo, false);
    hosts = sc.hosts.size();
    if (sc.hosts.size() < c.ranks)
      return fail("--topology", fmt::format("{} has {} hosts, --ranks asks for {}", a.topology,
                                            sc.hosts.size(), c.ranks));
    if (file) sim::Simulator check(sc);
  } catch (const sim::ScenarioError& e) {
    return fail("--topology", e.what());
  } catch (const std::out_of_range&) {
    return fail("--topology", "fewer hosts than --straggler/--background name");
  }

  const auto sizes = pktgen::sweep_sizes(c);
  const pktgen::ScheduleParams top =
      pktgen::schedule_params(c, *std::max_element(sizes.begin(), sizes.end()));
  // Counted, not made: the largest size's schedule is made when it runs.
  const pktgen::ScheduleSize size = pktgen::schedule_size(top);
  if (const int rc = check_memory(a, top, size, hosts); rc != kGoOn) return rc;
  if (st.verify) {
    // Every rank holds its whole buffer ([data | staging | recv]) in verify
    // a.mode; refuse sweeps that would not fit rather than swap or die.
    const uint64_t total = size.buffer_bytes;
    if (total > kMaxVerifyBytes)
      return fail("--verify",
                  fmt::format("{} ranks at {} B need {:.1f} GiB of buffers (limit {} GiB); use a "
                              "smaller -e/--maxbytes or drop --verify",
                              c.ranks, top.bytes, static_cast<double>(total) / (1 << 30),
                              kMaxVerifyBytes >> 30));
  }
  return kGoOn;
}

// The runs, one per CC, then the comparison, the JSON and the plots.
int run_all(Args& a) {
  Setup& st = a.st;
  // ---- The runs ----------------------------------------------------------
  std::ostream& out = a.json_file == "-" ? std::cerr : std::cout;
  std::vector<CcRun> runs;
  for (const std::string& name : st.ccs) {
    if (!runs.empty()) out << "#\n";
    const std::string dir = a.csv_dir.empty() || st.ccs.size() == 1 ? a.csv_dir : a.csv_dir + "/" + name;
    try {
      runs.push_back(run_cc(st, name, dir, out));
    } catch (const std::invalid_argument& e) {
      return fail("-b/-e", e.what());
    } catch (const std::exception& e) {
      std::cerr << "droce-pktgen: " << e.what() << "\n";
      return 1;
    }
  }
  // Split over processes, the first writes the files and says how it went.
  if (st.comm && st.comm->index() != 0) return 0;
  const bool several = runs.size() > 1;
  if (several) print_comparison(runs, out);

  int rc = 0;
  try {
    if (!a.json_file.empty()) {
      nlohmann::json j;
      if (several) {
        j = {{"mode", "sim"}, {"comparison", nlohmann::json::array()}};
        for (const CcRun& r : runs) j["comparison"].push_back(run_json(st, r));
      } else {
        j = run_json(st, runs[0]);
      }
      if (a.json_file == "-") {
        std::cout << j.dump(2) << "\n";
      } else {
        if (!apps::write_whole_file("droce-pktgen", "--json", a.json_file, j.dump(2) + "\n"))
          return 1;
        out << "# wrote " << a.json_file << "\n";
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "droce-pktgen: " << e.what() << "\n";
    return 1;
  }
  if (a.plot_pngs) {
    out.flush();
    if (const std::string why = plot(a.csv_dir); !why.empty()) {
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

}  // namespace

int main(int argc, char** argv) {
  // --mode dpdk|stream belongs to droce-pktgen-dpdk: hand over before parsing.
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], mode;
    if (a == "--mode" && i + 1 < argc) mode = argv[i + 1];
    if (a.rfind("--mode=", 0) == 0) mode = a.substr(7);
    if (mode == "dpdk" || mode == "stream") return exec_dpdk(argv, mode);
  }

  Args a;
  // Started by mpirun with several processes: each runs one partition of
  // the testbed, and the first reports the whole run (docs/PKTGEN.md
  // "Across processes"); the others print nothing.
  const uint32_t processes = sim_mpi::launched_size();
#ifdef DROCE_HAVE_MPI
  std::unique_ptr<sim_mpi::MpiComm> mpi;
  if (processes > 1) mpi = std::make_unique<sim_mpi::MpiComm>(&argc, &argv);
  a.st.comm = mpi.get();
  if (mpi && mpi->index() != 0) {
    // Streams and stdio alike (CLI11's messages, fmt's).
    if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr))
      return 1;
  }
#else
  if (processes > 1)
    return fail("--mode", fmt::format("sim: started by an MPI launcher ({} processes) but built "
                                      "without MPI (libopenmpi-dev); run it without mpirun",
                                      processes));
#endif
  CLI::App app{"droce-pktgen: collective replay over RoCEv2 RC QPs in virtual time"};
  add_options(app, a);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return apps::cli_exit(app, e, "droce-pktgen");
  }
  if (a.list_profiles) {
    try {
      std::cout << cc::describe_profiles(cc::list_profiles());
    } catch (const droce::ConfigError& e) {
      return fail("--list-cc-profiles", e.what());
    }
    return 0;
  }
  // Everything is checked before anything runs.
  for (int (*check)(Args&) : {check_run_options, check_cc, check_stragglers_and_backgrounds,
                              check_testbed})
    if (const int rc = check(a); rc != kGoOn) return rc;
  return run_all(a);
}
