// Dependencies of a schedule's transfers; see dependencies.h.
#include "dependencies.h"

#include <fmt/format.h>

#include <map>
#include <memory_resource>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace droce::pktgen {
namespace {

// Derives dependencies from the byte ranges each transfer reads and writes,
// taking the generation order as the sequential reference: a transfer
// waits for the last writer of everything it reads or writes (RAW, WAW) and
// for every reader of what it overwrites since that write (WAR). Chunks of
// the next step therefore wait only for the same chunk of the previous
// step, which is the pipelining NCCL's ring gets from its chunked FIFOs.
//
// One rank's buffer at a time: a transfer reads on its source and writes on
// its destination, so a rank's segments change only by the transfers that
// touch it, in id order, and what one rank's segments say does not depend
// on another's. Walking every transfer once with all ranks' segments live
// kept hundreds of MB of tree nodes at 1024 ranks, each step of a search a
// cache miss (four fifths of make_schedule); one rank's tree stays in
// cache, and its nodes and reader lists live in one arena, released at once
// before the next rank (a ring of 1024 ranks makes millions of them).
class RankDependencies {
 public:
  explicit RankDependencies(uint64_t end) : end_(end) { segments_.emplace(0, Segment{}); }

  // Calls depend(d) for each transfer d that t's ranges on `rank` wait for
  // (in no order, repeats possible), then records t as their reader or
  // writer.
  template <typename Depend>
  void add(const Transfer& t, uint32_t rank, Depend&& depend) {
    struct Range {
      uint64_t lo, hi;
      bool write;
    };
    Range ranges[3];
    size_t n = 0;
    if (t.src == rank) ranges[n++] = {t.src_offset, t.src_offset + t.bytes, false};
    if (t.dst == rank) {
      ranges[n++] = {t.dst_offset, t.dst_offset + t.bytes, true};
      if (t.action == Action::kReduce)
        ranges[n++] = {t.reduce_offset, t.reduce_offset + t.bytes, true};
    }
    const std::span<const Range> mine(ranges, n);
    for (const auto& r : mine) {
      for_each(r.lo, r.hi, [&](Segment& s) {
        if (s.writer != kNoTransfer) depend(s.writer);
        if (r.write)
          for (uint32_t reader : s.readers) depend(reader);
      });
    }
    for (const auto& r : mine) {
      if (!r.write) for_each(r.lo, r.hi, [&](Segment& s) { s.readers.push_back(t.id); });
    }
    for (const auto& r : mine) {
      if (r.write) {
        for_each(r.lo, r.hi, [&](Segment& s) {
          s.writer = t.id;
          s.readers.clear();
        });
      }
    }
  }

 private:
  // Allocator-aware, so that a map node's copy keeps its readers in the
  // arena too (uses-allocator construction).
  struct Segment {
    using allocator_type = std::pmr::polymorphic_allocator<>;
    explicit Segment(allocator_type a = {}) : readers(a) {}
    Segment(const Segment& o, allocator_type a) : writer(o.writer), readers(o.readers, a) {}
    Segment(Segment&& o, allocator_type a) : writer(o.writer), readers(std::move(o.readers), a) {}
    uint32_t writer = kNoTransfer;
    std::pmr::vector<uint32_t> readers;
  };
  using Map = std::pmr::map<uint64_t, Segment>;

  // Calls f on the segments covering [lo, hi), split first at lo and hi
  // so that exactly they do. One search per call: the segment holding hi
  // is split when the walk reaches it, before f sees it (a range is a
  // segment or two; three searches a call were half of make_schedule at
  // 1024 ranks, each a walk down a tree of thousands of nodes).
  template <typename F>
  void for_each(uint64_t lo, uint64_t hi, F&& f) {
    Map& m = segments_;
    if (lo >= end_) return;
    auto it = std::prev(m.upper_bound(lo));
    if (it->first != lo) it = m.emplace_hint(std::next(it), lo, it->second);
    for (; it != m.end() && it->first < hi; ++it) {
      const auto next = std::next(it);
      const uint64_t seg_end = next == m.end() ? end_ : next->first;
      if (hi < seg_end) m.emplace_hint(next, hi, it->second);
      f(it->second);
    }
  }

  std::pmr::monotonic_buffer_resource arena_;  // before segments_: outlives them
  Map segments_{&arena_};
  uint64_t end_;
};

// All-to-all with a window of W: rank r's messages go to r+1, r+2, ... in
// step order, and each waits for the whole of rank r's message W steps
// before (every chunk and channel of it), so at most W messages of a rank
// are in flight, as an MPI all-to-all that bounds its outstanding
// requests keeps them. The builder makes a message's transfers one after
// the other, and a rank's messages in step order: a ring of W + 1 id
// ranges per rank is all it takes to find them.
void add_window(const Schedule& s, std::vector<std::pair<uint32_t, uint32_t>>& found) {
  const uint32_t w = s.params.window;
  if (w == 0) return;
  struct Message {
    uint32_t step = UINT32_MAX, first = 0, end = 0;
  };
  std::vector<Message> recent(size_t{s.params.ranks} * (w + 1));
  for (const Transfer& t : s.transfers) {
    Message& m = recent[size_t{t.src} * (w + 1) + t.step % (w + 1)];
    if (m.step != t.step) {
      m = {t.step, t.id, t.id};
    } else if (m.end != t.id) {
      throw std::logic_error(fmt::format(
          "all_to_all window: transfer {} is not next to the rest of its message", t.id));
    }
    m.end = t.id + 1;
    if (t.step < w) continue;
    const Message& before = recent[size_t{t.src} * (w + 1) + (t.step - w) % (w + 1)];
    if (before.step != t.step - w)
      throw std::logic_error(
          fmt::format("all_to_all window: rank {} has no message at step {}", t.src, t.step - w));
    for (uint32_t d = before.first; d < before.end; ++d) found.emplace_back(t.id, d);
  }
}

}  // namespace

void derive_dependencies(Schedule& s) {
  const uint32_t ranks = static_cast<uint32_t>(s.layout.size());
  // The transfers touching each rank, in id order.
  IndexLists touching = IndexLists::build(ranks, [&](auto&& emit) {
    for (const auto& t : s.transfers) {
      emit(t.src, t.id);
      if (t.dst != t.src) emit(t.dst, t.id);
    }
  });
  // (transfer, what it waits for) as the ranks find them; one derivation,
  // then sorted into lists.
  std::vector<std::pair<uint32_t, uint32_t>> found;
  found.reserve(2 * s.transfers.size());  // a ring's transfers find two each
  for (uint32_t r = 0; r < ranks; ++r) {
    RankDependencies rank(s.layout[r].total_bytes());
    for (uint32_t id : touching[r])
      rank.add(s.transfers[id], r, [&](uint32_t d) { found.emplace_back(id, d); });
  }
  touching = {};
  add_window(s, found);
  s.depends_on = IndexLists::build(s.transfers.size(), [&](auto&& emit) {
    for (const auto& [id, d] : found) emit(id, d);
  });
  found = {};
  s.depends_on.sort_unique_each([](size_t id, uint32_t d) { return d == id; });
}

}  // namespace droce::pktgen
