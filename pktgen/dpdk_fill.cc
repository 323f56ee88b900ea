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
void store_be(uint8_t* p, uint8_t bytes, uint64_t v) {
  for (int i = bytes - 1; i >= 0; --i) {
    p[i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}

}  // namespace

FastFiller::FastFiller(const StreamSpec& spec) : stream_(spec) {
  base_.resize(stream_.frame_size());
  stream_.fill(0, base_, 0);
  wire::ParsedPacket parsed;
  if (wire::parse(base_, parsed) != wire::ParseError::kOk)
    throw std::logic_error("stream template does not parse");
  icrc_offset_ = static_cast<uint16_t>(parsed.frame_length - 4);
  const StreamSpec& s = stream_.spec();
  using M = FieldRange::Mode;
  const auto bth = parsed.bth_offset;
  if (s.dest_qp.mode != M::kKeep) add_field(static_cast<uint16_t>(bth + 5), 3, &s.dest_qp);
  if (s.psn.mode != M::kKeep) add_field(static_cast<uint16_t>(bth + 9), 3, &s.psn);
  if (s.udp_src_port.mode != M::kKeep) add_field(parsed.l4_offset, 2, &s.udp_src_port);
  const size_t src_off = parsed.ipv6() ? 8 + 12 : 12;
  const size_t dst_off = parsed.ipv6() ? 24 + 12 : 16;
  if (s.src_ip.mode != M::kKeep)
    add_field(static_cast<uint16_t>(parsed.l3_offset + src_off), 4, &s.src_ip);
  if (s.dst_ip.mode != M::kKeep)
    add_field(static_cast<uint16_t>(parsed.l3_offset + dst_off), 4, &s.dst_ip);
  if (!parsed.ipv6() && (s.src_ip.mode != M::kKeep || s.dst_ip.mode != M::kKeep))
    ipv4_offset_ = parsed.l3_offset;
  if (s.probe) {
    probe_seq_ = static_cast<int32_t>(fields_.size());
    add_field(static_cast<uint16_t>(parsed.payload_offset + 8), 8, nullptr);
    probe_ts_ = static_cast<int32_t>(fields_.size());
    add_field(static_cast<uint16_t>(parsed.payload_offset + 16), 8, nullptr);
  }
  // Bit tables: flip one bit of the template, let the wire layer recompute
  // the ICRC, keep the xor.
  const uint32_t base_icrc = load_le32(base_.data() + icrc_offset_);
  std::vector<uint8_t> tmp(base_);
  for (const Field& f : fields_) {
    for (uint8_t i = 0; i < f.bytes; ++i) {
      const size_t pos = f.offset + i;
      uint32_t bit[8];
      for (int k = 0; k < 8; ++k) {
        tmp = base_;
        tmp[pos] ^= static_cast<uint8_t>(1u << k);
        wire::refresh_checksums(tmp, parsed);
        bit[k] = load_le32(tmp.data() + icrc_offset_) ^ base_icrc;
      }
      auto& t = tables_[f.table + i];
      for (unsigned v = 0; v < 256; ++v) {
        uint32_t x = 0;
        for (int k = 0; k < 8; ++k)
          if (v & (1u << k)) x ^= bit[k];
        t[v] = x;
      }
    }
  }
}

void FastFiller::add_field(uint16_t offset, uint8_t bytes, const FieldRange* range) {
  Field f;
  f.offset = offset;
  f.bytes = bytes;
  f.range = range;
  if (range) {
    f.old = range->value(0);
    if (range->mode == FieldRange::Mode::kIncrement && range->step == 1 &&
        (range->count & (range->count - 1)) == 0)
      f.mask = range->count - 1;
  }
  f.table = static_cast<uint32_t>(tables_.size());
  tables_.resize(tables_.size() + bytes);
  fields_.push_back(f);
}

inline uint32_t FastFiller::icrc_delta(const Field& f, uint64_t old_value,
                                       uint64_t new_value) const {
  uint64_t x = old_value ^ new_value;
  uint32_t d = 0;
  for (int i = f.bytes - 1; i >= 0 && x != 0; --i, x >>= 8)
    d ^= tables_[f.table + static_cast<uint32_t>(i)][x & 0xFF];
  return d;
}

void FastFiller::fill(uint64_t n, uint8_t* out, uint64_t tx_ns) const {
  std::memcpy(out, base_.data(), base_.size());
  uint32_t d = 0;
  for (size_t i = 0; i < fields_.size(); ++i) {
    const Field& f = fields_[i];
    uint64_t v;
    const uint64_t old = f.old;
    if (f.mask) {
      v = f.range->start + (n & f.mask);
    } else if (f.range) {
      v = f.range->value(n);
    } else {
      v = static_cast<int32_t>(i) == probe_seq_ ? n : tx_ns;
    }
    if (v == old) continue;
    store_be(out + f.offset, f.bytes, v);
    d ^= icrc_delta(f, old, v);
  }
  if (d != 0) store_le32(out + icrc_offset_, load_le32(out + icrc_offset_) ^ d);
  if (ipv4_offset_ >= 0) {
    uint8_t* ip = out + ipv4_offset_;
    wire::store_be16(ip + 10, 0);
    wire::store_be16(ip + 10, wire::ipv4_checksum(ip, 20));
  }
}

}  // namespace droce::pktgen
