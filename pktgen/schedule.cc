#include "droce/pktgen/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <stdexcept>
#include <utility>

#include "dependencies.h"
#include "droce/pktgen/rng.h"

namespace droce::pktgen {
namespace {

constexpr uint64_t kElem = 4;  // float32

struct PatternName {
  Pattern pattern;
  std::string_view name;
};
constexpr PatternName kPatternNames[] = {
    {Pattern::kRingAllReduce, "ring"},
    {Pattern::kHalvingDoubling, "halving_doubling"},
    {Pattern::kTreeAllReduce, "tree"},
    {Pattern::kAllGather, "all_gather"},
    {Pattern::kReduceScatter, "reduce_scatter"},
    {Pattern::kAllToAll, "all_to_all"},
    {Pattern::kIncast, "incast"},
    {Pattern::kPermutation, "permutation"},
};

// [lo, hi) in elements of part i when `count` elements are split into
// `parts` nearly equal contiguous parts.
uint64_t split_point(uint64_t count, uint64_t parts, uint64_t i) {
  return count * i / parts;
}

// Turns messages into channel- and chunk-sized transfers.
class Builder {
 public:
  // Makes the transfers into `out`.
  Builder(const ScheduleParams& p, uint64_t chunk_bytes, std::vector<Transfer>& out)
      : p_(p), chunk_(chunk_bytes), out_(&out) {}
  // Only counts them (schedule_size), with a bit per pair of ranks.
  Builder(const ScheduleParams& p, uint64_t chunk_bytes, ScheduleSize& size)
      : p_(p), chunk_(chunk_bytes), size_(&size), paired_(uint64_t{p.ranks} * p.ranks / 64 + 1) {}

  // fifo_slots > 0: the receiver lands the chunks of each channel in a ring
  // of that many chunk-sized slots at dst_off (chunk j in slot j mod
  // fifo_slots), as NCCL's connections do; the dependency tracker then
  // holds chunk j + fifo_slots until chunk j has been applied, which is
  // NCCL's credit flow control.
  void message(uint32_t src, uint32_t dst, uint32_t step, Phase phase, Action action,
               uint64_t src_off, uint64_t dst_off, uint64_t reduce_off, uint64_t bytes,
               uint32_t fifo_slots = 0) {
    const uint64_t elems = bytes / kElem;
    for (uint32_t ch = 0; ch < p_.channels; ++ch) {
      const uint64_t lo = split_point(elems, p_.channels, ch) * kElem;
      const uint64_t hi = split_point(elems, p_.channels, ch + 1) * kElem;
      if (hi == lo) continue;
      const uint64_t piece = chunk_ == 0 ? hi - lo : chunk_;
      if (size_) {
        count(src, dst, (hi - lo + piece - 1) / piece);
        continue;
      }
      for (uint64_t off = lo; off < hi; off += piece) {
        Transfer t;
        t.id = static_cast<uint32_t>(out_->size());
        t.src = src;
        t.dst = dst;
        t.channel = ch;
        t.step = step;
        t.phase = phase;
        t.action = action;
        t.src_offset = src_off + off;
        t.dst_offset = dst_off + off;
        if (fifo_slots > 0 && chunk_ > 0) t.dst_offset = dst_off + lo + (off - lo) / chunk_ % fifo_slots * chunk_;
        t.reduce_offset = action == Action::kReduce ? reduce_off + off : 0;
        t.bytes = std::min(piece, hi - off);
        t.with_imm = off + piece >= hi;
        t.imm = t.with_imm ? (step << 8) | (ch & 0xFF) : 0;
        out_->push_back(std::move(t));
      }
    }
  }

 private:
  void count(uint32_t src, uint32_t dst, uint64_t transfers) {
    size_->transfers += transfers;
    const uint64_t bit = uint64_t{std::min(src, dst)} * p_.ranks + std::max(src, dst);
    uint64_t& word = paired_[bit / 64];
    const uint64_t mask = uint64_t{1} << (bit % 64);
    if (!(word & mask)) ++size_->rank_pairs;
    word |= mask;
  }

