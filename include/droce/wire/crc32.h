// CRC-32 with the Ethernet polynomial 0x04C11DB7, reflected (the CRC that
// zlib's crc32() and IEEE 802.3 compute). RoCEv2's ICRC is this CRC over a
// masked copy of the packet (icrc.h).
//
// Implementations, fastest first, chosen once from the CPU flags:
//  - VPCLMULQDQ + AVX-512: four 512-bit lanes folded with carry-less multiply;
//  - PCLMULQDQ + SSE4.1: four 128-bit lanes folded with carry-less multiply;
//  - slice-by-8 table lookup (portable);
//  - bit-at-a-time reference, only for tests.
// All take and return the *running* CRC state (pre-/post-inverted outside),
// so calls chain: crc32_finish(crc32_update(crc32_update(kCrc32Init, a), b)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace droce::wire {

constexpr uint32_t kCrc32Init = 0xFFFFFFFFu;
constexpr uint32_t crc32_finish(uint32_t state) { return ~state; }

enum class Crc32Impl { kBitwise, kSliceBy8, kPclmul, kVpclmulAvx512 };
std::string_view to_string(Crc32Impl impl);

// The fastest implementation this CPU supports.
Crc32Impl crc32_best_impl();
bool crc32_impl_supported(Crc32Impl impl);

// Update the running state with `len` bytes, using the fastest implementation.
uint32_t crc32_update(uint32_t state, const uint8_t* data, size_t len);
// Same, with an explicit implementation (tests and benchmarks). The caller
// must check crc32_impl_supported() first.
uint32_t crc32_update_with(Crc32Impl impl, uint32_t state, const uint8_t* data,
                           size_t len);

// crc32_update over `len` bytes whose first 64 (all of them, when fewer)
// are taken OR-ed with `or_mask` (64 bytes; those past `len` do not
// matter), as if they had been copied and masked first.
// The ICRC sets variant header fields to ones this way, without a copy (a
// copy followed by a wide load stalls on store forwarding).
uint32_t crc32_update_or_first64(uint32_t state, const uint8_t* data, size_t len,
                                 const uint8_t* or_mask);
uint32_t crc32_update_or_first64_with(Crc32Impl impl, uint32_t state, const uint8_t* data,
                                      size_t len, const uint8_t* or_mask);

// The running state after kCrc32Init, eight 0xFF bytes, then `len` bytes
// of `data` with the first 64 OR-ed with `or_mask` (as above): RoCEv2's
// ICRC (the eight ones stand in for the LRH).
uint32_t crc32_update_ones_or_first64(const uint8_t* data, size_t len, const uint8_t* or_mask);
uint32_t crc32_update_ones_or_first64_with(Crc32Impl impl, const uint8_t* data, size_t len,
                                           const uint8_t* or_mask);

// The running state after `n` zero bytes. With PCLMULQDQ one carry-less
// multiply per 10 KiB (multiplication by x^(8n) mod P), else a loop. The
// AVX-512 implementation uses it for messages that end in whole 64-byte
// blocks of zeros, so zero-filled payload costs a scan instead of a fold.
uint32_t crc32_zeros(uint32_t state, size_t n);

// One-shot: zlib-compatible crc32 of a buffer.
inline uint32_t crc32(const uint8_t* data, size_t len) {
  return crc32_finish(crc32_update(kCrc32Init, data, len));
}

}  // namespace droce::wire
