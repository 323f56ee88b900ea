// PFC in the switch model (IEEE 802.1Qbb): XOFF/XON hysteresis per ingress
// port and priority, real PFC frames upstream, pauses honoured on egress with
// quanta x 512 bit times, XON, refresh, pause-time counters and the watchdog.
#include <gtest/gtest.h>

#include "droce/fabric/switch.h"
#include "droce/wire/pfc.h"
#include "fabric_test_util.h"

namespace droce::fabric {
namespace {

using testing::drain;
using testing::roce_bytes;
using testing::roce_packet;
using testing::simple_config;

constexpr uint64_t k25G = 25 * kGbps;
constexpr uint64_t k100G = 100 * kGbps;

Packet pfc_packet(uint8_t prio, uint16_t quanta) {
  wire::PfcFrame f;
  f.src_mac = {0x02, 0xBB, 0, 0, 0, 1};
  f.enable = static_cast<uint8_t>(1u << prio);
  f.quanta[prio] = quanta;
  Packet p;
  p.bytes.resize(wire::kPfcFrameSize);
  wire::build_pfc(f, p.bytes);
  return p;
}

struct Pfc {
  uint16_t port;
  uint64_t time;
  wire::PfcFrame frame;
};
std::vector<Pfc> pfc_frames(const std::vector<Departure>& out) {
  std::vector<Pfc> r;
  for (const auto& d : out) {
    wire::PfcFrame f;
    if (wire::parse_pfc(d.packet.bytes, f) == wire::PfcParseError::kOk)
      r.push_back({d.port, d.start_time, f});
  }
  return r;
}

TEST(FabricPfc, PauseHonouredForQuantaTimesBitTime) {
  for (uint64_t rate : {k25G, k100G}) {
    Switch sw(simple_config(2, rate));
    sw.receive(1, pfc_packet(3, 1000), 10'000);  // port 1's peer pauses prio 3
    EXPECT_EQ(sw.counters(1).rx_pfc, 1u);
    EXPECT_TRUE(sw.paused(1, 3, 10'000));
    sw.receive(0, roce_packet({}, 1), 10'100);
    sw.receive(0, roce_packet({.dscp = 8}, 2), 10'200);  // class 1: not paused
    auto out = drain(sw);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0].packet.tag, 2u);
    EXPECT_EQ(out[0].start_time, 10'200u);
    const uint64_t expiry = 10'000 + wire::pfc_quanta_to_ns(1000, rate);
    EXPECT_EQ(expiry, 10'000 + 512'000'000'000'000ull / rate);
    EXPECT_EQ(out[1].packet.tag, 1u);
    EXPECT_EQ(out[1].start_time, std::max(expiry, out[0].time));
    EXPECT_EQ(sw.paused_ns(1, 3, 1'000'000), expiry - 10'000);
  }
}

TEST(FabricPfc, XonResumesEarly) {
  Switch sw(simple_config(2, k100G));
  sw.receive(1, pfc_packet(3, 0xFFFF), 0);
  sw.receive(0, roce_packet({}), 100);
  EXPECT_TRUE(drain(sw, 5'000).empty());
  sw.receive(1, pfc_packet(3, 0), 5'000);
  EXPECT_FALSE(sw.paused(1, 3, 5'000));
  auto out = drain(sw);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].start_time, 5'000u);
  EXPECT_EQ(sw.paused_ns(1, 3, 100'000), 5'000u);
  // A second pause adds to the counter.
  sw.receive(1, pfc_packet(3, 100), 200'000);
  EXPECT_EQ(sw.paused_ns(1, 3, 1'000'000), 5'000u + 512u);
}

TEST(FabricPfc, XoffXonHysteresis) {
  auto cfg = simple_config(3, k25G);
  const uint64_t frame = roce_bytes({}).size();
  cfg.pfc.enabled_priorities = 0x08;
  cfg.pfc.xoff_bytes = 20 * frame;
  cfg.pfc.xon_bytes = 10 * frame;
  cfg.ports[2].rate_bps = 10 * kGbps;  // the bottleneck
  cfg.routes.add_host(wire::IpAddress::v4(0x0A000009), 2);
  Switch sw(cfg);
  // 30 packets from port 0 toward port 2, faster than port 2 drains.
  std::vector<Departure> out;
  auto emit = [&](Departure&& d) { out.push_back(std::move(d)); };
  for (uint64_t i = 0; i < 30; ++i) {
    sw.receive(0, roce_packet({.dst_ip = 0x0A000009}), i * 10);
    sw.advance(i * 10, emit);
  }
  auto pfc = pfc_frames(out);
  ASSERT_EQ(pfc.size(), 1u);  // one XOFF, not one per packet above XOFF
  EXPECT_EQ(pfc[0].port, 0);
  EXPECT_EQ(pfc[0].frame.enable, 0x08);
  EXPECT_EQ(pfc[0].frame.quanta[3], cfg.pfc.pause_quanta);
  EXPECT_EQ(pfc[0].frame.src_mac, cfg.ports[0].mac);
  EXPECT_TRUE(sw.xoff_asserted(0, 3));
  EXPECT_EQ(sw.counters(0).tx_xoff, 1u);
  // The XOFF went out when the 20-frame threshold was crossed, ahead of data.
  EXPECT_GE(sw.ingress_bytes(0, 3), cfg.pfc.xon_bytes);
  // Drain: XON exactly once, when the ingress count falls to XON.
  for (uint64_t t; (t = sw.next_event_time()) != kNever;) {
    sw.advance(t, emit);
    if (!sw.xoff_asserted(0, 3)) {
      EXPECT_LE(sw.ingress_bytes(0, 3), cfg.pfc.xon_bytes);
      EXPECT_GT(sw.ingress_bytes(0, 3) + frame, cfg.pfc.xon_bytes);
      break;
    }
  }
  for (auto& d : drain(sw)) out.push_back(std::move(d));
  pfc = pfc_frames(out);
  ASSERT_EQ(pfc.size(), 2u);
  EXPECT_EQ(pfc[1].frame.quanta[3], 0);  // XON
  EXPECT_EQ(sw.counters(0).tx_xon, 1u);
  EXPECT_EQ(sw.counters(2).queues[3].drops, 0u);
}

// A link that goes down ends PFC on it both ways (802.1Qbb state is per
// link): the peer's pause of the egress closes at the down time, and an
// XOFF the port had sent upstream is forgotten: no XON goes out, or is
// counted, when its ingress drains.
TEST(FabricPfc, LinkDownEndsPfcBothWays) {
  // The peer's pause of port 1.
  {
    Switch sw(simple_config(2, k100G));
    sw.receive(1, pfc_packet(3, 0xFFFF), 0);
    sw.set_port_up(1, false, 1'000);
    EXPECT_FALSE(sw.paused(1, 3, 1'000));
    EXPECT_EQ(sw.paused_ns(1, 3, 1'000'000), 1'000u);
    sw.set_port_up(1, true, 2'000);
    sw.receive(0, roce_packet({}), 3'000);
    auto out = drain(sw);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].start_time, 3'000u);  // not held by the old pause
  }
  // The XOFF port 0 sent to its peer (the hysteresis set-up above).
  auto cfg = simple_config(3, k25G);
  const uint64_t frame = roce_bytes({}).size();
  cfg.pfc.enabled_priorities = 0x08;
  cfg.pfc.xoff_bytes = 20 * frame;
  cfg.pfc.xon_bytes = 10 * frame;
  cfg.ports[2].rate_bps = 10 * kGbps;
  cfg.routes.add_host(wire::IpAddress::v4(0x0A000009), 2);
  Switch sw(cfg);
  std::vector<Departure> out;
  auto emit = [&](Departure&& d) { out.push_back(std::move(d)); };
  uint64_t t = 0;
  for (; t < 300; t += 10) {
    sw.receive(0, roce_packet({.dst_ip = 0x0A000009}), t);
    sw.advance(t, emit);
  }
  ASSERT_TRUE(sw.xoff_asserted(0, 3));
  sw.set_port_up(0, false, t);
  EXPECT_FALSE(sw.xoff_asserted(0, 3));
  for (auto& d : drain(sw)) out.push_back(std::move(d));
  EXPECT_EQ(sw.ingress_bytes(0, 3), 0u);  // port 2 sent all 30 on
  EXPECT_EQ(sw.counters(2).queues[3].drops, 0u);
  const auto pfc = pfc_frames(out);
  ASSERT_EQ(pfc.size(), 1u);  // the XOFF only
  EXPECT_NE(pfc[0].frame.quanta[3], 0);
  EXPECT_EQ(sw.counters(0).tx_xoff, 1u);
  EXPECT_EQ(sw.counters(0).tx_xon, 0u);
}

TEST(FabricPfc, OnlyLosslessPrioritiesGeneratePause) {
  auto cfg = simple_config(2, k25G);
  cfg.pfc.enabled_priorities = 0x08;
  cfg.pfc.xoff_bytes = 2 * roce_bytes({}).size();
  cfg.pfc.xon_bytes = 0;
  Switch sw(cfg);
  for (int i = 0; i < 10; ++i) sw.receive(0, roce_packet({.dscp = 8}), 0);  // class 1
  EXPECT_TRUE(pfc_frames(drain(sw)).empty());
}

// With Classifier::kPcp, PFC acts on the class the VLAN PCP gives: XOFF
// goes out for the lossless PCP only, and a pause received for one priority
// holds that PCP's frames while another PCP's (same DSCP) keep flowing.
TEST(FabricPfc, PcpClassesArePausedAndPauseSeparately) {
  auto cfg = simple_config(3, k25G);
  const uint64_t frame = roce_bytes({.vlan = true, .pcp = 5}).size();
  cfg.classifier = Classifier::kPcp;
  cfg.pfc.enabled_priorities = 1u << 5;
  cfg.pfc.xoff_bytes = 4 * frame;
  cfg.pfc.xon_bytes = 2 * frame;
  Switch sw(cfg);
  // Port 2's peer pauses priority 5; DSCP 26 (class 3 by DSCP) everywhere.
  sw.receive(2, pfc_packet(5, 0xFFFF), 0);
  for (uint64_t i = 0; i < 6; ++i) {
    sw.receive(0, roce_packet({.dst_ip = 0x0A000003, .vlan = true, .pcp = 5}, 5), 10 + i);
    sw.receive(1, roce_packet({.dst_ip = 0x0A000003, .vlan = true, .pcp = 2}, 2), 10 + i);
  }
  auto out = drain(sw, 100'000);
  // The lossless class crossed XOFF at ingress port 0: one XOFF for
  // priority 5 upstream; the lossy PCP 2 at port 1 sent none.
  auto pfc = pfc_frames(out);
  ASSERT_EQ(pfc.size(), 1u);
  EXPECT_EQ(pfc[0].port, 0);
  EXPECT_EQ(pfc[0].frame.enable, 1u << 5);
  EXPECT_TRUE(sw.xoff_asserted(0, 5));
  EXPECT_FALSE(sw.xoff_asserted(1, 2));
  EXPECT_EQ(sw.counters(1).tx_xoff, 0u);
  // Egress port 2: all six PCP 2 frames left, the PCP 5 frames wait.
  size_t data = 0;
  for (const Departure& d : out) {
    if (d.port != 2) continue;
    EXPECT_EQ(d.packet.tag, 2u);
    ++data;
  }
  EXPECT_EQ(data, 6u);
  EXPECT_EQ(sw.queue_packets(2, 5), 6u);
  EXPECT_EQ(sw.queue_packets(2, 2), 0u);
  EXPECT_EQ(sw.queue_packets(2, 3), 0u);
  // XON for priority 5 releases them.
  sw.receive(2, pfc_packet(5, 0), 100'000);
  size_t released = 0;
  for (const Departure& d : drain(sw)) {
    if (d.port != 2) continue;
    EXPECT_EQ(d.packet.tag, 5u);
    ++released;
  }
  EXPECT_EQ(released, 6u);
}

TEST(FabricPfc, XoffRefreshedBeforePeerTimerExpires) {
  auto cfg = simple_config(2, k100G);
  const uint64_t frame = roce_bytes({}).size();
  cfg.pfc.enabled_priorities = 0x08;
  cfg.pfc.xoff_bytes = 4 * frame;
  cfg.pfc.xon_bytes = 2 * frame;
  cfg.pfc.pause_quanta = 100;  // 512 ns at 100 G; refresh every 256 ns
  Switch sw(cfg);
  // Port 1 itself is paused by its peer, so our queue cannot drain.
  sw.receive(1, pfc_packet(3, 0xFFFF), 0);
  for (int i = 0; i < 6; ++i) sw.receive(0, roce_packet({}), 10);
  auto pfc = pfc_frames(drain(sw, 2'000));
  ASSERT_GE(pfc.size(), 7u);
  for (size_t i = 1; i < pfc.size(); ++i) {
    EXPECT_EQ(pfc[i].frame.quanta[3], 100);
    EXPECT_LE(pfc[i].time - pfc[i - 1].time, 256u + 1);
  }
}

TEST(FabricPfc, WatchdogDropsStuckQueue) {
  auto cfg = simple_config(2, k100G);
  cfg.pfc.watchdog_ns = 100'000;
  cfg.pfc.watchdog_restore_ns = 80'000;
  Switch sw(cfg);
  // A storm: the peer keeps pausing priority 3.
  std::vector<Departure> out;
  auto emit = [&](Departure&& d) { out.push_back(std::move(d)); };
  sw.receive(1, pfc_packet(3, 0xFFFF), 0);
  for (int i = 0; i < 5; ++i) sw.receive(0, roce_packet({}), 0);
  uint64_t t = 50'000;
  for (; t < 300'000; t += 50'000) {
    sw.receive(1, pfc_packet(3, 0xFFFF), t);
    sw.advance(t, emit);
  }
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(sw.watchdog_active(1, 3));
  EXPECT_EQ(sw.counters(1).watchdog_triggers[3], 1u);
  EXPECT_EQ(sw.counters(1).queues[3].watchdog_drops, 5u);
  EXPECT_GE(sw.counters(1).pauses_ignored[3], 3u);
  EXPECT_EQ(sw.paused_ns(1, 3, t), 100'000u);  // paused until detection
  // While active, arrivals of that class are dropped.
  sw.receive(0, roce_packet({}), t);
  EXPECT_EQ(sw.counters(1).queues[3].watchdog_drops, 6u);
  // The storm stops; after the restore time the priority works again.
  drain(sw, t + 40'000);
  EXPECT_FALSE(sw.watchdog_active(1, 3));
  sw.receive(0, roce_packet({}), t + 40'000);
  EXPECT_EQ(drain(sw).size(), 1u);
}

TEST(FabricPfc, WatchdogIgnoreModeTransmits) {
  auto cfg = simple_config(2, k100G);
  cfg.pfc.watchdog_ns = 20'000;
  cfg.pfc.watchdog_action = WatchdogAction::kIgnorePause;
  Switch sw(cfg);
  sw.receive(1, pfc_packet(3, 0xFFFF), 0);  // 671 us pause
  sw.receive(0, roce_packet({}), 0);
  auto out = drain(sw);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].start_time, 20'000u);  // released by the watchdog
  EXPECT_EQ(sw.counters(1).watchdog_triggers[3], 1u);
  EXPECT_EQ(sw.counters(1).queues[3].watchdog_drops, 0u);
}

TEST(FabricPfc, PfcFramesAreNotForwardedAndLegacyPauseIsCounted) {
  Switch sw(simple_config(2, k100G));
  sw.receive(0, pfc_packet(3, 10), 0);
  Packet legacy = pfc_packet(3, 10);
  legacy.bytes[15] = 0x01;
  legacy.bytes[14] = 0x00;  // opcode 0x0001
  sw.receive(0, std::move(legacy), 0);
  EXPECT_TRUE(drain(sw).empty());
  EXPECT_EQ(sw.counters(0).rx_pfc, 1u);
  EXPECT_EQ(sw.counters(0).rx_pause_8023x, 1u);
}

}  // namespace
}  // namespace droce::fabric
