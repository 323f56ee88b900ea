// Elided frames (fabric/packet.h): a frame whose payload is unheld, kept
// without it. Restored, it is the whole frame outside that payload; links
// and switches treat it as they treat the whole frame, byte for byte on
// the wire.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "droce/fabric/link.h"
#include "droce/fabric/switch.h"
#include "droce/wire/int.h"
#include "droce/wire/packet.h"
#include "fabric_test_util.h"

namespace droce::fabric {
namespace {

using testing::drain;
using testing::roce_packet;
using testing::simple_config;

constexpr uint16_t kPayload = 1000;  // RoceSpec's

// A RoCEv2 SEND whose payload is unheld: its ICRC is that of zeros there,
// and the bytes there say otherwise (nothing may read them).
Packet whole_frame(testing::RoceSpec spec = {}) {
  Packet p = roce_packet(spec);
  p.unheld = {static_cast<uint16_t>(spec.payload), 0};
  const auto [first, last] = p.unheld_range();
  EXPECT_EQ(last - first, spec.payload);
  std::fill(p.bytes.begin() + first, p.bytes.begin() + last, 0);
  wire::ParsedPacket pp;
  EXPECT_EQ(wire::parse(p.bytes, pp, {.verify_icrc = false}), wire::ParseError::kOk);
  wire::refresh_checksums(p.bytes, pp);
  std::fill(p.bytes.begin() + first, p.bytes.begin() + last, 0x5A);
  return p;
}

Packet elided(const Packet& whole) {
  Packet p;
  p.tag = whole.tag;
  elide(whole.bytes, whole.unheld, p);
  return p;
}

// The frame as an endpoint would get it, in room first filled with `fill`.
std::vector<uint8_t> restored(const Packet& p, uint8_t fill = 0xEE) {
  std::vector<uint8_t> room(p.size() + 64, fill);
  const std::span<const uint8_t> f = restore(p, room);
  EXPECT_EQ(f.data(), room.data());
  return {f.begin(), f.end()};
}

// Equal outside the unheld payload, which both frames have at `range`.
void expect_same_outside_payload(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                                 std::pair<size_t, size_t> range) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + range.first, b.begin()));
  EXPECT_TRUE(std::equal(a.begin() + range.second, a.end(), b.begin() + range.second));
}

TEST(ElidedFrame, HoldsAllButItsPayloadAndRestoresWhole) {
  const Packet whole = whole_frame();
  const Packet p = elided(whole);
  EXPECT_EQ(p.elided, kPayload);
  EXPECT_EQ(p.unheld, whole.unheld);
  EXPECT_EQ(p.size(), whole.size());
  EXPECT_EQ(p.bytes.size(), whole.size() - kPayload);
  EXPECT_EQ(p.unheld_range(), whole.unheld_range());
  // The ICRC ends the buffer; the headers start it.
  const auto [first, last] = whole.unheld_range();
  EXPECT_EQ(p.held_offset(last), first);
  EXPECT_EQ(p.held_offset(first - 1), first - 1);
  EXPECT_TRUE(std::equal(p.bytes.end() - wire::kIcrcSize, p.bytes.end(),
                         whole.bytes.end() - wire::kIcrcSize));

  const std::vector<uint8_t> f = restored(p);
  expect_same_outside_payload(f, {whole.bytes.begin(), whole.bytes.end()}, {first, last});
  // The restored payload is what the room held, not the sender's bytes.
  EXPECT_TRUE(
      std::all_of(f.begin() + first, f.begin() + last, [](uint8_t b) { return b == 0xEE; }));
  wire::ParsedPacket pp;
  EXPECT_EQ(wire::parse(f, pp, {.unheld = p.unheld}), wire::ParseError::kOk);
  EXPECT_TRUE(pp.icrc_checked);
}

TEST(ElidedFrame, PayloadNotInTheFrameStaysWhole) {
  Packet whole = whole_frame();
  whole.unheld = {static_cast<uint16_t>(whole.size()), 0};  // longer than the frame
  const Packet p = elided(whole);
  EXPECT_EQ(p.elided, 0);
  EXPECT_EQ(p.bytes, whole.bytes);
  EXPECT_EQ(restored(p), std::vector<uint8_t>(whole.bytes.begin(), whole.bytes.end()));
}

TEST(ElidedFrame, RestoreNeedsRoomForTheWholeFrame) {
  const Packet p = elided(whole_frame());
  std::vector<uint8_t> room(p.size() - 1);
  EXPECT_THROW(restore(p, room), std::length_error);
}

