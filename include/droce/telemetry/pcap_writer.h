// A capture file of Ethernet frames: libpcap's format with nanosecond
// timestamps (magic 0xa1b23c4d), which tshark, scapy and libpcap readers
// take as they take the microsecond one. One writer for every program
// that captures (the engine's ports, droce-switch), so their files look
// alike and a frame's time is as precise as the clock that stamped it.
#pragma once

#include <cstdint>
#include <span>
#include <string>

struct pcap;
struct pcap_dumper;

namespace droce::telemetry {

class PcapWriter {
 public:
  // Creates (truncates) `path`. Throws std::runtime_error naming the path
  // and the reason when it cannot.
  explicit PcapWriter(const std::string& path);
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // One frame, stamped `wall_ns` (nanoseconds since the Unix epoch).
  void write(std::span<const uint8_t> frame, uint64_t wall_ns);
  // Flushes and closes the file; write() must not be called after.
  void close();

  uint64_t frames() const { return frames_; }
  // Wall-clock nanoseconds now (CLOCK_REALTIME), for callers without a clock
  // of their own.
  static uint64_t wall_now_ns();

 private:
  struct pcap* dead_ = nullptr;
  struct pcap_dumper* dumper_ = nullptr;
  uint64_t frames_ = 0;
};

}  // namespace droce::telemetry
