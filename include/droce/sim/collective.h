// A collective operation over simulator hosts: [collective] in a scenario
// (CollectiveSpec), run by droce-sim after the scenario's flows are set
// up. Each rank is a host; each transfer is one RDMA WRITE of a chunk
// (bytes / ranks) over an RC QP per rank pair, made once and kept across
// iterations as a communicator keeps its connections.
//
//  - ring (all-reduce): 2(N-1) steps; at each step rank r writes one
//    chunk to rank r+1 (reduce-scatter, then all-gather). Rank r starts
//    step k once its own step k-1 and rank r-1's step k-1 completed: what
//    it forwards at step k is what arrived at step k-1. With trigger =
//    "sender", rank r-1's step counts at its completion at r-1; with
//    "receiver", at its arrival at r (a WRITE with immediate, whose
//    receive completion r sees; r keeps receive WRs posted for them).
//    With slices = S, a step's chunk is S WRITEs, and slice j of step k
//    waits only for slice j of step k-1 (as NCCL's ring moves a chunk).
//  - all_to_all: rank r writes chunk d to every other rank d, all at once
//    (each to its own QP), rank r+1 first. With a window W, rank r keeps
//    at most W of them in flight, to r+1, r+2, ... in turn, each over a
//    connection made when it is posted and closed at its completion, as a
//    dynamically connected transport (or a connection cache of W) does:
//    N x W connections open at most instead of N(N-1)/2 kept, which is
//    what lets thousands of ranks fit in memory.
//
// A transfer is complete at the sender's WRITE completion: the responder
// ACKs only after placing the data (IBA 9.7.5.1). Payload is virtual
// (docs/SIM.md): frames keep their length, no byte is copied. An
// iteration starts when the previous one ended; JCT is its duration.
//
// The bound is what the host links allow: every rank sends 2(N-1)/N x
// bytes (ring) or (N-1)/N x bytes (all-to-all) through its link, at the
// link's payload rate (MTU payload per MTU frame with its RoCEv2 headers,
// ICRC and 24 bytes of Ethernet overhead). A fabric with less bisection
// than the hosts (oversubscribed) has a lower bound the caller computes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "droce/sim/partition.h"
#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"

namespace droce::sim {

struct CollectiveResult {
  std::vector<uint64_t> jct_ns;  // per finished iteration
  bool stalled = false;          // an iteration did not finish in the run's duration
  uint64_t failed_wrs = 0;       // completions with an error status
  uint64_t bound_ns = 0;         // host-link bound of one iteration
  uint64_t transfers = 0;        // per iteration
  // Over the collective's QPs (both ends).
  uint64_t retransmits = 0;          // request packets sent again
  uint64_t timeouts = 0;             // RTO_high expiries
  uint64_t timeouts_low = 0;         // RTO_low expiries (selective repeat)
  uint64_t seq_naks_sent = 0;        // NAKs (SACKs with selective repeat)
  uint64_t out_of_sequence = 0;      // requests that arrived ahead of the expected PSN
  uint32_t reorder_depth_max = 0;    // the furthest ahead (PSNs), any QP
  uint64_t entropy_changes = 0;      // UDP source port changes
  // QP pairs made, over all iterations (kept ones once), and the most open
  // at one time.
  uint64_t connections = 0;
  uint64_t connections_open_max = 0;
};

// Runs spec.iterations back to back on `sim` (built from the scenario
// that holds `spec`). Throws ScenarioError if a QP cannot be set up.
// With `comm`, `sim` runs one partition of a split run (partition.h): call
// it after Simulator::enter_partition, in every partition; each posts and
// completes its own ranks' transfers, and the result is the whole
// collective's in every partition. One process stops at the first failed
// WR; split, the run goes on until nothing is left (a failing run's
// outputs then differ).
CollectiveResult run_collective(Simulator& sim, const Scenario& sc, const CollectiveSpec& spec,
                                PartitionComm* comm = nullptr);

// collective.json: the spec, the JCTs (p50, p99, max), the bound, the
// counters above, PFC and drops from the simulator's summary, and the
// bytes each switch-to-switch link direction carried (its spread says how
// evenly the fabric's paths were used); with a window, the window and the
// connections made and open at most.
std::string collective_json(const Simulator& sim, const Scenario& sc, const CollectiveSpec& spec,
                            const CollectiveResult& r);

// One line for the terminal: pattern, ranks, size, JCT p50/p99 and the
// bound.
std::string collective_line(const CollectiveSpec& spec, const CollectiveResult& r);

}  // namespace droce::sim
