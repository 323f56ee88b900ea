// A DPDK device's arguments read for their limits (src/options/device_args.cc).
#include "droce/options/device_args.h"

#include <gtest/gtest.h>

namespace droce::options {
namespace {

TEST(DeviceArgs, FindsAKeyAnywhereInTheList) {
  const std::string_view args = "role=server,socket=/tmp/a.sock,bsize=8192,mac=02:00:00:00:00:01";
  EXPECT_EQ(device_arg(args, "role"), "server");
  EXPECT_EQ(device_arg(args, "bsize"), "8192");
  EXPECT_EQ(device_arg(args, "mac"), "02:00:00:00:00:01");
  EXPECT_EQ(device_arg(args, "size"), std::nullopt);  // not a suffix match
  EXPECT_EQ(device_arg("", "bsize"), std::nullopt);
  EXPECT_EQ(device_arg("zero-copy", "zero-copy"), std::nullopt);  // a flag, no value
  EXPECT_EQ(device_arg("bsize=1,bsize=2", "bsize"), "1");
}

TEST(DeviceArgs, MemifSlotIsItsBufferSizeOrThePmdDefault) {
  EXPECT_EQ(memif_slot_bytes("role=client,bsize=10240"), 10240u);
  EXPECT_EQ(memif_slot_bytes("role=client"), 2048u);
  EXPECT_EQ(memif_slot_bytes(""), 2048u);
  // What the PMD itself would refuse is not a limit droce can know.
  EXPECT_EQ(memif_slot_bytes("bsize=big"), 2048u);
  EXPECT_EQ(memif_slot_bytes("bsize=0"), 2048u);
  EXPECT_EQ(memif_slot_bytes("bsize=4096x"), 2048u);
}

}  // namespace
}  // namespace droce::options
