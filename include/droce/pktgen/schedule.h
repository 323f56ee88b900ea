// Collective schedules as data: every pattern becomes a flat list
// of RDMA WRITEs {src rank, dst rank, byte ranges, dependencies} that any
// executor (the in-memory reference below, the virtual-time simulator, DPDK
// ports) can run. No I/O and no clock here. docs/PKTGEN.md draws each
// pattern step by step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "droce/pktgen/index_lists.h"

namespace droce::pktgen {

enum class Pattern : uint8_t {
  kRingAllReduce,     // reduce-scatter then all-gather around a ring
  kHalvingDoubling,   // Rabenseifner: recursive halving, then doubling
  kTreeAllReduce,     // double binary tree: reduce up, broadcast down
  kAllGather,         // ring
  kReduceScatter,     // ring
  kAllToAll,          // every ordered pair, staggered
  kIncast,            // N-1 senders to one root
  kPermutation,       // random derangement from a seed
};
inline constexpr Pattern kAllPatterns[] = {
    Pattern::kRingAllReduce, Pattern::kHalvingDoubling, Pattern::kTreeAllReduce,
    Pattern::kAllGather,     Pattern::kReduceScatter,   Pattern::kAllToAll,
    Pattern::kIncast,        Pattern::kPermutation};

// The option spelling of each pattern ("ring", "halving_doubling", ...).
std::string_view to_string(Pattern p);
std::optional<Pattern> pattern_from_string(std::string_view name);
// "ring, halving_doubling, ..." for error messages.
std::string pattern_names();

// Which part of an algorithm a transfer belongs to.
enum class Phase : uint8_t {
  kReduceScatter,
  kAllGather,
  kReduceUp,      // tree: child to parent
  kBroadcastDown, // tree: parent to child
  kPreReduce,     // halving-doubling, non-power-of-two fold-in
  kPostCopy,      // halving-doubling, non-power-of-two fold-out
  kExchange,      // all-to-all, incast, permutation
};
std::string_view to_string(Phase p);

// What the receiver does once a WRITE has landed.
enum class Action : uint8_t {
  kCopy,    // the landed bytes are the result (dst_offset is in the data region)
  kReduce,  // landed in staging; add them element-wise (float32) into the
            // accumulator at reduce_offset of the receiver's data region
};

inline constexpr uint32_t kNoTransfer = UINT32_MAX;
inline constexpr uint32_t kMaxRanks = 8192;
inline constexpr uint32_t kMaxChannels = 256;  // the immediate carries 8 bits of channel

// 64 bytes: a replay of 8192 ranks holds 134 M of them.
struct Transfer {
  uint32_t id = 0;  // index in Schedule::transfers
  uint32_t src = 0;
  uint32_t dst = 0;
  uint32_t channel = 0;  // QP per peer pair carrying it
  uint32_t step = 0;     // algorithm step, 0..Schedule::num_steps-1
  // The last chunk of a (step, src, dst, channel) message carries an
  // immediate: imm = step << 8 | (channel & 0xFF).
  uint32_t imm = 0;
  bool with_imm = false;
  Phase phase = Phase::kExchange;
  Action action = Action::kCopy;
  uint64_t src_offset = 0;     // in src's registered buffer
  uint64_t dst_offset = 0;     // where the WRITE lands in dst's registered buffer
  uint64_t reduce_offset = 0;  // kReduce only: accumulator offset in dst's data region
  uint64_t bytes = 0;          // a multiple of 4 (float32), never 0
};
static_assert(sizeof(Transfer) == 64);

// A copy inside one rank's registered buffer, no network: nccl-tests'
// alltoall sends every rank's own block to itself too (ncclSend/ncclRecv
// to self, which NCCL performs as a local copy). Executors apply these when
// an iteration starts (verify mode); no transfer touches their bytes.
struct LocalCopy {
  uint32_t rank = 0;
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  uint64_t bytes = 0;
};

struct ScheduleParams {
  Pattern pattern = Pattern::kRingAllReduce;
  uint32_t ranks = 2;
  uint64_t bytes = 0;        // S: see docs/PKTGEN.md "Sizes" per pattern
  uint32_t channels = 1;     // QPs per peer pair; data split evenly across them
  // Pipelining unit per channel. 0 = the pattern's default
  // (default_chunk_bytes): one chunk per step, except the tree, which is
  // chunked as NCCL chunks it.
  uint64_t chunk_bytes = 0;
  uint32_t root = 0;         // incast destination
  uint64_t seed = 1;         // permutation
  // all_to_all: messages each rank keeps in flight, 0..ranks-1 (0: all at
  // once). A rank's message to r+k waits for its message to r+k-window.
  uint32_t window = 0;
};

// Each rank registers one buffer laid out as [data | staging | recv]:
//   data    S bytes, the user buffer (send buffer for all-to-all, incast,
//           permutation; the in-place accumulator for reductions),
//   staging slots x S bytes where reduce transfers land before being added,
//   recv    where copy-only exchanges land (all-to-all, incast, permutation).
struct BufferLayout {
  uint64_t data_bytes = 0;
  uint64_t staging_offset = 0;
  uint64_t staging_bytes = 0;
  uint64_t recv_offset = 0;
  uint64_t recv_bytes = 0;
  uint64_t total_bytes() const { return recv_offset + recv_bytes; }
};

struct Schedule {
  ScheduleParams params;
  std::vector<BufferLayout> layout;  // per rank
  uint32_t num_steps = 0;
  uint64_t chunk_bytes = 0;  // the unit used: effective_chunk_bytes(params); 0 = whole step
  std::vector<Transfer> transfers;
  // depends_on[id]: the transfers that must have completed (landed and been
  // applied) before transfer id may be posted. Sorted, unique, all with
  // smaller ids. One array for all: a vector per transfer took 24 bytes and
  // a heap block of 32 for its one or two entries.
  IndexLists depends_on;
  std::vector<LocalCopy> local_copies;  // kAllToAll: each rank's own block
  // Pattern-specific structure, exposed for tests and reports.
  std::vector<uint32_t> permutation;         // kPermutation: rank -> destination
  std::vector<int32_t> tree_parent[2];       // kTreeAllReduce: -1 at the root
};

// Bytes a size must be a multiple of for this pattern and rank count:
// 4 x ranks where every rank owns an equal share (ring, halving-doubling,
// all-gather, reduce-scatter, all-to-all), else 4 (one float32).
uint64_t size_alignment(Pattern p, uint32_t ranks);

// The tree's pipelining. NCCL pipelines its trees in chunks through each
// connection's buffer: NCCL_STEPS = 8 slots of one chunk each, and a
// sender may only fill a slot the receiver has freed (credit flow
// control). Its Simple-protocol tree chunk is 512 KiB for large messages
// and halves down to 32 KiB for small ones (chunkSize in src/enqueue.cc,
// NCCL 2.x). Here a child's reduce-up chunks land in a ring of
// tree_fifo_slots(chunk, N) chunk-sized slots at its parent, so chunk j +
// slots waits until chunk j has been added: the same credit loop.
//
// What bounds the queues of the tree's 2:1 fan-ins is the bytes a child
// has in flight, slots x chunk, and on the emulated fabric (a shallow
// 12 MiB shared switch buffer, and by default neither congestion control
// nor PFC) it has to stay near one bandwidth-delay product: NCCL's
// 8 x 512 KiB = 4 MiB per child drops packets at 8 ranks (go-back-N,
// 0.80 GB/s busbw at 64 MiB), 8 x 64 KiB = 512 KiB does at 64 ranks
// (0.16 GB/s), and 64 KiB per child does at 256 ranks (0.48 GB/s at
// 16 MiB). So a child keeps tree_window_bytes(N) in flight: 64 KiB up to
// 64 ranks, then 4 MiB / N (the fan-ins of all inner ranks together
// about 8 MiB at worst), at least one 8 KiB chunk; with the default 8 KiB
// chunk that is NCCL's 8 slots up to 64 ranks, fewer above
// (docs/PKTGEN.md has the measurements); a larger --chunk gets fewer
// slots, at least one.
inline constexpr uint64_t kTreeChunkBytes = 8 * 1024;
inline constexpr uint64_t kTreeWindowBytes = 64 * 1024;
inline constexpr uint64_t kTreeFabricWindowBytes = 4 * 1024 * 1024;
inline constexpr uint32_t kTreeFifoSlotsMax = 8;  // NCCL_STEPS
// Bytes a child may have in flight towards its parent at N ranks.
uint64_t tree_window_bytes(uint32_t ranks);
// Slots of a child's ring at its parent for a chunk size:
// tree_window_bytes(ranks) / chunk, within 1..kTreeFifoSlotsMax.
uint32_t tree_fifo_slots(uint64_t chunk_bytes, uint32_t ranks);
// The default chunk grows (doubling) when a tree schedule would otherwise
// have more transfers than this (thousands of ranks at large sizes), to
// bound its memory; the window then holds fewer, larger slots.
inline constexpr uint64_t kTreeMaxTransfers = uint64_t{1} << 21;

// The chunk size used when ScheduleParams::chunk_bytes is 0: for the tree,
// kTreeChunkBytes (grown as kTreeMaxTransfers says); 0 (one chunk per
// step) for every other pattern.
uint64_t default_chunk_bytes(const ScheduleParams& params);
// params.chunk_bytes when non-zero, else default_chunk_bytes(params).
uint64_t effective_chunk_bytes(const ScheduleParams& params);
// For reports: "whole step", "<n> B", or the tree's default by name.
std::string chunk_label(Pattern pattern, uint64_t chunk_bytes);

// Empty when params are usable, else a message naming the problem.
std::string check_params(const ScheduleParams& params);

// Builds the schedule; throws std::invalid_argument with check_params()'s
// message when params are not usable.
Schedule make_schedule(const ScheduleParams& params);

// How large make_schedule(params) would be, counted without making it
// (no transfer is stored), so that a run that cannot fit in memory is
// refused before it starts.
struct ScheduleSize {
  uint64_t transfers = 0;
  uint64_t rank_pairs = 0;    // distinct unordered {src, dst} among the transfers
  uint64_t buffer_bytes = 0;  // every rank's BufferLayout::total_bytes() together
};
// Throws as make_schedule does.
ScheduleSize schedule_size(const ScheduleParams& params);

// What each transfer's completion releases: the transfers that depend on
// it, in id order.
IndexLists dependents_of(const Schedule& s);

// Throws std::invalid_argument unless depends_on has a list for every
// transfer (a schedule put together without make_schedule may lack them)
// and each names only transfers before it.
void check_dependencies(const Schedule& s);

// Transfers grouped by source rank in posting order (ascending id), for
// executors that run one ordered op list per rank.
std::vector<std::vector<uint32_t>> transfers_by_src(const Schedule& s);

// The in-order binary tree NCCL's double tree is built from (tree 0) and its
// complement (tree 1: mirrored for even N, shifted by one for odd N).
// parent[r] = -1 for the root.
std::vector<int32_t> binary_tree_parents(uint32_t ranks, int tree);

}  // namespace droce::pktgen
