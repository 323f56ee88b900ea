// droce-pktgen's testbed: the run's settings as checked from the command
// line (Setup), and the simulated fabric they describe (make_testbed):
// a generated single switch or leaf-spine, or a scenario file, with the
// stragglers, loss and background flows applied.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "droce/pktgen/config.h"
#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"

namespace droce::pktgen_app {

// nccl-tests' sizes (pktgen::parse_size, as droce-pktgen-dpdk takes them);
// also the simulator's spellings (MB, ...).
bool parse_size(const std::string& s, uint64_t& out);
// "1%", "0.01" -> 0.01; must be in [0, 1).
bool parse_probability(std::string s, double& out);

struct Straggler {
  uint32_t rank = 0;
  uint64_t rate_bps = 0;  // 0: unchanged
  std::optional<double> loss;
};

struct Background {
  uint32_t src = 0, dst = 0;
  uint64_t bytes = 1ull << 40;
};

// Everything a run takes from the command line, validated.
struct Setup {
  pktgen::CollectiveConfig c;
  std::vector<std::string> ccs;  // one run each, in order
  sim::QpOptions qo;             // cc and INT-dependent fields set per run
  std::string int_mode = "auto", ack_every = "auto", topology, recovery;
  bool receiver_trigger = false;  // --trigger receiver (sim_executor.h)
  // Split over processes (mpirun): this process's partition, else null.
  sim::PartitionComm* comm = nullptr;
  uint64_t link_bps = 0, delay_ns = 0, interval_ns = 0, sim_seed = 1;
  uint32_t hosts_per_leaf = 4, spines = 2, mtu = 4096;
  double oversub = 1, loss = 0;
  bool verify = false, pfc = false, quiet = false;
  std::vector<Straggler> strag;
  std::vector<Background> bgs;
  std::vector<std::string> stragglers, backgrounds;  // as given, for JSON
};

// "25G": a rate in Gb/s for messages.
std::string fmt_rate(uint64_t bps);
// The generated topologies as scenario text (docs/SIM.md), so switches and
// links get the simulator's documented defaults.
std::string topology_toml(const std::string& kind, uint32_t ranks, uint64_t link_bps,
                          uint64_t delay_ns, uint32_t hosts_per_leaf, uint32_t spines,
                          double oversub, bool pfc, bool int_on, uint64_t seed,
                          uint64_t interval_ns);

// INT and ACK coalescing for `cc` as --int and --ack-every say; false when
// --ack-every is not a count (reported by the caller).
bool int_and_acks(const Setup& st, const std::string& cc, bool& int_on, uint32_t& ack_every_n);

// The testbed for one run: generated or from a file, with the stragglers,
// loss and background flows applied. Throws sim::ScenarioError.
sim::Scenario make_testbed(const Setup& st, const sim::QpOptions& qo, bool int_on);

}  // namespace droce::pktgen_app
