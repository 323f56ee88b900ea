#include "droce/pktgen/schedule.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

namespace droce::pktgen {
namespace {

ScheduleParams params_of(Pattern p, uint32_t n, uint64_t bytes, uint32_t channels = 1,
                         uint64_t chunk = 0) {
  ScheduleParams params;
  params.pattern = p;
  params.ranks = n;
  params.bytes = bytes;
  params.channels = channels;
  params.chunk_bytes = chunk;
  return params;
}

Schedule make(Pattern p, uint32_t n, uint64_t bytes, uint32_t channels = 1, uint64_t chunk = 0) {
  return make_schedule(params_of(p, n, bytes, channels, chunk));
}

uint64_t mod(int64_t x, int64_t n) { return static_cast<uint64_t>(((x % n) + n) % n); }

// Sorted [lo, hi) ranges cover [0, total) exactly once.
void expect_tiles(std::vector<std::pair<uint64_t, uint64_t>> ranges, uint64_t total,
                  const std::string& what) {
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [lo, hi] : ranges) {
    ASSERT_EQ(lo, at) << what;
    at = hi;
  }
  EXPECT_EQ(at, total) << what;
}

TEST(PktgenSchedule, PatternNamesRoundTrip) {
  for (Pattern p : kAllPatterns) EXPECT_EQ(pattern_from_string(to_string(p)), p);
  EXPECT_FALSE(pattern_from_string("butterfly"));
  EXPECT_NE(pattern_names().find("halving_doubling"), std::string::npos);
}

TEST(PktgenSchedule, RingAllReduceStepDefinition) {
  for (uint32_t n : {2u, 3u, 4u, 5u, 8u}) {
    const uint64_t s = 64 * n;
    const uint64_t cs = s / n;
    const Schedule sch = make(Pattern::kRingAllReduce, n, s);
    ASSERT_EQ(sch.num_steps, 2 * (n - 1));
    ASSERT_EQ(sch.transfers.size(), size_t{2} * (n - 1) * n);
    for (const auto& t : sch.transfers) {
      EXPECT_EQ(t.dst, (t.src + 1) % n);
      EXPECT_EQ(t.bytes, cs);
      EXPECT_TRUE(t.with_imm);
      EXPECT_EQ(t.imm, t.step << 8);
      if (t.step < n - 1) {
        // Reduce-scatter step k: rank r sends chunk (r - k) mod N to r + 1.
        const uint64_t c = mod(int64_t{t.src} - t.step, n);
        EXPECT_EQ(t.phase, Phase::kReduceScatter);
        EXPECT_EQ(t.action, Action::kReduce);
        EXPECT_EQ(t.src_offset, c * cs);
        EXPECT_EQ(t.reduce_offset, c * cs);
        EXPECT_EQ(t.dst_offset, sch.layout[t.dst].staging_offset + c * cs);
      } else {
        // All-gather step k: rank r forwards chunk (r + 1 - k) mod N.
        const uint32_t k = t.step - (n - 1);
        const uint64_t c = mod(int64_t{t.src} + 1 - k, n);
        EXPECT_EQ(t.phase, Phase::kAllGather);
        EXPECT_EQ(t.action, Action::kCopy);
        EXPECT_EQ(t.src_offset, c * cs);
        EXPECT_EQ(t.dst_offset, c * cs);
      }
    }
    // Every step moves each chunk exactly once.
    for (uint32_t k = 0; k < sch.num_steps; ++k) {
      std::vector<std::pair<uint64_t, uint64_t>> r;
      for (const auto& t : sch.transfers) {
        if (t.step == k) r.emplace_back(t.src_offset, t.src_offset + t.bytes);
      }
      expect_tiles(r, s, "ring step " + std::to_string(k));
    }
  }
}

TEST(PktgenSchedule, RingReduceScatterAndAllGatherOwnership) {
  const uint32_t n = 5;
  const uint64_t cs = 16;
  const Schedule rs = make(Pattern::kReduceScatter, n, cs * n);
  ASSERT_EQ(rs.num_steps, n - 1);
  for (const auto& t : rs.transfers) {
    EXPECT_EQ(t.src_offset, mod(int64_t{t.src} - t.step - 1, n) * cs);
    // The last step delivers to each rank its own chunk.
    if (t.step == n - 2) { EXPECT_EQ(t.reduce_offset, t.dst * cs); }
  }
  const Schedule ag = make(Pattern::kAllGather, n, cs * n);
  ASSERT_EQ(ag.num_steps, n - 1);
  for (const auto& t : ag.transfers) {
    EXPECT_EQ(t.src_offset, mod(int64_t{t.src} - t.step, n) * cs);
    if (t.step == 0) {
      EXPECT_EQ(t.src_offset, t.src * cs);  // starts with its own chunk
    }
  }
}

TEST(PktgenSchedule, ChannelsAndChunksSplitEveryMessage) {
  const uint32_t n = 4;
  const uint64_t s = 4 * n * 30;  // 30 floats per rank's chunk
  const uint64_t cs = s / n;
  const Schedule sch = make(Pattern::kRingAllReduce, n, s, 3, 16);
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, std::vector<const Transfer*>> msgs;
  for (const auto& t : sch.transfers) {
    EXPECT_LT(t.channel, 3u);
    EXPECT_LE(t.bytes, 16u);
    EXPECT_EQ(t.bytes % 4, 0u);
    msgs[{t.step, t.src, t.channel}].push_back(&t);
  }
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> per_step;
  for (const auto& [key, ts] : msgs) {
    // Exactly the last chunk of each (step, src, channel) carries the immediate.
    for (size_t i = 0; i < ts.size(); ++i) {
      EXPECT_EQ(ts[i]->with_imm, i + 1 == ts.size());
      if (ts[i]->with_imm) { EXPECT_EQ(ts[i]->imm, (std::get<0>(key) << 8) | std::get<2>(key)); }
      per_step[{std::get<0>(key), std::get<1>(key)}] += ts[i]->bytes;
    }
  }
  for (const auto& [key, bytes] : per_step) EXPECT_EQ(bytes, cs);
}

TEST(PktgenSchedule, HalvingDoublingPartnersAndHalves) {
  for (uint32_t n : {2u, 4u, 8u, 16u}) {
    const uint64_t s = 4 * 16 * n;
    const Schedule sch = make(Pattern::kHalvingDoubling, n, s);
    uint32_t m = 0;
    while ((1u << m) < n) ++m;
    ASSERT_EQ(sch.num_steps, 2 * m);
    ASSERT_EQ(sch.transfers.size(), size_t{2} * m * n);
    std::map<std::pair<uint32_t, uint32_t>, const Transfer*> by;  // (step, src)
    for (const auto& t : sch.transfers) by[{t.step, t.src}] = &t;
    for (const auto& t : sch.transfers) {
      if (t.step < m) {
        // Recursive halving: partner r XOR 2^k, S / 2^(k+1) bytes, the lower
        // rank of the pair sends the upper half of the block they share.
        const uint32_t k = t.step;
        EXPECT_EQ(t.dst, t.src ^ (1u << k));
        EXPECT_EQ(t.bytes, s >> (k + 1));
        EXPECT_EQ(t.action, Action::kReduce);
        const Transfer* back = by[{k, t.dst}];
        const bool low = (t.src & (1u << k)) == 0;
        if (low) {
          EXPECT_EQ(t.src_offset, back->src_offset + t.bytes);
        } else {
          EXPECT_EQ(back->src_offset, t.src_offset + t.bytes);
        }
        EXPECT_EQ((std::min(t.src_offset, back->src_offset) % (2 * t.bytes)), 0u);
      } else {
        // Recursive doubling in reverse: partner r XOR 2^(m-1-j), growing.
        const uint32_t j = t.step - m;
        EXPECT_EQ(t.dst, t.src ^ (1u << (m - 1 - j)));
        EXPECT_EQ(t.bytes, (s / n) << j);
        EXPECT_EQ(t.action, Action::kCopy);
        EXPECT_EQ(t.dst_offset, t.src_offset);
      }
    }
    // After halving every rank owns a distinct block: the last halving
    // step's received ranges tile the buffer.
    std::vector<std::pair<uint64_t, uint64_t>> owned;
    for (const auto& t : sch.transfers) {
      if (t.step == m - 1) owned.emplace_back(t.reduce_offset, t.reduce_offset + t.bytes);
    }
    expect_tiles(owned, s, "halving result");
  }
}

TEST(PktgenSchedule, HalvingDoublingNonPowerOfTwoFolds) {
  const uint32_t n = 6;  // p = 4, rem = 2: ranks 0 and 2 fold into 1 and 3
  const uint64_t s = 4 * n * 8;
  const Schedule sch = make(Pattern::kHalvingDoubling, n, s);
  // The fold-in shares step 0 with the first exchange; the fold-out is the last step.
  EXPECT_EQ(sch.num_steps, 2 + 2 + 1u);
  std::set<std::pair<uint32_t, uint32_t>> pre, post;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<uint64_t, uint64_t>>> pre_ranges,
      post_ranges;
  for (const auto& t : sch.transfers) {
    if (t.phase == Phase::kPreReduce) {
      pre.insert({t.src, t.dst});
      pre_ranges[{t.src, t.dst}].emplace_back(t.src_offset, t.src_offset + t.bytes);
      EXPECT_EQ(t.step, 0u);
    } else if (t.phase == Phase::kPostCopy) {
      post.insert({t.src, t.dst});
      post_ranges[{t.dst, t.dst}].emplace_back(t.src_offset, t.src_offset + t.bytes);
      EXPECT_EQ(t.step, sch.num_steps - 1);
    } else {
      // Ranks that folded in take no part in the middle.
      EXPECT_NE(t.src, 0u);
      EXPECT_NE(t.src, 2u);
      EXPECT_NE(t.dst, 0u);
      EXPECT_NE(t.dst, 2u);
    }
  }
  // Both partners of the first exchange folded: each takes the whole vector.
  EXPECT_EQ(pre, (std::set<std::pair<uint32_t, uint32_t>>{{0, 1}, {2, 3}}));
  // The fold-out comes half from 2i + 1, half from an unfolded rank that
  // holds the other half before the last doubling step (see below).
  EXPECT_EQ(post, (std::set<std::pair<uint32_t, uint32_t>>{{1, 0}, {5, 0}, {3, 2}, {4, 2}}));
  for (const auto& [pair, ranges] : pre_ranges) expect_tiles(ranges, s, "fold-in");
  for (const auto& [pair, ranges] : post_ranges) expect_tiles(ranges, s, "fold-out per receiver");
}

// The fold overlaps the algorithm where the data allow it: 2i + 1's first
// exchange does not wait for the half of the fold it keeps; with a partner
// that did not fold, it does not wait for the fold at all (2i sends the
// pass-on half straight to that partner, which also sends half of the
// result back); the fold-out of the block 2i + 1 owns after the
// reduce-scatter does not wait for the all-gather.
// The fold-out is shared: an unfolded rank that holds the half 2i + 1 only
// gets in the last doubling step sends it to 2i, each such rank helping
// one folded rank at most; 2i + 1 sends the rest (everything when no
// unfolded rank of the right parity is free, as for two of N = 7's).
TEST(PktgenSchedule, HalvingDoublingFoldOutIsShared) {
  for (uint32_t n : {3u, 5u, 6u, 7u, 10u, 11u, 12u, 14u}) {
    const uint64_t s = 4 * n * 16;
    const Schedule sch = make(Pattern::kHalvingDoubling, n, s);
    uint32_t pof2 = 1;
    while (pof2 * 2 <= n) pof2 *= 2;
    const uint32_t rem = n - pof2;
    std::map<uint32_t, std::map<uint32_t, uint64_t>> from;  // folded rank -> sender -> bytes
    for (const auto& t : sch.transfers) {
      if (t.phase == Phase::kPostCopy) from[t.dst][t.src] += t.bytes;
    }
    std::set<uint32_t> co_senders;
    uint32_t helped = 0;
    for (uint32_t i = 0; i < rem; ++i) {
      const auto& f = from[2 * i];
      ASSERT_TRUE(f.count(2 * i + 1)) << "n=" << n;
      if (f.size() == 1) {
        EXPECT_EQ(f.at(2 * i + 1), s) << "n=" << n;
        continue;
      }
      ASSERT_EQ(f.size(), 2u) << "n=" << n;
      ++helped;
      EXPECT_EQ(f.at(2 * i + 1), s / 2) << "n=" << n;
      for (const auto& [src, bytes] : f) {
        if (src == 2 * i + 1) continue;
        EXPECT_GE(src, 2 * rem) << "n=" << n;  // an unfolded rank
        EXPECT_EQ(bytes, s / 2);
        EXPECT_TRUE(co_senders.insert(src).second) << "n=" << n << ": rank " << src << " helps twice";
      }
    }
    // Every folded rank is helped when enough unfolded ranks of each parity exist.
    if (n == 6 || n == 10 || n == 12 || n == 5 || n == 3) {
      EXPECT_EQ(helped, rem) << "n=" << n;
    }
    if (n == 7) {
      EXPECT_EQ(helped, 1u);  // one unfolded rank (3), the partner of new rank 2
    }
  }
}

TEST(PktgenSchedule, HalvingDoublingFoldOverlapsTheExchanges) {
  for (uint32_t n : {3u, 5u, 6u, 7u, 12u}) {
    const uint64_t s = 4 * n * 16;
    const Schedule sch = make(Pattern::kHalvingDoubling, n, s);
    uint32_t pof2 = 1;
    while (pof2 * 2 <= n) pof2 *= 2;
    const uint32_t rem = n - pof2;
    std::map<uint32_t, std::vector<const Transfer*>> fold_into;  // by receiver
    for (const auto& t : sch.transfers) {
      if (t.phase == Phase::kPreReduce) fold_into[t.dst].push_back(&t);
    }
    for (uint32_t i = 0; i < rem; ++i) {
      const uint32_t folded_partner = (i ^ 1) < rem;
      const Transfer* first = nullptr;
      for (const auto& t : sch.transfers) {
        if (t.phase == Phase::kReduceScatter && t.src == 2 * i + 1 && t.step == 0) first = &t;
      }
      ASSERT_NE(first, nullptr);
      for (uint32_t d : sch.depends_on[first->id]) {
        const Transfer& u = sch.transfers[d];
        if (u.phase != Phase::kPreReduce || u.dst != 2 * i + 1) continue;
        // Only the fold of the bytes it sends, never the kept half.
        EXPECT_TRUE(folded_partner) << "n=" << n << " i=" << i;
        EXPECT_EQ(u.src_offset, first->src_offset) << "n=" << n << " i=" << i;
      }
      if (!folded_partner) {
        // 2i sent 2i + 1 only the half it keeps.
        uint64_t bytes = 0;
        for (const Transfer* t : fold_into[2 * i + 1]) bytes += t->bytes;
        EXPECT_EQ(bytes, s / 2) << "n=" << n;
        // And gets the result back half from 2i + 1, half from the partner.
        std::map<uint32_t, uint64_t> out_from;
        for (const auto& t : sch.transfers) {
          if (t.phase == Phase::kPostCopy && t.dst == 2 * i) out_from[t.src] += t.bytes;
        }
        EXPECT_EQ(out_from, (std::map<uint32_t, uint64_t>{{2 * i + 1, s / 2},
                                                          {(i ^ 1) + rem, s / 2}}))
            << "n=" << n;
      }
      // The first fold-out range waits for no all-gather transfer.
      const Transfer* out = nullptr;
      for (const auto& t : sch.transfers) {
        if (t.phase == Phase::kPostCopy && t.src == 2 * i + 1 && !out) out = &t;
      }
      ASSERT_NE(out, nullptr);
      for (uint32_t d : sch.depends_on[out->id]) {
        EXPECT_NE(sch.transfers[d].phase, Phase::kAllGather) << "n=" << n << " i=" << i;
      }
    }
  }
}

TEST(PktgenSchedule, BinaryTreesAreTreesAndComplementary) {
  // NCCL's in-order tree for 8 ranks: 0 -> 4 -> {2, 6}, 2 -> {1, 3}, 6 -> {5, 7}.
  EXPECT_EQ(binary_tree_parents(8, 0), (std::vector<int32_t>{-1, 2, 4, 2, 0, 6, 4, 6}));
  for (uint32_t n = 2; n <= 64; ++n) {
    std::vector<uint32_t> inner(n, 0);
    for (int t = 0; t < 2; ++t) {
      const auto parent = binary_tree_parents(n, t);
      std::vector<uint32_t> children(n, 0);
      int roots = 0;
      for (uint32_t r = 0; r < n; ++r) {
        if (parent[r] < 0) {
          ++roots;
          continue;
        }
        ASSERT_LT(parent[r], static_cast<int32_t>(n));
        ++children[parent[r]];
        // Walking up reaches the root without a cycle.
        uint32_t hops = 0;
        for (int32_t a = parent[r]; a >= 0; a = parent[a]) ASSERT_LT(++hops, n);
      }
      EXPECT_EQ(roots, 1) << n;
      for (uint32_t r = 0; r < n; ++r) {
        EXPECT_LE(children[r], 2u) << "n=" << n << " tree " << t << " rank " << r;
        if (children[r] > 0 && parent[r] >= 0) ++inner[r];
      }
    }
    // Even N (mirrored): no rank is an inner node of both trees.
    if (n % 2 == 0) {
      for (uint32_t r = 0; r < n; ++r) EXPECT_LE(inner[r], 1u) << "n=" << n << " rank " << r;
    }
  }
}

TEST(PktgenSchedule, TreeReducesUpThenBroadcastsDownHalfEach) {
  for (uint32_t n : {2u, 3u, 7u, 8u}) {
    const uint64_t s = 4 * 10;
    const Schedule sch = make(Pattern::kTreeAllReduce, n, s);
    std::multiset<std::tuple<int, uint32_t, uint32_t>> up, down;
    for (const auto& t : sch.transfers) {
      const int tree = t.src_offset == 0 ? 0 : 1;
      EXPECT_EQ(t.bytes, s / 2);
      EXPECT_EQ(t.src_offset, tree == 0 ? 0u : s / 2);
      if (t.phase == Phase::kReduceUp) {
        EXPECT_EQ(t.action, Action::kReduce);
        up.insert({tree, t.src, t.dst});
      } else {
        ASSERT_EQ(t.phase, Phase::kBroadcastDown);
        down.insert({tree, t.dst, t.src});
      }
    }
    std::multiset<std::tuple<int, uint32_t, uint32_t>> edges;
    for (int tree = 0; tree < 2; ++tree) {
      const auto& parent = sch.tree_parent[tree];
      for (uint32_t r = 0; r < n; ++r) {
        if (parent[r] >= 0) edges.insert({tree, r, static_cast<uint32_t>(parent[r])});
      }
    }
    EXPECT_EQ(up, edges);    // every child sends its half to its parent once
    EXPECT_EQ(down, edges);  // and gets the result back once
  }
}

// The tree is pipelined by default, as NCCL pipelines its trees: chunks of
// kTreeChunkBytes, each waiting only for the same chunk one level down (up)
// or up (down), and a child's chunk j + slots reusing the parent's slot of
// chunk j (NCCL's credits), so it waits for that chunk to be added.
TEST(PktgenSchedule, TreeIsChunkedByDefaultWithASlotRingPerChild) {
  const uint32_t kTreeFifoSlots = tree_fifo_slots(kTreeChunkBytes, 8);
  EXPECT_EQ(kTreeFifoSlots, 8u);  // NCCL_STEPS slots of 8 KiB: 64 KiB in flight
  EXPECT_EQ(tree_fifo_slots(16 * 1024, 8), 4u);
  EXPECT_EQ(tree_fifo_slots(512 * 1024, 8), 1u);
  EXPECT_EQ(tree_fifo_slots(4, 8), 8u);
  // Many ranks share the switch buffer: less in flight per child.
  EXPECT_EQ(tree_window_bytes(64), 64u * 1024);
  EXPECT_EQ(tree_window_bytes(256), 16u * 1024);
  EXPECT_EQ(tree_fifo_slots(kTreeChunkBytes, 256), 2u);
  EXPECT_EQ(tree_fifo_slots(kTreeChunkBytes, 4096), 1u);
  const uint64_t s = 2 * 20 * kTreeChunkBytes;  // 20 chunks per tree
  const Schedule sch = make(Pattern::kTreeAllReduce, 8, s);
  EXPECT_EQ(sch.chunk_bytes, kTreeChunkBytes);
  EXPECT_EQ(effective_chunk_bytes(sch.params), kTreeChunkBytes);
  EXPECT_EQ(default_chunk_bytes({Pattern::kRingAllReduce, 8, s, 1, 0, 0, 1}), 0u);
  // 7 edges per tree, up and down, 20 chunks each.
  ASSERT_EQ(sch.transfers.size(), size_t{2} * 2 * 7 * 20);
  for (const auto& t : sch.transfers) {
    EXPECT_EQ(t.bytes, kTreeChunkBytes);
    for (uint32_t d : sch.depends_on[t.id]) {
      const Transfer& u = sch.transfers[d];
      const bool same_chunk = u.src_offset == t.src_offset;
      // The only other wait: the slot ring at the parent.
      const bool slot_reuse = t.phase == Phase::kReduceUp && u.phase == Phase::kReduceUp &&
                              u.dst == t.dst && u.dst_offset == t.dst_offset &&
                              u.src_offset + kTreeFifoSlots * kTreeChunkBytes == t.src_offset;
      EXPECT_TRUE(same_chunk || slot_reuse) << t.id << " waits for " << d;
    }
    if (t.phase == Phase::kReduceUp) {
      const uint64_t tree_off = t.src_offset < s / 2 ? 0 : s / 2;
      const uint64_t j = (t.src_offset - tree_off) / kTreeChunkBytes;
      const uint64_t slot = (t.dst_offset - sch.layout[0].staging_offset) % sch.params.bytes;
      EXPECT_EQ(slot, tree_off + j % kTreeFifoSlots * kTreeChunkBytes) << t.id;
      EXPECT_EQ(t.reduce_offset, t.src_offset);
    }
  }
  // --chunk overrides; a chunk as large as a tree's half is the whole step.
  const Schedule whole = make(Pattern::kTreeAllReduce, 8, s, 1, s / 2);
  EXPECT_EQ(whole.transfers.size(), size_t{2} * 2 * 7);
  EXPECT_EQ(chunk_label(Pattern::kTreeAllReduce, 0), "8192 (tree default)");
  // Thousands of ranks at a large size: the default chunk grows so that the
  // schedule stays within kTreeMaxTransfers.
  ScheduleParams big{Pattern::kTreeAllReduce, 4096, uint64_t{1} << 30, 1, 0, 0, 1};
  const uint64_t c = default_chunk_bytes(big);
  EXPECT_GT(c, kTreeChunkBytes);
  EXPECT_LE(4 * 4095 * ((big.bytes / 2 + c - 1) / c), kTreeMaxTransfers);
  EXPECT_EQ(default_chunk_bytes({Pattern::kTreeAllReduce, 64, 64 << 20, 1, 0, 0, 1}), kTreeChunkBytes);
  EXPECT_EQ(chunk_label(Pattern::kRingAllReduce, 0), "whole step");
  EXPECT_EQ(chunk_label(Pattern::kTreeAllReduce, 4096), "4096");
}

TEST(PktgenSchedule, AllToAllCoversEveryOrderedPairOnceStaggered) {
  for (uint32_t n : {2u, 3u, 6u, 9u}) {
    const uint64_t s = 4 * 4 * n;
    const uint64_t cs = s / n;
    const Schedule sch = make(Pattern::kAllToAll, n, s);
    std::set<std::pair<uint32_t, uint32_t>> pairs;
    std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> sent, recv;
    std::map<std::pair<uint32_t, uint32_t>, int> per_step_src, per_step_dst;
    for (const auto& t : sch.transfers) {
      EXPECT_NE(t.src, t.dst);
      EXPECT_EQ(t.bytes, cs);
      EXPECT_TRUE(pairs.insert({t.src, t.dst}).second);
      EXPECT_EQ(t.dst, (t.src + t.step + 1) % n);
      EXPECT_EQ(t.src_offset, t.dst * cs);
      EXPECT_EQ(t.dst_offset, sch.layout[t.dst].recv_offset + t.src * cs);
      ++per_step_src[{t.step, t.src}];
      ++per_step_dst[{t.step, t.dst}];
    }
    EXPECT_EQ(pairs.size(), size_t{n} * (n - 1));
    for (const auto& [k, c] : per_step_src) EXPECT_EQ(c, 1);
    for (const auto& [k, c] : per_step_dst) EXPECT_EQ(c, 1);
  }
}

// With a window of W, rank r's message of step k waits for all of its own
// message of step k - W (every channel and chunk) and nothing else; the
// first W steps wait for nothing, as without the window.
TEST(PktgenSchedule, AllToAllWindowWaitsForTheRanksMessageWindowStepsBefore) {
  for (uint32_t w : {1u, 3u, 6u}) {
    ScheduleParams p = params_of(Pattern::kAllToAll, 7, 7 * 4 * 64, 2, 64);
    p.window = w;
    const Schedule sch = make_schedule(p);
    std::map<std::pair<uint32_t, uint32_t>, std::vector<uint32_t>> message;  // (src, step)
    for (const auto& t : sch.transfers) message[{t.src, t.step}].push_back(t.id);
    for (const auto& t : sch.transfers) {
      const auto deps = sch.depends_on[t.id];
      const std::vector<uint32_t> got(deps.begin(), deps.end());
      if (t.step < w) {
        EXPECT_TRUE(got.empty()) << "window " << w << " transfer " << t.id;
      } else {
        EXPECT_EQ(got, (message[{t.src, t.step - w}])) << "window " << w << " transfer " << t.id;
      }
    }
    EXPECT_EQ(message.begin()->second.size(), 4u);  // 2 channels x 2 chunks
  }
}

TEST(PktgenSchedule, IncastAndPermutation) {
  ScheduleParams p;
  p.pattern = Pattern::kIncast;
  p.ranks = 5;
  p.bytes = 64;
  p.root = 2;
  const Schedule inc = make_schedule(p);
  ASSERT_EQ(inc.transfers.size(), 4u);
  std::vector<std::pair<uint64_t, uint64_t>> slots;
  for (const auto& t : inc.transfers) {
    EXPECT_EQ(t.dst, 2u);
    EXPECT_EQ(t.bytes, 64u);
    EXPECT_TRUE(inc.depends_on[t.id].empty());
    slots.emplace_back(t.dst_offset - inc.layout[2].recv_offset,
                       t.dst_offset - inc.layout[2].recv_offset + t.bytes);
  }
  expect_tiles(slots, 4 * 64, "incast slots");
  EXPECT_EQ(inc.layout[2].recv_bytes, 4 * 64u);
  EXPECT_EQ(inc.layout[0].recv_bytes, 0u);

  p.pattern = Pattern::kPermutation;
  p.ranks = 16;
  p.seed = 7;
  const Schedule a = make_schedule(p);
  const Schedule b = make_schedule(p);
  p.seed = 8;
  const Schedule c = make_schedule(p);
  EXPECT_EQ(a.permutation, b.permutation);
  EXPECT_NE(a.permutation, c.permutation);
  std::vector<int> in(16, 0);
  for (const auto& t : a.transfers) {
    EXPECT_NE(t.src, t.dst);
    EXPECT_EQ(t.dst, a.permutation[t.src]);
    ++in[t.dst];
  }
  for (int x : in) EXPECT_EQ(x, 1);
}

// The ranges a transfer touches on which ranks, and whether it writes them.
struct Access {
  uint32_t rank;
  uint64_t lo, hi;
  bool write;
};
std::vector<Access> accesses(const Transfer& t) {
  std::vector<Access> a{{t.src, t.src_offset, t.src_offset + t.bytes, false},
                        {t.dst, t.dst_offset, t.dst_offset + t.bytes, true}};
  if (t.action == Action::kReduce) a.push_back({t.dst, t.reduce_offset, t.reduce_offset + t.bytes, true});
  return a;
}
bool conflict(const Transfer& x, const Transfer& y) {
  for (const auto& a : accesses(x)) {
    for (const auto& b : accesses(y)) {
      if (a.rank == b.rank && a.lo < b.hi && b.lo < a.hi && (a.write || b.write)) return true;
    }
  }
  return false;
}

// Any two transfers touching the same bytes (one of them writing) are
// ordered by the dependencies, and every dependency is such a conflict.
TEST(PktgenSchedule, DependenciesOrderEveryConflictAndNothingElse) {
  for (Pattern p : kAllPatterns) {
    for (uint32_t n : {2u, 3u, 4u, 6u}) {
      const Schedule s = make(p, n, 4 * n * 6, 2, 8);
      const size_t t = s.transfers.size();
      std::vector<std::vector<bool>> before(t, std::vector<bool>(t, false));  // before[j][i]: i ->* j
      ASSERT_EQ(s.depends_on.size(), t);
      for (const auto& x : s.transfers) {
        const auto deps = s.depends_on[x.id];
        EXPECT_TRUE(std::adjacent_find(deps.begin(), deps.end(), std::greater_equal<>()) ==
                    deps.end())
            << "not sorted and unique: " << to_string(p) << " n=" << n << " " << x.id;
        for (uint32_t d : deps) {
          ASSERT_LT(d, x.id);
          EXPECT_TRUE(conflict(x, s.transfers[d])) << to_string(p) << " n=" << n;
          before[x.id][d] = true;
          for (size_t i = 0; i < t; ++i) {
            if (before[d][i]) before[x.id][i] = true;
          }
        }
      }
      for (size_t j = 0; j < t; ++j) {
        for (size_t i = 0; i < j; ++i) {
          if (conflict(s.transfers[i], s.transfers[j])) {
            ASSERT_TRUE(before[j][i]) << to_string(p) << " n=" << n << " " << i << " -> " << j;
          }
        }
      }
    }
  }
}

// Pipelining: with chunks, a ring step waits only for the same chunk of the
// step before, so the first chunk of step 1 can go while the rest of step 0
// is still in flight.
TEST(PktgenSchedule, RingChunksPipeline) {
  const Schedule s = make(Pattern::kRingAllReduce, 4, 4 * 4 * 8, 1, 8);  // 4 chunks per step
  for (const auto& t : s.transfers) {
    if (t.step == 0) {
      EXPECT_TRUE(s.depends_on[t.id].empty());
      continue;
    }
    const auto deps = s.depends_on[t.id];
    ASSERT_FALSE(deps.empty());
    for (uint32_t d : deps) EXPECT_LE(s.transfers[d].bytes, 8u);
    // The RAW dependency: the same bytes arriving at this sender one step earlier.
    const bool has_prev = std::any_of(deps.begin(), deps.end(), [&](uint32_t d) {
      const Transfer& u = s.transfers[d];
      return u.dst == t.src && u.step + 1 == t.step &&
             (u.action == Action::kReduce ? u.reduce_offset : u.dst_offset) == t.src_offset;
    });
    EXPECT_TRUE(has_prev) << t.id;
  }
}

// schedule_size counts what make_schedule makes: every pattern, odd and
// even rank counts, several channels (some left empty by small sizes),
// whole steps and chunks, the tree's default chunk.
TEST(PktgenSchedule, SizeCountsWhatMakeScheduleMakes) {
  for (Pattern p : kAllPatterns) {
    for (uint32_t n : {2u, 3u, 5u, 8u, 13u}) {
      for (uint32_t channels : {1u, 3u}) {
        for (uint64_t chunk : {uint64_t{0}, uint64_t{8}, uint64_t{1024}}) {
          for (uint64_t bytes : {uint64_t{4} * n, uint64_t{4} * n * 40, uint64_t{4} * n * 1024}) {
            ScheduleParams params = params_of(p, n, bytes, channels, chunk);
            params.root = n - 1;
            const Schedule s = make_schedule(params);
            std::set<std::pair<uint32_t, uint32_t>> pairs;
            for (const auto& t : s.transfers)
              pairs.emplace(std::min(t.src, t.dst), std::max(t.src, t.dst));
            const ScheduleSize size = schedule_size(params);
            const std::string what = fmt::format("{} n={} channels={} chunk={} bytes={}",
                                                 to_string(p), n, channels, chunk, bytes);
            EXPECT_EQ(size.transfers, s.transfers.size()) << what;
            EXPECT_EQ(size.rank_pairs, pairs.size()) << what;
            uint64_t buffers = 0;
            for (const BufferLayout& l : s.layout) buffers += l.total_bytes();
            EXPECT_EQ(size.buffer_bytes, buffers) << what;
          }
        }
      }
    }
  }
  ScheduleParams bad;
  bad.ranks = 3;
  bad.bytes = 40;
  EXPECT_THROW(schedule_size(bad), std::invalid_argument);
}

TEST(PktgenSchedule, RefusesBadParams) {
  ScheduleParams p;
  p.ranks = 3;
  p.bytes = 40;  // not a multiple of 12
  EXPECT_NE(check_params(p).find("multiple of 4 x ranks = 12"), std::string::npos) << check_params(p);
  EXPECT_THROW(make_schedule(p), std::invalid_argument);
  p.bytes = 48;
  EXPECT_EQ(check_params(p), "");
  p.ranks = 1;
  EXPECT_NE(check_params(p).find("at least 2"), std::string::npos);
  p.ranks = 3;
  p.pattern = Pattern::kTreeAllReduce;
  p.bytes = 42;
  EXPECT_NE(check_params(p).find("multiple of 4 bytes"), std::string::npos);
  p.bytes = 44;
  EXPECT_EQ(check_params(p), "");
  p.chunk_bytes = 6;
  EXPECT_NE(check_params(p).find("chunk"), std::string::npos);
  p.chunk_bytes = 0;
  p.channels = 0;
  EXPECT_NE(check_params(p).find("channels"), std::string::npos);
  p.channels = 1;
  p.pattern = Pattern::kIncast;
  p.root = 3;
  EXPECT_NE(check_params(p).find("root"), std::string::npos);
  p.root = 0;
  p.bytes = 48;
  p.window = 1;
  EXPECT_EQ(check_params(p), "a window is for all_to_all only");
  p.pattern = Pattern::kAllToAll;
  EXPECT_EQ(check_params(p), "");
  p.window = 3;
  EXPECT_EQ(check_params(p), "window 3 is not below the ranks (3)");
}

}  // namespace
}  // namespace droce::pktgen
