// Memory regions and keys (IBA 10.6).
#include <gtest/gtest.h>

#include <vector>

#include "droce/transport/device.h"

namespace droce::transport {
namespace {

TEST(Mr, TranslateChecksBoundsWithoutOverflow) {
  Device d;
  ProtectionDomain* pd = d.alloc_pd();
  std::vector<uint8_t> buf(4096);
  MemoryRegion* mr = d.reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE, 0x1000);
  ASSERT_NE(mr, nullptr);
  // Expect: VA = iova + offset; anything outside is refused.
  EXPECT_EQ(mr->translate(0x1000, 4096), buf.data());
  EXPECT_EQ(mr->translate(0x1FFF, 1), buf.data() + 4095);
  EXPECT_EQ(mr->translate(0x2000, 0), buf.data() + 4096);
  EXPECT_EQ(mr->translate(0x1FFF, 2), nullptr);
  EXPECT_EQ(mr->translate(0xFFF, 1), nullptr);
  EXPECT_EQ(mr->translate(0x1001, UINT64_MAX), nullptr);
  EXPECT_EQ(mr->translate(UINT64_MAX, 1), nullptr);
}

TEST(Mr, DefaultIovaIsThePointer) {
  Device d;
  std::vector<uint8_t> buf(64);
  MemoryRegion* mr = d.reg_mr(d.alloc_pd(), buf.data(), 64, 0);
  EXPECT_EQ(mr->iova(), reinterpret_cast<uint64_t>(buf.data()));
}

TEST(Mr, KeysLookUpAndDieWithDeregistration) {
  Device d;
  ProtectionDomain* pd = d.alloc_pd();
  std::vector<uint8_t> buf(64);
  MemoryRegion* a = d.reg_mr(pd, buf.data(), 64, IBV_ACCESS_LOCAL_WRITE);
  MemoryRegion* b = d.reg_mr(pd, buf.data(), 64, IBV_ACCESS_LOCAL_WRITE);
  EXPECT_NE(a->lkey(), b->lkey());
  EXPECT_EQ(d.find_mr(a->rkey()), a);
  const uint32_t old = a->lkey();
  ASSERT_EQ(d.dereg_mr(a), 0);
  // Expect: the stale key no longer resolves, even when the slot is reused.
  EXPECT_EQ(d.find_mr(old), nullptr);
  MemoryRegion* c = d.reg_mr(pd, buf.data(), 64, IBV_ACCESS_LOCAL_WRITE);
  EXPECT_NE(c->lkey(), old);
  EXPECT_EQ(d.find_mr(old), nullptr);
  EXPECT_EQ(d.find_mr(0xFFFFFF00), nullptr);
}

TEST(Mr, RemoteWriteNeedsLocalWrite) {
  Device d;
  std::vector<uint8_t> buf(64);
  // Expect: IBA 10.6.3.1 — refused without local write.
  EXPECT_EQ(d.reg_mr(d.alloc_pd(), buf.data(), 64, IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(d.reg_mr(d.alloc_pd(), buf.data(), 64, IBV_ACCESS_REMOTE_ATOMIC), nullptr);
  EXPECT_NE(d.reg_mr(d.alloc_pd(), buf.data(), 64, IBV_ACCESS_REMOTE_READ), nullptr);
  EXPECT_EQ(d.reg_mr(d.alloc_pd(), buf.data(), 0, 0), nullptr);
}

TEST(Mr, AllowsAndInvalidate) {
  Device d;
  std::vector<uint8_t> buf(64);
  MemoryRegion* mr = d.reg_mr(d.alloc_pd(), buf.data(), 64,
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  EXPECT_TRUE(mr->allows(IBV_ACCESS_REMOTE_READ));
  EXPECT_FALSE(mr->allows(IBV_ACCESS_REMOTE_WRITE));
  EXPECT_TRUE(mr->remote_valid());
  mr->invalidate_remote();
  EXPECT_FALSE(mr->remote_valid());
}

}  // namespace
}  // namespace droce::transport
