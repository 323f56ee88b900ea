// Placeholder: bit-at-a-time CRC-32 until the folding implementations land.
#include "droce/wire/crc32.h"

namespace droce::wire {

namespace {
uint32_t crc32_bitwise(uint32_t state, const uint8_t* data, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    state ^= data[i];
    for (int b = 0; b < 8; ++b) state = (state >> 1) ^ (0xEDB88320u & (0u - (state & 1)));
  }
  return state;
}
}  // namespace

std::string_view to_string(Crc32Impl impl) {
  switch (impl) {
    case Crc32Impl::kBitwise: return "bitwise";
    case Crc32Impl::kSliceBy8: return "slice-by-8";
    case Crc32Impl::kPclmul: return "pclmul";
    case Crc32Impl::kVpclmulAvx512: return "vpclmul-avx512";
  }
  return "?";
}
Crc32Impl crc32_best_impl() { return Crc32Impl::kBitwise; }
bool crc32_impl_supported(Crc32Impl impl) { return impl == Crc32Impl::kBitwise; }
uint32_t crc32_update(uint32_t state, const uint8_t* data, size_t len) {
  return crc32_bitwise(state, data, len);
}
uint32_t crc32_update_with(Crc32Impl, uint32_t state, const uint8_t* data, size_t len) {
  return crc32_bitwise(state, data, len);
}

}  // namespace droce::wire