  const ScheduleParams& p_;
  uint64_t chunk_;
  std::vector<Transfer>* out_ = nullptr;
  ScheduleSize* size_ = nullptr;
  std::vector<uint64_t> paired_;  // counting: bit lo * ranks + hi per pair seen
};

uint32_t floor_pow2(uint32_t n) {
  uint32_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

void build_ring(const ScheduleParams& p, Schedule& s, Builder& b) {
  const uint32_t n = p.ranks;
  const uint64_t cs = p.bytes / n;
  const uint64_t staging = s.layout[0].staging_offset;
  const auto mod = [n](int64_t x) { return static_cast<uint64_t>(((x % n) + n) % n); };
  uint32_t step = 0;
  // Reduce-scatter: at step k rank r sends chunk (r - k + shift) to r + 1,
  // which adds it into its own copy. All-reduce uses shift 0, so rank r
  // ends owning chunk r + 1: the textbook labelling of the ring all-reduce
  // that docs/PKTGEN.md draws, not NCCL's, whose ring kernel numbers the
  // chunks from another origin; only the labels differ, the traffic is the
  // same. The standalone reduce-scatter uses shift -1 so
  // that rank r ends owning chunk r (what nccl-tests checks).
  if (p.pattern == Pattern::kRingAllReduce || p.pattern == Pattern::kReduceScatter) {
    const int64_t shift = p.pattern == Pattern::kReduceScatter ? -1 : 0;
    for (uint32_t k = 0; k + 1 < n; ++k, ++step) {
      for (uint32_t r = 0; r < n; ++r) {
        const uint64_t c = mod(int64_t{r} - k + shift);
        b.message(r, (r + 1) % n, step, Phase::kReduceScatter, Action::kReduce, c * cs,
                  staging + c * cs, c * cs, cs);
      }
    }
  }
  // All-gather: rank r starts owning chunk r + shift and at step k forwards
  // chunk (r - k + shift), a plain copy into the same offset.
  if (p.pattern == Pattern::kRingAllReduce || p.pattern == Pattern::kAllGather) {
    const int64_t shift = p.pattern == Pattern::kRingAllReduce ? 1 : 0;
    for (uint32_t k = 0; k + 1 < n; ++k, ++step) {
      for (uint32_t r = 0; r < n; ++r) {
        const uint64_t c = mod(int64_t{r} - k + shift);
        b.message(r, (r + 1) % n, step, Phase::kAllGather, Action::kCopy, c * cs, c * cs, 0, cs);
      }
    }
  }
  s.num_steps = step;
}

// Rabenseifner's all-reduce. Non-power-of-two N: the standard fold (as in
// MPICH, Thakur, Rabenseifner and Gropp, "Optimization of Collective
// Communication Operations in MPICH", IJHPCA 2005): with p = 2^floor(log2 N)
// and rem = N - p, even ranks 2i < 2 rem first send their whole vector to
// 2i + 1 and sit out; the p remaining ranks (new rank v) run the
// power-of-two algorithm; at the end 2i + 1 copies the result back to 2i.
//
// The fold overlaps the algorithm instead of running as separate steps
// where the data allow it. Fold-in: 2i does not send its whole vector to
// 2i + 1 and wait; it sends the half that 2i + 1 keeps in its first
// exchange to 2i + 1 and the half that 2i + 1 would pass on straight to
// 2i + 1's partner, into a second staging slot. 2i + 1 then exchanges its
// own data at once instead of idling while the fold arrives (every rank
// still receives the same contributions; sums of the exactly representable
// values are order-independent). Fold-out: 2i + 1 copies each range back
// to 2i as soon as it is final: the block it owns after the
// reduce-scatter (while the all-gather runs), then what each doubling
// step brings. The dependency tracker derives the rest from byte ranges.
void build_halving_doubling(const ScheduleParams& p, Schedule& s, Builder& b) {
  const uint32_t n = p.ranks;
  const uint32_t pof2 = floor_pow2(n);
  const uint32_t rem = n - pof2;
  const uint64_t elems = p.bytes / kElem;
  const uint64_t staging = s.layout[0].staging_offset;
  const auto old_rank = [rem](uint32_t v) { return v < rem ? 2 * v + 1 : v + rem; };
  const auto block_byte = [&](uint32_t blk) { return split_point(elems, pof2, blk) * kElem; };
  uint32_t step = 0;
  // Block range [lo, hi) each new rank is responsible for.
  std::vector<uint32_t> lo(pof2, 0), hi(pof2, pof2);
  const auto exchange = [&](uint32_t v, uint32_t bit) {
    const uint32_t mid = (lo[v] + hi[v]) / 2;
    const bool low = (v & bit) == 0;
    const uint32_t send_lo = low ? mid : lo[v];
    const uint32_t send_hi = low ? hi[v] : mid;
    const uint64_t off = block_byte(send_lo);
    b.message(old_rank(v), old_rank(v ^ bit), step, Phase::kReduceScatter, Action::kReduce, off,
              staging + off, off, block_byte(send_hi) - off);
  };
  std::vector<bool> exchanged(pof2, false);
  if (rem > 0) {
    const uint64_t half = block_byte(pof2 / 2);
    const uint64_t fold_slot = staging + p.bytes;  // the second staging slot
    for (uint32_t i = 0; i < rem; ++i) {
      // New rank v = i (old 2i + 1) keeps the lower half in its first
      // exchange when bit 0 of v is clear and passes the upper half on.
      const bool keeps_lower = (i & 1) == 0;
      const uint64_t keep_off = keeps_lower ? 0 : half;
      const uint64_t keep_bytes = keeps_lower ? half : p.bytes - half;
      const uint64_t pass_off = keeps_lower ? half : 0;
      const uint64_t pass_bytes = p.bytes - keep_bytes;
      const auto fold = [&](uint32_t dst, uint64_t off, uint64_t bytes) {
        if (bytes > 0) {
          b.message(2 * i, dst, step, Phase::kPreReduce, Action::kReduce, off, fold_slot + off,
                    off, bytes);
        }
      };
      if ((i ^ 1) >= rem) {
        // The partner did not fold: 2i sends the pass-on half straight to
        // it and only the kept half to 2i + 1, generated so that each
        // receiver takes one contribution at a time (the tracker orders
        // reductions into the same bytes in generation order): 2i's
        // pass-on half, the partner's exchange into 2i + 1, 2i's kept half,
        // then 2i + 1's own exchange (in the halving loop below).
        fold(old_rank(i ^ 1), pass_off, pass_bytes);
        exchange(i ^ 1, 1);
        exchanged[i ^ 1] = true;
        fold(2 * i + 1, keep_off, keep_bytes);
      } else {
        // Both partners folded: the whole vector to 2i + 1, the half it
        // passes on first, so its first exchange starts after half the
        // fold (sending the pass-on half to a partner that is itself
        // still receiving a fold only lengthens the chain there).
        fold(2 * i + 1, pass_off, pass_bytes);
        fold(2 * i + 1, keep_off, keep_bytes);
      }
    }
  }
  // Recursive halving with partner v ^ 2^k: the rank whose bit k is clear
  // keeps the lower half and sends the upper half, its partner the reverse.
  for (uint32_t bit = 1; bit < pof2; bit <<= 1, ++step) {
    for (uint32_t v = 0; v < pof2; ++v) {
      if (bit == 1 && exchanged[v]) continue;
      exchange(v, bit);
    }
    for (uint32_t v = 0; v < pof2; ++v) {
      const uint32_t mid = (lo[v] + hi[v]) / 2;
      if ((v & bit) == 0) {
        hi[v] = mid;
      } else {
        lo[v] = mid;
      }
    }
  }
  // Fold-out ranges of the folded ranks (v < rem), in the order they become
  // final: the reduce-scatter's block, then each doubling step's.
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> final_ranges(pof2);
  for (uint32_t v = 0; v < pof2; ++v) final_ranges[v].emplace_back(lo[v], hi[v]);
  // Recursive doubling in the reverse order: send what is owned, own twice as much.
  for (uint32_t bit = pof2 >> 1; bit >= 1; bit >>= 1, ++step) {
    for (uint32_t v = 0; v < pof2; ++v) {
      const uint64_t off = block_byte(lo[v]);
      b.message(old_rank(v), old_rank(v ^ bit), step, Phase::kAllGather, Action::kCopy, off, off,
                0, block_byte(hi[v]) - off);
    }
    for (uint32_t v = 0; v < pof2; ++v) final_ranges[v].emplace_back(lo[v ^ bit], hi[v ^ bit]);
    for (uint32_t v = 0; v < pof2; ++v) {
      const uint32_t width = hi[v] - lo[v];
      if ((v & bit) == 0) {
        hi[v] += width;
      } else {
        lo[v] -= width;
      }
    }
  }
  if (rem > 0) {
    // Before the last doubling step (partner v ^ 1) a rank holds the
    // blocks of the ranks whose bit 0 equals its own, so any rank u with
    // the other bit 0 can send 2i the half that 2i + 1 only gets in that
    // step. Co-senders are unfolded ranks (no fold-out of their own), each
    // helping one folded rank at most (helping two costs it more than it
    // saves): first the partners that did not fold, then any other.
    std::vector<uint32_t> co_sender(rem, UINT32_MAX);
    std::vector<bool> busy(pof2, false);
    for (uint32_t i = 0; i < rem; ++i) {
      if ((i ^ 1) >= rem) {
        co_sender[i] = i ^ 1;
        busy[i ^ 1] = true;
      }
    }
    for (uint32_t i = 0; i < rem; ++i) {
      for (uint32_t u = rem; u < pof2 && co_sender[i] == UINT32_MAX; ++u) {
        if ((u & 1) != (i & 1) && !busy[u]) {
          co_sender[i] = u;
          busy[u] = true;
        }
      }
    }
    for (uint32_t i = 0; i < rem; ++i) {
      const auto copy_out = [&](uint32_t v, size_t ranges) {
        for (size_t k = 0; k < ranges; ++k) {
          const uint64_t off = block_byte(final_ranges[v][k].first);
          const uint64_t bytes = block_byte(final_ranges[v][k].second) - off;
          if (bytes > 0)
            b.message(old_rank(v), 2 * i, step, Phase::kPostCopy, Action::kCopy, off, off, 0, bytes);
        }
      };
      if (co_sender[i] != UINT32_MAX) {
        copy_out(i, final_ranges[i].size() - 1);
        copy_out(co_sender[i], final_ranges[co_sender[i]].size() - 1);
      } else {
        copy_out(i, final_ranges[i].size());
      }
    }
    ++step;
  }
  s.num_steps = step;
}


void build_tree(const ScheduleParams& p, Schedule& s, Builder& b) {
  const uint32_t n = p.ranks;
  const uint64_t elems = p.bytes / kElem;
  const uint64_t staging = s.layout[0].staging_offset;
  struct Tree {
    std::vector<int32_t> parent;
    std::vector<std::vector<uint32_t>> children;
    std::vector<uint32_t> height, depth;
    uint64_t off = 0, bytes = 0;
  };
  Tree trees[2];
  uint32_t max_height = 0;
  for (int t = 0; t < 2; ++t) {
    Tree& tr = trees[t];
    tr.parent = binary_tree_parents(n, t);
    s.tree_parent[t] = tr.parent;
    tr.children.assign(n, {});
    for (uint32_t r = 0; r < n; ++r) {
      if (tr.parent[r] >= 0) tr.children[tr.parent[r]].push_back(r);  // ascending rank
    }
    tr.depth.assign(n, 0);
    tr.height.assign(n, 0);
    for (uint32_t r = 0; r < n; ++r) {
      for (int32_t a = tr.parent[r]; a >= 0; a = tr.parent[a]) ++tr.depth[r];
    }
    // Heights: settle by repeated relaxation (depth <= n, trees are small).
    for (bool changed = true; changed;) {
      changed = false;
      for (uint32_t r = 0; r < n; ++r) {
        for (uint32_t c : tr.children[r]) {
          if (tr.height[r] < tr.height[c] + 1) {
            tr.height[r] = tr.height[c] + 1;
            changed = true;
          }
        }
      }
    }
    for (uint32_t r = 0; r < n; ++r) max_height = std::max(max_height, tr.height[r]);
    // Each tree carries half of the vector.
    tr.off = split_point(elems, 2, t) * kElem;
    tr.bytes = split_point(elems, 2, t + 1) * kElem - tr.off;
  }
  std::vector<uint32_t> order(n);
  // Reduce up: children before parents (ascending height). A child lands in
  // the staging slot of its position among the parent's children.
  for (int t = 0; t < 2; ++t) {
    const Tree& tr = trees[t];
    if (tr.bytes == 0) continue;
    for (uint32_t r = 0; r < n; ++r) order[r] = r;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t c) { return tr.height[a] < tr.height[c]; });
    for (uint32_t r : order) {
      if (tr.parent[r] < 0) continue;
      const auto& sib = tr.children[tr.parent[r]];
      const uint64_t slot = std::find(sib.begin(), sib.end(), r) - sib.begin();
      b.message(r, tr.parent[r], tr.height[r], Phase::kReduceUp, Action::kReduce, tr.off,
                staging + slot * p.bytes + tr.off, tr.off, tr.bytes, tree_fifo_slots(s.chunk_bytes, p.ranks));
    }
  }
  // Broadcast down: parents before children (ascending depth).
  for (int t = 0; t < 2; ++t) {
    const Tree& tr = trees[t];
    if (tr.bytes == 0) continue;
    for (uint32_t r = 0; r < n; ++r) order[r] = r;
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t c) { return tr.depth[a] < tr.depth[c]; });
    for (uint32_t r : order) {
      for (uint32_t c : tr.children[r]) {
        b.message(r, c, max_height + tr.depth[r], Phase::kBroadcastDown, Action::kCopy, tr.off,
                  tr.off, 0, tr.bytes);
      }
    }
  }
  s.num_steps = 2 * max_height;
}

