// The congestion-control event interface (docs/DESIGN.md "Congestion control
// interface"). An algorithm sees events, never packets: the endpoint turns
// ACKs, CNPs, transmissions and timer expiries into calls here and reads back
// a pacing rate and, for window-based algorithms, a window.
//
// Rules every algorithm follows:
//  - `now_ns` is always a parameter (uint64_t nanoseconds); no clock reads,
//    no globals, no randomness, so the same event sequence gives the same
//    outputs in real time and in the simulator.
//  - Units: rates are BYTES per second (the names say so), windows and sizes
//    are bytes, times are nanoseconds. Parameters given by name (registry.h)
//    use the units practitioners know: microseconds, Mbit/s, bytes.
//  - Timers: an algorithm that needs to wake up reports its earliest deadline
//    through next_timer(); the caller calls on_timer(now) once now >= that
//    deadline. Algorithms also fire any overdue timers at the start of every
//    other event, so an event at time t always sees timers due at or before
//    t already run.
//  - Cost: one virtual call per ACK, CNP or timer. on_send may be called per
//    packet or with batched bytes; algorithms keep it to a few adds.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace droce::cc {

// Enough for a data-centre path (HPCC's INT header carries at most 5 hops in
// the paper's deployment, §4.1); fixed so an AckEvent never allocates.
inline constexpr std::size_t kMaxIntHops = 8;

// One in-band telemetry record, as stamped by a switch egress port
// (HPCC, Li et al. SIGCOMM 2019, §3.2 / Fig. 4: ts, txBytes, qLen, B).
struct IntHop {
  uint64_t ts_ns = 0;       // egress timestamp of the stamped packet
  uint64_t tx_bytes = 0;    // cumulative bytes sent by that egress port
  uint64_t qlen_bytes = 0;  // egress queue length when the packet left
  uint64_t link_rate_bytes_per_sec = 0;  // B, the port's line rate
  // The stamping switch and egress port (node id << 16 | port); 0 when
  // unknown. A QP whose packets take several paths (spraying, adaptive
  // routing) must compare a hop only with that link's earlier record.
  uint64_t link_id = 0;
};

// The per-hop records an ACK echoes back; n_hops == 0 means "no INT".
struct IntRecord {
  std::array<IntHop, kMaxIntHops> hops{};
  uint8_t n_hops = 0;

  std::span<const IntHop> view() const { return {hops.data(), n_hops}; }
  // Appends a hop; returns false (and drops it) when the record is full.
  bool push(const IntHop& hop) {
    if (n_hops >= kMaxIntHops) return false;
    hops[n_hops++] = hop;
    return true;
  }
};

struct AckEvent {
  uint64_t acked_bytes = 0;        // newly acknowledged payload bytes
  std::optional<uint64_t> rtt_ns;  // RTT sample, when the ACK carries one
  IntRecord int_hops;              // INT hops, when the ACK carries them
};

class Algorithm {
 public:
  explicit Algorithm(uint64_t line_rate_bytes_per_sec)
      : line_rate_bytes_per_sec_(line_rate_bytes_per_sec) {}
  virtual ~Algorithm() = default;
  Algorithm(const Algorithm&) = delete;
  Algorithm& operator=(const Algorithm&) = delete;

  virtual std::string_view name() const = 0;

  // Events. The defaults ignore the event, so an algorithm only overrides
  // what it reacts to.
  virtual void on_ack(uint64_t /*now_ns*/, const AckEvent& /*ack*/) {}
  virtual void on_cnp(uint64_t /*now_ns*/) {}
  virtual void on_send(uint64_t /*now_ns*/, uint64_t /*bytes*/) {}
  virtual void on_timer(uint64_t /*now_ns*/) {}
  // Earliest pending deadline (absolute ns), or nullopt when idle.
  virtual std::optional<uint64_t> next_timer() const { return std::nullopt; }

  // Outputs.
  virtual uint64_t rate_bytes_per_sec() const = 0;
  // Congestion window for window-based algorithms; nullopt = rate only.
  virtual std::optional<uint64_t> window_bytes() const { return std::nullopt; }

  // Notification-point setting the receiving side of a CNP-driven algorithm
  // needs (DCQCN NP: at most one CNP per flow per this interval). 0 for
  // algorithms that do not use CNPs; CNP generation lives in the transport.
  virtual uint64_t np_min_time_between_cnps_ns() const { return 0; }

  uint64_t line_rate_bytes_per_sec() const { return line_rate_bytes_per_sec_; }

 private:
  uint64_t line_rate_bytes_per_sec_;
};

// Unit helpers shared by algorithms and tools (parameters are in Mbit/s and
// microseconds, state is in bytes/s and nanoseconds).
constexpr double mbps_to_bytes_per_sec(double mbps) { return mbps * 1e6 / 8; }
constexpr double us_to_ns(double us) { return us * 1e3; }

}  // namespace droce::cc
