// The switch model: N ports, each with a link rate, 8 egress queues (one per
// traffic class) served by strict priority and/or DWRR, a shared or per-port
// buffer, ECN marking, PFC, INT stamping and a route table. No I/O and no
// clock: the caller hands in packets with the time they arrived and asks
// when the switch next has something to do.
//
//   sw.receive(port, std::move(pkt), now);      // last bit arrived at `now`
//   while (sw.next_event_time() <= t) sw.advance(t, emit);
//   emit(Departure&&): port, start_time, time (last bit out), packet
//
// A departure is emitted as soon as its transmission starts, with the time
// its last bit leaves; the caller hands it to the port's Link. Transmissions
// never overlap on a port (serialization at the port rate, Ethernet
// preamble, IFG and FCS included).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "droce/fabric/ecn.h"
#include "droce/fabric/fifo.h"
#include "droce/fabric/load_balance.h"
#include "droce/fabric/packet.h"
#include "droce/fabric/rng.h"
#include "droce/fabric/routing.h"
#include "droce/fabric/scheduler.h"
#include "droce/wire/headers.h"
#include "droce/wire/int.h"
#include "droce/wire/pfc.h"

namespace droce::fabric {

// Preamble + SFD (8), FCS (4), minimum inter-frame gap (12): IEEE 802.3
// clause 4.4.2. Frames in Packet::bytes carry no FCS.
constexpr uint32_t kEthWireOverhead = 24;
constexpr uint32_t kEthMinFrame = 60;

struct PortConfig {
  uint64_t rate_bps = 100 * kGbps;
  wire::MacAddress mac{};
  // Egress buffer limit for BufferMode::kPerPort.
  uint64_t buffer_bytes = 1 << 20;
  SchedulerConfig scheduler = SchedulerConfig::strict_priority();
  EcnConfig ecn = ecn_defaults_for_rate(100 * kGbps);
  // Classes that get ECN marking (bit c); others are never marked.
  uint8_t ecn_classes = 0xFF;
  // Group-addressed frames (broadcast, multicast) and non-IP unicast to an
  // unlearned MAC are flooded out of every flood port but the ingress one.
  // In a fabric with loops only host ports and a spanning tree's links may
  // be flood ports, or floods circulate.
  bool flood = false;
};

enum class BufferMode : uint8_t { kShared, kPerPort };
enum class Classifier : uint8_t { kDscp, kPcp };
enum class WatchdogAction : uint8_t {
  kDrop,         // flush the stuck queue, drop its arrivals, ignore pauses
  kIgnorePause,  // keep transmitting as if no pause had been received
};

// IEEE 802.1Qbb PFC. XOFF/XON are per ingress port and priority: bytes that
// came in on port p with priority c and still sit in some egress queue.
struct PfcConfig {
  uint8_t enabled_priorities = 0;  // bit c: priority c is lossless (often 3)
  uint64_t xoff_bytes = 96 * kKiB;
  uint64_t xon_bytes = 64 * kKiB;
  uint16_t pause_quanta = 0xFFFF;  // sent in XOFF frames
  // XOFF is resent while above XON, before the peer's pause runs out:
  // every refresh_fraction of the pause time (vendors refresh at about half).
  double refresh_fraction = 0.5;
  // Watchdog (storm prevention): a priority paused longer than this with
  // packets waiting is declared stuck. 0 disables. Vendor defaults are
  // 100..200 ms; simulations usually want far less.
  uint64_t watchdog_ns = 0;
  uint64_t watchdog_restore_ns = 0;  // quiet time before the watchdog clears
  WatchdogAction watchdog_action = WatchdogAction::kDrop;
};

struct IntConfig {
  bool enabled = false;
  uint8_t max_hops = wire::kIntDefaultMaxHops;
  // RoCE requests and read responses only (what HPCC's senders need);
  // ACKs, NAKs and CNPs pass unstamped.
  bool data_only = true;
};

struct SwitchConfig {
  uint32_t node_id = 0;  // INT node id, ECMP seed component
  std::vector<PortConfig> ports;
  BufferMode buffer_mode = BufferMode::kShared;
  uint64_t shared_buffer_bytes = 12 << 20;  // shallow-buffer ASIC scale
  Classifier classifier = Classifier::kDscp;
  // DSCP -> class: the class-selector bits (RFC 2474 4.2.2), so AF31/DSCP 26
  // (a common RoCE setting) maps to class 3 and CS6/DSCP 48 (CNPs) to 6.
  std::array<uint8_t, 64> dscp_to_tc = [] {
    std::array<uint8_t, 64> m{};
    for (size_t i = 0; i < 64; ++i) m[i] = static_cast<uint8_t>(i >> 3);
    return m;
  }();
  std::array<uint8_t, kNumClasses> pcp_to_tc{0, 1, 2, 3, 4, 5, 6, 7};
  PfcConfig pfc;
  IntConfig int_cfg;
  RouteTable routes;
  uint64_t seed = 1;  // ECN draws and ECMP hash seed
  // The member of an ECMP group a packet takes (load_balance.h).
  LoadBalance load_balance = LoadBalance::kEcmp;
  uint64_t flowlet_gap_ns = 8'000;  // kAdaptiveFlowlet
  // MAC learning (source MAC -> ingress port) from group-addressed and
  // non-IP frames; when full, unknown sources are not learned.
  size_t mac_table_size = 4096;
};

struct QueueCounters {
  uint64_t enq_packets = 0;
  uint64_t enq_bytes = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t drops = 0;          // tail drops (buffer full)
  uint64_t drop_bytes = 0;
  uint64_t watchdog_drops = 0;
  uint64_t ecn_marked = 0;
  uint64_t ecn_not_ect = 0;    // would have been marked, but not ECT
  uint64_t max_bytes = 0;      // high-water mark
};

struct PortCounters {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;     // including PFC frames
  uint64_t tx_bytes = 0;
  uint64_t rx_pfc = 0;
  uint64_t rx_pause_8023x = 0; // legacy PAUSE: counted, not honoured
  uint64_t rx_bad = 0;         // runt / unparseable
  uint64_t no_route = 0;
  uint64_t flooded = 0;        // frames received here that were flooded
  uint64_t l2_forwarded = 0;   // non-IP unicast sent by the MAC table
  uint64_t down_drops = 0;
  uint64_t tx_xoff = 0;
  uint64_t tx_xon = 0;
  uint64_t int_stamped = 0;
  uint64_t int_full = 0;       // INT stack full or no room
  std::array<uint64_t, kNumClasses> watchdog_triggers{};
  std::array<uint64_t, kNumClasses> pauses_ignored{};  // while watchdog active
  std::array<QueueCounters, kNumClasses> queues{};
};

class Switch {
 public:
  using Emit = std::function<void(Departure&&)>;

