// Flow entropy of a QP's request packets: the UDP source port, which
// RoCEv2 leaves free for the sender to fill (annex A17.4.3) and which
// switches hash to pick an equal-cost path. One value per QP keeps a flow
// on one path (in order, but two elephants can collide on a link); varying
// it spreads one QP over many paths at the price of reordering, which the
// responder must then accept (Recovery::kSelectiveRepeat).
//
//  - kFixed: the path's port for every packet (what RoCE NICs do).
//  - kSpray: each packet takes the next of `paths` values, round robin
//    (per-packet spraying, as AWS SRD and Ultra Ethernet's packet
//    spraying do).
//  - kFlowlet: a new value only after the QP was idle for longer than
//    `flowlet_gap_ns` (CONGA/LetFlow flowlets: the gap should exceed the
//    delay difference between paths, so a flowlet cannot overtake the
//    previous one and the receiver sees no reordering).
//  - kPathAware: sprays like kSpray but passes over the values whose path
//    looks congested: the requester reports each packet's round trip and
//    each loss by the value it was sent with (selective repeat keeps which
//    PSN went with which); a round trip more than `path_rtt_threshold_ns`
//    above the QP's mean round trip makes that path avoided for as long
//    as the excess (the time its queue takes to drain), a loss for the
//    smallest round trip plus the threshold. When every path is avoided
//    it sprays round robin. This is the sender's half of AWS SRD
//    (Shalev et al., IEEE Micro 2020) and of the veRoCE proposal:
//    steering by end-to-end feedback, with switches that only hash. ECN
//    does not take part: a RoCEv2 CNP names the QP, not the packet or
//    its path (annex A17.9.3).
//
// The sequence depends only on the packets' send times, never on a clock
// or a random draw, so a simulation stays deterministic and the DPDK
// engine and the simulator send the same ports for the same events.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace droce::transport {

enum class EntropyMode : uint8_t { kFixed, kSpray, kFlowlet, kPathAware };
std::string_view to_string(EntropyMode m);

struct EntropyConfig {
  EntropyMode mode = EntropyMode::kFixed;
  // Distinct UDP source ports used (kSpray, kFlowlet): 1..kMaxEntropyPaths.
  // More values than paths keeps a hash from mapping them unevenly.
  uint32_t paths = 64;
  // kFlowlet: an idle gap longer than this starts a new flowlet.
  uint64_t flowlet_gap_ns = 8'000;
  // kPathAware: a round trip this far above the QP's mean marks the path
  // it took congested.
  uint64_t path_rtt_threshold_ns = 4'000;
};
constexpr uint32_t kMaxEntropyPaths = 1u << 14;  // the 14 bits below 0xC000

// A port in the dynamic range (0xC000 | 14 bits), the `index`-th of a QP
// whose fixed port is `base`: index 0 is `base` itself, and indices below
// kMaxEntropyPaths give distinct ports.
uint16_t entropy_port(uint16_t base, uint32_t index);

// The UDP source port of each request packet a QP sends.
class EntropySource {
 public:
  void reset(const EntropyConfig& cfg, uint16_t base_port);
  // The port for a request packet sent at `now` (virtual or real ns).
  uint16_t next(uint64_t now);
  uint16_t base() const { return base_; }
  // Times the port changed (a new flowlet, or each sprayed packet).
  uint64_t changes() const { return changes_; }
  const EntropyConfig& config() const { return cfg_; }
  // The index (0..paths-1) of the port next() returned last.
  uint32_t index() const { return index_; }

  // kPathAware feedback (ignored in the other modes): a packet sent with
  // index `path` was delivered after `rtt_ns`, or was lost.
  void on_delivered(uint32_t path, uint64_t rtt_ns, uint64_t now);
  void on_lost(uint32_t path, uint64_t now);
  // kPathAware: times next() passed over a path it was avoiding.
  uint64_t avoided() const { return avoided_; }

 private:
  uint32_t next_path_aware(uint64_t now, uint32_t n);
  EntropyConfig cfg_;
  uint16_t base_ = 0xC000;
  uint32_t index_ = 0;
  bool sent_ = false;
  uint64_t last_ns_ = 0;
  uint64_t changes_ = 0;
  // kPathAware: when each path may be used again, the smallest and the
  // mean round trip.
  std::vector<uint64_t> avoid_until_;
  uint64_t base_rtt_ns_ = UINT64_MAX;
  uint64_t mean_rtt_ns_ = 0;
  uint64_t avoided_ = 0;
};

}  // namespace droce::transport
