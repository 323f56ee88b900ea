// Verify mode: real float32 data in every rank's registered buffer, the
// receiver-side semantics of each transfer (copy or reduce), the exact
// expected result per pattern, and an in-memory reference executor.
//
// Initial data are small integers (-11..11), so every float32 sum of up to
// 2^20 ranks is exact whatever the order of additions: a result either
// equals the expected value bit for bit or it is wrong.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "droce/pktgen/schedule.h"

namespace droce::pktgen {

// Element `index` of rank `rank`'s data region before the collective.
float initial_value(uint32_t rank, uint64_t index);
// Value staging and recv regions start with; no pattern produces it.
inline constexpr float kUnwrittenValue = 1000.0f;

class VerifyBuffers {
 public:
  // Allocates every rank's registered buffer (Schedule::layout) and
  // initialises it. The schedule must outlive this object.
  explicit VerifyBuffers(const Schedule& schedule);

  // Back to the initial pattern, for the next iteration.
  void reset();
  // The schedule's local copies (Schedule::local_copies: all-to-all's own
  // block), which need no network; executors call it when an iteration
  // starts, after reset().
  void apply_local_copies();

  // A rank's whole registered buffer, for executors whose transport writes
  // the bytes of a WRITE in place (then call apply_landed()).
  std::span<uint8_t> bytes(uint32_t rank);
  std::span<const float> floats(uint32_t rank) const { return bufs_[rank]; }

  // The receiver's side of a completed transfer: copies the source's bytes
  // (as they are now) to dst_offset, then applies the transfer's action
  // (for kReduce: adds them into the accumulator at reduce_offset).
  void on_transfer_complete(const Transfer& t);
  // Same, with the payload that actually arrived (t.bytes long).
  void on_transfer_complete(const Transfer& t, std::span<const uint8_t> payload);
  // When the bytes already landed in bytes(t.dst) at dst_offset: only the action.
  void apply_landed(const Transfer& t);

  // Elements of each rank's result that differ from the expected value
  // (nccl-tests' #wrong, here per rank). Only regions the pattern defines
  // are checked: everything for all-reduce and all-gather, the rank's own
  // chunk for reduce-scatter, the received slots for the exchanges (for
  // all-to-all every slot, the rank's own included, as nccl-tests checks).
  std::vector<uint64_t> wrong_per_rank() const;
  uint64_t wrong_total() const;

 private:
  const Schedule& s_;
  std::vector<std::vector<float>> bufs_;
};

struct ReferenceOptions {
  // 0: post and complete in id order. Otherwise a seeded random
  // interleaving: at each step either post a random ready transfer
  // (snapshotting its source bytes, as a NIC's DMA would) or complete a
  // random in-flight one, so missing dependencies show up as wrong results
  // or hazards.
  uint64_t seed = 0;
  // Adds 1.0 to the first element of this transfer's payload (tests).
  uint32_t corrupt_transfer = kNoTransfer;
};

struct ReferenceResult {
  uint64_t completed = 0;
  // Transfers whose source bytes changed between post and completion
  // (a write-after-read dependency is missing).
  uint64_t hazards = 0;
  bool stalled = false;  // some transfer never became ready
};

// Runs the schedule without a network, honouring depends_on. Throws as
// check_dependencies does.
ReferenceResult run_reference(const Schedule& s, VerifyBuffers& buffers,
                              const ReferenceOptions& options = {});

}  // namespace droce::pktgen
