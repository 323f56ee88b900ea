// Copying a packet's payload into a memory region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace droce::transport {

// Payloads of 16..64 bytes (the small-message hot path) as two fixed-size
// copies that may overlap, which the compiler turns into a few loads and
// stores; larger and smaller ones through memcpy. A call to memcpy for 64
// bytes cost about as much as the bytes (its size dispatch, the call).
[[gnu::always_inline]] inline void copy_payload(uint8_t* dst, const uint8_t* src, size_t len) {
  if (len > 64 || len < 16) {
    std::memcpy(dst, src, len);
  } else if (len > 32) {
    std::memcpy(dst, src, 32);
    std::memcpy(dst + len - 32, src + len - 32, 32);
  } else {
    std::memcpy(dst, src, 16);
    std::memcpy(dst + len - 16, src + len - 16, 16);
  }
}

}  // namespace droce::transport
