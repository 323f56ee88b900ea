#include "droce/pktgen/dpdk_fill.h"

#include <cstring>
#include <stdexcept>

#include "droce/pktgen/probe.h"
#include "droce/wire/build.h"
#include "droce/wire/bytes.h"
#include "droce/wire/packet.h"

namespace droce::pktgen {
namespace {

uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
void store_le32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}

// The template copy with fixed-size moves: a frame of 32..64 bytes (every
// header-only RoCEv2 frame, 58 bytes and up) is two overlapping 32-byte
// copies, 65..128 two overlapping 64-byte ones; no length-dispatching
// memcpy call per packet.
inline void copy_frame(uint8_t* out, const uint8_t* in, size_t len) {
  if (len >= 32 && len <= 64) {
    std::memcpy(out, in, 32);
    std::memcpy(out + len - 32, in + len - 32, 32);
  } else if (len > 64 && len <= 128) {
    std::memcpy(out, in, 64);
    std::memcpy(out + len - 64, in + len - 64, 64);
  } else {
    std::memcpy(out, in, len);
  }
}

// Stores the low `bytes` bytes of v big-endian at p and returns the ICRC
// xor of the change: one table lookup per byte (tables of consecutive bytes
// are consecutive).
inline uint32_t store_field(uint8_t* p, uint8_t bytes, uint64_t v,
                            const std::array<uint32_t, 256>* t) {
  uint32_t d = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    const uint8_t b = static_cast<uint8_t>(v);
    p[i] = b;
    d ^= t[i][b];
    v >>= 8;
  }
  return d;
}

}  // namespace

FastFiller::FastFiller(const StreamSpec& spec) : stream_(spec) {
  base_.resize(stream_.frame_size());
  stream_.fill(0, base_, 0);
  wire::ParsedPacket parsed;
  if (wire::parse(base_, parsed) != wire::ParseError::kOk)
    throw std::logic_error("stream template does not parse");
  icrc_offset_ = static_cast<uint16_t>(parsed.frame_length - 4);
  base_icrc_ = load_le32(base_.data() + icrc_offset_);
  const StreamSpec& s = stream_.spec();
  using M = FieldRange::Mode;
  auto add_range = [&](size_t offset, uint8_t bytes, const FieldRange& r) {
    if (r.mode == M::kKeep) return;
    const bool pow2 = r.mode == M::kIncrement && (r.count & (r.count - 1)) == 0;
    add_field(static_cast<uint16_t>(offset), bytes, pow2 ? Kind::kMasked : Kind::kRange, &r);
  };
  const auto bth = parsed.bth_offset;
  add_range(bth + 5, 3, s.dest_qp);
  add_range(bth + 9, 3, s.psn);
  add_range(parsed.l4_offset, 2, s.udp_src_port);
  const size_t src_off = parsed.ipv6() ? 8 + 12 : 12;
  const size_t dst_off = parsed.ipv6() ? 24 + 12 : 16;
  add_range(parsed.l3_offset + src_off, 4, s.src_ip);
  add_range(parsed.l3_offset + dst_off, 4, s.dst_ip);
  if (!parsed.ipv6() && (s.src_ip.mode != M::kKeep || s.dst_ip.mode != M::kKeep))
    ipv4_offset_ = parsed.l3_offset;
  if (s.probe) {
    add_field(static_cast<uint16_t>(parsed.payload_offset + 8), 8, Kind::kSeq, nullptr);
    add_field(static_cast<uint16_t>(parsed.payload_offset + 16), 8, Kind::kTxNs, nullptr);
  }
  single_counter_ = num_fields_ == 1 && fields_[0].kind == Kind::kMasked &&
                    fields_[0].bytes == 3 && ipv4_offset_ < 0;
  // Bit tables: flip one bit of the template, let the wire layer recompute
  // the ICRC, keep the xor. Then entry v of a byte's table = the xor for the
  // byte changing from the template's value to v.
  std::vector<uint8_t> tmp(base_);
  for (size_t fi = 0; fi < num_fields_; ++fi) {
    const Field& f = fields_[fi];
    for (uint8_t i = 0; i < f.bytes; ++i) {
      const size_t pos = f.offset + i;
      uint32_t bit[8];
      for (int k = 0; k < 8; ++k) {
        tmp = base_;
        tmp[pos] ^= static_cast<uint8_t>(1u << k);
        wire::refresh_checksums(tmp, parsed);
        bit[k] = load_le32(tmp.data() + icrc_offset_) ^ base_icrc_;
      }
      auto& t = tables_[f.table + i];
      for (unsigned v = 0; v < 256; ++v) {
        const unsigned x = v ^ base_[pos];
        uint32_t d = 0;
        for (int k = 0; k < 8; ++k)
          if (x & (1u << k)) d ^= bit[k];
        t[v] = d;
      }
    }
  }
}

