// One scenario run by several processes (docs/SIM.md "Across processes"):
// the topology is split into partitions, each process runs its partition's
// hosts, switches and the link directions into them, and frames that cross
// from one partition to another are carried between the processes.
//
// The synchronisation is conservative (Chandy-Misra-Bryant style, with a
// global window instead of null messages): a frame sent at time t over a
// link of propagation delay d arrives at t + d or later, so with d_min the
// smallest delay of a link between partitions, every partition can run the
// window [T, T + d_min) on its own and exchange what it sent at the end.
// Events still run in the one-process order, (time, component id), so the
// outputs are the same bytes as one process's.
//
// What carries the frames is a PartitionComm: MPI in droce-sim
// (sim_mpi/mpi_comm.h), threads in the tests. This layer knows neither.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "droce/sim/scenario.h"

namespace droce::sim {

// Collective operations among the partitions of one run. Every partition
// calls each of them in the same order.
class PartitionComm {
 public:
  virtual ~PartitionComm() = default;
  virtual uint32_t index() const = 0;
  virtual uint32_t count() const = 0;
  // `out[p]` goes to partition p (out[index()] is ignored); returns what
  // every other partition sent to this one, concatenated in partition
  // order. The bytes stay valid until the next exchange.
  virtual std::span<const uint8_t> exchange(const std::vector<std::vector<uint8_t>>& out) = 0;
  // Every partition's `mine` (the same length everywhere), concatenated in
  // partition order.
  virtual std::vector<uint64_t> allgather(std::span<const uint64_t> mine) = 0;
};

// Which partition runs each host and switch: by leaf. A leaf (a switch with
// hosts on it) and its hosts stay together, leaves go in contiguous blocks
// of switch order (so a pod's leaves mostly share a partition), the other
// switches (spines, cores) round-robin. A link direction belongs to the
// partition of the node it leads to.
struct PartitionPlan {
  uint32_t count = 1;
  std::vector<uint32_t> host, sw;  // partition of each host, switch
  // The smallest propagation delay of a link between two partitions: the
  // lookahead. UINT64_MAX when no link crosses.
  uint64_t lookahead_ns = UINT64_MAX;
};

// Throws ScenarioError when the scenario cannot be split: a link between
// partitions without delay (no lookahead), or a feature the partitioned
// run does not carry yet (named in the message).
PartitionPlan plan_partitions(const Scenario& sc, uint32_t count);

}  // namespace droce::sim
