// Collective replay in real time (--mode dpdk): one droce process per rank,
// RC QPs through the engine, a Schedule's transfers as RDMA WRITE with
// immediate (imm = iteration << 24 | transfer id), VerifyBuffers checking
// the result. Topology: a ring of point-to-point links; each rank has a
// "next" port (to rank r+1) and a "prev" port (from rank r-1), e.g. one
// net_memif link per neighbour pair, or one port for both behind a switch
// that routes the ranks' addresses (10.0.0.1 + rank). Out-of-band set-up
// over TCP (oob::RankGroup). docs/PKTGEN.md "DPDK modes".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "droce/options/multipath.h"
#include "droce/pktgen/schedule.h"

namespace droce::pktgen {

struct CollectiveRunConfig {
  ScheduleParams params;            // bytes is ignored: sizes below
  std::vector<uint64_t> sizes;      // the sweep
  uint32_t rank = 0;
  uint32_t iters = 5;
  uint32_t warmup = 1;
  std::string next_port = "net_memif0";  // link to rank + 1
  std::string prev_port = "net_memif1";  // link from rank - 1; next_port: one port for both
  std::string oob_host = "127.0.0.1";
  uint16_t oob_port = 18700;
  double timeout_s = 60;
  uint32_t mtu = 1024;
  // Each port sends at most this (0: as fast as it takes frames), as
  // droce-perf's --rate-gbps: a rank behind a modelled link then paces
  // instead of filling the switch's queue.
  double rate_gbps = 0;
  uint32_t idle_sleep_us = 50;   // engine worker: sleep when idle (shared CPUs)
  uint32_t poll_sleep_us = 20;   // control thread: sleep when no completion
  bool verify = true;
  std::string json_path;         // rank 0: results_json() here
  // --recovery, --entropy, ... for every QP (docs/MULTIPATH.md "In real
  // time"); all ranks must recover alike (a selective repeat requester
  // needs a responder that SACKs).
  options::Multipath multipath;
};

// Empty when the schedule runs on the ring topology: every transfer goes
// from r to r+1 and every rank that depends on a transfer can learn of its
// completion (its receiver, its sender, or the sender's predecessor).
std::string check_ring_topology(const Schedule& s);

// Runs every size; rank 0 prints the nccl-tests table. Returns the exit
// code (0, 1 when #wrong > 0). Throws droce::ConfigError / oob::Error /
// std::runtime_error on failures.
int run_collective(const CollectiveRunConfig& config);

}  // namespace droce::pktgen
