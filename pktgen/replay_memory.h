// What a virtual-time replay will need in memory, known before it runs, and
// what this process may have: droce-pktgen refuses a run that cannot fit
// with a message, where the kernel would stop it minutes in (or the machine
// would swap).
//
// Where the memory goes, per process (each process of a split run builds
// the whole schedule and every QP): every transfer's entry in the schedule
// and the executor's state for it (what it waits for and releases, when it
// was posted; its latency in every timed iteration where those are kept,
// for transfers.csv), a QP pair per rank pair and channel (the QPs, their
// rings' touched pages, their CC state), and each host's endpoint, CQ and
// share of the fabric.
#pragma once

#include <cstdint>

#include "droce/pktgen/schedule.h"
#include "sim_executor.h"

namespace droce::pktgen {

// Bytes per item, measured as droce-pktgen's peak resident set on
// leaf-spines (16 hosts per leaf, 4 spines, DCQCN, 1 MiB, one timed
// iteration) between two sizes of one pattern, and rounded down, so that
// the sum is a floor: all-to-all at 128 and 256 ranks (8.4 KiB a rank
// pair), permutation at 256 and 512 ranks (53 KiB a host and its rank
// pair). A transfer: the ring all-reduce at 8192 ranks peaks at 137 B a
// transfer once its hosts and rank pairs are taken out at the rates here
// (between 512 and 1024 ranks it is 174 B, because the hosts and steps
// that come with the ranks weigh more there). A kept latency
// (SimExecutorOptions::keep_transfer_latencies) is its own size.
inline constexpr uint64_t kReplayBytesPerTransfer = 128;
inline constexpr uint64_t kReplayBytesPerKeptLatency =
    sizeof(decltype(SizeRun::transfer_latencies)::value_type);
inline constexpr uint64_t kReplayBytesPerConnection = 6 << 10;  // a QP pair kept
inline constexpr uint64_t kReplayBytesPerHost = 40 << 10;
// A QP pair made for one transfer of a windowed all-to-all (rings of 4
// slots): between 2048 and 4096 ranks with a window of 16 the peak grew by
// 2-3 KiB per QP pair open at once beside the transfers and hosts at the
// rates above. At 8192 ranks 6 KiB made the estimate (9.06 GiB) pass the
// peak (8.99 GiB).
inline constexpr uint64_t kReplayBytesPerWindowConnection = 2 << 10;

// The QP pairs a replay of `size` holds at once: one per rank pair and
// channel, kept; with a window, at most ranks x window x channels (one per
// transfer in flight, a message being at least one transfer a channel).
uint64_t replay_connections(const ScheduleParams& params, const ScheduleSize& size);

// At least the peak resident memory of one process replaying a schedule of
// `params` and `size` (its QP pairs: replay_connections) on a fabric of
// `hosts` hosts, keeping the latencies of `kept_iterations` timed
// iterations (0 unless they are kept); --verify's buffers and the time
// series not included.
uint64_t replay_memory_floor(const ScheduleParams& params, const ScheduleSize& size,
                             uint32_t kept_iterations, uint64_t hosts);

// The memory one of `processes_here` processes on this machine may use:
// the machine's physical memory, or its control group's limit where that is
// lower (cgroup v2 memory.max, as in a container), shared evenly.
uint64_t memory_for_this_process(uint32_t processes_here);

}  // namespace droce::pktgen
