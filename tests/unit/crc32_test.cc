// CRC-32 implementations against known answers, zlib (when the build found
// it) and the bit-at-a-time reference, over every length up to 1 KiB and
// random lengths up to 64 KiB at every alignment within a cache line.
#include "droce/wire/crc32.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

#ifdef DROCE_HAVE_ZLIB
#include <zlib.h>
#endif

namespace droce::wire {
namespace {

constexpr Crc32Impl kAllImpls[] = {Crc32Impl::kBitwise, Crc32Impl::kSliceBy8,
                                   Crc32Impl::kPclmul, Crc32Impl::kVpclmulAvx512};

std::vector<Crc32Impl> supported_impls() {
  std::vector<Crc32Impl> out;
  for (Crc32Impl impl : kAllImpls) {
    if (crc32_impl_supported(impl)) out.push_back(impl);
  }
  return out;
}

uint32_t crc_with(Crc32Impl impl, const uint8_t* p, size_t len) {
  return crc32_finish(crc32_update_with(impl, kCrc32Init, p, len));
}

uint32_t crc_with(Crc32Impl impl, std::string_view s) {
  return crc_with(impl, reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(Crc32, ReportsImplementations) {
  EXPECT_TRUE(crc32_impl_supported(Crc32Impl::kBitwise));
  EXPECT_TRUE(crc32_impl_supported(Crc32Impl::kSliceBy8));
  EXPECT_TRUE(crc32_impl_supported(crc32_best_impl()));
  for (Crc32Impl impl : kAllImpls) EXPECT_NE(to_string(impl), "?");
  // Not a failure on other machines, but worth seeing in the log.
  std::printf("best: %s; supported:", std::string(to_string(crc32_best_impl())).c_str());
  for (Crc32Impl impl : supported_impls()) std::printf(" %s", std::string(to_string(impl)).c_str());
  std::printf("\n");
}

TEST(Crc32, KnownAnswers) {
  for (Crc32Impl impl : supported_impls()) {
    SCOPED_TRACE(to_string(impl));
    // The CRC catalogue's check value for CRC-32/ISO-HDLC.
    EXPECT_EQ(crc_with(impl, "123456789"), 0xCBF43926u);
    EXPECT_EQ(crc_with(impl, ""), 0x00000000u);
    EXPECT_EQ(crc_with(impl, "a"), 0xE8B7BE43u);
    EXPECT_EQ(crc_with(impl, "The quick brown fox jumps over the lazy dog"), 0x414FA339u);
    // 32 zero bytes and 32 0xFF bytes (iSCSI/RFC 3720-style patterns, values
    // for this polynomial).
    const std::vector<uint8_t> zeros(32, 0x00), ones(32, 0xFF);
    EXPECT_EQ(crc_with(impl, zeros.data(), zeros.size()), 0x190A55ADu);
    EXPECT_EQ(crc_with(impl, ones.data(), ones.size()), 0xFF6CAB0Bu);
  }
  EXPECT_EQ(crc32(reinterpret_cast<const uint8_t*>("123456789"), 9), 0xCBF43926u);
}

#ifdef DROCE_HAVE_ZLIB
TEST(Crc32, MatchesZlib) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    const size_t len = rng() % 20000;
    const auto buf = random_bytes(len, static_cast<uint32_t>(i));
    const uint32_t expected =
        static_cast<uint32_t>(::crc32(0L, buf.data(), static_cast<uInt>(buf.size())));
    for (Crc32Impl impl : supported_impls()) {
      ASSERT_EQ(crc_with(impl, buf.data(), buf.size()), expected)
          << to_string(impl) << " len " << len;
    }
    ASSERT_EQ(crc32(buf.data(), buf.size()), expected);
  }
}
#endif

// Every length 0..1024 at every alignment 0..63, from any starting state:
// the reference state for length n+1 is one bitwise step from length n.
TEST(Crc32, EveryShortLengthAndAlignmentMatchesBitwise) {
  constexpr size_t kMaxLen = 1024;
  const auto buf = random_bytes(kMaxLen + 64, 1);
  std::mt19937 rng(2);
  for (size_t align = 0; align < 64; ++align) {
    const uint8_t* base = buf.data() + align;
    const uint32_t init = (align % 2 == 0) ? kCrc32Init : static_cast<uint32_t>(rng());
    uint32_t expected = init;
    for (size_t len = 0; len <= kMaxLen; ++len) {
      if (len > 0) expected = crc32_update_with(Crc32Impl::kBitwise, expected, base + len - 1, 1);
      for (Crc32Impl impl : supported_impls()) {
        ASSERT_EQ(crc32_update_with(impl, init, base, len), expected)
            << to_string(impl) << " align " << align << " len " << len;
      }
    }
  }
}

TEST(Crc32, RandomLongLengthsAtEveryAlignmentMatchBitwise) {
  constexpr size_t kMaxLen = 64 * 1024;
  const auto buf = random_bytes(kMaxLen + 64, 3);
  std::mt19937 rng(4);
  for (size_t align = 0; align < 64; ++align) {
    for (int i = 0; i < 3; ++i) {
      // Lengths near multiples of the 256-byte main step exercise the
      // hand-over between the wide loop, the 64/16-byte loops and the tail.
      size_t len = rng() % (kMaxLen + 1);
      if (i == 1) len = (len & ~size_t{255}) + (rng() % 3) - 1;
      len = std::min(len, kMaxLen);
      const uint32_t init = static_cast<uint32_t>(rng());
      const uint32_t expected =
          crc32_update_with(Crc32Impl::kBitwise, init, buf.data() + align, len);
      for (Crc32Impl impl : supported_impls()) {
        ASSERT_EQ(crc32_update_with(impl, init, buf.data() + align, len), expected)
            << to_string(impl) << " align " << align << " len " << len;
      }
    }
  }
}

TEST(Crc32, ChainedUpdatesEqualOneShot) {
  const auto buf = random_bytes(3000, 5);
  for (Crc32Impl impl : supported_impls()) {
    SCOPED_TRACE(to_string(impl));
    const uint32_t one_shot = crc_with(impl, buf.data(), buf.size());
    // Every split point of the first 600 bytes' worth of prefix, then coarser.
    for (size_t split = 0; split <= buf.size(); split += (split < 600 ? 1 : 37)) {
      uint32_t s = crc32_update_with(impl, kCrc32Init, buf.data(), split);
      s = crc32_update_with(impl, s, buf.data() + split, buf.size() - split);
      ASSERT_EQ(crc32_finish(s), one_shot) << "split " << split;
    }
    // Many random pieces, mixing implementations between pieces.
    std::mt19937 rng(6);
    const auto impls = supported_impls();
    for (int round = 0; round < 50; ++round) {
      uint32_t s = kCrc32Init;
      size_t pos = 0;
      while (pos < buf.size()) {
        const size_t n = std::min<size_t>(rng() % 700, buf.size() - pos);
        s = crc32_update_with(impls[rng() % impls.size()], s, buf.data() + pos, n);
        pos += n;
      }
      ASSERT_EQ(crc32_finish(s), one_shot);
    }
  }
}

TEST(Crc32, OrFirst64EqualsMaskingACopy) {
  // Expect: from a random state, any length (under 64 too, where the mask
  // bytes past the message must not count), equals the bitwise CRC of a
  // masked copy.
  std::mt19937 rng(5);
  std::vector<size_t> lengths;
  for (size_t len = 0; len < 64; ++len) lengths.push_back(len);
  for (size_t len : {64u, 65u, 100u, 127u, 128u, 255u, 256u, 300u, 4170u}) lengths.push_back(len);
  for (Crc32Impl impl : kAllImpls) {
    if (!crc32_impl_supported(impl)) continue;
    for (size_t len : lengths) {
      std::vector<uint8_t> data(len + 1), mask(64);
      for (auto& b : data) b = static_cast<uint8_t>(rng());
      for (auto& b : mask) b = rng() % 4 == 0 ? static_cast<uint8_t>(rng()) : 0;
      const uint8_t* p = data.data() + 1;  // not aligned
      std::vector<uint8_t> masked(p, p + len);
      for (size_t i = 0; i < std::min<size_t>(len, 64); ++i) masked[i] |= mask[i];
      const uint32_t init = static_cast<uint32_t>(rng());
      EXPECT_EQ(crc32_update_or_first64_with(impl, init, p, len, mask.data()),
                crc32_update_with(Crc32Impl::kBitwise, init, masked.data(), len))
          << to_string(impl) << " len " << len;
    }
  }
}

TEST(Crc32, OnesPrefixedOrFirst64EqualsMaskingACopy) {
  // Expect: every length 0..300 (the AVX-512 short paths cover 0..63 and
  // 64..127, the general fold the rest), unaligned data, equals the bitwise
  // CRC of eight 0xFF bytes followed by a masked copy (only the first `len`
  // mask bytes count under 64).
  std::mt19937 rng(11);
  const uint8_t ones[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  const uint32_t after_ones = crc32_update_with(Crc32Impl::kBitwise, kCrc32Init, ones, 8);
  for (Crc32Impl impl : kAllImpls) {
    if (!crc32_impl_supported(impl)) continue;
    for (size_t len = 0; len <= 300; ++len) {
      std::vector<uint8_t> data(len + 3), mask(64);
      for (auto& b : data) b = static_cast<uint8_t>(rng());
      for (auto& b : mask) b = rng() % 4 == 0 ? static_cast<uint8_t>(rng()) : 0;
      const uint8_t* p = data.data() + 3;
      std::vector<uint8_t> masked(p, p + len);
      for (size_t i = 0; i < std::min<size_t>(len, 64); ++i) masked[i] |= mask[i];
      ASSERT_EQ(crc32_update_ones_or_first64_with(impl, p, len, mask.data()),
                crc32_update_with(Crc32Impl::kBitwise, after_ones, masked.data(), len))
          << to_string(impl) << " len " << len;
    }
  }
}

TEST(Crc32, ZerosEqualsUpdatingOverZeroBytes) {
  // Expect: crc32_zeros(s, n) is the bitwise CRC state after n zero bytes,
  // for every n up to 700, multiples of 64 around the one-multiply limit
  // (10240 bytes), and lengths several times beyond it.
  std::mt19937 rng(13);
  const std::vector<uint8_t> zeros(40000, 0);
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 700; ++n) lengths.push_back(n);
  for (size_t n : {4096u, 10176u, 10240u, 10304u, 10241u, 20480u, 33333u, 40000u})
    lengths.push_back(n);
  for (size_t n : lengths) {
    const uint32_t state = static_cast<uint32_t>(rng());
    ASSERT_EQ(crc32_zeros(state, n),
              crc32_update_with(Crc32Impl::kBitwise, state, zeros.data(), n))
        << "n " << n;
  }
}

TEST(Crc32, MessagesEndingInZerosMatchBitwise) {
  // Expect: data followed by a run of zeros (the AVX-512 code multiplies
  // whole zero blocks at the end instead of folding them) gives the bitwise
  // CRC, through every entry point and implementation, for heads that end
  // in zero or non-zero bytes, runs shorter and longer than one multiply
  // covers, and frames where a single non-zero byte sits inside the run.
  std::mt19937 rng(17);
  const uint8_t ones[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  const uint32_t after_ones = crc32_update_with(Crc32Impl::kBitwise, kCrc32Init, ones, 8);
  for (Crc32Impl impl : supported_impls()) {
    for (size_t head : {0u, 1u, 60u, 64u, 100u, 130u, 200u, 511u}) {
      for (size_t run : {0u, 63u, 64u, 255u, 256u, 448u, 4096u, 4159u, 10240u, 10300u, 25000u}) {
        const size_t len = head + run;
        if (len < 64) continue;
        std::vector<uint8_t> data(len + 5, 0), mask(64);
        uint8_t* p = data.data() + 5;  // not aligned
        for (size_t i = 0; i < head; ++i) p[i] = static_cast<uint8_t>(rng() | 1);
        for (auto& b : mask) b = rng() % 4 == 0 ? static_cast<uint8_t>(rng()) : 0;
        for (int poke = 0; poke < 2; ++poke) {
          // The second round puts one non-zero byte inside the run.
          if (poke && run > 0) p[head + rng() % run] = static_cast<uint8_t>(rng() | 1);
          std::vector<uint8_t> masked(p, p + len);
          for (size_t i = 0; i < 64; ++i) masked[i] |= mask[i];
          const uint32_t init = static_cast<uint32_t>(rng());
          ASSERT_EQ(crc32_update_with(impl, init, p, len),
                    crc32_update_with(Crc32Impl::kBitwise, init, p, len))
              << to_string(impl) << " head " << head << " run " << run << " poke " << poke;
          ASSERT_EQ(crc32_update_or_first64_with(impl, init, p, len, mask.data()),
                    crc32_update_with(Crc32Impl::kBitwise, init, masked.data(), len))
              << to_string(impl) << " head " << head << " run " << run << " poke " << poke;
          ASSERT_EQ(crc32_update_ones_or_first64_with(impl, p, len, mask.data()),
                    crc32_update_with(Crc32Impl::kBitwise, after_ones, masked.data(), len))
              << to_string(impl) << " head " << head << " run " << run << " poke " << poke;
        }
      }
    }
  }
}

TEST(Crc32, OnesPrefixedShortPathReadsNothingBeforeItsBuffers) {
  // The AVX-512 short path loads right-aligned registers with masked loads
  // whose addresses start before the data and the mask. Expect: with both
  // right after an inaccessible page, no fault and the right CRC.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* m = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* base = static_cast<uint8_t*>(m);
  ASSERT_EQ(mprotect(base, page, PROT_NONE), 0);
  uint8_t* data = base + page;
  uint8_t* mask = data + 1024;
  std::mt19937 rng(3);
  for (size_t i = 0; i < 300; ++i) data[i] = static_cast<uint8_t>(rng());
  for (size_t i = 0; i < 64; ++i) mask[i] = i % 7 == 0 ? 0xFF : 0;
  const uint8_t ones[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  const uint32_t after_ones = crc32_update_with(Crc32Impl::kBitwise, kCrc32Init, ones, 8);
  for (size_t len : {65u, 100u, 120u, 124u}) {
    std::vector<uint8_t> masked(data, data + len);
    for (size_t i = 0; i < 64; ++i) masked[i] |= mask[i];
    EXPECT_EQ(crc32_update_ones_or_first64(data, len, mask),
              crc32_update_with(Crc32Impl::kBitwise, after_ones, masked.data(), len))
        << "len " << len;
  }
  // The mask right after the guard page too.
  uint8_t* mask2 = data;
  uint8_t* data2 = data + 512;
  std::copy(mask, mask + 64, mask2);
  std::vector<uint8_t> masked(data2, data2 + 120);
  for (size_t i = 0; i < 64; ++i) masked[i] |= mask2[i];
  EXPECT_EQ(crc32_update_ones_or_first64(data2, 120, mask2),
            crc32_update_with(Crc32Impl::kBitwise, after_ones, masked.data(), 120));
  munmap(m, 2 * page);
}

TEST(Crc32, ShortPathsReadNothingAfterTheirData) {
  // Under 64 bytes the AVX-512 code loads a whole zmm from the message's
  // start with the bytes past its end masked off. Expect: with the message
  // ending right before an inaccessible page, no fault and the bitwise CRC,
  // for the plain CRC and the masked one, every length 1..127.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* m = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* base = static_cast<uint8_t*>(m);
  ASSERT_EQ(mprotect(base + page, page, PROT_NONE), 0);
  std::mt19937 rng(37);
  for (size_t i = 0; i < page; ++i) base[i] = static_cast<uint8_t>(rng());
  uint8_t mask[64] = {};
  mask[1] = mask[8] = mask[10] = mask[11] = 0xFF;
  const uint8_t ones[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  const uint32_t after_ones = crc32_update_with(Crc32Impl::kBitwise, kCrc32Init, ones, 8);
  for (size_t len = 1; len < 128; ++len) {
    const uint8_t* p = base + page - len;
    const uint32_t init = static_cast<uint32_t>(rng());
    std::vector<uint8_t> masked(p, p + len);
    for (size_t i = 0; i < std::min<size_t>(len, 64); ++i) masked[i] |= mask[i];
    for (Crc32Impl impl : supported_impls()) {
      ASSERT_EQ(crc32_update_with(impl, init, p, len),
                crc32_update_with(Crc32Impl::kBitwise, init, p, len))
          << to_string(impl) << " len " << len;
      ASSERT_EQ(crc32_update_or_first64_with(impl, init, p, len, mask),
                crc32_update_with(Crc32Impl::kBitwise, init, masked.data(), len))
          << to_string(impl) << " len " << len;
      ASSERT_EQ(crc32_update_ones_or_first64_with(impl, p, len, mask),
                crc32_update_with(Crc32Impl::kBitwise, after_ones, masked.data(), len))
          << to_string(impl) << " len " << len;
    }
  }
  munmap(m, 2 * page);
}

}  // namespace
}  // namespace droce::wire
