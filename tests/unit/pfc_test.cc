// PFC frames (IEEE 802.1Qbb clause 36): byte layout, parsing, quanta timing,
// and decoding by Wireshark's dissector as an independent oracle.
#include "droce/wire/pfc.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "fabric_test_util.h"

namespace droce::wire {
namespace {

using fabric::testing::PcapWriter;
using fabric::testing::run_command;

PfcFrame sample() {
  PfcFrame f;
  f.src_mac = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  f.enable = 0x88;  // priorities 3 and 7
  f.quanta[3] = 0xFFFF;
  f.quanta[7] = 0x0102;
  return f;
}

TEST(Pfc, BuildIsByteExact) {
  uint8_t buf[64];
  ASSERT_EQ(build_pfc(sample(), buf), kPfcFrameSize);
  const uint8_t want[34] = {
      0x01, 0x80, 0xC2, 0x00, 0x00, 0x01,  // dst: MAC Control group address
      0x02, 0x11, 0x22, 0x33, 0x44, 0x55,  // src
      0x88, 0x08,                          // EtherType MAC Control
      0x01, 0x01,                          // opcode PFC
      0x00, 0x88,                          // class-enable vector
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // time[0..2]
      0xFF, 0xFF,                          // time[3]
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // time[4..6]
      0x01, 0x02};                         // time[7]
  for (size_t i = 0; i < sizeof want; ++i) EXPECT_EQ(buf[i], want[i]) << "byte " << i;
  for (size_t i = sizeof want; i < kPfcFrameSize; ++i) EXPECT_EQ(buf[i], 0) << "pad " << i;
}

TEST(Pfc, BuildNeedsRoom) {
  uint8_t buf[59];
  EXPECT_EQ(build_pfc(sample(), buf), 0u);
}

TEST(Pfc, ParseRoundTrip) {
  uint8_t buf[kPfcFrameSize];
  build_pfc(sample(), buf);
  PfcFrame got;
  ASSERT_EQ(parse_pfc(buf, got), PfcParseError::kOk);
  EXPECT_EQ(got, sample());
  EXPECT_TRUE(got.enabled(3));
  EXPECT_FALSE(got.enabled(2));
  EXPECT_TRUE(is_pfc(buf));
}

TEST(Pfc, ParseRejects) {
  uint8_t buf[kPfcFrameSize];
  PfcFrame got;
  build_pfc(sample(), buf);
  EXPECT_EQ(parse_pfc(std::span<const uint8_t>(buf, 20), got), PfcParseError::kTruncated);
  buf[14] = 0x00;
  buf[15] = 0x01;  // opcode 0x0001: 802.3x PAUSE
  EXPECT_EQ(parse_pfc(buf, got), PfcParseError::kNotPfc);
  EXPECT_FALSE(is_pfc(buf));
  build_pfc(sample(), buf);
  buf[5] = 0x02;
  EXPECT_EQ(parse_pfc(buf, got), PfcParseError::kBadDestination);
  build_pfc(sample(), buf);
  buf[16] = 0x01;
  EXPECT_EQ(parse_pfc(buf, got), PfcParseError::kReservedBits);
  build_pfc(sample(), buf);
  buf[12] = 0x08;
  buf[13] = 0x00;
  EXPECT_EQ(parse_pfc(buf, got), PfcParseError::kNotMacControl);
}

TEST(Pfc, QuantaAreFiveHundredTwelveBitTimes) {
  // 512 bits at 100 Gb/s = 5.12 ns; at 25 Gb/s = 20.48 ns.
  EXPECT_EQ(pfc_quanta_to_ns(1, 100'000'000'000ull), 6u);  // rounded up
  EXPECT_EQ(pfc_quanta_to_ns(100, 100'000'000'000ull), 512u);
  EXPECT_EQ(pfc_quanta_to_ns(100, 25'000'000'000ull), 2048u);
  EXPECT_EQ(pfc_quanta_to_ns(0xFFFF, 10'000'000'000ull), 3'355'392u);
  EXPECT_EQ(pfc_quanta_to_ns(0xFFFF, 800'000'000'000ull), 41'943u);  // 41942.4
  EXPECT_EQ(pfc_quanta_to_ns(0, 100'000'000'000ull), 0u);
}

TEST(Pfc, TsharkDecodesAsPfc) {
  if (run_command("command -v tshark").empty()) GTEST_SKIP() << "tshark not installed";
  const std::string path = "/tmp/droce_pfc_test_" + std::to_string(getpid()) + ".pcap";
  {
    PcapWriter w(path);
    ASSERT_TRUE(w.ok());
    std::vector<uint8_t> frame(kPfcFrameSize);
    build_pfc(sample(), frame);
    w.write(frame, 1000);
    PfcFrame xon;
    xon.enable = 0x08;  // priority 3, quanta 0: XON
    build_pfc(xon, frame);
    w.write(frame, 2000);
  }
  const std::string fields = run_command(
      "tshark -r " + path +
      " -T fields -E separator=, -e macc.opcode -e macc.cbfc.enbv"
      " -e macc.cbfc.pause_time.c3 -e macc.cbfc.pause_time.c7 2>&1");
  EXPECT_NE(fields.find("0x0101,0x0088,65535,258"), std::string::npos) << fields;
  EXPECT_NE(fields.find("0x0101,0x0008,0,0"), std::string::npos) << fields;
  const std::string verbose = run_command("tshark -r " + path + " -V 2>&1");
  // Wireshark names 802.1Qbb PFC "Class Based Flow Control [CBFC] Pause".
  EXPECT_NE(verbose.find("MAC Control"), std::string::npos) << verbose;
  EXPECT_NE(verbose.find("Flow Control [CBFC] Pause (0x0101)"), std::string::npos) << verbose;
  EXPECT_NE(verbose.find("C3: 65535"), std::string::npos) << verbose;
  EXPECT_EQ(verbose.find("Malformed"), std::string::npos) << verbose;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace droce::wire