// A corrupting link draws the same bits for both frames (same seed): the
// elided frame, restored, is the whole frame outside the payload, the
// flips that fall in the payload going to the ICRC in both.
TEST(ElidedFrame, LinkCorruptsTheSameWireBytes) {
  const LinkConfig cfg{.impairments = {.corrupt = 1.0}, .seed = 21};
  Link a(cfg), b(cfg);
  const Packet whole = whole_frame();
  const Packet held = elided(whole);
  std::vector<std::vector<uint8_t>> got_a, got_b;
  for (uint64_t i = 0; i < 500; ++i) {
    a.send(Packet(whole), i * 1000);
    b.send(Packet(held), i * 1000);
  }
  a.advance(kNever - 1,
            [&](Packet&& q, uint64_t) { got_a.emplace_back(q.bytes.begin(), q.bytes.end()); });
  b.advance(kNever - 1, [&](Packet&& q, uint64_t) {
    EXPECT_EQ(q.elided, kPayload);
    got_b.push_back(restored(q));
  });
  ASSERT_EQ(got_a.size(), 500u);
  ASSERT_EQ(got_b.size(), 500u);
  size_t icrc_hit = 0;
  for (size_t i = 0; i < got_a.size(); ++i) {
    expect_same_outside_payload(got_a[i], got_b[i], whole.unheld_range());
    icrc_hit += !std::equal(got_b[i].end() - wire::kIcrcSize, got_b[i].end(),
                            whole.bytes.end() - wire::kIcrcSize);
    wire::ParsedPacket pp;
    EXPECT_EQ(wire::parse(got_b[i], pp, {.unheld = whole.unheld}),
              wire::parse(got_a[i], pp, {.unheld = whole.unheld}));
  }
  EXPECT_GT(icrc_hit, 250u);  // the payload is most of the frame
}

// Two switches stamping INT records (HPCC): the same records, in the same
// place, on the elided frame as on the whole one, and stripped at the
// receiver the frame's ICRC verifies. Payloads shorter than the headers
// too: where the payload would be in the whole frame is then inside the
// elided frame's buffer, and must not be skipped there.
TEST(ElidedFrame, SwitchesStampIntAsOnTheWholeFrame) {
  for (const auto& [ipv6, payload] : {std::pair{false, 1000}, {true, 1000}, {false, 16}}) {
    auto cfg = simple_config(2, 100 * kGbps);
    cfg.int_cfg.enabled = true;
    wire::IpAddress v6_dst;  // roce_bytes' IPv6 destination
    v6_dst.v6 = true;
    v6_dst.bytes[0] = 0xFD;
    wire::store_be32(v6_dst.bytes + 12, 0x0A000002);
    cfg.routes.add_host(v6_dst, 1);
    std::vector<uint8_t> frames[2];
    for (int form = 0; form < 2; ++form) {
      Switch s1(cfg), s2(cfg);
      const Packet whole = whole_frame({.payload = size_t(payload), .ipv6 = ipv6});
      s1.receive(0, form ? elided(whole) : Packet(whole), 100);
      std::vector<Departure> out = drain(s1);
      ASSERT_EQ(out.size(), 1u);
      s2.receive(0, std::move(out[0].packet), out[0].time + 1000);
      out = drain(s2);
      ASSERT_EQ(out.size(), 1u);
      const Packet& p = out[0].packet;
      EXPECT_EQ(p.elided, form ? payload : 0);
      EXPECT_EQ(p.size(), whole.size() + wire::kIntHeaderSize + 2 * wire::kIntHopSize);
      frames[form] = restored(p);
      wire::IntHop hops[4];
      size_t n = 0;
      ASSERT_EQ(wire::int_read_hops(frames[form], hops, n), wire::IntError::kOk);
      EXPECT_EQ(n, 2u);
      size_t len = frames[form].size();
      ASSERT_EQ(wire::int_strip(frames[form], len, p.unheld), wire::IntError::kOk);
      frames[form].resize(len);
      wire::ParsedPacket pp;
      EXPECT_EQ(wire::parse(frames[form], pp, {.unheld = p.unheld}), wire::ParseError::kOk)
          << "ipv6 " << ipv6 << " elided " << form;
    }
    const Packet whole = whole_frame({.payload = size_t(payload), .ipv6 = ipv6});
    expect_same_outside_payload(frames[0], frames[1], whole.unheld_range());
  }
}

// The IP length of an elided frame counts bytes its buffer does not hold;
// what INT reads (UDP header, shim) must still be in the buffer.
TEST(ElidedFrame, IntLocateReadsOnlyTheBuffer) {
  const Packet whole = whole_frame();
  const Packet p = elided(whole);
  wire::IntLocation loc;
  EXPECT_EQ(wire::int_locate(p.bytes, loc), wire::IntError::kTruncated);  // as a whole frame
  ASSERT_EQ(wire::int_locate(p.bytes, loc, p.elided), wire::IntError::kOk);
  EXPECT_EQ(loc.l3_end, whole.size());  // the IP datagram ends with the ICRC
  // Cut inside the UDP header: nothing past the buffer is read.
  const std::span<const uint8_t> cut(p.bytes.data(), loc.l4_offset + 4);
  EXPECT_EQ(wire::int_locate(cut, loc, p.elided + p.bytes.size() - cut.size()),
            wire::IntError::kTruncated);
}

}  // namespace
}  // namespace droce::fabric
