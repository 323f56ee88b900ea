// The fast per-packet path of droce-pktgen's raw streams on DPDK ports.
//
// PacketStream::fill() copies the template, patches the ranged fields and
// recomputes the ICRC with one CRC pass over the frame. At line rate on one
// core that CRC pass is most of the cost. The ICRC is CRC-32, which is
// affine over GF(2): for frames of the same length,
//   icrc(base ^ delta) = icrc(base) ^ L(delta)
// with L linear. So the ICRC of packet n is the template's ICRC xored with
// one precomputed 32-bit table entry per byte of a changing field (PSN: 3
// bytes, a probe: 16 bytes of sequence number and timestamp). Each table is
// indexed by the byte's new value and already holds L(template byte ^ new
// byte), so no byte needs a compare or a branch. Tables are built by
// flipping single bits of the template and asking wire::refresh_checksums,
// so they follow whatever the ICRC covers and masks. The IPv4 header
// checksum (not covered by the ICRC) is recomputed over the 20-byte header
// when an address changes. The bytes written equal PacketStream::fill()'s
// exactly (tested).
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

  // True when the only changing field is one 24-bit field (PSN or
  // destination QPN) incrementing over a power-of-two count, the default
  // stream of droce-pktgen-dpdk: fill_burst() then runs a loop made for it
  // (copy, three bytes, three table lookups per packet).
  bool single_counter() const { return single_counter_; }

  // Writes packet n (frame_size() bytes) at `out`; same bytes as
  // PacketStream::fill(n, ..., tx_ns).
  void fill(uint64_t n, uint8_t* out, uint64_t tx_ns) const;

  // Writes packets n0, n0 + 1, ..., n0 + count - 1 at outs[0], ...,
  // outs[count - 1]: the same bytes as count fill() calls with this tx_ns.
  void fill_burst(uint64_t n0, uint8_t* const* outs, uint32_t count, uint64_t tx_ns) const;

 private:
  enum class Kind : uint8_t {
    kMasked,  // increment over a power-of-two count: start + ((n * step) & mask)
    kRange,   // anything else: FieldRange::value(n)
    kSeq,     // the probe's sequence number: n
    kTxNs,    // the probe's TX timestamp
  };
  struct Field {
    uint16_t offset = 0;  // of the first byte in the frame
    uint8_t bytes = 0;    // 2, 3, 4 or 8; big-endian
    Kind kind = Kind::kRange;
    uint32_t table = 0;  // index of its first byte's table in tables_
    uint64_t start = 0, step = 1, mask = 0;  // kMasked
    // kRange: a copy, not a pointer into stream_'s spec, which moves with
    // the filler (a pointer kept the moved-from spec's address).
    FieldRange range;
  };
  // At most: QPN, PSN, UDP source port, two addresses, probe seq and tx_ns.
  static constexpr size_t kMaxFields = 7;

  void add_field(uint16_t offset, uint8_t bytes, Kind kind, const FieldRange* range);
  uint64_t value(const Field& f, uint64_t n, uint64_t tx_ns) const;

  PacketStream stream_;
  std::vector<uint8_t> base_;
  std::array<Field, kMaxFields> fields_{};
  uint8_t num_fields_ = 0;
  // One table per byte of a changing field: entry v is the ICRC xor for that
  // byte being v instead of the template's byte.
  std::vector<std::array<uint32_t, 256>> tables_;
  uint32_t base_icrc_ = 0;  // the template's ICRC as stored (little-endian load)
  uint16_t icrc_offset_ = 0;
  int32_t ipv4_offset_ = -1;  // IPv4 header to re-checksum, -1: none
  bool single_counter_ = false;
};

}  // namespace droce::pktgen