void build_all_to_all(const ScheduleParams& p, Schedule& s, Builder& b) {
  const uint32_t n = p.ranks;
  const uint64_t cs = p.bytes / n;
  // Staggered: at step k every rank sends to r + k, so each rank sends to and
  // receives from exactly one peer per step (no hot receiver). Its own
  // block goes to its own slot by a local copy, as in nccl-tests.
  for (uint32_t r = 0; r < n; ++r) {
    if (cs > 0) s.local_copies.push_back({r, r * cs, s.layout[r].recv_offset + r * cs, cs});
  }
  for (uint32_t k = 1; k < n; ++k) {
    for (uint32_t r = 0; r < n; ++r) {
      const uint32_t d = (r + k) % n;
      b.message(r, d, k - 1, Phase::kExchange, Action::kCopy, d * cs,
                s.layout[d].recv_offset + r * cs, 0, cs);
    }
  }
  s.num_steps = n - 1;
}

void build_incast(const ScheduleParams& p, Schedule& s, Builder& b) {
  for (uint32_t q = 0; q < p.ranks; ++q) {
    if (q == p.root) continue;
    const uint64_t slot = q < p.root ? q : q - 1;
    b.message(q, p.root, 0, Phase::kExchange, Action::kCopy, 0,
              s.layout[p.root].recv_offset + slot * p.bytes, 0, p.bytes);
  }
  s.num_steps = 1;
}

