// One real port behind a switch port, as the switch runtime sees it: frames
// in, frames out, a link state and a MAC. The DPDK ethdev behind droce-switch
// is one (DpdkFramePort); unit tests use their own, so the runtime's
// forwarding, pacing, learning and link handling are tested without EAL.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "droce/wire/packet.h"

namespace droce::switch_runtime {

// What a port did with frames, counted by the port itself.
struct FramePortCounters {
  uint64_t rx_frames = 0, rx_bytes = 0, tx_frames = 0, tx_bytes = 0;
  uint64_t tx_dropped = 0;       // the device did not take them
  uint64_t tx_alloc_failed = 0;  // no buffer to put them in
  uint64_t tx_too_big = 0;       // longer than the device's buffers
};

class FramePort {
 public:
  virtual ~FramePort() = default;
  virtual const std::string& name() const = 0;
  virtual wire::MacAddress mac() const = 0;
  // Hands up to `max` received frames to `frame`, in arrival order; returns
  // how many. The bytes are valid only during the call.
  virtual size_t receive(size_t max, const std::function<void(std::span<const uint8_t>)>& frame) = 0;
  // Queues one frame for transmission at the next flush().
  virtual void send(std::span<const uint8_t> frame) = 0;
  // Transmits what send() queued; what the device does not take is counted
  // (tx_dropped), not kept: the model already accounted the frame as gone.
  virtual void flush() = 0;
  // The link: up, down, or nullopt when the device cannot tell.
  virtual std::optional<bool> link_up() = 0;
  virtual const FramePortCounters& counters() const = 0;
};

}  // namespace droce::switch_runtime
