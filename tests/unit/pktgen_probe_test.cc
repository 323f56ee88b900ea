#include "droce/pktgen/probe.h"
#include "droce/pktgen/sample_chunks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace droce::pktgen {
namespace {

TEST(PktgenProbe, SampleChunksKeepEverySampleInOrderAcrossChunks) {
  SampleChunks s;
  EXPECT_TRUE(s.empty());
  EXPECT_TRUE(s.to_vector().empty());
  const size_t n = 2 * SampleChunks::kChunk + 3;
  for (size_t i = 0; i < n; ++i) s.push(i * 7);
  EXPECT_EQ(s.size(), n);
  EXPECT_EQ(s.chunks(), 3u);
  const std::vector<uint64_t> v = s.to_vector();
  ASSERT_EQ(v.size(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], i * 7) << i;
}

TEST(PktgenProbe, PayloadRoundTripAndMagic) {
  uint8_t buf[kProbeSize + 4] = {};
  write_probe(buf, Probe{7, 0x0102030405060708ull, 123456789});
  EXPECT_EQ(buf[0], 0x44);  // 'D', big-endian magic first
  EXPECT_EQ(buf[8], 0x01);  // sequence number big-endian
  const auto p = read_probe(buf);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->stream_id, 7u);
  EXPECT_EQ(p->seq, 0x0102030405060708ull);
  EXPECT_EQ(p->tx_ns, 123456789u);
  EXPECT_FALSE(read_probe(std::span<const uint8_t>(buf, kProbeSize - 1)));
  buf[0] ^= 1;
  EXPECT_FALSE(read_probe(buf));
}

TEST(PktgenProbe, HandWrittenSequence) {
  ProbeTracker t;
  // 0 1 3 2 2 5 1 (4 never arrives)
  for (uint64_t s : {0, 1, 3, 2, 2, 5, 1}) t.on_probe(s, 100, 150);
  const auto& c = t.counters();
  EXPECT_EQ(c.received, 7u);
  EXPECT_EQ(c.unique, 5u);
  EXPECT_EQ(c.duplicate, 2u);     // the second 2, the second 1
  EXPECT_EQ(c.out_of_order, 1u);  // 2 after 3
  EXPECT_EQ(c.highest_seq, 5u);
  EXPECT_EQ(t.lost(), 1u);        // 4
  EXPECT_EQ(t.lost(8), 3u);       // 4, 6, 7
  EXPECT_EQ(t.latency().count(), 5u);
  EXPECT_EQ(t.latency().percentile(0.5), 50u);
}

// The oracle: the definitions in docs/PKTGEN.md applied with a std::set.
struct Expected {
  uint64_t unique = 0, duplicate = 0, out_of_order = 0, lost = 0;
};
Expected oracle(const std::vector<uint64_t>& arrivals) {
  Expected e;
  std::set<uint64_t> seen;
  uint64_t highest = 0;
  for (uint64_t s : arrivals) {
    if (seen.count(s)) {
      ++e.duplicate;
      continue;
    }
    if (!seen.empty() && s < highest) ++e.out_of_order;
    if (seen.empty() || s > highest) highest = s;
    seen.insert(s);
  }
  e.unique = seen.size();
  e.lost = seen.empty() ? 0 : highest + 1 - seen.size();
  return e;
}

TEST(PktgenProbe, SeededImpairmentsGiveExactCounts) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    constexpr uint64_t kSent = 20000;
    std::vector<uint64_t> arrivals;
    uint64_t drops = 0;
    for (uint64_t s = 0; s < kSent; ++s) {
      const uint64_t r = rng() % 100;
      if (r < 3) {
        ++drops;
        continue;  // 3% loss
      }
      arrivals.push_back(s);
      if (r < 5) arrivals.push_back(s);  // 2% duplicated
    }
    // 5% reordered: swap with a neighbour up to 8 places ahead.
    for (size_t i = 0; i + 8 < arrivals.size(); ++i) {
      if (rng() % 100 < 5) std::swap(arrivals[i], arrivals[i + 1 + rng() % 8]);
    }
    ProbeTracker t;
    for (size_t i = 0; i < arrivals.size(); ++i) t.on_probe(arrivals[i], 0, 1000 + i % 100);
    const Expected e = oracle(arrivals);
    const auto& c = t.counters();
    EXPECT_EQ(c.received, arrivals.size());
    EXPECT_EQ(c.unique, e.unique);
    EXPECT_EQ(c.duplicate, e.duplicate);
    EXPECT_EQ(c.out_of_order, e.out_of_order);
    EXPECT_GT(c.out_of_order, 0u);
    EXPECT_EQ(t.lost(), e.lost);
    EXPECT_EQ(t.lost(kSent), drops);  // every gap is a real drop in the end
    EXPECT_EQ(c.too_old, 0u);
    EXPECT_EQ(t.latency().count(), e.unique);
  }
}

TEST(PktgenProbe, WindowBoundsDuplicateDetection) {
  ProbeTracker t(64);
  t.on_probe(0, 0, 1);
  t.on_probe(100, 0, 1);
  t.on_probe(0, 0, 1);   // 100 below the highest: outside a 64-wide window
  t.on_probe(50, 0, 1);  // inside: a late first arrival
  t.on_probe(50, 0, 1);  // and now a duplicate
  const auto& c = t.counters();
  EXPECT_EQ(c.too_old, 1u);
  EXPECT_EQ(c.out_of_order, 1u);
  EXPECT_EQ(c.duplicate, 1u);
  EXPECT_EQ(c.unique, 3u);
  // Long runs reuse the window without false duplicates.
  ProbeTracker u(128);
  for (uint64_t s = 0; s < 100000; ++s) u.on_probe(s, 0, 1);
  EXPECT_EQ(u.counters().duplicate, 0u);
  EXPECT_EQ(u.lost(), 0u);
}

TEST(PktgenProbe, LatencyPercentilesAndClockSkew) {
  ProbeTracker t;
  std::vector<uint64_t> lat;
  for (uint64_t s = 0; s < 1000; ++s) {
    t.on_probe(s, 1000, 1000 + s);
    lat.push_back(s);
  }
  t.on_probe(1000, 5000, 4000);  // rx before tx
  EXPECT_EQ(t.counters().negative_latency, 1u);
  EXPECT_EQ(t.latency().count(), 1000u);
  EXPECT_EQ(t.latency().percentile(0.5), 499u);
  EXPECT_EQ(t.latency().percentile(0.99), 989u);
  EXPECT_EQ(t.latency().percentile(0.999), 998u);
}

TEST(PktgenProbe, ReceiverDispatchesByStream) {
  ProbeReceiver rx;
  uint8_t buf[kProbeSize];
  for (uint32_t id : {1u, 2u, 1u}) {
    write_probe(buf, Probe{id, 0, 0});
    EXPECT_TRUE(rx.on_payload(buf, 10));
  }
  uint8_t junk[kProbeSize] = {};
  EXPECT_FALSE(rx.on_payload(junk, 10));
  EXPECT_EQ(rx.not_probe(), 1u);
  ASSERT_NE(rx.stream(1), nullptr);
  EXPECT_EQ(rx.stream(1)->counters().duplicate, 1u);
  EXPECT_EQ(rx.stream(2)->counters().unique, 1u);
  EXPECT_EQ(rx.stream(3), nullptr);
}

}  // namespace
}  // namespace droce::pktgen
