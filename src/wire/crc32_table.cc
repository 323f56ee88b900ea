// Portable CRC-32: slice-by-8 (eight table lookups per 8 bytes, no
// loop-carried dependency between them), and the bit-at-a-time reference the
// tests hold every other implementation to.
#include <array>

#include "crc32_internal.h"
#include "droce/wire/bytes.h"

namespace droce::wire::crc32_detail {

namespace {

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// tables[0][b] is the CRC of byte b alone (state 0); tables[k][b] is the same
// byte followed by k zero bytes, so one lookup per input byte accounts for
// its effect k bytes later.
constexpr Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ (kPolyReflected & (0u - (c & 1u)));
    t[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (size_t b = 0; b < 256; ++b) {
      t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
    }
  }
  return t;
}

constexpr Tables kTables = make_tables();
static_assert(kTables[0][1] == 0x77073096u, "first table row of the reflected polynomial");

}  // namespace

uint32_t update_bitwise(uint32_t state, const uint8_t* data, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    state ^= data[i];
    for (int b = 0; b < 8; ++b) state = (state >> 1) ^ (kPolyReflected & (0u - (state & 1u)));
  }
  return state;
}

uint32_t update_slice8(uint32_t state, const uint8_t* p, size_t len) {
  const auto& t = kTables;
  while (len >= 8) {
    const uint32_t a = state ^ load_le32(p);
    const uint32_t b = load_le32(p + 4);
    // Balanced XOR tree: the loop-carried path is one lookup and three XORs.
    const uint32_t from_a = (t[7][a & 0xFF] ^ t[6][(a >> 8) & 0xFF]) ^
                            (t[5][(a >> 16) & 0xFF] ^ t[4][a >> 24]);
    const uint32_t from_b = (t[3][b & 0xFF] ^ t[2][(b >> 8) & 0xFF]) ^
                            (t[1][(b >> 16) & 0xFF] ^ t[0][b >> 24]);
    state = from_a ^ from_b;
    p += 8;
    len -= 8;
  }
  while (len-- > 0) state = (state >> 8) ^ t[0][(state ^ *p++) & 0xFF];
  return state;
}

}  // namespace droce::wire::crc32_detail
