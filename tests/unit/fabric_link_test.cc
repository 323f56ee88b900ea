// Link impairments: random and Gilbert-Elliott loss, duplication, reordering,
// corruption caught by the ICRC, link down, and determinism by seed.
#include "droce/fabric/link.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

#include "droce/wire/build.h"
#include "droce/wire/packet.h"
#include "fabric_test_util.h"

namespace droce::fabric {
namespace {

using testing::binomial_tolerance;
using testing::roce_bytes;
using testing::roce_packet;

// Sends n tagged packets 1 us apart and returns the tags in arrival order.
std::vector<uint64_t> run(Link& link, size_t n, std::vector<Packet>* got = nullptr) {
  std::vector<uint64_t> tags;
  Packet proto = roce_packet({.payload = 64});
  for (size_t i = 0; i < n; ++i) {
    Packet p = proto;
    p.tag = i;
    link.send(std::move(p), i * 1000);
    link.advance(i * 1000, [&](Packet&& q, uint64_t) {
      tags.push_back(q.tag);
      if (got) got->push_back(std::move(q));
    });
  }
  link.advance(kNever - 1, [&](Packet&& q, uint64_t) {
    tags.push_back(q.tag);
    if (got) got->push_back(std::move(q));
  });
  return tags;
}

TEST(Link, PropagationAndOrder) {
  Link link(LinkConfig{.propagation_ns = 700});
  std::vector<std::pair<uint64_t, uint64_t>> arr;
  for (uint64_t i = 0; i < 5; ++i) {
    Packet p;
    p.tag = i;
    link.send(std::move(p), 100 + i);
  }
  EXPECT_EQ(link.next_event_time(), 800u);
  link.advance(802, [&](Packet&& p, uint64_t t) { arr.emplace_back(p.tag, t); });
  ASSERT_EQ(arr.size(), 3u);
  for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(arr[i], std::make_pair(i, 800 + i));
}

TEST(Link, ExtraDelayAddsExactlyItsValue) {
  // The same departures over two links that differ only in extra_delay:
  // every packet arrives exactly extra_delay later, in the same order, and
  // the fixed delay draws nothing from the random stream (an impaired link
  // with jitter and reordering keeps the same random arrivals, shifted).
  constexpr uint64_t kExtra = 2'345;
  Impairments base;
  base.jitter_ns = 200;
  base.reorder = 0.1;
  base.reorder_delay_ns = 1'500;
  Impairments delayed = base;
  delayed.extra_delay_ns = kExtra;
  auto arrivals = [](const Impairments& im) {
    Link link(LinkConfig{.propagation_ns = 700, .impairments = im, .seed = 3});
    std::vector<std::pair<uint64_t, uint64_t>> out;  // (tag, arrival)
    for (uint64_t i = 0; i < 2'000; ++i) {
      Packet p;
      p.tag = i;
      link.send(std::move(p), i * 100);
    }
    link.advance(kNever - 1, [&](Packet&& q, uint64_t t) { out.emplace_back(q.tag, t); });
    return out;
  };
  const auto a = arrivals(base), b = arrivals(delayed);
  ASSERT_EQ(a.size(), 2'000u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(b[i].first, a[i].first) << i;
    ASSERT_EQ(b[i].second, a[i].second + kExtra) << "tag " << a[i].first;
  }
  // Without other impairments: departure + propagation + extra, exactly.
  Link plain(LinkConfig{.propagation_ns = 700, .impairments = {.extra_delay_ns = kExtra}});
  plain.send(Packet{}, 1'000);
  EXPECT_EQ(plain.next_event_time(), 1'000u + 700u + kExtra);
}

TEST(Link, RandomLossRate) {
  const double p = 0.03;
  const size_t n = 100'000;
  Link link(LinkConfig{.impairments = {.loss = p}, .seed = 9});
  const size_t got = run(link, n).size();
  EXPECT_NEAR(static_cast<double>(n - got), p * n, binomial_tolerance(p, n));
  EXPECT_EQ(link.counters().lost_random, n - got);
}

TEST(Link, GilbertElliottBurstLoss) {
  Impairments im;
  im.burst = {.p_good_to_bad = 0.01, .p_bad_to_good = 0.25, .loss_good = 0, .loss_bad = 1};
  const size_t n = 400'000;
  Link link(LinkConfig{.impairments = im, .seed = 5});
  const std::vector<uint64_t> tags = run(link, n);
  const double rate = 1.0 - static_cast<double>(tags.size()) / n;
  EXPECT_NEAR(rate, im.burst.stationary_loss(), 0.15 * im.burst.stationary_loss());
  // Mean run of consecutive losses: 1 / p_bad_to_good = 4 packets.
  size_t runs = 0, lost = 0;
  uint64_t expect = 0;
  for (uint64_t t : tags) {
    if (t != expect) {
      ++runs;
      lost += t - expect;
    }
    expect = t + 1;
  }
  ASSERT_GT(runs, 100u);
  EXPECT_NEAR(static_cast<double>(lost) / runs, 4.0, 0.4);
  EXPECT_EQ(link.counters().lost_burst, lost + (n - expect));
}

TEST(Link, Duplication) {
  const double p = 0.05;
  const size_t n = 50'000;
  Link link(LinkConfig{.impairments = {.duplicate = p}, .seed = 2});
  const std::vector<uint64_t> tags = run(link, n);
  EXPECT_NEAR(static_cast<double>(tags.size() - n), p * n, binomial_tolerance(p, n));
  size_t dups = 0;
  for (size_t i = 1; i < tags.size(); ++i) dups += tags[i] == tags[i - 1];
  EXPECT_EQ(dups, tags.size() - n);  // the copy arrives right behind
}

TEST(Link, Reordering) {
  Impairments im;
  im.reorder = 0.1;
  im.reorder_delay_ns = 3'500;  // overtaken by the next three packets
  const size_t n = 20'000;
  Link link(LinkConfig{.impairments = im, .seed = 4});
  const std::vector<uint64_t> tags = run(link, n);
  ASSERT_EQ(tags.size(), n);
  size_t late = 0;
  uint64_t max_seen = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i && tags[i] < max_seen) ++late;
    max_seen = std::max(max_seen, tags[i]);
  }
  EXPECT_NEAR(static_cast<double>(late), 0.1 * n, binomial_tolerance(0.1, n));
  // A held-back packet is late unless its followers were all held back too.
  EXPECT_NEAR(static_cast<double>(late), static_cast<double>(link.counters().reordered),
              0.02 * static_cast<double>(link.counters().reordered) + 1);
}

// Which bytes of an IPv4 RoCE frame the ICRC does not cover and the IPv4
// checksum does not catch either: the UDP checksum and the BTH FECN/BECN byte.
bool undetectable(size_t byte) {
  const size_t udp = wire::kEthSize + wire::kIpv4Size;
  return byte == udp + 6 || byte == udp + 7 || byte == udp + 8 + 4;
}

TEST(Link, CorruptionCaughtByIcrc) {
  const size_t n = 5'000;
  Link link(LinkConfig{.impairments = {.corrupt = 1.0}, .seed = 11});
  std::vector<Packet> got;
  run(link, n, &got);
  const std::vector<uint8_t> orig = roce_bytes({.payload = 64});
  ASSERT_EQ(got.size(), n);
  EXPECT_EQ(link.counters().corrupted, n);
  size_t caught = 0, masked = 0;
  for (const Packet& p : got) {
    size_t diff = 0, where = 0;
    for (size_t i = 0; i < orig.size(); ++i)
      if (p.bytes[i] != orig[i]) ++diff, where = i;
    ASSERT_EQ(diff, 1u);  // exactly one bit
    ASSERT_GE(where, wire::kEthSize);
    wire::ParsedPacket pp;
    const wire::ParseError e = wire::parse(p.bytes, pp);
    if (undetectable(where)) {
      ++masked;
    } else {
      EXPECT_NE(e, wire::ParseError::kOk) << "flip at byte " << where;
      caught += e != wire::ParseError::kOk;
    }
  }
  EXPECT_EQ(caught + masked, n);
  EXPECT_LT(masked, n / 10);
}

// A frame whose payload is unheld (wire/icrc.h: the simulator's virtual
// payload, ICRC'd as zeros) is caught just the same when the bit drawn is
// in that payload: the flip goes to its ICRC instead, since a flipped byte
// there would be read by nobody.
TEST(Link, CorruptionOfUnheldPayloadIsCaughtByIcrc) {
  const size_t n = 2'000, len = 1024;
  Link link(LinkConfig{.impairments = {.corrupt = 1.0}, .seed = 12});
  Packet proto = roce_packet({.payload = len});
  const size_t payload_at = proto.size() - wire::kIcrcSize - len;
  std::fill_n(proto.bytes.begin() + payload_at, len, 0);
  wire::ParsedPacket pp;
  ASSERT_EQ(wire::parse(proto.bytes, pp, {.verify_icrc = false}), wire::ParseError::kOk);
  wire::refresh_checksums(proto.bytes, pp);  // the ICRC of zeros
  std::fill_n(proto.bytes.begin() + payload_at, len, 0x5A);  // not what it says
  proto.unheld = {len, 0};
  ASSERT_EQ(proto.unheld_range(), std::make_pair(payload_at, payload_at + len));
  ASSERT_EQ(wire::parse(proto.bytes, pp, {.unheld = proto.unheld}), wire::ParseError::kOk);
  size_t in_payload = 0;
  for (size_t i = 0; i < n; ++i) {
    Packet p = proto;
    link.send(std::move(p), i * 1000);
    link.advance(i * 1000, [&](Packet&& q, uint64_t) {
      EXPECT_EQ(q.unheld, proto.unheld);
      // The unheld bytes are as they were; a byte was flipped elsewhere.
      EXPECT_TRUE(std::equal(q.bytes.begin() + payload_at, q.bytes.begin() + payload_at + len,
                             proto.bytes.begin() + payload_at));
      EXPECT_NE(q.bytes, proto.bytes);
      const bool icrc_flipped =
          !std::equal(q.bytes.end() - wire::kIcrcSize, q.bytes.end(),
                      proto.bytes.end() - wire::kIcrcSize);
      in_payload += icrc_flipped;
      if (icrc_flipped) {
        EXPECT_EQ(wire::parse(q.bytes, pp, {.unheld = q.unheld}), wire::ParseError::kBadIcrc);
      }
    });
  }
  EXPECT_EQ(link.counters().corrupted, n);
  // The payload is most of the frame past the Ethernet header.
  const double share = double(len + wire::kIcrcSize) / double(proto.size() - wire::kEthSize);
  EXPECT_NEAR(static_cast<double>(in_payload), share * n, binomial_tolerance(share, n));
}

TEST(Link, DownDropsInFlightAndNewPackets) {
  Link link(LinkConfig{.propagation_ns = 10'000});
  for (uint64_t i = 0; i < 3; ++i) link.send(Packet{}, i);
  link.set_up(false);
  link.send(Packet{}, 5);
  EXPECT_EQ(link.counters().lost_down, 4u);
  EXPECT_EQ(link.next_event_time(), kNever);
  link.set_up(true);
  link.send(Packet{}, 20);
  size_t n = 0;
  link.advance(kNever - 1, [&](Packet&&, uint64_t) { ++n; });
  EXPECT_EQ(n, 1u);
}

TEST(Link, ASendMadeLaterIsTheSendMadeThen) {
  // send_as_of() replays a send made elsewhere: the same draws when the
  // link was up then (so every later packet meets the same fate), none
  // when it was down, and a packet the link was cut under is lost after
  // its draws, as set_up(false) would have dropped it in flight.
  Impairments im;
  im.loss = 0.3;
  im.jitter_ns = 200;
  im.duplicate = 0.1;
  const LinkConfig cfg{.propagation_ns = 1'000, .impairments = im, .seed = 5};
  auto arrivals = [](Link& link) {
    std::vector<std::pair<uint64_t, uint64_t>> out;
    link.advance(kNever - 1, [&](Packet&& q, uint64_t t) { out.emplace_back(t, q.tag); });
    return out;
  };
  auto tagged = [](uint64_t tag) {
    Packet p;
    p.tag = tag;
    return p;
  };
  // Packet 0 in flight when the cable is cut, packet 1 sent while it is
  // down, then 200 packets on the repaired link.
  Link live(cfg);
  live.send(tagged(0), 0);
  live.set_up(false);
  live.send(tagged(1), 10);
  live.set_up(true);
  for (uint64_t i = 2; i < 202; ++i) live.send(tagged(i), i * 100);
  Link replayed(cfg);
  replayed.send_as_of(tagged(0), 0, true, true);
  replayed.send_as_of(tagged(1), 10, false, false);
  for (uint64_t i = 2; i < 202; ++i) replayed.send_as_of(tagged(i), i * 100, true, false);
  const auto want = arrivals(live);
  EXPECT_EQ(arrivals(replayed), want);
  EXPECT_FALSE(want.empty());
  EXPECT_NE(want.front().second, 0u);
  EXPECT_EQ(replayed.counters().lost_down, live.counters().lost_down);
  EXPECT_EQ(replayed.counters().lost_random, live.counters().lost_random);
  EXPECT_EQ(replayed.counters().sent, live.counters().sent);
}

TEST(Link, JitterDeliversInArrivalThenSendOrder) {
  // Expect: with jitter, reordering and duplicates, packets come out by
  // arrival time, ties in the order they were sent, each copy once: the
  // order of a stable sort of what was sent by arrival time.
  Impairments im;
  im.jitter_ns = 150;  // neighbours overtake each other, and often tie
  im.reorder = 0.1;
  im.reorder_delay_ns = 3'000;
  im.duplicate = 0.05;
  Link link(LinkConfig{.propagation_ns = 500, .impairments = im, .seed = 9});
  std::vector<std::pair<uint64_t, uint64_t>> out;  // (arrival, tag)
  for (uint64_t i = 0; i < 5'000; ++i) {
    Packet p;
    p.tag = i;
    // Departures 100 ns apart, some on the same nanosecond (ties).
    link.send(std::move(p), (i / 2) * 100);
    if (i % 7 == 0)
      link.advance((i / 2) * 100, [&](Packet&& q, uint64_t t) { out.emplace_back(t, q.tag); });
  }
  link.advance(kNever - 1, [&](Packet&& q, uint64_t t) { out.emplace_back(t, q.tag); });
  EXPECT_EQ(out.size(), 5'000 + link.counters().duplicated);
  for (size_t i = 1; i < out.size(); ++i) {
    ASSERT_LE(out[i - 1].first, out[i].first) << i;
    if (out[i - 1].first == out[i].first) {
      ASSERT_LE(out[i - 1].second, out[i].second) << i;
    }
  }
}

TEST(Link, DeterministicBySeed) {
  Impairments im;
  im.loss = 0.05;
  im.burst = {.p_good_to_bad = 0.01, .p_bad_to_good = 0.3};
  im.duplicate = 0.02;
  im.reorder = 0.05;
  im.jitter_ns = 300;
  im.corrupt = 0.01;
  auto trace = [&](uint64_t seed) {
    Link link(LinkConfig{.impairments = im, .seed = seed});
    std::vector<Packet> got;
    auto tags = run(link, 5'000, &got);
    std::vector<uint8_t> all;
    for (auto& p : got) all.insert(all.end(), p.bytes.begin(), p.bytes.end());
    return std::make_pair(tags, all);
  };
  EXPECT_EQ(trace(77), trace(77));
  EXPECT_NE(trace(77).first, trace(78).first);
}

}  // namespace
}  // namespace droce::fabric
