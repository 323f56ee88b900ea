// Ring storage (transport/zeroed_array.h): zero bytes, cache-line aligned,
// untouched pages not resident, and a reused block cleared again.
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "droce/transport/wqe.h"
#include "droce/transport/zeroed_array.h"

namespace droce::transport {
namespace {

bool all_zero(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != 0) return false;
  return true;
}

// Pages of [p, p + n) the process has resident (mincore).
size_t resident_pages(const void* p, size_t n) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const size_t len = reinterpret_cast<uintptr_t>(p) + n - start;
  std::vector<unsigned char> vec((len + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(start), len, vec.data()) != 0) return SIZE_MAX;
  size_t r = 0;
  for (unsigned char v : vec) r += v & 1;
  return r;
}

TEST(ZeroedArray, StartsAsZeroBytesAlignedToALine) {
  ZeroedArray<SendWqe> sq(256);
  ZeroedArray<WorkCompletion> cq(4096);
  ZeroedArray<uint8_t> bytes(3);  // an odd size is rounded up inside
  ASSERT_EQ(sq.size(), 256u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(sq.data()) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(cq.data()) % 64, 0u);
  EXPECT_TRUE(all_zero(sq.data(), sq.size() * sizeof(SendWqe)));
  EXPECT_TRUE(all_zero(cq.data(), cq.size() * sizeof(WorkCompletion)));
  EXPECT_TRUE(all_zero(bytes.data(), 3));
  ZeroedArray<RecvWqe> none(0);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.data(), nullptr);
}

// The point of it: a large ring costs memory only where it was written.
TEST(ZeroedArray, UnwrittenSlotsAreNotResident) {
  ZeroedArray<WorkCompletion> big(1 << 20);  // 48 MiB: its own mapping
  const size_t bytes = big.size() * sizeof(WorkCompletion);
  EXPECT_LE(resident_pages(big.data(), bytes), 2u);
  big[0].wr_id = 7;
  big[big.size() - 1].wr_id = 9;
  EXPECT_LE(resident_pages(big.data(), bytes), 4u);
  EXPECT_EQ(big[0].wr_id, 7u);

  // Many small rings come from shared pieces, also untouched.
  std::vector<ZeroedArray<RecvWqe>> rqs;
  for (int i = 0; i < 64; ++i) rqs.emplace_back(256);  // 38 KiB each
  size_t resident = 0;
  for (const auto& rq : rqs) resident += resident_pages(rq.data(), rq.size() * sizeof(RecvWqe));
  EXPECT_LE(resident, 64u * 2);  // at most the pages a block's ends share
}

TEST(ZeroedArray, AReusedBlockIsClearedAgain) {
  void* first = nullptr;
  {
    ZeroedArray<RecvWqe> rq(100);
    first = rq.data();
    std::memset(static_cast<void*>(rq.data()), 0xab, rq.size() * sizeof(RecvWqe));
  }
  ZeroedArray<RecvWqe> again(100);  // same size: the freed block comes back
  EXPECT_EQ(again.data(), first);
  EXPECT_TRUE(all_zero(again.data(), again.size() * sizeof(RecvWqe)));
}

// A window of a collective, registered again for the next size of a sweep:
// cleared by giving its pages back, so that a reuse makes no page resident
// that the new owner does not write (a memset made them all resident).
TEST(ZeroedArray, AReusedLargeBlockIsClearedWithoutTouchingIt) {
  // An odd size (not whole pages, so the block's ends share pages with its
  // neighbours in the piece) between the page-drop size and the own mapping.
  const size_t n = (512 << 10) + 1000;
  uint8_t* first = nullptr;
  {
    ZeroedArray<uint8_t> w(n);
    first = w.data();
    std::memset(w.data(), 0xcd, n);
    EXPECT_GE(resident_pages(w.data(), n), n / 4096);
  }
  ZeroedArray<uint8_t> again(n);
  ASSERT_EQ(again.data(), first);  // the freed block comes back
  EXPECT_TRUE(all_zero(again.data(), n));
  // all_zero read every page: the middle ones read the shared zero page, so
  // count before reading instead, on a fresh reuse.
  std::memset(again.data(), 0xef, n);
  { ZeroedArray<uint8_t> gone(std::move(again)); }
  ZeroedArray<uint8_t> third(n);
  ASSERT_EQ(third.data(), first);
  EXPECT_LE(resident_pages(third.data(), n), 2u);  // the two ends, written with zeros
  EXPECT_TRUE(all_zero(third.data(), n));
}

TEST(ZeroedArray, MovesOwnership) {
  ZeroedArray<Sge> a(8);
  a[3].length = 5;
  Sge* p = a.data();
  ZeroedArray<Sge> b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b[3].length, 5u);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty
  ZeroedArray<Sge> c(2);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), 8u);
}

}  // namespace
}  // namespace droce::transport
