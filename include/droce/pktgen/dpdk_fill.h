// The fast per-packet path of droce-pktgen's raw streams on DPDK ports.
//
// PacketStream::fill() copies the template, patches the ranged fields and
// recomputes the ICRC with one CRC pass over the frame. At line rate on one
// core that CRC pass is most of the cost. The ICRC is CRC-32, which is
// affine over GF(2): for frames of the same length,
//   icrc(base ^ delta) = icrc(base) ^ L(delta)
// with L linear. So the ICRC of packet n is the template's ICRC xored with
// one precomputed 32-bit table entry per changed byte (PSN: 3 bytes, a probe:
// 16 bytes of sequence number and timestamp). Tables are built by flipping
// single bits of the template and asking wire::refresh_checksums, so they
// follow whatever the ICRC covers and masks. The IPv4 header checksum (not
// covered by the ICRC) is recomputed over the 20-byte header when an address
// changes. The bytes written equal PacketStream::fill()'s exactly (tested).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "droce/pktgen/stream.h"

namespace droce::pktgen {

class FastFiller {
 public:
  // Throws std::invalid_argument as PacketStream does.
  explicit FastFiller(const StreamSpec& spec);

  size_t frame_size() const { return base_.size(); }
  const StreamSpec& spec() const { return stream_.spec(); }
  const PacketStream& stream() const { return stream_; }

  // Writes packet n (frame_size() bytes) at `out`; same bytes as
  // PacketStream::fill(n, ..., tx_ns).
  void fill(uint64_t n, uint8_t* out, uint64_t tx_ns) const;

 private:
  struct Field {
    uint16_t offset = 0;  // of the first byte in the frame
    uint8_t bytes = 0;    // 2, 3, 4 or 8; big-endian
    const FieldRange* range = nullptr;  // null: the probe's seq or tx_ns
    uint32_t table = 0;                 // index of its first byte's table
    uint64_t old = 0;                   // value in the template (packet 0)
    uint64_t mask = 0;                  // increment by 1 over 2^k values: start + (n & mask)
  };
  void add_field(uint16_t offset, uint8_t bytes, const FieldRange* range);
  uint32_t icrc_delta(const Field& f, uint64_t old_value, uint64_t new_value) const;

  PacketStream stream_;
  std::vector<uint8_t> base_;
  std::vector<Field> fields_;
  // One 256-entry table per changing byte: the ICRC xor for that byte xored
  // with v.
  std::vector<std::array<uint32_t, 256>> tables_;
  uint16_t icrc_offset_ = 0;
  int32_t ipv4_offset_ = -1;  // IPv4 header to re-checksum, -1: none
  int32_t probe_seq_ = -1, probe_ts_ = -1;  // indexes into fields_
};

}  // namespace droce::pktgen
