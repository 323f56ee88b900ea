// INT-MD over UDP for HPCC hop records (layout in docs/INT.md).
#include "droce/wire/int.h"

#include <cstring>

#include "droce/wire/build.h"
#include "droce/wire/headers.h"

namespace droce::wire {

std::string_view to_string(IntError e) {
  switch (e) {
    case IntError::kOk: return "ok";
    case IntError::kNotIp: return "not_ip";
    case IntError::kNotUdp: return "not_udp";
    case IntError::kNotRoce: return "not_roce";
    case IntError::kNoInt: return "no_int";
    case IntError::kAlreadyInt: return "already_int";
    case IntError::kTruncated: return "truncated";
    case IntError::kBadHeader: return "bad_header";
    case IntError::kStackFull: return "stack_full";
    case IntError::kEcho: return "echo";
    case IntError::kNoRoom: return "no_room";
    case IntError::kTooManyHops: return "too_many_hops";
  }
  return "unknown";
}

namespace {

// INT-MD header word 0: Ver(4) D(1) E(1) M(1) reserved(12) HopML(5) RHC(8).
constexpr uint32_t kMdEBit = 1u << 26;

void write_hop(uint8_t* p, const IntHop& h) {
  store_be32(p, h.node_id);
  store_be16(p + 4, h.ingress_port);
  store_be16(p + 6, h.egress_port);
  store_be64(p + 8, h.timestamp_ns);
  store_be64(p + 16, h.tx_bytes);
  store_be32(p + 24, h.qlen_bytes);
  store_be32(p + 28, h.rate_mbps);
}

IntHop read_hop(const uint8_t* p) {
  IntHop h;
  h.node_id = load_be32(p);
  h.ingress_port = load_be16(p + 4);
  h.egress_port = load_be16(p + 6);
  h.timestamp_ns = load_be64(p + 8);
  h.tx_bytes = load_be64(p + 16);
  h.qlen_bytes = load_be32(p + 24);
  h.rate_mbps = load_be32(p + 28);
  return h;
}

// Grows (delta > 0) or shrinks the IP and UDP length fields by `delta`
// bytes; the IPv4 header checksum is recomputed (the ICRC masks it anyway,
// but receivers verify it).
void adjust_lengths(uint8_t* f, const IntLocation& loc, int delta) {
  uint8_t* l3 = f + loc.l3_offset;
  if (loc.ipv6) {
    store_be16(l3 + 4, static_cast<uint16_t>(load_be16(l3 + 4) + delta));
  } else {
    store_be16(l3 + 2, static_cast<uint16_t>(load_be16(l3 + 2) + delta));
    const size_t ihl = size_t{static_cast<uint8_t>(l3[0] & 0x0F)} * 4;
    store_be16(l3 + 10, 0);
    store_be16(l3 + 10, ipv4_checksum(l3, ihl));
  }
  uint8_t* udp = f + loc.l4_offset;
  store_be16(udp + 4, static_cast<uint16_t>(load_be16(udp + 4) + delta));
}

// Where a frame's unheld payload (icrc.h) lies, [first, last), if it lies
// after `after` (the INT header's end); else the empty (after, after).
struct Span {
  size_t first, last;
};
Span unheld_span(size_t frame_len, size_t after, UnheldPayload unheld) {
  const auto [first, last] = unheld_range(frame_len, unheld);
  if (first == last || first < after) return {after, after};
  return {first, last};
}

// Opens a gap of `n` bytes at `at`, moving the rest of the frame (Ethernet
// padding included) towards the end: all but the unheld payload, whose
// bytes are unspecified wherever they are.
bool open_gap(std::span<uint8_t> buf, size_t& frame_len, size_t at, size_t n,
              UnheldPayload unheld) {
  if (buf.size() < frame_len + n) return false;
  uint8_t* f = buf.data();
  const Span u = unheld_span(frame_len, at, unheld);
  std::memmove(f + u.last + n, f + u.last, frame_len - u.last);  // the end first
  std::memmove(f + at + n, f + at, u.first - at);
  frame_len += n;
  return true;
}

// Writes shim + MD header for an empty stack at `p`.
void write_header(uint8_t* p, uint16_t original_port, uint8_t max_hops,
                  uint16_t ds_flags) {
  p[0] = static_cast<uint8_t>(kIntShimTypeMd << 4 | kIntNptUdpPort << 2);
  p[1] = static_cast<uint8_t>(kIntHeaderSize / 4);
  store_be16(p + 2, original_port);
  uint8_t* md = p + kIntShimSize;
  store_be32(md, uint32_t{kIntVersion} << 28 | uint32_t{kIntHopWords} << 8 | max_hops);
  store_be16(md + 4, 0);  // standard instruction bitmap: none, see DS fields
  store_be16(md + 6, kIntDomainId);
  store_be16(md + 8, kIntDsInstructionHpcc);
  store_be16(md + 10, ds_flags);
}

}  // namespace

IntError int_locate(std::span<const uint8_t> frame, IntLocation& out, size_t elided) {
  out = IntLocation{};
  const uint8_t* f = frame.data();
  const size_t len = frame.size();
  if (len < kEthSize) return IntError::kTruncated;
  uint16_t type = load_be16(f + 12);
  size_t l3 = kEthSize;
  if (type == kEtherTypeVlan) {
    if (len < kEthSize + kVlanTagSize) return IntError::kTruncated;
    type = load_be16(f + 16);
    l3 += kVlanTagSize;
  }
  out.l3_offset = static_cast<uint16_t>(l3);
  size_t l4 = 0, l3_end = 0;
  if (type == kEtherTypeIpv4) {
    if (len < l3 + kIpv4Size) return IntError::kTruncated;
    const size_t ihl = size_t{static_cast<uint8_t>(f[l3] & 0x0F)} * 4;
    if ((f[l3] >> 4) != 4 || ihl < kIpv4Size) return IntError::kBadHeader;
    if (f[l3 + 9] != kIpProtoUdp) return IntError::kNotUdp;
    l4 = l3 + ihl;
    l3_end = l3 + load_be16(f + l3 + 2);
  } else if (type == kEtherTypeIpv6) {
    if (len < l3 + kIpv6Size) return IntError::kTruncated;
    if (f[l3 + 6] != kIpProtoUdp) return IntError::kNotUdp;
    out.ipv6 = true;
    l4 = l3 + kIpv6Size;
    l3_end = l4 + load_be16(f + l3 + 4);
  } else {
    return IntError::kNotIp;
  }
  // An elided frame's headers count bytes its buffer leaves out; what is
  // read here must still be in the buffer.
  if (l3_end > len + elided || l3_end < l4 + kUdpSize || l4 + kUdpSize > len)
    return IntError::kTruncated;
  out.l4_offset = static_cast<uint16_t>(l4);
  out.l3_end = static_cast<uint32_t>(l3_end);
  const uint16_t dport = load_be16(f + l4 + 2);
  if (dport == kRoceV2Port) return IntError::kOk;
  if (dport != kIntUdpPort) return IntError::kNotRoce;

  const size_t shim = l4 + kUdpSize;
  if (l3_end < shim + kIntHeaderSize || len < shim + kIntHeaderSize) return IntError::kTruncated;
  const uint8_t* s = f + shim;
  const uint32_t md0 = load_be32(s + kIntShimSize);
  const uint32_t int_len = uint32_t{s[1]} * 4;
  if ((s[0] >> 4) != kIntShimTypeMd || ((s[0] >> 2) & 3) != kIntNptUdpPort ||
      (md0 >> 28) != kIntVersion || ((md0 >> 8) & 0x1F) != kIntHopWords ||
      load_be16(s + kIntShimSize + 6) != kIntDomainId || int_len < kIntHeaderSize ||
      (int_len - kIntHeaderSize) % kIntHopSize != 0)
    return IntError::kBadHeader;
  if (l3_end < shim + int_len || len < shim + int_len) return IntError::kTruncated;
  out.has_int = true;
  out.int_length = int_len;
  out.hop_count = static_cast<uint8_t>((int_len - kIntHeaderSize) / kIntHopSize);
  out.remaining_hops = static_cast<uint8_t>(md0 & 0xFF);
  out.exceeded = md0 & kMdEBit;
  out.echo = load_be16(s + kIntShimSize + 10) & kIntDsFlagEcho;
  out.original_dst_port = load_be16(s + 2);
  return IntError::kOk;
}

IntError int_push_hop(std::span<uint8_t> buf, size_t& frame_len, const IntHop& hop,
                      uint8_t max_hops, UnheldPayload unheld, size_t elided) {
  if (frame_len > buf.size()) return IntError::kTruncated;
  IntLocation loc;
  if (auto e = int_locate(buf.first(frame_len), loc, elided); e != IntError::kOk) return e;
  if (elided) unheld = {};  // not in the buffer: all of it moves
  uint8_t* f = buf.data();
  const size_t shim = loc.l4_offset + kUdpSize;
  if (!loc.has_int) {
    if (max_hops == 0 || max_hops > kIntMaxHops) return IntError::kBadHeader;
    const size_t n = kIntHeaderSize + kIntHopSize;
    if (size_t{loc.l3_end} - loc.l3_offset + n > 0xFFFF) return IntError::kNoRoom;
    if (!open_gap(buf, frame_len, shim, n, unheld)) return IntError::kNoRoom;
    write_header(f + shim, kRoceV2Port, max_hops, 0);
    store_be16(f + loc.l4_offset + 2, kIntUdpPort);
    f[shim + 1] = static_cast<uint8_t>(n / 4);
    store_be32(f + shim + kIntShimSize,
               load_be32(f + shim + kIntShimSize) - 1);  // one hop used
    write_hop(f + shim + kIntHeaderSize, hop);
    adjust_lengths(f, loc, static_cast<int>(n));
    return IntError::kOk;
  }
  if (loc.echo) return IntError::kEcho;
  uint8_t* md = f + shim + kIntShimSize;
  if (loc.remaining_hops == 0 || loc.hop_count >= kIntMaxHops) {
    store_be32(md, load_be32(md) | kMdEBit);
    return IntError::kStackFull;
  }
  if (size_t{loc.l3_end} - loc.l3_offset + kIntHopSize > 0xFFFF)
    return IntError::kNoRoom;
  if (!open_gap(buf, frame_len, shim + kIntHeaderSize, kIntHopSize, unheld))
    return IntError::kNoRoom;
  write_hop(f + shim + kIntHeaderSize, hop);
  f[shim + 1] = static_cast<uint8_t>(f[shim + 1] + kIntHopWords);
  store_be32(md, load_be32(md) - 1);
  adjust_lengths(f, loc, static_cast<int>(kIntHopSize));
  return IntError::kOk;
}

IntError int_read_hops(std::span<const uint8_t> frame, std::span<IntHop> out,
                       size_t& count) {
  count = 0;
  IntLocation loc;
  if (auto e = int_locate(frame, loc); e != IntError::kOk) return e;
  if (!loc.has_int) return IntError::kNoInt;
  if (loc.hop_count > out.size()) return IntError::kTooManyHops;
  // The stack is newest first; the caller gets the path order.
  const uint8_t* stack = frame.data() + loc.l4_offset + kUdpSize + kIntHeaderSize;
  for (size_t i = 0; i < loc.hop_count; ++i)
    out[loc.hop_count - 1 - i] = read_hop(stack + i * kIntHopSize);
  count = loc.hop_count;
  return IntError::kOk;
}

IntError int_strip(std::span<uint8_t> buf, size_t& frame_len, UnheldPayload unheld) {
  if (frame_len > buf.size()) return IntError::kTruncated;
  IntLocation loc;
  if (auto e = int_locate(buf.first(frame_len), loc); e != IntError::kOk) return e;
  if (!loc.has_int) return IntError::kNoInt;
  uint8_t* f = buf.data();
  const size_t shim = loc.l4_offset + kUdpSize;
  const size_t n = loc.int_length;
  store_be16(f + loc.l4_offset + 2, loc.original_dst_port);
  // The bytes after the INT header move back by n, but the unheld payload's.
  const Span u = unheld_span(frame_len, shim + n, unheld);
  std::memmove(f + shim, f + shim + n, u.first - shim - n);
  std::memmove(f + u.last - n, f + u.last, frame_len - u.last);
  frame_len -= n;
  adjust_lengths(f, loc, -static_cast<int>(n));
  return IntError::kOk;
}

IntError int_insert_echo(std::span<uint8_t> buf, size_t& frame_len,
                         std::span<const IntHop> hops) {
  if (frame_len > buf.size()) return IntError::kTruncated;
  if (hops.size() > kIntMaxHops) return IntError::kTooManyHops;
  IntLocation loc;
  if (auto e = int_locate(buf.first(frame_len), loc); e != IntError::kOk) return e;
  if (loc.has_int) return IntError::kAlreadyInt;
  const size_t n = kIntHeaderSize + hops.size() * kIntHopSize;
  if (size_t{loc.l3_end} - loc.l3_offset + n > 0xFFFF) return IntError::kNoRoom;
  const size_t shim = loc.l4_offset + kUdpSize;
  if (!open_gap(buf, frame_len, shim, n, {})) return IntError::kNoRoom;
  uint8_t* f = buf.data();
  write_header(f + shim, kRoceV2Port, 0, kIntDsFlagEcho);
  f[shim + 1] = static_cast<uint8_t>(n / 4);
  // Stored newest first, like the stack the switches built.
  for (size_t i = 0; i < hops.size(); ++i)
    write_hop(f + shim + kIntHeaderSize + i * kIntHopSize, hops[hops.size() - 1 - i]);
  store_be16(f + loc.l4_offset + 2, kIntUdpPort);
  adjust_lengths(f, loc, static_cast<int>(n));
  return IntError::kOk;
}

}  // namespace droce::wire
