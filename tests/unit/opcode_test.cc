#include "droce/wire/opcode.h"

#include <gtest/gtest.h>

#include <set>

namespace droce::wire {
namespace {

TEST(OpcodeTable, SupportedSetIsExactlyRcUcUdAndCnp) {
  // Expect: 21 RC opcodes (0x00-0x14) + 2 with invalidate, 12 UC, 2 UD, CNP.
  int n = 0;
  for (int op = 0; op < 256; ++op) n += opcode_info(static_cast<uint8_t>(op)).supported;
  EXPECT_EQ(n, 21 + 2 + 12 + 2 + 1);
  // RD (0x40-0x5F) and reserved ranges are not supported.
  for (int op = 0x40; op < 0x60; ++op) EXPECT_FALSE(opcode_info(static_cast<uint8_t>(op)).supported);
  EXPECT_FALSE(opcode_info(0x15).supported);
  EXPECT_FALSE(opcode_info(0x2c).supported);  // UC has no READ
}

TEST(OpcodeTable, ExtensionHeadersFollowIba93) {
  // Expect: WRITE FIRST/ONLY carry RETH; ONLY_WITH_IMMEDIATE RETH then ImmDt.
  EXPECT_EQ(opcode_info(IBV_OPCODE_RC_RDMA_WRITE_FIRST).ext, kExtReth);
  EXPECT_EQ(opcode_info(IBV_OPCODE_RC_RDMA_WRITE_MIDDLE).ext, 0);
  EXPECT_EQ(opcode_info(IBV_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE).ext_offset(kExtReth), 0);
  EXPECT_EQ(opcode_info(IBV_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE).ext_offset(kExtImmDt), 16);
  // Expect: READ responses FIRST/LAST/ONLY carry AETH, MIDDLE none.
  EXPECT_EQ(opcode_info(IBV_OPCODE_RC_RDMA_READ_RESPONSE_FIRST).ext, kExtAeth);
  EXPECT_EQ(opcode_info(IBV_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE).ext, 0);
  EXPECT_EQ(opcode_info(IBV_OPCODE_RC_RDMA_READ_RESPONSE_LAST).ext, kExtAeth);
  // Expect: atomic ACK is AETH (4) then AtomicAckETH (8).
  EXPECT_EQ(opcode_info(IBV_OPCODE_RC_ATOMIC_ACKNOWLEDGE).ext_length(), 12u);
  EXPECT_EQ(opcode_info(IBV_OPCODE_RC_COMPARE_SWAP).ext_length(), 28u);
  EXPECT_EQ(opcode_info(kOpRcSendOnlyWithInvalidate).ext, kExtIeth);
  EXPECT_EQ(opcode_info(IBV_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE).ext_offset(kExtImmDt), 8);
}

TEST(OpcodeTable, PayloadRules) {
  EXPECT_FALSE(opcode_info(IBV_OPCODE_RC_ACKNOWLEDGE).payload);
  EXPECT_FALSE(opcode_info(IBV_OPCODE_RC_RDMA_READ_REQUEST).payload);
  EXPECT_FALSE(opcode_info(IBV_OPCODE_RC_FETCH_ADD).payload);
  EXPECT_FALSE(opcode_info(kOpCnp).payload);
  EXPECT_TRUE(opcode_info(IBV_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE).payload);
  EXPECT_TRUE(opcode_info(IBV_OPCODE_UC_SEND_FIRST).payload);
}

TEST(OpcodeTable, ClassesAndPositions) {
  EXPECT_EQ(opcode_info(IBV_OPCODE_RC_SEND_MIDDLE).position, Position::kMiddle);
  EXPECT_EQ(opcode_info(IBV_OPCODE_RC_SEND_LAST_WITH_IMMEDIATE).position, Position::kLast);
  EXPECT_EQ(opcode_info(IBV_OPCODE_RC_RDMA_READ_RESPONSE_ONLY).op_class, OpClass::kResponse);
  EXPECT_EQ(opcode_info(IBV_OPCODE_RC_ACKNOWLEDGE).op_class, OpClass::kAck);
  EXPECT_EQ(opcode_info(kOpCnp).op_class, OpClass::kCnp);
  EXPECT_EQ(opcode_info(IBV_OPCODE_UC_RDMA_WRITE_ONLY).transport, Transport::kUc);
}

TEST(OpcodeTable, NamesAreUniqueAndMatchRdmaCore) {
  std::set<std::string_view> names;
  for (int op = 0; op < 256; ++op) {
    const auto& i = opcode_info(static_cast<uint8_t>(op));
    if (i.supported) {
      EXPECT_TRUE(names.insert(i.name).second) << i.name;
    }
  }
  EXPECT_EQ(opcode_name(0x0a), "RC_RDMA_WRITE_ONLY");
  EXPECT_EQ(opcode_name(0x64), "UD_SEND_ONLY");
  EXPECT_EQ(opcode_name(0x81), "CNP");
  EXPECT_EQ(opcode_name(0x40), "UNKNOWN");
}

}  // namespace
}  // namespace droce::wire
