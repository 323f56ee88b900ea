// Latency probes: a payload a stream's packets can carry (magic, stream id,
// sequence number, TX timestamp) and the receive-side tracker that turns
// them into loss / duplicate / out-of-order counters and a latency
// histogram. Counter definitions: docs/PKTGEN.md "Probe counters".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "droce/telemetry/latency_histogram.h"

namespace droce::pktgen {

// Payload layout, all big-endian:
//   0  u32 magic 0x44524F50 ("DROP": droce probe)
//   4  u32 stream id
//   8  u64 sequence number (0, 1, 2, ... per stream)
//  16  u64 TX timestamp, ns
inline constexpr uint32_t kProbeMagic = 0x44524F50;
inline constexpr size_t kProbeSize = 24;

struct Probe {
  uint32_t stream_id = 0;
  uint64_t seq = 0;
  uint64_t tx_ns = 0;
};

// `payload` must hold kProbeSize bytes.
void write_probe(std::span<uint8_t> payload, const Probe& p);
// nullopt when too short or the magic does not match.
std::optional<Probe> read_probe(std::span<const uint8_t> payload);

struct ProbeCounters {
  uint64_t received = 0;          // every probe handed to on_probe
  uint64_t unique = 0;            // first arrivals of a sequence number
  uint64_t duplicate = 0;         // a sequence number seen before
  uint64_t out_of_order = 0;      // first arrival below the highest seen
  uint64_t too_old = 0;           // below the tracking window: not classified
  uint64_t negative_latency = 0;  // rx < tx (clocks not in sync); not in the histogram
  uint64_t highest_seq = 0;       // valid when unique > 0
};

class ProbeTracker {
 public:
  // Duplicates are recognised up to `window` sequence numbers below the
  // highest seen (rounded up to a multiple of 64).
  explicit ProbeTracker(uint64_t window = 1 << 16);

  void on_probe(uint64_t seq, uint64_t tx_ns, uint64_t rx_ns);

  const ProbeCounters& counters() const { return c_; }
  // Sequence numbers up to the highest seen that never arrived.
  uint64_t lost() const;
  // Same, when the sender says it sent `sent` probes (0..sent-1): the tail
  // after the highest arrival counts too.
  uint64_t lost(uint64_t sent) const;
  // One-way latency (rx - tx) of every first arrival.
  const telemetry::LatencyHistogram& latency() const { return latency_; }

 private:
  bool test_and_set(uint64_t seq);
  void advance_to(uint64_t seq);

  ProbeCounters c_;
  std::vector<uint64_t> seen_;  // bit per seq, ring indexed by seq % window
  uint64_t window_;
  telemetry::LatencyHistogram latency_;
};

// Trackers by stream id, fed with received payloads.
class ProbeReceiver {
 public:
  // Returns false (and counts not_probe) when the payload is not a probe.
  bool on_payload(std::span<const uint8_t> payload, uint64_t rx_ns);
  const ProbeTracker* stream(uint32_t id) const;
  const std::unordered_map<uint32_t, ProbeTracker>& streams() const { return streams_; }
  uint64_t not_probe() const { return not_probe_; }

 private:
  std::unordered_map<uint32_t, ProbeTracker> streams_;
  uint64_t not_probe_ = 0;
};

}  // namespace droce::pktgen
