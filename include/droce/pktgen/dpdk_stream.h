// Raw RoCEv2 streams on DPDK ports (pktgen/TRex style): packets built by
// FastFiller straight into mbufs and handed to rte_eth_tx_burst from one
// lcore, a TSC token bucket per stream, and a receive side that parses
// probes into ProbeReceiver (loss / duplicate / out-of-order, latency
// histograms). No transport: these are raw frames. docs/PKTGEN.md
// "DPDK modes".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "droce/pktgen/dpdk_fill.h"
#include "droce/pktgen/probe.h"
#include "droce/pktgen/sample_chunks.h"
#include "droce/pktgen/stream.h"

namespace droce::pktgen {

// Deliberate impairments made by the sender (tests of the receive side).
// With N = count: drop_every k drops seq n when (n+1) % k == 0;
// dup_every k sends seq n twice when (n+1) % k == 0; reorder_every k sends
// n+1 before n when n % k == 0 (and n+1 < count).
struct Impairment {
  uint64_t drop_every = 0;
  uint64_t dup_every = 0;
  uint64_t reorder_every = 0;
  bool any() const { return drop_every || dup_every || reorder_every; }
};

struct DpdkStream {
  StreamSpec spec;
  Rate rate;                   // pps, bit/s (layer 1) or % of line_rate_bps
  double line_rate_bps = 100e9;
  bool unlimited = false;      // no token bucket: as fast as the core goes
  uint64_t count = 0;          // packets (sequence numbers) to send; 0 = until the end
  Impairment impair;
};

struct StreamRunConfig {
  std::vector<DpdkStream> streams;
  int tx_port = -1;  // DPDK port ids; -1 = none (receive only)
  int rx_port = -1;  // -1 = no receive side
  double duration_s = 1;  // stop sending after this (also with count)
  // After the last send, keep receiving until nothing arrived for this long.
  double drain_s = 0.2;
  uint32_t burst = 32;
  // Token bucket depth in time: how much sending a stream may catch up after
  // the core was busy or descheduled. Small = smooth, large = exact average
  // on a shared CPU.
  uint64_t bucket_ns = 100'000;
  uint32_t mbufs = 8191;
  uint16_t rx_desc = 1024, tx_desc = 1024;
  uint32_t idle_sleep_us = 0;  // receive only: sleep when RX was empty
  // The sender waits this long for its port's link before the clock starts
  // (a memif's comes up when its peer connects). Frames sent before would
  // be refused and kept, and leave later with their old probe stamps:
  // milliseconds of latency that no frame had on the wire.
  double link_timeout_s = 10;
};

struct StreamStats {
  uint32_t stream_id = 0;
  uint64_t count = 0;  // intended sequence numbers (0: unknown)
  uint64_t tx_packets = 0, tx_bytes = 0, tx_wire_bytes = 0;
  uint64_t tx_first_ns = 0, tx_last_ns = 0;
  double configured_pps = 0;
};

inline constexpr uint64_t kMaxLatencySamples = 64ull << 20;

struct StreamRunResult {
  std::vector<StreamStats> tx;
  std::shared_ptr<ProbeReceiver> rx;  // null without a receive side
  // One-way latency of every first arrival per stream (up to
  // kMaxLatencySamples in all), for exact nearest-rank percentiles; the
  // trackers' histograms (within 0.2%) take over past that.
  std::map<uint32_t, SampleChunks> latency_samples;
  uint64_t samples_total = 0, samples_dropped = 0;
  uint64_t rx_packets = 0, rx_bytes = 0, rx_not_roce = 0, rx_not_probe = 0;
  uint64_t tx_alloc_failed = 0;
  double tx_seconds = 0;  // first to last send of the run
  double rx_seconds = 0;
};

// Configures and starts the ports (one RX and one TX queue each, their own
// pool), runs on the calling lcore, stops the ports. Throws
// std::runtime_error on DPDK failures, std::invalid_argument on bad specs.
StreamRunResult run_streams(const StreamRunConfig& config);

// The perftest-like table: one row per stream (tx, rx, loss, dup, ooo,
// Mpps, Gb/s, latency p50/p99/p99.9/max in us) and a JSON object.
std::string stream_report(const StreamRunConfig& config, const StreamRunResult& r);
std::string stream_report_json(const StreamRunConfig& config, const StreamRunResult& r);

// TSC in ns without an epoch: comparable across processes on one host
// (invariant TSC), so a second process can measure one-way latency.
uint64_t tsc_ns();

}  // namespace droce::pktgen
