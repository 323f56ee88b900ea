// The switch runtime behind droce-switch: the fabric switch model
// (src/fabric, docs/FABRIC.md) between real ports in real time.
//
// One run-to-completion loop: read the clock once, receive a burst on every
// port and hand each frame to Switch::receive(port, frame, now),
// Switch::advance(now) starts the departures the model schedules, and each
// departure is transmitted for real once its last bit would have left the
// modelled port (Departure::time): the model's serialisation at the
// configured rate is what paces the real TX. PFC frames the model generates
// go out as frames; received ones are handed to the model like any frame
// (it honours them). A switch port may front several real ports (an L2
// segment): it learns where each source MAC lives and floods what it does
// not know. DPDK-free: the ports are FramePorts.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

#include "droce/fabric/switch.h"
#include "droce/switch_runtime/frame_port.h"
#include "droce/switch_runtime/settings.h"
#include "droce/telemetry/pcap_writer.h"

namespace droce::switch_runtime {

// How often links are read (as the engine reads its ports').
constexpr uint64_t kLinkPollNs = 10'000'000;

class Runtime {
 public:
  // `ports[p]` are the real ports behind switch port p, in the order of
  // Settings::ports[p].members. Throws ConfigError when the model refuses
  // the configuration or the capture file cannot be written.
  Runtime(Settings s, std::vector<std::vector<std::unique_ptr<FramePort>>> ports,
          std::FILE* out = stdout);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Starts the run at `now` (the caller's monotonic clock, ns) and prints
  // the ports; `wall_ns` is the wall clock at `now`, for capture times.
  void start(uint64_t now, uint64_t wall_ns);
  // One iteration at `now`: links (every kLinkPollNs), receive, the model,
  // transmit what is due. Returns the frames received.
  size_t step(uint64_t now);
  // When something is next due: a model event or a departure held for its time.
  uint64_t next_due() const;
  // One line per port: rates, queue, marks, drops, PFC since the last line.
  void live_stats(uint64_t now, double interval_s);
  // The final counters, printed and returned (and written to Settings::json).
  nlohmann::json finish(uint64_t now);
  // step() until `stop` or Settings::duration, with live stats every
  // Settings::stats_interval; when nothing arrived, sleeps until the next
  // due time, at most Settings::idle_sleep_us. Then finish().
  void run(const std::atomic<bool>& stop, uint64_t (*clock_ns)());

  const fabric::Switch& model() const { return *sw_; }
  uint64_t flooded(uint16_t port) const { return ports_[port].flooded; }
  bool link_up(uint16_t port) const { return ports_[port].link_up; }

 private:
  struct SwitchPort {
    std::vector<size_t> members;                     // indexes into members_
    std::unordered_map<uint64_t, size_t> mac_table;  // learned src MAC -> member
    std::deque<fabric::Departure> held;              // started, not yet due
    uint64_t rate_bps = 0;
    uint64_t interval_qmax = 0;  // live-stats interval state
    fabric::PortCounters last{};
    uint64_t flooded = 0;
    // Up while any member's link is. The model port follows only once the
    // link has been seen up: a memif port reads down until its peer
    // connects, and that was never a failure.
    bool link_seen_up = false;
    bool link_up = true;
    uint64_t link_downs = 0;
  };

  size_t receive_all(uint64_t now);  // returns the frames received
  void transmit_due(uint64_t now);
  void poll_links(uint64_t now);
  std::string member_names(const SwitchPort& p) const;
  fabric::FrameBytes take_buffer();
  void recycle(fabric::FrameBytes&& b);

  Settings s_;
  std::FILE* out_;
  std::vector<std::unique_ptr<FramePort>> members_;
  std::vector<uint16_t> member_port_;  // member -> switch port
  std::vector<SwitchPort> ports_;
  std::unique_ptr<fabric::Switch> sw_;
  std::vector<fabric::FrameBytes> spare_;
  std::unique_ptr<telemetry::PcapWriter> capture_;
  // Real TX lateness behind the model's departure time (scheduling jitter).
  uint64_t lag_max_ns_ = 0, lag_sum_ns_ = 0, lag_count_ = 0;
  uint64_t start_ns_ = 0;
  uint64_t next_link_poll_ = 0;
  int64_t wall_offset_ns_ = 0;  // wall clock - now, for capture times
};

}  // namespace droce::switch_runtime