void build_permutation(const ScheduleParams& p, Schedule& s, Builder& b) {
  s.permutation = random_derangement(p.ranks, p.seed);
  for (uint32_t r = 0; r < p.ranks; ++r) {
    const uint32_t d = s.permutation[r];
    b.message(r, d, 0, Phase::kExchange, Action::kCopy, 0, s.layout[d].recv_offset, 0, p.bytes);
  }
  s.num_steps = 1;
}

}  // namespace

std::string_view to_string(Pattern p) {
  for (const auto& e : kPatternNames) {
    if (e.pattern == p) return e.name;
  }
  return "unknown";
}

std::optional<Pattern> pattern_from_string(std::string_view name) {
  for (const auto& e : kPatternNames) {
    if (e.name == name) return e.pattern;
  }
  return std::nullopt;
}

std::string pattern_names() {
  std::string out;
  for (const auto& e : kPatternNames) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

std::string_view to_string(Phase p) {
  switch (p) {
    case Phase::kReduceScatter: return "reduce_scatter";
    case Phase::kAllGather: return "all_gather";
    case Phase::kReduceUp: return "reduce_up";
    case Phase::kBroadcastDown: return "broadcast_down";
    case Phase::kPreReduce: return "pre_reduce";
    case Phase::kPostCopy: return "post_copy";
    case Phase::kExchange: return "exchange";
  }
  return "unknown";
}

uint64_t size_alignment(Pattern p, uint32_t ranks) {
  switch (p) {
    case Pattern::kRingAllReduce:
    case Pattern::kHalvingDoubling:
    case Pattern::kAllGather:
    case Pattern::kReduceScatter:
    case Pattern::kAllToAll:
      return kElem * ranks;
    case Pattern::kTreeAllReduce:
    case Pattern::kIncast:
    case Pattern::kPermutation:
      return kElem;
  }
  return kElem;
}

std::string check_params(const ScheduleParams& p) {
  if (p.ranks < 2) return fmt::format("ranks must be at least 2 (got {})", p.ranks);
  if (p.ranks > kMaxRanks) return fmt::format("ranks must be at most {} (got {})", kMaxRanks, p.ranks);
  if (p.bytes == 0) return "size must be at least one float32 element (4 bytes)";
  const uint64_t align = size_alignment(p.pattern, p.ranks);
  if (p.bytes % align != 0) {
    if (align == kElem) {
      return fmt::format("size {} is not a multiple of 4 bytes (float32 elements)", p.bytes);
    }
    return fmt::format(
        "size {} is not a multiple of 4 x ranks = {} bytes, which {} needs (every rank owns "
        "size/ranks bytes of float32)",
        p.bytes, align, to_string(p.pattern));
  }
  if (p.channels < 1 || p.channels > kMaxChannels) {
    return fmt::format("channels must be 1..{} (got {})", kMaxChannels, p.channels);
  }
  if (p.chunk_bytes % kElem != 0) {
    return fmt::format("chunk size {} is not a multiple of 4 bytes (float32)", p.chunk_bytes);
  }
  if (p.pattern == Pattern::kIncast && p.root >= p.ranks) {
    return fmt::format("root {} is not a rank (0..{})", p.root, p.ranks - 1);
  }
  if (p.window != 0 && p.pattern != Pattern::kAllToAll) return "a window is for all_to_all only";
  if (p.window >= p.ranks)
    return fmt::format("window {} is not below the ranks ({})", p.window, p.ranks);
  return {};
}

uint64_t tree_window_bytes(uint32_t ranks) {
  return std::clamp<uint64_t>(kTreeFabricWindowBytes / std::max<uint32_t>(ranks, 1),
                              kTreeChunkBytes, kTreeWindowBytes);
}

uint32_t tree_fifo_slots(uint64_t chunk_bytes, uint32_t ranks) {
  if (chunk_bytes == 0) return 1;
  return static_cast<uint32_t>(
      std::clamp<uint64_t>(tree_window_bytes(ranks) / chunk_bytes, 1, kTreeFifoSlotsMax));
}

uint64_t default_chunk_bytes(const ScheduleParams& p) {
  if (p.pattern != Pattern::kTreeAllReduce || p.channels == 0 || p.ranks < 2) return 0;
  // Two trees of N - 1 edges, each edge up and down, every channel's part
  // of a tree's half split into chunks.
  const uint64_t per_channel = p.bytes / 2 / p.channels + kElem;
  const uint64_t messages = uint64_t{4} * (p.ranks - 1) * p.channels;
  uint64_t chunk = kTreeChunkBytes;
  while (messages * ((per_channel + chunk - 1) / chunk) > kTreeMaxTransfers) chunk *= 2;
  return chunk;
}

uint64_t effective_chunk_bytes(const ScheduleParams& p) {
  return p.chunk_bytes != 0 ? p.chunk_bytes : default_chunk_bytes(p);
}

std::string chunk_label(Pattern pattern, uint64_t chunk_bytes) {
  if (chunk_bytes != 0) return fmt::format("{}", chunk_bytes);
  if (pattern == Pattern::kTreeAllReduce) return fmt::format("{} (tree default)", kTreeChunkBytes);
  return "whole step";
}

namespace {

// The schedule's parameters, chunk and every rank's buffer layout.
void lay_out(const ScheduleParams& p, Schedule& s) {
  s.params = p;
  s.chunk_bytes = effective_chunk_bytes(p);
  uint64_t staging_slots = 0, recv_bytes = 0;
  switch (p.pattern) {
    case Pattern::kRingAllReduce:
    case Pattern::kReduceScatter:
      staging_slots = 1;
      break;
    case Pattern::kHalvingDoubling:
      // Non-power-of-two: the fold-in lands in a slot of its own, so it
      // can arrive while the first exchange does.
      staging_slots = floor_pow2(p.ranks) == p.ranks ? 1 : 2;
      break;
    case Pattern::kTreeAllReduce:
      staging_slots = 2;  // up to two children land at once
      break;
    case Pattern::kAllGather:
      break;
    case Pattern::kAllToAll:
    case Pattern::kPermutation:
      recv_bytes = p.bytes;
      break;
    case Pattern::kIncast:
      break;
  }
  s.layout.resize(p.ranks);
  for (uint32_t r = 0; r < p.ranks; ++r) {
    BufferLayout& l = s.layout[r];
    l.data_bytes = p.bytes;
    l.staging_offset = p.bytes;
    l.staging_bytes = staging_slots * p.bytes;
    l.recv_offset = l.staging_offset + l.staging_bytes;
    l.recv_bytes = recv_bytes;
    if (p.pattern == Pattern::kIncast && r == p.root) l.recv_bytes = (p.ranks - 1) * p.bytes;
  }
}

void build_pattern(const ScheduleParams& p, Schedule& s, Builder& b) {
  switch (p.pattern) {
    case Pattern::kRingAllReduce:
    case Pattern::kAllGather:
    case Pattern::kReduceScatter:
      build_ring(p, s, b);
      break;
    case Pattern::kHalvingDoubling:
      build_halving_doubling(p, s, b);
      break;
    case Pattern::kTreeAllReduce:
      build_tree(p, s, b);
      break;
    case Pattern::kAllToAll:
      build_all_to_all(p, s, b);
      break;
    case Pattern::kIncast:
      build_incast(p, s, b);
      break;
    case Pattern::kPermutation:
      build_permutation(p, s, b);
      break;
  }
}

}  // namespace

Schedule make_schedule(const ScheduleParams& p) {
  if (auto err = check_params(p); !err.empty()) throw std::invalid_argument(err);
  Schedule s;
  lay_out(p, s);
  // As many as it will hold: growing would copy them, and for a moment
  // hold them twice.
  s.transfers.reserve(schedule_size(p).transfers);
  Builder b(p, s.chunk_bytes, s.transfers);
  build_pattern(p, s, b);
  derive_dependencies(s);
  return s;
}

ScheduleSize schedule_size(const ScheduleParams& p) {
  if (auto err = check_params(p); !err.empty()) throw std::invalid_argument(err);
  Schedule s;
  lay_out(p, s);
  ScheduleSize size;
  for (const BufferLayout& l : s.layout) size.buffer_bytes += l.total_bytes();
  Builder b(p, s.chunk_bytes, size);
  build_pattern(p, s, b);
  return size;
}

void check_dependencies(const Schedule& s) {
  if (s.depends_on.size() != s.transfers.size())
    throw std::invalid_argument(fmt::format("the schedule has {} transfers and {} dependency lists",
                                            s.transfers.size(), s.depends_on.size()));
  for (uint32_t id = 0; id < s.transfers.size(); ++id)
    for (uint32_t d : s.depends_on[id])
      if (d >= id)
        throw std::invalid_argument(
            fmt::format("transfer {} depends on transfer {}, which is not before it", id, d));
}

IndexLists dependents_of(const Schedule& s) {
  return IndexLists::build(s.transfers.size(), [&](auto&& emit) {
    for (const Transfer& t : s.transfers)
      for (uint32_t d : s.depends_on[t.id]) emit(d, t.id);
  });
}

std::vector<std::vector<uint32_t>> transfers_by_src(const Schedule& s) {
  std::vector<std::vector<uint32_t>> out(s.params.ranks);
  for (const auto& t : s.transfers) out[t.src].push_back(t.id);
  return out;
}

// The in-order binary tree: rank r > 0 whose lowest set bit is b hangs under
// r + b or r - b, whichever has lowest set bit 2b (that is (r ^ b) | 2b),
// or under r - b when that would be past the last rank; rank 0 is the root
// with the largest power of two below N as its only child.
std::vector<int32_t> binary_tree_parents(uint32_t ranks, int tree) {
  const auto in_order = [ranks](uint32_t r) -> int32_t {
    if (r == 0) return -1;
    const uint32_t low = r & (~r + 1);
    uint32_t up = (r ^ low) | (low << 1);
    if (up >= ranks) up = r ^ low;
    return static_cast<int32_t>(up);
  };
  std::vector<int32_t> parent(ranks);
  for (uint32_t r = 0; r < ranks; ++r) {
    if (tree == 0) {
      parent[r] = in_order(r);
    } else if (ranks % 2 == 0) {
      // Mirror: leaves of tree 0 (odd ranks) become inner nodes of tree 1.
      const int32_t up = in_order(ranks - 1 - r);
      parent[r] = up < 0 ? -1 : static_cast<int32_t>(ranks - 1) - up;
    } else {
      // Shift by one rank.
      const int32_t up = in_order((r + ranks - 1) % ranks);
      parent[r] = up < 0 ? -1 : static_cast<int32_t>((up + 1) % ranks);
    }
  }
  return parent;
}

}  // namespace droce::pktgen
