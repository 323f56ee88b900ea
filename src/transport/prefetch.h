// Prefetching the bytes the next packet of a message will use.
//
// A requester gathers a message from memory one MTU at a time and a
// responder places it one MTU at a time, with other QPs' packets in
// between. The hardware prefetchers do not carry a stream across that
// interleaving nor across a 4 KiB page, so with many QPs each packet's
// source bytes came from memory and each destination line was read for
// ownership when the copy reached it: in the simulator's 16-to-1 incast
// (16 MiB of source and 16 MiB of destination windows) those two copies
// were 28 % of the run time (docs/PERFORMANCE.md, "Simulator").
// Asking for the next packet's lines while copying this one gives them
// the time of the other QPs' packets to arrive.
//
// Only within the same message (or scatter/gather element): where the next
// message goes is not known yet, so a message of one packet prefetches
// nothing.
#pragma once

#include <algorithm>
#include <cstdint>

namespace droce::transport {

constexpr uint64_t kCacheLineBytes = 64;

// Bytes of the next packet: `done` bytes of a `total`-byte extent are
// handled, packets carry `packet` bytes; 0 when nothing follows.
constexpr uint64_t next_packet_bytes(uint64_t done, uint64_t packet, uint64_t total) {
  return done >= total ? 0 : std::min(packet, total - done);
}

// One prefetch per 64 bytes from p on, so the line holding the last few
// bytes of [p, p + len) may be left out (this is a hint), and never a line
// past it: a loop that also fetched the line after the next packet (where,
// with the simulator's windows, a new 4 KiB page starts) ran ~15 % slower.

// Both are always inlined: compiled as functions of their own, GCC 12
// finds they change nothing the program can see and may drop a call to a
// caller of theirs as dead code. That happened to the responder's
// prefetch_next_packet (an inline member calling prefetch_for_write):
// its call was gone from the responder's WRITE placement and the
// simulator's real-payload incast ran ~10 % slower, with no test to notice.

// [p, p + len), to be read soon.
[[gnu::always_inline]] inline void prefetch_for_read(const uint8_t* p, uint64_t len) {
  for (uint64_t i = 0; i < len; i += kCacheLineBytes) __builtin_prefetch(p + i, 0, 3);
}

// [p, p + len), to be written soon (an exclusive fetch where the target
// has PREFETCHW; a measured wash against a shared one here).
[[gnu::always_inline]] inline void prefetch_for_write(uint8_t* p, uint64_t len) {
  for (uint64_t i = 0; i < len; i += kCacheLineBytes) __builtin_prefetch(p + i, 1, 3);
}

}  // namespace droce::transport
