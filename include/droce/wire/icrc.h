// RoCEv2 invariant CRC (IBA annex A17.4.1, IBA 7.8.1): CRC-32 over 8 bytes of
// 0xFF (standing in for the LRH), then the IP header, UDP header, BTH and
// everything after it up to the ICRC, with the fields that routers may change
// replaced by ones: IPv4 TOS, TTL and header checksum; IPv6 traffic class,
// flow label and hop limit; the UDP checksum; the BTH byte holding FECN, BECN
// and the reserved bits. Stored in the 4 bytes before the Ethernet FCS, least
// significant byte first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace droce::wire {

// `l3` points at the IPv4 or IPv6 header; `len_before_icrc` counts bytes from
// there up to (not including) the ICRC. The IP header's length fields must be
// final: they are part of the CRC. Returns the CRC value (not yet byte-swapped
// for storage; use store_le32 to write it).
uint32_t icrc_compute(const uint8_t* l3, size_t len_before_icrc, bool ipv6);

// One received datagram's ICRC check: icrc_compute's arguments and the ICRC
// the frame carries (decoded from its little-endian bytes).
struct IcrcCheck {
  const uint8_t* l3 = nullptr;
  uint32_t len_before_icrc = 0;
  bool ipv6 = false;
  uint32_t carried = 0;
  // Payload the buffer does not hold: `zeros` bytes from l3 + zeros_at are
  // taken as zeros, whatever the buffer holds there (UnheldPayload below).
  // A region that does not lie between the BTH and the ICRC is ignored:
  // the bytes there are read as they are.
  uint16_t zeros_at = 0;
  uint16_t zeros = 0;
};
static_assert(sizeof(void*) != 8 || sizeof(IcrcCheck) == 24, "a burst's checks stay small");

// Payload a simulated frame carries as a length only (the simulator's
// virtual payload, docs/SIM.md): `len` bytes that end `gap` bytes before
// the ICRC are zeros to the ICRC, whatever the frame's buffer holds there,
// so neither the sender nor the receiver reads them. Measured from the
// ICRC because a switch may insert headers before the BTH (INT) and a
// frame may be padded after it. Frames from a real wire never have one.
struct UnheldPayload {
  uint16_t len = 0;
  uint16_t gap = 0;
  bool empty() const { return len == 0; }
  friend bool operator==(const UnheldPayload&, const UnheldPayload&) = default;
};

// Where a frame of `frame_len` bytes whose ICRC ends it (no Ethernet
// padding: a frame with payload needs none) holds `unheld`: bytes
// [first, second); (0, 0) when there is none or it would not fit.
inline std::pair<size_t, size_t> unheld_range(size_t frame_len, UnheldPayload unheld) {
  constexpr size_t kIcrcBytes = 4;
  if (unheld.empty() || frame_len < kIcrcBytes + unheld.gap + unheld.len) return {0, 0};
  const size_t end = frame_len - kIcrcBytes - unheld.gap;
  return {end - unheld.len, end};
}

// `check` with `unheld` applied (zeros_at and zeros set), for the datagram
// check.l3 points at.
inline IcrcCheck with_unheld(IcrcCheck check, UnheldPayload unheld) {
  if (unheld.empty() || size_t{unheld.len} + unheld.gap > check.len_before_icrc) return check;
  check.zeros_at = static_cast<uint16_t>(check.len_before_icrc - unheld.gap - unheld.len);
  check.zeros = unheld.len;
  return check;
}
// The UnheldPayload of a check's zeros (empty without).
inline UnheldPayload unheld_of(const IcrcCheck& check) {
  if (check.zeros == 0) return {};
  return {check.zeros,
          static_cast<uint16_t>(check.len_before_icrc - check.zeros_at - check.zeros)};
}
// icrc_compute for one check, its zeros included.
uint32_t icrc_of(const IcrcCheck& check);
// The checks of a receive burst at once: ok[i] is whether checks[i]'s ICRC
// is right. Same results as icrc_compute one by one, but with AVX-512 the
// checks are read and answered in one loop with no call per frame, and
// short datagrams (64..127 bytes: a 64-byte WRITE's is 116) go four to a
// register, sharing the final reduction.
void icrc_check_many(const IcrcCheck* checks, bool* ok, size_t n);
// The ICRCs of a send burst at once, for the same reasons: icrc[i] is
// icrc_compute of checks[i] (whose `carried` is not read).
void icrc_compute_many(const IcrcCheck* checks, uint32_t* icrc, size_t n);

}  // namespace droce::wire
