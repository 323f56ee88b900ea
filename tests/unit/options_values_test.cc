// The values users give, parsed one way for every app (src/options/values.cc).
#include "droce/options/values.h"

#include <gtest/gtest.h>

#include "droce/transport/requester.h"

namespace droce::options {
namespace {

TEST(OptionValues, MacTextForms) {
  wire::MacAddress m{};
  EXPECT_TRUE(try_parse_mac("aa:BB:cc:01:02:03", m));
  EXPECT_EQ(m, (wire::MacAddress{0xaa, 0xbb, 0xcc, 1, 2, 3}));
  EXPECT_TRUE(try_parse_mac("02-00-00-00-00-01", m));
  EXPECT_EQ(m, (wire::MacAddress{2, 0, 0, 0, 0, 1}));
  EXPECT_FALSE(try_parse_mac("aa:bb:cc:01:02", m));
  EXPECT_FALSE(try_parse_mac("aa:bb:cc:01:02:0g", m));
  EXPECT_FALSE(try_parse_mac("aa:bb:cc:01:02:034", m));
  EXPECT_FALSE(try_parse_mac("aa:bb:cc:1:2:3", m));
  EXPECT_EQ(format_mac({0xaa, 0xbb, 0xcc, 1, 2, 3}), "aa:bb:cc:01:02:03");
}

TEST(OptionValues, IpTextForms) {
  wire::IpAddress ip;
  ASSERT_TRUE(try_parse_ip("fe80::1", ip));
  EXPECT_TRUE(ip.v6);
  EXPECT_EQ(format_ip(ip), "fe80::1");
  ASSERT_TRUE(try_parse_ip("10.0.0.7", ip));
  EXPECT_FALSE(ip.v6);
  EXPECT_EQ(format_ip(ip), "10.0.0.7");
  EXPECT_FALSE(try_parse_ip("10.0.0", ip));
  EXPECT_FALSE(try_parse_ip("", ip));
}

TEST(OptionValues, ErrorsNameTheOptionAndTheAcceptedForm) {
  try {
    parse_mac("--peer-mac", "02:00");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.option(), "--peer-mac");
    EXPECT_NE(std::string(e.what()).find("a MAC address like"), std::string::npos) << e.what();
  }
  try {
    parse_ip("--peer-ip", "10.0.0");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "--peer-ip: '10.0.0' is not an IPv4 or IPv6 address");
  }
  EXPECT_THROW(parse_uint("--qpn", "0x1000000", 0xFFFFFF), ConfigError);
  EXPECT_EQ(parse_uint("--qpn", "0x11", 0xFFFFFF), 0x11u);
  EXPECT_THROW(parse_uint("--qpn", "12a", 0xFFFFFF), ConfigError);
  EXPECT_THROW(parse_qp_type("--qp-type", "xrc"), ConfigError);
  EXPECT_EQ(parse_ecn("--ecn", "ce"), wire::Ecn::kCe);
}

// Times as droce-sim's scenario files write them.
TEST(OptionValues, TimesWithUnitsOrBareNanoseconds) {
  EXPECT_EQ(parse_time_ns("--gap", "8us", 1'000'000'000), 8'000u);
  EXPECT_EQ(parse_time_ns("--gap", "1.5us", 1'000'000'000), 1'500u);
  EXPECT_EQ(parse_time_ns("--gap", "500ns", 1'000'000'000), 500u);
  EXPECT_EQ(parse_time_ns("--gap", "2ms", 1'000'000'000), 2'000'000u);
  EXPECT_EQ(parse_time_ns("--gap", "1s", 1'000'000'000), 1'000'000'000u);
  EXPECT_EQ(parse_time_ns("--gap", "750", 1'000'000'000), 750u);
  EXPECT_EQ(parse_time_ns("--gap", "0us", 1'000'000'000), 0u);
  for (const char* bad : {"", "us", "8 us", "8h", "-1us", "1.5", "8us8", "0x10"}) {
    try {
      parse_time_ns("--gap", bad, 1'000'000'000);
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.option(), "--gap");
      EXPECT_NE(std::string(e.what()).find("a time like 8us"), std::string::npos) << e.what();
    }
  }
  try {
    parse_time_ns("--gap", "2s", 1'000'000'000);
    ADD_FAILURE() << "no error for 2s above 1s";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
}

// IBA 9.6: path MTUs are 256..4096 bytes, powers of two.
TEST(OptionValues, MtuIsOneOfTheFiveSizes) {
  EXPECT_EQ(parse_mtu("--mtu", 256), IBV_MTU_256);
  EXPECT_EQ(parse_mtu("--mtu", 4096), IBV_MTU_4096);
  EXPECT_THROW(parse_mtu("--mtu", 1500), ConfigError);
  EXPECT_THROW(parse_mtu("--mtu", 8192), ConfigError);
  EXPECT_THROW(parse_mtu("--mtu", (uint64_t{1} << 32) | 1024), ConfigError);
  EXPECT_EQ(transport::mtu_bytes(*transport::mtu_code(2048)), 2048u);
}

// A PCP alone travels in a priority tag (IEEE 802.1Q: VLAN 0).
TEST(OptionValues, MarksSetThePath) {
  wire::PathSpec path;
  PacketMarks m(26);
  m.ecn = "ect1";
  m.pcp = 3;
  apply_marks(m, path);
  EXPECT_EQ(path.dscp, 26);
  EXPECT_EQ(path.ecn, wire::Ecn::kEct1);
  EXPECT_TRUE(path.vlan);
  EXPECT_EQ(path.vlan_id, 0);
  EXPECT_EQ(path.pcp, 3);
  wire::PathSpec untagged;
  apply_marks(PacketMarks(10), untagged);
  EXPECT_FALSE(untagged.vlan);
  PacketMarks bad;
  bad.ecn = "red";
  try {
    apply_marks(bad, untagged, "qp[0].ecn");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.option(), "qp[0].ecn");
  }
}

}  // namespace
}  // namespace droce::options
