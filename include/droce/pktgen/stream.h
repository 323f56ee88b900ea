// Raw RoCEv2 streams: a packet template (any opcode, IPv4/IPv6, VLAN/PCP,
// DSCP/ECN) built once with wire::build_packet, then per packet n a few
// fields patched from their ranges (QPN, PSN, UDP source port, addresses),
// an optional latency probe written into the payload, and the checksums
// (IPv4 header, ICRC) recomputed. Plus rate specs ("10Mpps", "25Gbps",
// "50%") checked against the line rate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "droce/wire/build.h"
#include "droce/wire/packet.h"

namespace droce::pktgen {

// How a field changes from packet to packet. value(n) is a pure function of
// n, so packets can be filled in any order or by several cores.
struct FieldRange {
  enum class Mode : uint8_t {
    kKeep,       // the template's value
    kIncrement,  // start + (n * step) mod count
    kRandom,     // start + hash(seed, n) mod count
  };
  Mode mode = Mode::kKeep;
  uint64_t start = 0;
  uint64_t count = 1;  // values start .. start + count - 1 (>= 1)
  uint64_t step = 1;
  uint64_t seed = 1;

  static FieldRange keep() { return {}; }
  static FieldRange increment(uint64_t start, uint64_t count, uint64_t step = 1) {
    return {Mode::kIncrement, start, count, step, 1};
  }
  static FieldRange random(uint64_t start, uint64_t count, uint64_t seed) {
    return {Mode::kRandom, start, count, 1, seed};
  }
  uint64_t value(uint64_t n) const;
  // Largest value the range produces.
  uint64_t last() const { return start + count - 1; }
};

struct StreamSpec {
  wire::PathSpec path;
  wire::TransportSpec transport;  // opcode, QPN, PSN, RETH, ... of packet 0
  uint32_t payload_bytes = 0;
  uint8_t payload_fill = 0;
  // Field ranges. IP ranges set the address's last 32 bits (all of IPv4).
  FieldRange dest_qp;       // 24 bits
  FieldRange psn;           // 24 bits
  FieldRange udp_src_port;  // 16 bits
  FieldRange src_ip;        // 32 bits
  FieldRange dst_ip;        // 32 bits
  // Write a latency probe (seq = n) at the start of the payload; needs
  // payload_bytes >= kProbeSize.
  bool probe = false;
  uint32_t stream_id = 0;
};

// Empty when usable, else a message naming the field.
std::string check_stream(const StreamSpec& spec);

class PacketStream {
 public:
  // Throws std::invalid_argument with check_stream()'s message.
  explicit PacketStream(const StreamSpec& spec);

  // Length of every frame of the stream (no Ethernet padding, no FCS).
  size_t frame_size() const { return base_.size(); }
  const StreamSpec& spec() const { return spec_; }

  // Writes packet n into `out` and returns its length, 0 if `out` is too
  // small. tx_ns goes into the probe when the stream carries one.
  size_t fill(uint64_t n, std::span<uint8_t> out, uint64_t tx_ns = 0) const;

 private:
  StreamSpec spec_;
  std::vector<uint8_t> base_;
  wire::ParsedPacket parsed_;  // of base_: offsets for patching
};

// Opcode by its name in the wire opcode table ("RC_RDMA_WRITE_ONLY") or as
// a number ("0x0a", "10"); nullopt if unknown or unsupported.
std::optional<uint8_t> opcode_from_string(std::string_view name);

// ---- Rates ----------------------------------------------------------------

struct Rate {
  enum class Unit : uint8_t { kPps, kBitsPerSecond, kPercentOfLine };
  Unit unit = Unit::kPercentOfLine;
  double value = 100;
};

// "1000pps", "2.5Mpps", "100kpps", "25Gbps", "400Mbps", "1.5Tbps", "50%".
// bps rates are layer-1 rates, like the link speed (see wire_bytes).
std::optional<Rate> parse_rate(std::string_view text);

// Bytes a frame occupies on the wire: the frame plus FCS (4), padded to
// the 64-byte minimum, plus preamble/SFD (8) and inter-frame gap (12).
uint64_t wire_bytes(size_t frame_size);

// Packets per second the rate means for this frame size on this link.
double rate_pps(const Rate& rate, size_t frame_size, double line_rate_bps);

// Empty when the rate is positive and at most the line rate; otherwise a
// message with both rates in Gb/s.
std::string check_rate(const Rate& rate, size_t frame_size, double line_rate_bps);

}  // namespace droce::pktgen