void FastFiller::add_field(uint16_t offset, uint8_t bytes, Kind kind, const FieldRange* range) {
  if (num_fields_ == kMaxFields) throw std::logic_error("FastFiller: too many fields");
  Field f;
  f.offset = offset;
  f.bytes = bytes;
  f.kind = kind;
  if (range) f.range = *range;
  if (kind == Kind::kMasked) {
    f.start = range->start;
    f.step = range->step;
    f.mask = range->count - 1;
  }
  f.table = static_cast<uint32_t>(tables_.size());
  tables_.resize(tables_.size() + bytes);
  fields_[num_fields_++] = f;
}

inline uint64_t FastFiller::value(const Field& f, uint64_t n, uint64_t tx_ns) const {
  switch (f.kind) {
    case Kind::kMasked:
      // (n * step) mod 2^k: the 64-bit product wraps modulo 2^64, a multiple
      // of 2^k, so the mask gives FieldRange::value's 128-bit modulo.
      return f.start + ((n * f.step) & f.mask);
    case Kind::kRange:
      return f.range.value(n);
    case Kind::kSeq:
      return n;
    case Kind::kTxNs:
      return tx_ns;
  }
  return 0;
}

void FastFiller::fill(uint64_t n, uint8_t* out, uint64_t tx_ns) const {
  copy_frame(out, base_.data(), base_.size());
  uint32_t icrc = base_icrc_;
  for (size_t i = 0; i < num_fields_; ++i) {
    const Field& f = fields_[i];
    icrc ^= store_field(out + f.offset, f.bytes, value(f, n, tx_ns), &tables_[f.table]);
  }
  store_le32(out + icrc_offset_, icrc);
  if (ipv4_offset_ >= 0) {
    uint8_t* ip = out + ipv4_offset_;
    wire::store_be16(ip + 10, 0);
    wire::store_be16(ip + 10, wire::ipv4_checksum(ip, 20));
  }
}

void FastFiller::fill_burst(uint64_t n0, uint8_t* const* outs, uint32_t count,
                            uint64_t tx_ns) const {
  if (!single_counter_) {
    for (uint32_t i = 0; i < count; ++i) fill(n0 + i, outs[i], tx_ns);
    return;
  }
  const uint8_t* base = base_.data();
  const size_t len = base_.size();
  const Field& f = fields_[0];
  const uint32_t* t0 = tables_[f.table].data();
  const uint32_t* t1 = tables_[f.table + 1].data();
  const uint32_t* t2 = tables_[f.table + 2].data();
  const uint16_t off = f.offset, icrc_off = icrc_offset_;
  const uint32_t icrc = base_icrc_;
  for (uint32_t i = 0; i < count; ++i) {
    uint8_t* out = outs[i];
    copy_frame(out, base, len);
    const uint64_t v = f.start + (((n0 + i) * f.step) & f.mask);
    const uint8_t b0 = static_cast<uint8_t>(v >> 16), b1 = static_cast<uint8_t>(v >> 8),
                  b2 = static_cast<uint8_t>(v);
    out[off] = b0;
    out[off + 1] = b1;
    out[off + 2] = b2;
    store_le32(out + icrc_off, icrc ^ t0[b0] ^ t1[b1] ^ t2[b2]);
  }
}

}  // namespace droce::pktgen
