#include "droce/pktgen/verify.h"

#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>

namespace droce::pktgen {
namespace {

Schedule make(Pattern p, uint32_t n, uint64_t bytes, uint32_t channels = 1, uint64_t chunk = 0) {
  ScheduleParams params;
  params.pattern = p;
  params.ranks = n;
  params.bytes = bytes;
  params.channels = channels;
  params.chunk_bytes = chunk;
  params.root = n / 2;
  params.seed = n;
  return make_schedule(params);
}

TEST(PktgenVerify, InitialValuesAreSmallIntegers) {
  for (uint32_t r = 0; r < 100; ++r) {
    for (uint64_t i = 0; i < 100; ++i) {
      const float v = initial_value(r, i);
      EXPECT_EQ(v, static_cast<float>(static_cast<int>(v)));
      EXPECT_GE(v, -11.0f);
      EXPECT_LE(v, 11.0f);
    }
  }
}

TEST(PktgenVerify, UntouchedBuffersAreWrong) {
  const Schedule s = make(Pattern::kRingAllReduce, 4, 4 * 4 * 8);
  VerifyBuffers b(s);
  EXPECT_GT(b.wrong_total(), 0u);
}

// Every pattern computes its result for N = 2..16, in id order and in random
// interleavings that respect only depends_on, with several channel/chunk shapes.
TEST(PktgenVerify, EveryPatternIsCorrectForTwoToSixteenRanks) {
  for (Pattern p : kAllPatterns) {
    for (uint32_t n = 2; n <= 16; ++n) {
      struct Shape {
        uint64_t elems_per_rank;
        uint32_t channels;
        uint64_t chunk;
      };
      for (const Shape& shape : {Shape{3, 1, 0}, Shape{7, 2, 8}, Shape{1, 3, 4}}) {
        const Schedule s = make(p, n, 4 * n * shape.elems_per_rank, shape.channels, shape.chunk);
        for (uint64_t seed : {0, 1, 2}) {
          VerifyBuffers b(s);
          ReferenceOptions o;
          o.seed = seed;
          const ReferenceResult r = run_reference(s, b, o);
          ASSERT_FALSE(r.stalled);
          EXPECT_EQ(r.completed, s.transfers.size());
          EXPECT_EQ(r.hazards, 0u) << to_string(p) << " n=" << n << " seed=" << seed;
          const auto wrong = b.wrong_per_rank();
          EXPECT_EQ(std::accumulate(wrong.begin(), wrong.end(), uint64_t{0}), 0u)
              << to_string(p) << " n=" << n << " channels=" << shape.channels
              << " chunk=" << shape.chunk << " seed=" << seed;
        }
      }
    }
  }
}

TEST(PktgenVerify, LargeRankCounts) {
  for (Pattern p : kAllPatterns) {
    for (uint32_t n : {64u, 128u, 100u}) {
      const Schedule s = make(p, n, 4 * n);
      VerifyBuffers b(s);
      ReferenceOptions o;
      o.seed = 42;
      const ReferenceResult r = run_reference(s, b, o);
      EXPECT_FALSE(r.stalled);
      EXPECT_EQ(r.hazards, 0u);
      EXPECT_EQ(b.wrong_total(), 0u) << to_string(p) << " n=" << n;
    }
  }
}

TEST(PktgenVerify, ResetRestoresTheInitialPattern) {
  const Schedule s = make(Pattern::kHalvingDoubling, 6, 4 * 6 * 2);
  VerifyBuffers b(s);
  run_reference(s, b);
  EXPECT_EQ(b.wrong_total(), 0u);
  b.reset();
  EXPECT_GT(b.wrong_total(), 0u);
  run_reference(s, b);
  EXPECT_EQ(b.wrong_total(), 0u);
}

TEST(PktgenVerify, CorruptedTransferIsCountedAsWrong) {
  for (Pattern p : kAllPatterns) {
    const uint32_t n = 8;
    const Schedule s = make(p, n, 4 * n * 4);
    for (uint32_t victim : {0u, static_cast<uint32_t>(s.transfers.size() / 2),
                            static_cast<uint32_t>(s.transfers.size() - 1)}) {
      VerifyBuffers b(s);
      ReferenceOptions o;
      o.corrupt_transfer = victim;
      run_reference(s, b, o);
      const auto wrong = b.wrong_per_rank();
      // At least the receiver of the corrupted transfer (or someone it
      // forwards to) ends with a wrong element.
      EXPECT_GT(std::accumulate(wrong.begin(), wrong.end(), uint64_t{0}), 0u)
          << to_string(p) << " victim " << victim;
    }
  }
}

TEST(PktgenVerify, CorruptionInTheLastCopyHitsExactlyThatRank) {
  const uint32_t n = 4;
  const Schedule s = make(Pattern::kRingAllReduce, n, 4 * n);
  VerifyBuffers b(s);
  ReferenceOptions o;
  o.corrupt_transfer = static_cast<uint32_t>(s.transfers.size() - 1);
  run_reference(s, b, o);
  const auto wrong = b.wrong_per_rank();
  for (uint32_t r = 0; r < n; ++r) {
    EXPECT_EQ(wrong[r], r == s.transfers.back().dst ? 1u : 0u) << r;
  }
}

// The tree's slot ring at each parent: with many more chunks than slots,
// any interleaving the dependencies allow still adds every chunk once, and
// no slot is overwritten before its chunk was added (that would be a
// wrong sum, and the slot is the transfer's destination, not its source,
// so only the result shows it).
TEST(PktgenVerify, TreeSlotRingReusesSlotsSafely) {
  for (uint32_t n : {3u, 8u, 11u}) {
    const Schedule s = make(Pattern::kTreeAllReduce, n, 4 * 2 * 3 * 40, 3, 4);  // 40 chunks per channel
    for (uint64_t seed : {0, 1, 7, 9}) {
      VerifyBuffers b(s);
      ReferenceOptions o;
      o.seed = seed;
      const ReferenceResult r = run_reference(s, b, o);
      ASSERT_FALSE(r.stalled);
      EXPECT_EQ(r.hazards, 0u);
      EXPECT_EQ(b.wrong_total(), 0u) << "n=" << n << " seed=" << seed;
    }
  }
}

// nccl-tests' alltoall copies every rank's own block to its own slot (a
// local copy, no network); the check expects it, and the schedule's local
// copies provide it.
TEST(PktgenVerify, AllToAllCopiesTheOwnBlockLocally) {
  const uint32_t n = 5;
  const Schedule s = make(Pattern::kAllToAll, n, 4 * n * 6);
  ASSERT_EQ(s.local_copies.size(), n);
  for (const auto& t : s.transfers) EXPECT_NE(t.src, t.dst);
  const uint64_t cs = s.params.bytes / n / 4;  // elements per block
  {
    // The transfers alone leave each rank's own slot unwritten: wrong.
    VerifyBuffers b(s);
    for (const auto& t : s.transfers) b.on_transfer_complete(t);
    for (uint64_t w : b.wrong_per_rank()) EXPECT_EQ(w, cs);
    b.apply_local_copies();
    EXPECT_EQ(b.wrong_total(), 0u);
  }
  VerifyBuffers b(s);
  const ReferenceResult r = run_reference(s, b, {3, kNoTransfer});
  EXPECT_FALSE(r.stalled);
  EXPECT_EQ(b.wrong_total(), 0u);
  for (uint32_t q = 0; q < n; ++q) {
    const auto f = b.floats(q);
    const uint64_t slot = s.layout[q].recv_offset / 4 + q * cs;
    for (uint64_t j = 0; j < cs; ++j) EXPECT_EQ(f[slot + j], initial_value(q, q * cs + j));
  }
}

TEST(PktgenVerify, ExecutorsCanLandBytesThemselves) {
  // An executor whose transport wrote the payload in place calls apply_landed.
  const Schedule s = make(Pattern::kTreeAllReduce, 5, 4 * 9);
  VerifyBuffers b(s);
  for (const auto& t : s.transfers) {
    auto src = b.bytes(t.src).subspan(t.src_offset, t.bytes);
    std::vector<uint8_t> wire(src.begin(), src.end());
    std::copy(wire.begin(), wire.end(), b.bytes(t.dst).begin() + static_cast<ptrdiff_t>(t.dst_offset));
    b.apply_landed(t);
  }
  EXPECT_EQ(b.wrong_total(), 0u);
}

}  // namespace
}  // namespace droce::pktgen

namespace droce::pktgen {
namespace {

// The reference executor is a real oracle: without dependencies the random
// interleavings produce wrong results or hazards.
TEST(PktgenVerify, DroppedDependenciesAreCaught) {
  Schedule s = make(Pattern::kRingAllReduce, 6, 4 * 6 * 4, 1, 8);
  s.depends_on = IndexLists::build(s.transfers.size(), [](auto&&) {});
  VerifyBuffers b(s);
  ReferenceOptions o;
  o.seed = 3;
  const ReferenceResult r = run_reference(s, b, o);
  EXPECT_GT(b.wrong_total() + r.hazards, 0u);
}

// Without its dependency lists (a schedule put together by hand) the
// reference refuses to run rather than reading past them.
TEST(PktgenVerify, ReferenceRefusesAScheduleWithoutDependencyLists) {
  Schedule s = make(Pattern::kRingAllReduce, 4, 4 * 4 * 4, 1, 0);
  VerifyBuffers b(s);
  s.depends_on = {};
  EXPECT_THROW(run_reference(s, b), std::invalid_argument);
}

}  // namespace
}  // namespace droce::pktgen
