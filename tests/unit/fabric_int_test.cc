// INT stamping at dequeue (HPCC): two switches in a row stamp one record
// each with the dequeue time, tx byte count, queue length and link rate;
// stripping gives back the sender's bytes with a valid ICRC.
#include <gtest/gtest.h>

#include <algorithm>

#include "droce/fabric/link.h"
#include "droce/fabric/switch.h"
#include "droce/wire/int.h"
#include "droce/wire/packet.h"
#include "fabric_test_util.h"

namespace droce::fabric {
namespace {

using testing::drain;
using testing::roce_bytes;
using testing::roce_packet;
using testing::simple_config;

SwitchConfig int_switch(uint32_t node, uint64_t rate) {
  auto cfg = simple_config(2, rate);
  cfg.node_id = node;
  cfg.int_cfg.enabled = true;
  return cfg;
}

TEST(FabricInt, TwoHopsStampedAndStripped) {
  Switch a(int_switch(7, 100 * kGbps));
  Switch b(int_switch(8, 25 * kGbps));
  Link ab(LinkConfig{.propagation_ns = 1000});
  const std::vector<uint8_t> sent = roce_bytes({});
  // Three packets so the second and third see a queue and tx bytes.
  for (uint64_t i = 0; i < 3; ++i) a.receive(0, roce_packet({}, i), 100);
  std::vector<Departure> out_a = drain(a);
  ASSERT_EQ(out_a.size(), 3u);
  for (auto& d : out_a) {
    Departure copy = d;
    ab.send(std::move(copy.packet), d.time);
  }
  ab.advance(kNever - 1, [&](Packet&& p, uint64_t t) { b.receive(0, std::move(p), t); });
  std::vector<Departure> out_b = drain(b);
  ASSERT_EQ(out_b.size(), 3u);

  uint64_t a_tx = 0, b_tx = 0;
  for (size_t i = 0; i < 3; ++i) {
    const Departure& da = out_a[i];
    const Departure& db = out_b[i];
    wire::IntHop hops[8];
    size_t n = 0;
    ASSERT_EQ(wire::int_read_hops(db.packet.bytes, hops, n), wire::IntError::kOk);
    ASSERT_EQ(n, 2u);
    // Path order: switch A first.
    EXPECT_EQ(hops[0].node_id, 7u);
    EXPECT_EQ(hops[0].ingress_port, 0);
    EXPECT_EQ(hops[0].egress_port, 1);
    EXPECT_EQ(hops[0].timestamp_ns, da.start_time);
    EXPECT_EQ(hops[0].tx_bytes, a_tx);
    // Left behind at A: #0 went out alone, #1 left #2 waiting, #2 nothing.
    EXPECT_EQ(hops[0].qlen_bytes, i == 1 ? sent.size() : 0u);
    EXPECT_EQ(hops[0].rate_mbps, 100'000u);
    EXPECT_EQ(hops[1].node_id, 8u);
    EXPECT_EQ(hops[1].timestamp_ns, db.start_time);
    EXPECT_EQ(hops[1].tx_bytes, b_tx);
    EXPECT_EQ(hops[1].rate_mbps, 25'000u);
    a_tx += da.packet.size();
    b_tx += db.packet.size();
    EXPECT_EQ(da.packet.size(), sent.size() + wire::kIntHeaderSize + wire::kIntHopSize);
    EXPECT_EQ(db.packet.size(), da.packet.size() + wire::kIntHopSize);

    std::vector<uint8_t> bytes(db.packet.bytes.begin(), db.packet.bytes.end());
    size_t len = bytes.size();
    ASSERT_EQ(wire::int_strip(bytes, len), wire::IntError::kOk);
    bytes.resize(len);
    EXPECT_EQ(bytes, sent);
    wire::ParsedPacket pp;
    EXPECT_EQ(wire::parse(bytes, pp), wire::ParseError::kOk);
  }
  EXPECT_EQ(a.counters(1).int_stamped, 3u);
  EXPECT_EQ(b.counters(1).int_stamped, 3u);
}

TEST(FabricInt, AcksAndCnpsPassUnstamped) {
  Switch sw(int_switch(1, 100 * kGbps));
  const auto ack = roce_bytes({.opcode = IBV_OPCODE_RC_ACKNOWLEDGE});
  sw.receive(0, roce_packet({.opcode = IBV_OPCODE_RC_ACKNOWLEDGE}), 0);
  sw.receive(0, roce_packet({.opcode = wire::kOpCnp}), 0);
  auto out = drain(sw);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(std::ranges::equal(out[0].packet.bytes, ack));
  EXPECT_EQ(sw.counters(1).int_stamped, 0u);
}

TEST(FabricInt, HopBudgetCountsFull) {
  auto cfg = int_switch(1, 100 * kGbps);
  cfg.int_cfg.max_hops = 1;
  Switch a(cfg), b(cfg);
  a.receive(0, roce_packet({}), 0);
  auto out = drain(a);
  b.receive(0, std::move(out[0].packet), 1000);
  out = drain(b);
  wire::IntLocation loc;
  ASSERT_EQ(wire::int_locate(out[0].packet.bytes, loc), wire::IntError::kOk);
  EXPECT_EQ(loc.hop_count, 1);
  EXPECT_TRUE(loc.exceeded);
  EXPECT_EQ(b.counters(1).int_full, 1u);
}

}  // namespace
}  // namespace droce::fabric