  // Throws std::invalid_argument naming the bad field.
  explicit Switch(SwitchConfig cfg);

  size_t num_ports() const { return ports_.size(); }
  const SwitchConfig& config() const { return cfg_; }
  RouteTable& routes() { return cfg_.routes; }

  // A frame whose last bit arrived on `port` at `now`. `now` must not go
  // backwards across calls to receive/advance.
  void receive(uint16_t port, Packet&& packet, uint64_t now);

  // Earliest time at which advance() has work (a transmission start, a PFC
  // refresh, a watchdog check, departures not yet emitted), or kNever.
  uint64_t next_event_time() const;

  // Runs everything due at or before `now`; emits departures.
  template <class F>
  void advance(uint64_t now, F&& emit) {
    run_until(now);
    for (auto& d : outbox_) emit(std::move(d));
    outbox_.clear();
  }
  // Same, returning the departures (valid until the next call).
  std::vector<Departure>& poll(uint64_t now) {
    run_until(now);
    polled_.swap(outbox_);
    outbox_.clear();
    return polled_;
  }

  // Link state of a port: while down, packets routed to it are dropped,
  // ECMP avoids it, and its queues are flushed. Going down also ends PFC
  // on the link both ways: the peer's pause of this egress, and any XOFF
  // this port had sent (no XON follows; no PFC frame is sent or counted
  // while down).
  void set_port_up(uint16_t port, bool up, uint64_t now);
  bool port_up(uint16_t port) const { return ports_[port].up; }

  // Occupancy, for sampling by the caller.
  uint64_t queue_bytes(uint16_t port, uint8_t tc) const {
    return ports_[port].q_bytes[tc];
  }
  size_t queue_packets(uint16_t port, uint8_t tc) const {
    return ports_[port].q[tc].size();
  }
  uint64_t port_queue_bytes(uint16_t port) const { return ports_[port].bytes; }
  uint64_t buffer_used() const { return used_; }
  uint64_t ingress_bytes(uint16_t port, uint8_t prio) const {
    return ports_[port].in_bytes[prio];
  }
  // PFC state of egress `port`: paused by its peer for `prio` at `now`.
  bool paused(uint16_t port, uint8_t prio, uint64_t now) const;
  // Total time `prio` on egress `port` has been paused, up to `now`.
  uint64_t paused_ns(uint16_t port, uint8_t prio, uint64_t now) const;
  // Whether this switch currently asserts XOFF towards the peer on `port`.
  bool xoff_asserted(uint16_t port, uint8_t prio) const {
    return ports_[port].xoff_sent >> (prio & 7) & 1;
  }
  bool watchdog_active(uint16_t port, uint8_t prio) const {
    return ports_[port].wd_active >> (prio & 7) & 1;
  }
  const PortCounters& counters(uint16_t port) const { return ports_[port].counters; }
  // MAC learning: entries in the table, sources not learned (table full),
  // and the port a MAC was learned on (-1: unknown).
  size_t mac_table_entries() const { return macs_.size(); }
  uint64_t mac_table_full() const { return mac_full_; }
  int learned_port(const wire::MacAddress& mac) const;
  // Adaptive routing by flowlets: flowlets started (a member chosen).
  uint64_t flowlets_started() const { return flowlets_.flowlets(); }

