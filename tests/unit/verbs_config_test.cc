// libdroce-verbs' configuration file: every key read, every mistake named.
#include "droce/verbs/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

namespace droce::verbs {
namespace {

std::string key_of(std::string_view text) {
  try {
    parse_config(text, "test.toml");
  } catch (const ConfigError& e) {
    return e.option();
  }
  return "(accepted)";
}

TEST(VerbsConfig, ReadsEveryKey) {
  const Config c = parse_config(R"(
device = "droce7"
eal = ["--no-huge", "-m", "512", "--vdev=net_null0"]
port = "net_null0"
addresses = ["10.0.0.1", "fd00::1"]
mtu = 1024
cc = "dcqcn"
cc_params = { rp_ai_rate = 5, rp_hai_rate = 50.5, mode = "x" }
port_rate_gbps = 25
idle_sleep_us = 20
dscp = 26
telemetry = false
report_link = true
start_timeout_ms = 500
wait_for = "/tmp/x.sock"
[neighbours]
"10.0.0.2" = "02:00:00:00:00:02"
"fd00::2" = "02-00-00-00-00-03"
)",
                                "t.toml");
  EXPECT_EQ(c.device, "droce7");
  ASSERT_EQ(c.eal.size(), 4u);
  EXPECT_EQ(c.eal[3], "--vdev=net_null0");
  EXPECT_EQ(c.port, "net_null0");
  ASSERT_EQ(c.addresses.size(), 2u);
  EXPECT_FALSE(c.addresses[0].v6);
  EXPECT_EQ(c.addresses[0].v4_host_order(), 0x0a000001u);
  EXPECT_TRUE(c.addresses[1].v6);
  EXPECT_EQ(c.mtu, 1024u);
  EXPECT_EQ(c.cc, "dcqcn");
  EXPECT_EQ(c.cc_params.at("rp_ai_rate"), "5");
  EXPECT_EQ(c.cc_params.at("rp_hai_rate"), "50.5");
  EXPECT_EQ(c.cc_params.at("mode"), "x");
  EXPECT_DOUBLE_EQ(c.port_rate_gbps, 25);
  EXPECT_EQ(c.idle_sleep_us, 20u);
  EXPECT_EQ(c.dscp, 26);
  EXPECT_FALSE(c.telemetry);
  EXPECT_TRUE(c.report_link);
  EXPECT_EQ(c.start_timeout_ms, 500u);
  EXPECT_EQ(c.wait_for, "/tmp/x.sock");
  ASSERT_EQ(c.neighbours.size(), 2u);
  EXPECT_EQ(c.neighbours[0].mac, (wire::MacAddress{2, 0, 0, 0, 0, 2}));
  EXPECT_TRUE(c.neighbours[1].ip.v6);
  EXPECT_EQ(c.neighbours[1].mac, (wire::MacAddress{2, 0, 0, 0, 0, 3}));
}

TEST(VerbsConfig, DefaultsFitAPlainPort) {
  const Config c = parse_config("", "empty.toml");
  EXPECT_EQ(c.device, "droce0");
  EXPECT_EQ(c.port, "0");
  EXPECT_EQ(c.mtu, 4096u);
  EXPECT_EQ(c.cc, "none");
  EXPECT_TRUE(c.addresses.empty());
  EXPECT_FALSE(c.report_link);
}

TEST(VerbsConfig, MistakesNameTheirKey) {
  EXPECT_EQ(key_of("devise = \"x\""), "devise");
  EXPECT_EQ(key_of("mtu = 1500"), "mtu");
  EXPECT_EQ(key_of("mtu = \"4096\""), "mtu");
  EXPECT_EQ(key_of("addresses = [\"10.0.0.300\"]"), "addresses[0]");
  EXPECT_EQ(key_of("addresses = \"10.0.0.1\""), "addresses");
  EXPECT_EQ(key_of("eal = [\"-l\", 0]"), "eal[1]");
  EXPECT_EQ(key_of("dscp = 64"), "dscp");
  EXPECT_EQ(key_of("start_timeout_ms = 1e3"), "start_timeout_ms");
  EXPECT_EQ(key_of("idle_sleep_us = -1"), "idle_sleep_us");
  EXPECT_EQ(key_of("port_rate_gbps = 5000"), "port_rate_gbps");
  EXPECT_EQ(key_of("telemetry = 1"), "telemetry");
  EXPECT_EQ(key_of("report_link = \"yes\""), "report_link");
  EXPECT_EQ(key_of("device = \"\""), "device");
  EXPECT_EQ(key_of("cc_params = { a = [1] }"), "cc_params.a");
  EXPECT_EQ(key_of("[neighbours]\n\"10.0.0.2\" = \"02:00:00:00:00\""),
            "neighbours.\"10.0.0.2\"");
  EXPECT_EQ(key_of("[neighbours]\nhost = \"02:00:00:00:00:01\""), "neighbours.\"host\"");
  EXPECT_EQ(key_of("mtu = = 3"), "test.toml");  // a syntax error names the file
}

TEST(VerbsConfig, UnknownKeyListsTheAcceptedOnes) {
  try {
    parse_config("prot = \"x\"", "t.toml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("accepted: device, eal, port"), std::string::npos)
        << e.what();
  }
}

TEST(VerbsConfig, EnvironmentNamesTheFile) {
  unsetenv("DROCE_VERBS_CONFIG");
  try {
    load_config_from_env();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.option(), "DROCE_VERBS_CONFIG");
  }
  setenv("DROCE_VERBS_CONFIG", "/nonexistent/droce.toml", 1);
  EXPECT_THROW(load_config_from_env(), ConfigError);
  const std::string path = testing::TempDir() + "verbs_config_test.toml";
  std::ofstream(path) << "device = \"fromenv\"\n";
  setenv("DROCE_VERBS_CONFIG", path.c_str(), 1);
  EXPECT_EQ(load_config_from_env().device, "fromenv");
  unsetenv("DROCE_VERBS_CONFIG");
}

}  // namespace
}  // namespace droce::verbs
