// The NIC without its I/O (DESIGN.md "src/endpoint"): given `now` and
// received frames, it parses them, dispatches by destination QPN, runs due
// timers, and fills transmit buffers with what each QP's rate and window and
// the port's link rate allow. The DPDK engine hands it mbuf data areas; the
// simulator hands it plain buffers. Single-threaded: one endpoint per lcore.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "droce/cc/algorithm.h"
#include "droce/endpoint/cc_binding.h"
#include "droce/endpoint/counters.h"
#include "droce/endpoint/timing_wheel.h"
#include "droce/transport/device.h"
#include "droce/transport/qp.h"

namespace droce::endpoint {

struct EndpointConfig {
  // The port's link rate: frames leave no faster than this (a vdev can so
  // emulate a 10/25/100/400 G link). 0 = unlimited.
  uint64_t port_rate_bytes_per_sec = 100'000'000'000ull / 8;
  // Bytes a frame occupies on the wire beyond its own length: preamble and
  // SFD (8), FCS (4), inter-frame gap (12).
  uint32_t wire_overhead_bytes = 24;
  uint64_t pacer_granularity_ns = 64;
  uint32_t pacer_slots = 4096;
};

class Endpoint {
 public:
  Endpoint(transport::Device& device, const EndpointConfig& config);
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Puts `qp` under this endpoint's scheduler with its own congestion
  // control instance (cc::make_algorithm). Installs the QP's CC hooks.
  void attach(transport::QueuePair& qp, std::unique_ptr<cc::Algorithm> cc);
  // Control plane: post a send WR and wake the QP's scheduling.
  int post_send(transport::QueuePair& qp, const transport::SendWr& wr);
  // Wake a QP after anything changed it from outside the data path.
  void notify(uint32_t qpn);

  // One received frame (no FCS). Bad input is counted and dropped.
  void receive(std::span<const uint8_t> frame, uint64_t now);

  // Runs due timers and writes up to bufs.size() frames, one per buffer,
  // their lengths into lens. Returns how many were written.
  size_t transmit(uint64_t now, std::span<const std::span<uint8_t>> bufs,
                  std::span<uint32_t> lens);

  // When transmit() next has something to do: timers, pacer, port.
  // UINT64_MAX when idle until a frame arrives or a WR is posted.
  uint64_t next_deadline() const;

  const EndpointCounters& counters() const { return counters_; }
  CcBinding* cc_of(uint32_t qpn);
  transport::Device& device() { return device_; }

 private:
  struct QpSlot {
    transport::QueuePair* qp = nullptr;
    std::unique_ptr<CcBinding> cc;
    bool active = false;        // in active_ (has or may have work)
    uint64_t timer_filed = UINT64_MAX;  // deadline filed in timers_
  };
  QpSlot* slot(uint32_t qpn);
  void activate(QpSlot& s);
  void file_timer(uint32_t qpn, QpSlot& s);
  uint64_t slot_deadline(const QpSlot& s) const;
  void run_timers(uint64_t now);

  transport::Device& device_;
  EndpointConfig config_;
  EndpointCounters counters_;
  std::unordered_map<uint32_t, QpSlot> slots_;
  std::deque<QpSlot*> active_;   // round robin over QPs with work
  TimingWheel pacer_;            // QPs waiting for their CC rate
  TimingWheel timers_;           // QPs with a transport or CC timer
  uint64_t port_free_ns_ = 0;    // the link is busy until then
  std::vector<uint32_t> due_;
};

}  // namespace droce::endpoint
