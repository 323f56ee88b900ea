// The neighbour cache's states and timers (RFC 4861 section 7.3 and
// appendix C, with Linux's default timers).
#include "droce/endpoint/neighbour_cache.h"

#include <gtest/gtest.h>

namespace droce::endpoint {
namespace {

constexpr uint64_t kS = 1'000'000'000;
const wire::IpAddress kPeer = wire::IpAddress::v4(0x0A000002);
const wire::MacAddress kMac{2, 0, 0, 0, 0, 2};
const wire::MacAddress kMac2{2, 0, 0, 0, 0, 3};

struct Ticks {
  std::vector<NeighbourCache::Probe> probes;
  std::vector<wire::IpAddress> failed;
  void run(NeighbourCache& c, uint64_t now) {
    probes.clear();
    failed.clear();
    c.tick(now, probes, failed);
  }
};

TEST(NeighbourCache, ResolvesOnASolicitedAnswer) {
  NeighbourCache c;
  EXPECT_EQ(c.use(kPeer, 0), nullptr);
  EXPECT_TRUE(c.resolve(kPeer, 0));   // first solicitation now
  EXPECT_FALSE(c.resolve(kPeer, 1));  // already resolving: no second one
  EXPECT_EQ(c.find(kPeer)->state, NeighbourState::kIncomplete);
  EXPECT_EQ(c.find(kPeer)->users, 2u);
  EXPECT_EQ(c.next_deadline(), 1 * kS);
  EXPECT_EQ(c.on_advertisement(kPeer, kMac, true, true, kS / 2),
            NeighbourCache::Learned::kResolved);
  const Neighbour* n = c.use(kPeer, kS / 2);
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->mac, kMac);
  EXPECT_EQ(n->state, NeighbourState::kReachable);
  // ReachableTime: between 0.5x and 1.5x of 30 s.
  EXPECT_GE(n->deadline, kS / 2 + 15 * kS);
  EXPECT_LT(n->deadline, kS / 2 + 45 * kS);
}

TEST(NeighbourCache, RetransmitsThenFails) {
  NeighbourCache c;
  Ticks t;
  ASSERT_TRUE(c.resolve(kPeer, 0));
  t.run(c, kS);
  ASSERT_EQ(t.probes.size(), 1u);  // the second of three
  EXPECT_FALSE(t.probes[0].unicast);
  t.run(c, 2 * kS);
  ASSERT_EQ(t.probes.size(), 1u);  // the third
  t.run(c, 3 * kS - 1);
  EXPECT_TRUE(t.probes.empty());
  t.run(c, 3 * kS);
  EXPECT_TRUE(t.probes.empty());
  ASSERT_EQ(t.failed.size(), 1u);
  EXPECT_EQ(t.failed[0], kPeer);
  EXPECT_EQ(c.find(kPeer)->state, NeighbourState::kFailed);
  EXPECT_EQ(c.use(kPeer, 3 * kS), nullptr);
  // A later resolution starts over.
  EXPECT_TRUE(c.resolve(kPeer, 4 * kS));
  EXPECT_EQ(c.find(kPeer)->state, NeighbourState::kIncomplete);
}

TEST(NeighbourCache, StaleThenDelayThenProbeThenReachableAgain) {
  NeighbourCache c({.base_reachable_ns = 2 * kS});
  Ticks t;
  c.resolve(kPeer, 0);
  c.on_advertisement(kPeer, kMac, true, true, 0);
  t.run(c, 3 * kS);  // past 1.5 x 2 s at most
  EXPECT_EQ(c.find(kPeer)->state, NeighbourState::kStale);
  ASSERT_NE(c.use(kPeer, 3 * kS), nullptr);  // stale is used as is ...
  EXPECT_EQ(c.find(kPeer)->state, NeighbourState::kDelay);  // ... and checked
  t.run(c, 8 * kS);  // DELAY_FIRST_PROBE_TIME 5 s
  EXPECT_EQ(c.find(kPeer)->state, NeighbourState::kProbe);
  ASSERT_EQ(t.probes.size(), 1u);
  EXPECT_TRUE(t.probes[0].unicast);
  EXPECT_EQ(t.probes[0].mac, kMac);
  EXPECT_EQ(c.on_advertisement(kPeer, kMac, true, false, 8 * kS + 1),
            NeighbourCache::Learned::kUnchanged);
  EXPECT_EQ(c.find(kPeer)->state, NeighbourState::kReachable);
}

TEST(NeighbourCache, ProbesUnansweredFailTheEntry) {
  NeighbourCache c;
  Ticks t;
  c.on_solicitation(kPeer, kMac, 0);  // stale
  c.find(kPeer);
  ASSERT_NE(c.use(kPeer, 0), nullptr);
  for (uint64_t s = 5; s <= 8; ++s) t.run(c, s * kS);
  EXPECT_EQ(c.find(kPeer)->state, NeighbourState::kFailed);
  EXPECT_TRUE(t.failed.empty());  // nobody was waiting for it
}

TEST(NeighbourCache, AnswersNobodyAskedForAddNothing) {
  NeighbourCache c;
  EXPECT_EQ(c.on_advertisement(kPeer, kMac, true, true, 0), NeighbourCache::Learned::kIgnored);
  EXPECT_EQ(c.size(), 0u);
}

TEST(NeighbourCache, OverrideRules) {
  NeighbourCache c;
  c.resolve(kPeer, 0);
  c.on_advertisement(kPeer, kMac, true, true, 0);
  // RFC 4861 7.2.5: a different address without Override is not taken;
  // the entry goes stale.
  EXPECT_EQ(c.on_advertisement(kPeer, kMac2, false, false, 1),
            NeighbourCache::Learned::kUnchanged);
  EXPECT_EQ(c.find(kPeer)->mac, kMac);
  EXPECT_EQ(c.find(kPeer)->state, NeighbourState::kStale);
  // With Override it is.
  EXPECT_EQ(c.on_advertisement(kPeer, kMac2, false, true, 2), NeighbourCache::Learned::kChanged);
  EXPECT_EQ(c.find(kPeer)->mac, kMac2);
}

TEST(NeighbourCache, RequestsFillItUpToItsBoundAndNoFurther) {
  NeighbourCache c({.max_entries = 8});
  // Someone QPs wait for.
  c.resolve(kPeer, 0);
  for (uint32_t i = 0; i < 1000; ++i) c.on_solicitation(wire::IpAddress::v4(0x0B000000 + i), kMac, i);
  EXPECT_LE(c.size(), 8u);
  EXPECT_GT(c.evicted(), 0u);
  ASSERT_NE(c.find(kPeer), nullptr);  // in use: never evicted
  EXPECT_EQ(c.find(kPeer)->state, NeighbourState::kIncomplete);
  // Full of entries in use: a new one is refused, not added.
  NeighbourCache d({.max_entries = 2});
  EXPECT_TRUE(d.resolve(wire::IpAddress::v4(1), 0));
  EXPECT_TRUE(d.resolve(wire::IpAddress::v4(2), 0));
  EXPECT_FALSE(d.resolve(wire::IpAddress::v4(3), 0));
  EXPECT_EQ(d.size(), 2u);
  EXPECT_EQ(d.no_room(), 1u);
}

TEST(NeighbourCache, UnusedEntriesAreCollected) {
  NeighbourCache c;
  Ticks t;
  c.on_solicitation(kPeer, kMac, 0);
  t.run(c, 59 * kS);
  EXPECT_EQ(c.size(), 1u);
  t.run(c, 60 * kS);
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.next_deadline(), UINT64_MAX);
}

TEST(NeighbourCache, SameSeedSameReachableTimes) {
  NeighbourCache a({}, 7), b({}, 7);
  for (NeighbourCache* c : {&a, &b}) {
    c->resolve(kPeer, 0);
    c->on_advertisement(kPeer, kMac, true, true, 0);
  }
  EXPECT_EQ(a.find(kPeer)->deadline, b.find(kPeer)->deadline);
}

}  // namespace
}  // namespace droce::endpoint
