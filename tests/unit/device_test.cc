// Device: requested QPNs and MR keys (config files and replayed captures
// name them) next to the automatic allocation.
#include "droce/transport/device.h"

#include <gtest/gtest.h>

#include <array>

namespace droce::transport {
namespace {

struct DeviceFixture : ::testing::Test {
  Device dev;
  ProtectionDomain* pd = dev.alloc_pd();
  CompletionQueue* cq = dev.create_cq(64);
  QpInitAttr init() const {
    QpInitAttr a;
    a.pd = pd;
    a.send_cq = cq;
    a.recv_cq = cq;
    return a;
  }
  std::array<uint8_t, 4096> mem{};
  static constexpr uint32_t kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
};

TEST_F(DeviceFixture, RequestedQpnIsUsed) {
  QueuePair* qp = dev.create_qp(init(), 0x123456);
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(qp->qpn(), 0x123456u);
  EXPECT_EQ(dev.find_qp(0x123456), qp);
}

TEST_F(DeviceFixture, RequestedQpnRefusedWhenReservedTooWideOrTaken) {
  EXPECT_EQ(dev.create_qp(init(), 0), nullptr);
  EXPECT_EQ(dev.create_qp(init(), 1), nullptr);
  EXPECT_EQ(dev.create_qp(init(), 0x1000000), nullptr);
  ASSERT_NE(dev.create_qp(init(), 17), nullptr);
  EXPECT_EQ(dev.create_qp(init(), 17), nullptr);
  EXPECT_NE(dev.create_qp(init(), kQpnMask), nullptr);
}

TEST_F(DeviceFixture, AutomaticQpnsSkipRequestedOnes) {
  ASSERT_NE(dev.create_qp(init(), kFirstQpn), nullptr);
  ASSERT_NE(dev.create_qp(init(), kFirstQpn + 1), nullptr);
  QueuePair* qp = dev.create_qp(init());
  ASSERT_NE(qp, nullptr);
  EXPECT_EQ(qp->qpn(), kFirstQpn + 2);
}

TEST_F(DeviceFixture, RequestedKeyIsUsedAndFound) {
  MemoryRegion* mr = dev.reg_mr(pd, mem.data(), mem.size(), kAccess, {}, 0x1234u);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(mr->rkey(), 0x1234u);
  EXPECT_EQ(mr->lkey(), 0x1234u);
  EXPECT_EQ(dev.find_mr(0x1234), mr);
  EXPECT_EQ(dev.find_mr(0x1235), nullptr);  // same slot, other key byte
}

TEST_F(DeviceFixture, RequestedKeyRefusedWhenSlotTakenOrTooLarge) {
  ASSERT_NE(dev.reg_mr(pd, mem.data(), 64, kAccess, {}, 0x0501u), nullptr);
  EXPECT_EQ(dev.reg_mr(pd, mem.data(), 64, kAccess, {}, 0x0502u), nullptr);
  EXPECT_EQ(dev.reg_mr(pd, mem.data(), 64, kAccess, {},
                       (kMaxRequestedKeySlot + 1) << 8),
            nullptr);
}

TEST_F(DeviceFixture, AutomaticKeysFillHolesAroundRequestedOnes) {
  MemoryRegion* fixed = dev.reg_mr(pd, mem.data(), 64, kAccess, {}, 0x0307u);
  ASSERT_NE(fixed, nullptr);
  // Slots 0..2 are free; 3 is taken; automatic keys use 0, 1, 2, then 4.
  for (uint32_t want_slot : {0u, 1u, 2u, 4u}) {
    MemoryRegion* mr = dev.reg_mr(pd, mem.data(), 64, kAccess);
    ASSERT_NE(mr, nullptr);
    EXPECT_EQ(mr->lkey() >> 8, want_slot);
  }
  // Deregistering the requested key frees its slot; the next key of the
  // slot has another key byte, so the old key stays invalid.
  ASSERT_EQ(dev.dereg_mr(fixed), 0);
  EXPECT_EQ(dev.find_mr(0x0307), nullptr);
  MemoryRegion* again = dev.reg_mr(pd, mem.data(), 64, kAccess);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->lkey() >> 8, 3u);
  EXPECT_NE(again->lkey(), 0x0307u);
  EXPECT_EQ(dev.find_mr(0x0307), nullptr);
}

TEST_F(DeviceFixture, RequestedKeyStillChecksAccess) {
  EXPECT_EQ(dev.reg_mr(pd, mem.data(), 64, IBV_ACCESS_REMOTE_WRITE, {}, 0x0100u),
            nullptr);
}

}  // namespace
}  // namespace droce::transport