  // Time to serialize a frame of `frame_bytes` (no FCS) at `rate_bps`,
  // rounded down; Switch carries the remainder so long runs are exact.
  static uint64_t serialization_ns(size_t frame_bytes, uint64_t rate_bps);

 private:
  struct Port {
    PortConfig cfg;
    ClassScheduler sched;
    std::array<Fifo<Packet>, kNumClasses> q;
    // Per-class state as bit masks (bit c = class c): compute_next and
    // process_port run per switch event and visit only the classes with
    // something to do instead of testing eight queues (ten cache lines).
    uint8_t queued = 0;       // q[c] is not empty
    std::array<uint64_t, kNumClasses> q_bytes{};
    uint64_t bytes = 0;
    Fifo<Packet> ctrl;  // PFC frames: never paused, sent first
    uint64_t busy_until = 0;
    uint64_t ser_rem = 0;     // serialization remainder, bit-ns units
    uint64_t tx_total = 0;    // bytes sent (INT tx_bytes)
    bool up = true;
    // Pauses received from the peer (egress side).
    std::array<wire::PauseTimer, kNumClasses> pause{};
    uint8_t wd_active = 0;    // the PFC watchdog ignores the peer's pauses
    std::array<uint64_t, kNumClasses> wd_last_pause{};
    // Ingress accounting and our own XOFF state (ingress side).
    std::array<uint64_t, kNumClasses> in_bytes{};
    uint8_t xoff_sent = 0;    // we assert XOFF towards the peer
    std::array<uint64_t, kNumClasses> refresh_at{};
    PortCounters counters;
  };

  void run_until(uint64_t now);
  void process_port(uint16_t p, uint64_t t);
  uint64_t compute_next(const Port& port) const;
  void refresh_next(uint16_t p);
  // The earliest of next_ (lowest port on a tie), rescanned when stale.
  uint64_t earliest_port(uint16_t& port) const;
  bool is_paused(const Port& port, int c, uint64_t t) const {
    return port.pause[c].paused(t) && !(port.wd_active >> c & 1);
  }
  void on_pfc(uint16_t p, std::span<const uint8_t> frame, uint64_t now);
  // L2 path for group-addressed and non-IP frames.
  void switch_l2(uint16_t port, Packet&& pkt, const FrameInfo& info, uint64_t now);
  void learn(const wire::MacAddress& src, uint16_t port);
  void enqueue(uint16_t out, Packet&& pkt, uint64_t now);
  Packet dequeue(Port& port, int c);
  void release(Packet& pkt, uint64_t now);  // buffer + ingress accounting
  void send_pfc(uint16_t p, uint8_t prio, uint16_t quanta, uint64_t now);
  void transmit(uint16_t p, Packet&& pkt, uint64_t t, bool data);
  void maybe_mark(Port& port, Packet& pkt, uint64_t qlen);
  void stamp_int(uint16_t p, Packet& pkt, uint64_t t);
  void flush_class(uint16_t p, int c, uint64_t now, bool watchdog);

  SwitchConfig cfg_;
  std::vector<Port> ports_;
  // Each port's cached next event time (compute_next), kept apart from the
  // ports so the per-event scans for the earliest read a few lines.
  std::vector<uint64_t> next_;
  // The earliest of next_ and its port, as the scan would find it: kept by
  // refresh_next while it can be (an earlier time, or the same time on a
  // lower port, takes over), marked stale when the earliest port's own time
  // moves later. The switch asks for it on every receive and event.
  mutable uint64_t min_next_ = kNever;
  mutable uint16_t min_port_ = 0;
  mutable bool min_stale_ = false;
  std::vector<bool> port_up_;
  uint64_t used_ = 0;
  uint64_t clock_ = 0;
  uint64_t hash_seed_ = 0;
  Rng rng_;
  std::vector<Departure> outbox_;
  std::vector<Departure> polled_;
  std::unordered_map<uint64_t, uint16_t> macs_;  // MAC (48 bits) -> port
  FlowletTable flowlets_;
  int route(const FrameInfo& info, uint64_t now);
  uint64_t mac_full_ = 0;
};

}  // namespace droce::fabric
