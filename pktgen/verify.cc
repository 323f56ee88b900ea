#include "droce/pktgen/verify.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "droce/pktgen/rng.h"

namespace droce::pktgen {
namespace {

constexpr uint64_t kElem = 4;

// initial_value(q, i) depends on i only through i mod kPeriod (the
// i * 31 % 23 term), so the sum over ranks has that period too.
constexpr uint64_t kPeriod = 23;

// Exact sums over ranks of initial_value(q, i) for i = 0..kPeriod-1: the
// expected result of a reduction at index i is sums[i % kPeriod]. Computed
// once per check, so checking N ranks of S bytes costs O(N*S), not O(N^2*S).
std::array<float, kPeriod> expected_sums(uint32_t ranks) {
  std::array<float, kPeriod> sums{};
  for (uint64_t i = 0; i < kPeriod; ++i) {
    int64_t sum = 0;
    for (uint32_t q = 0; q < ranks; ++q) sum += static_cast<int64_t>(initial_value(q, i));
    sums[i] = static_cast<float>(sum);
  }
  return sums;
}

}  // namespace

float initial_value(uint32_t rank, uint64_t index) {
  return static_cast<float>(static_cast<int64_t>((uint64_t{rank + 1} * 131 + index * 31) % 23) -
                            11);
}

VerifyBuffers::VerifyBuffers(const Schedule& schedule) : s_(schedule) {
  bufs_.resize(s_.params.ranks);
  for (uint32_t r = 0; r < s_.params.ranks; ++r) bufs_[r].resize(s_.layout[r].total_bytes() / kElem);
  reset();
}

void VerifyBuffers::reset() {
  for (uint32_t r = 0; r < s_.params.ranks; ++r) {
    auto& b = bufs_[r];
    const uint64_t data = s_.layout[r].data_bytes / kElem;
    for (uint64_t i = 0; i < data; ++i) b[i] = initial_value(r, i);
    std::fill(b.begin() + static_cast<ptrdiff_t>(data), b.end(), kUnwrittenValue);
  }
}

void VerifyBuffers::apply_local_copies() {
  for (const LocalCopy& c : s_.local_copies) {
    std::memmove(bufs_[c.rank].data() + c.dst_offset / kElem,
                 bufs_[c.rank].data() + c.src_offset / kElem, c.bytes);
  }
}

std::span<uint8_t> VerifyBuffers::bytes(uint32_t rank) {
  return {reinterpret_cast<uint8_t*>(bufs_[rank].data()), bufs_[rank].size() * kElem};
}

void VerifyBuffers::on_transfer_complete(const Transfer& t) {
  // memmove: a rank never sends to itself, but be safe about overlap.
  std::memmove(bufs_[t.dst].data() + t.dst_offset / kElem,
               bufs_[t.src].data() + t.src_offset / kElem, t.bytes);
  apply_landed(t);
}

void VerifyBuffers::on_transfer_complete(const Transfer& t, std::span<const uint8_t> payload) {
  std::memcpy(bufs_[t.dst].data() + t.dst_offset / kElem, payload.data(),
              std::min<uint64_t>(payload.size(), t.bytes));
  apply_landed(t);
}

void VerifyBuffers::apply_landed(const Transfer& t) {
  if (t.action != Action::kReduce) return;
  float* acc = bufs_[t.dst].data() + t.reduce_offset / kElem;
  const float* in = bufs_[t.dst].data() + t.dst_offset / kElem;
  for (uint64_t i = 0; i < t.bytes / kElem; ++i) acc[i] += in[i];
}

std::vector<uint64_t> VerifyBuffers::wrong_per_rank() const {
  const uint32_t n = s_.params.ranks;
  const uint64_t count = s_.params.bytes / kElem;
  std::vector<uint64_t> wrong(n, 0);
  const std::array<float, kPeriod> sums = expected_sums(n);
  for (uint32_t r = 0; r < n; ++r) {
    const auto& b = bufs_[r];
    const uint64_t recv = s_.layout[r].recv_offset / kElem;
    uint64_t w = 0;
    switch (s_.params.pattern) {
      case Pattern::kRingAllReduce:
      case Pattern::kHalvingDoubling:
      case Pattern::kTreeAllReduce:
        for (uint64_t i = 0; i < count; ++i) w += b[i] != sums[i % kPeriod];
        break;
      case Pattern::kReduceScatter: {
        const uint64_t cs = count / n;
        for (uint64_t i = r * cs; i < (r + 1) * cs; ++i) w += b[i] != sums[i % kPeriod];
        break;
      }
      case Pattern::kAllGather: {
        const uint64_t cs = count / n;
        for (uint64_t i = 0; i < count; ++i) w += b[i] != initial_value(i / cs, i);
        break;
      }
      case Pattern::kAllToAll: {
        // Slot q of rank r holds what q had at r's chunk of its send buffer,
        // slot r included (the local copy).
        const uint64_t cs = count / n;
        for (uint32_t q = 0; q < n; ++q) {
          for (uint64_t j = 0; j < cs; ++j) w += b[recv + q * cs + j] != initial_value(q, r * cs + j);
        }
        break;
      }
      case Pattern::kIncast:
        if (r == s_.params.root) {
          for (uint32_t q = 0; q < n; ++q) {
            if (q == r) continue;
            const uint64_t slot = q < r ? q : q - 1;
            for (uint64_t j = 0; j < count; ++j) w += b[recv + slot * count + j] != initial_value(q, j);
          }
        }
        break;
      case Pattern::kPermutation:
        for (uint32_t q = 0; q < n; ++q) {
          if (s_.permutation[q] != r) continue;
          for (uint64_t j = 0; j < count; ++j) w += b[recv + j] != initial_value(q, j);
        }
        break;
    }
    wrong[r] = w;
  }
  return wrong;
}

uint64_t VerifyBuffers::wrong_total() const {
  uint64_t total = 0;
  for (uint64_t w : wrong_per_rank()) total += w;
  return total;
}

ReferenceResult run_reference(const Schedule& s, VerifyBuffers& buffers,
                              const ReferenceOptions& options) {
  check_dependencies(s);
  const size_t n = s.transfers.size();
  std::vector<uint32_t> missing(n);
  for (uint32_t id = 0; id < n; ++id)
    missing[id] = static_cast<uint32_t>(s.depends_on[id].size());
  const IndexLists dependents = dependents_of(s);
  std::vector<uint32_t> ready;
  for (const auto& t : s.transfers) {
    if (missing[t.id] == 0) ready.push_back(t.id);
  }
  struct InFlight {
    uint32_t id;
    std::vector<uint8_t> snapshot;
  };
  std::vector<InFlight> in_flight;
  SplitMix64 rng(options.seed);
  ReferenceResult result;
  buffers.apply_local_copies();
  const auto source = [&](const Transfer& t) {
    return buffers.bytes(t.src).subspan(t.src_offset, t.bytes);
  };
  // Picks index i of v: the first (seed 0, id order) or a random one.
  const auto pick = [&](size_t size) -> size_t { return options.seed == 0 ? 0 : rng.below(size); };
  while (!ready.empty() || !in_flight.empty()) {
    const bool post = !ready.empty() &&
                      (in_flight.empty() || (options.seed == 0 ? true : rng.below(2) == 0));
    if (post) {
      size_t i = pick(ready.size());
      if (options.seed == 0) i = std::min_element(ready.begin(), ready.end()) - ready.begin();
      const Transfer& t = s.transfers[ready[i]];
      ready.erase(ready.begin() + static_cast<ptrdiff_t>(i));
      auto src = source(t);
      in_flight.push_back({t.id, {src.begin(), src.end()}});
      continue;
    }
    const size_t i = pick(in_flight.size());
    InFlight f = std::move(in_flight[i]);
    in_flight.erase(in_flight.begin() + static_cast<ptrdiff_t>(i));
    const Transfer& t = s.transfers[f.id];
    auto now = source(t);
    if (!std::equal(now.begin(), now.end(), f.snapshot.begin())) ++result.hazards;
    if (t.id == options.corrupt_transfer) {
      float v;
      std::memcpy(&v, f.snapshot.data(), sizeof v);
      v += 1.0f;
      std::memcpy(f.snapshot.data(), &v, sizeof v);
    }
    buffers.on_transfer_complete(t, f.snapshot);
    ++result.completed;
    for (uint32_t d : dependents[t.id]) {
      if (--missing[d] == 0) ready.push_back(d);
    }
  }
  result.stalled = result.completed != n;
  return result;
}

}  // namespace droce::pktgen
