#include "droce/telemetry/pcap_writer.h"

#include <pcap/pcap.h>

#include <algorithm>
#include <ctime>
#include <stdexcept>

namespace droce::telemetry {

namespace {
// Longer frames are cut to this in the file (caplen), their length kept
// (len): jumbo frames and INT stacks fit.
constexpr int kSnapLen = 65535;
}  // namespace

PcapWriter::PcapWriter(const std::string& path) {
  dead_ = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, kSnapLen, PCAP_TSTAMP_PRECISION_NANO);
  if (!dead_) throw std::runtime_error("cannot open a capture handle for '" + path + "'");
  dumper_ = pcap_dump_open(dead_, path.c_str());
  if (!dumper_) {
    const std::string err = pcap_geterr(dead_);
    pcap_close(dead_);
    dead_ = nullptr;
    throw std::runtime_error("cannot write '" + path + "': " + err);
  }
}

PcapWriter::~PcapWriter() { close(); }

void PcapWriter::write(std::span<const uint8_t> frame, uint64_t wall_ns) {
  pcap_pkthdr h{};
  h.ts.tv_sec = static_cast<time_t>(wall_ns / 1'000'000'000);
  // In a nanosecond file the field holds nanoseconds.
  h.ts.tv_usec = static_cast<suseconds_t>(wall_ns % 1'000'000'000);
  h.len = static_cast<bpf_u_int32>(frame.size());
  h.caplen = static_cast<bpf_u_int32>(std::min<size_t>(frame.size(), kSnapLen));
  pcap_dump(reinterpret_cast<u_char*>(dumper_), &h, frame.data());
  ++frames_;
}

void PcapWriter::close() {
  if (dumper_) {
    pcap_dump_close(dumper_);
    dumper_ = nullptr;
  }
  if (dead_) {
    pcap_close(dead_);
    dead_ = nullptr;
  }
}

uint64_t PcapWriter::wall_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace droce::telemetry
