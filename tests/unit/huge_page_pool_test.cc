// memory/huge_page_pool.h: blocks aligned and apart, a freed block reused
// for the next of its size, small and large sizes from operator new,
// objects (InHugePages) at an odd stride of lines, the regions advised for
// huge pages, and several threads at once.
#include "droce/memory/huge_page_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace droce::memory {
namespace {

constexpr size_t kFrame = 4096 + 512;  // the simulator's frame buffer

uintptr_t at(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(HugePagePool, BlocksAreAlignedWritableAndApart) {
  std::vector<void*> blocks;
  for (int i = 0; i < 1000; ++i) {
    void* p = huge_page_allocate(kFrame);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(at(p) % 64, 0u);
    std::memset(p, i & 0xff, kFrame);
    blocks.push_back(p);
  }
  std::vector<uintptr_t> starts;
  for (void* p : blocks) starts.push_back(at(p));
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i) EXPECT_GE(starts[i] - starts[i - 1], kFrame);
  for (int i = 0; i < 1000; ++i) {
    const auto* b = static_cast<const uint8_t*>(blocks[static_cast<size_t>(i)]);
    EXPECT_EQ(b[0], i & 0xff);
    EXPECT_EQ(b[kFrame - 1], i & 0xff);
  }
  for (void* p : blocks) huge_page_deallocate(p, kFrame);
}

// Under AddressSanitizer every block is operator new's: reuse is the
// allocator's business there.
#if !defined(__SANITIZE_ADDRESS__)
TEST(HugePagePool, AFreedBlockServesTheNextOfItsSize) {
  void* a = huge_page_allocate(kFrame);
  huge_page_deallocate(a, kFrame);
  EXPECT_EQ(huge_page_allocate(kFrame), a);
  // Another size does not take it.
  void* b = huge_page_allocate(2048);
  EXPECT_NE(b, a);
  huge_page_deallocate(b, 2048);
  huge_page_deallocate(a, kFrame);
}

// A QP-sized object (28 cache lines) takes 29: objects side by side at an
// odd stride of lines, so a field at one offset falls in every cache set.
struct QpSized : InHugePages {
  uint8_t bytes[1792];
};

TEST(HugePagePool, ObjectsTakeAnOddNumberOfLinesAndAreReused) {
  std::vector<QpSized*> objects;
  for (int i = 0; i < 100; ++i) objects.push_back(new QpSized);
  int side_by_side = 0;
  for (size_t i = 0; i < objects.size(); ++i) {
    EXPECT_EQ(at(objects[i]) % 64, 0u);
    std::memset(objects[i]->bytes, static_cast<int>(i), sizeof objects[i]->bytes);
    if (i > 0 && at(objects[i]) == at(objects[i - 1]) + 29 * 64) ++side_by_side;
  }
  // All but where a new region started.
  EXPECT_GE(side_by_side, 95);
  for (size_t i = 0; i < objects.size(); ++i) EXPECT_EQ(objects[i]->bytes[1791], i & 0xff);
  QpSized* last = objects.back();
  delete last;
  objects.pop_back();
  QpSized* again = new QpSized;
  EXPECT_EQ(again, last);
  objects.push_back(again);
  for (QpSized* o : objects) delete o;
}

// The kernel says which mappings may have huge pages (THPeligible, since
// Linux 5.0); where transparent huge pages are off altogether, none may.
TEST(HugePagePool, RegionsAreAdvisedForHugePages) {
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(mode, modes);
  if (modes.empty() || modes.find("[never]") != std::string::npos)
    GTEST_SKIP() << "transparent huge pages are off here";
  void* p = huge_page_allocate(kFrame);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  int eligible = -1;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at(p) && at(p) < hi;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) eligible = std::stoi(line.substr(12));
  }
  huge_page_deallocate(p, kFrame);
  ASSERT_NE(eligible, -1) << "no THPeligible line for the block's mapping";
  EXPECT_EQ(eligible, 1);
}
#endif

TEST(HugePagePool, SmallAndLargeSizesComeFromOperatorNew) {
  for (size_t n : {size_t{1}, size_t{64}, size_t{1000}, size_t{65537}, size_t{1} << 20}) {
    void* p = huge_page_allocate(n);
    EXPECT_EQ(at(p) % 64, 0u) << n;
    std::memset(p, 0x5a, n);
    huge_page_deallocate(p, n);
  }
  huge_page_deallocate(nullptr, kFrame);  // as delete of null: nothing
}

TEST(HugePagePool, ThreadsAllocateAndFreeAtOnce) {
  std::vector<std::thread> threads;
  std::vector<std::vector<void*>> got(4);
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&got, t] {
      for (int round = 0; round < 50; ++round) {
        for (int i = 0; i < 100; ++i) {
          void* p = huge_page_allocate(kFrame);
          std::memset(p, static_cast<int>(t), kFrame);
          got[t].push_back(p);
        }
        for (void* p : got[t]) {
          EXPECT_EQ(*static_cast<uint8_t*>(p), t);
          huge_page_deallocate(p, kFrame);
        }
        got[t].clear();
      }
    });
  for (std::thread& th : threads) th.join();
}

}  // namespace
}  // namespace droce::memory
