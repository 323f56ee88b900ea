// Memory regions and keys (IBA 10.6).
#include <gtest/gtest.h>

#include <set>
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

// Automatically assigned keys are not predictable (Linux rxe draws the
// key byte at random): the first region's key is not the same on every
// Device. Seeded here so the test is deterministic; with the default
// random seed two Devices differ the same way with probability 254/255.
TEST(Mr, FirstKeyDependsOnTheDevicesSeed) {
  std::vector<uint8_t> buf(64);
  std::set<uint32_t> first_keys;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Device d(seed);
    MemoryRegion* mr = d.reg_mr(d.alloc_pd(), buf.data(), 64, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    EXPECT_EQ(mr->lkey() >> 8, 0u);    // the first free slot
    EXPECT_NE(mr->lkey() & 0xFF, 0u);  // never a zero key byte
    EXPECT_EQ(mr->rkey(), mr->lkey());
    first_keys.insert(mr->lkey());
  }
  // Expect: eight seeds, several first keys (a fixed layout gives one).
  EXPECT_GT(first_keys.size(), 4u);
  // Expect: the same seed gives the same keys (the simulator's runs
  // repeat), also after seed_mr_keys on a used Device.
  Device a(42), b(7);
  b.seed_mr_keys(42);
  for (int i = 0; i < 4; ++i) {
    MemoryRegion* x = a.reg_mr(a.alloc_pd(), buf.data(), 64, IBV_ACCESS_LOCAL_WRITE);
    MemoryRegion* y = b.reg_mr(b.alloc_pd(), buf.data(), 64, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_EQ(x->lkey(), y->lkey());
  }
  // Expect: two default Devices draw their own seeds (this holds with
  // probability 1 - 1/255 per pair; eight pairs all equal would be 2^-64).
  bool differ = false;
  for (int i = 0; i < 8 && !differ; ++i) {
    Device c, e;
    differ = c.reg_mr(c.alloc_pd(), buf.data(), 64, 0)->lkey() !=
             e.reg_mr(e.alloc_pd(), buf.data(), 64, 0)->lkey();
  }
  EXPECT_TRUE(differ);
}

// A re-used slot never gets its previous key back, so a stale key of a
// deregistered region cannot name the next region of that slot (IBA
// 10.6.3.2: the R_Key must name a valid region).
TEST(Mr, ReRegisteredSlotNeverReusesThePreviousKey) {
  std::vector<uint8_t> buf(64);
  for (uint64_t seed = 0; seed < 16; ++seed) {
    Device d(seed);
    ProtectionDomain* pd = d.alloc_pd();
    uint32_t previous = 0;
    for (int i = 0; i < 300; ++i) {
      MemoryRegion* mr = d.reg_mr(pd, buf.data(), 64, IBV_ACCESS_LOCAL_WRITE);
      ASSERT_NE(mr, nullptr);
      ASSERT_EQ(mr->lkey() >> 8, 0u);
      ASSERT_NE(mr->lkey(), previous) << "seed " << seed << " registration " << i;
      ASSERT_NE(mr->lkey() & 0xFF, 0u);
      previous = mr->lkey();
      ASSERT_EQ(d.dereg_mr(mr), 0);
      EXPECT_EQ(d.find_mr(previous), nullptr);
    }
  }
  // Expect: also when the slot's previous key was a requested one.
  Device d(3);
  ProtectionDomain* pd = d.alloc_pd();
  for (uint32_t i = 0; i < 2000; ++i) {
    const uint32_t asked_key = 1 + i % 255;  // slot 0
    MemoryRegion* asked = d.reg_mr(pd, buf.data(), 64, IBV_ACCESS_LOCAL_WRITE, {}, asked_key);
    ASSERT_NE(asked, nullptr);
    ASSERT_EQ(d.dereg_mr(asked), 0);
    MemoryRegion* mr = d.reg_mr(pd, buf.data(), 64, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr->lkey(), asked_key) << i;
    ASSERT_EQ(d.dereg_mr(mr), 0);
  }
}

// A requested key (a config file or a replayed capture names it) is used
// exactly as asked, whatever the seed, key byte 0 included.
TEST(Mr, RequestedKeysAreKeptAsAsked) {
  std::vector<uint8_t> buf(64);
  for (uint64_t seed : {1u, 2u}) {
    Device d(seed);
    ProtectionDomain* pd = d.alloc_pd();
    for (uint32_t key : {0x1234u, 0x0500u, 0x0001u, 0xFFFF0u}) {
      MemoryRegion* mr = d.reg_mr(pd, buf.data(), 64, IBV_ACCESS_LOCAL_WRITE, {}, key);
      ASSERT_NE(mr, nullptr) << key;
      EXPECT_EQ(mr->lkey(), key);
      EXPECT_EQ(mr->rkey(), key);
      EXPECT_EQ(d.find_mr(key), mr);
    }
  }
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
