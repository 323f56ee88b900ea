// droce-switch's settings (src/switch_runtime/settings.cc): flags, the TOML
// file, and what is refused before EAL starts.
#include "droce/switch_runtime/settings.h"

#include <gtest/gtest.h>

#include <string>

#include "config_error_util.h"

namespace droce::switch_runtime {
namespace {

using droce::testing::config_error_of;

TEST(SwitchSettings, PortSpecsNameMembersAndRate) {
  const PortSpec p = parse_port_spec("--port", "net_memif0+net_memif1@25G");
  EXPECT_EQ(p.members, (std::vector<std::string>{"net_memif0", "net_memif1"}));
  EXPECT_EQ(p.rate_bps, 25'000'000'000ull);
  EXPECT_FALSE(parse_port_spec("--port", "0").rate_bps.has_value());
  EXPECT_NE(config_error_of([] { parse_port_spec("--port", "a++b"); }).find("expected NAME[+NAME...]"),
            std::string::npos);
  EXPECT_NE(config_error_of([] { parse_port_spec("--port", "a@2T"); }).find("out of range"),
            std::string::npos);
}

TEST(SwitchSettings, RoutesArePrefixesToPortGroups) {
  const RouteSpec r = parse_route_spec("--route", "10.0.0.0/24=1,2");
  EXPECT_EQ(r.len, 24);
  EXPECT_FALSE(r.prefix.v6);
  EXPECT_EQ(r.ports, (std::vector<uint16_t>{1, 2}));
  const RouteSpec d = parse_route_spec("--route", "default6=0");
  EXPECT_TRUE(d.prefix.v6);
  EXPECT_EQ(d.len, 0);
  EXPECT_EQ(parse_route_spec("--route", "fd00::1=3").len, 128);
  EXPECT_NE(config_error_of([] { parse_route_spec("--route", "10.0.0.1/33=0"); })
                .find("prefix length must be 0..32"),
            std::string::npos);
  EXPECT_NE(config_error_of([] { parse_route_spec("--route", "10.0.0.1"); }).find("expected PREFIX"),
            std::string::npos);
  EXPECT_EQ(parse_priorities("--pfc-priorities", "3,4"), 0x18);
}

TEST(SwitchSettings, FlagsOverrideTheFile) {
  Settings s;
  load_config_text(R"([switch]
rate = "25G"
seed = 7
[[ports]]
name = ["net_memif0", "net_memif1"]
rate = "100G"
[[ports]]
name = "net_memif2"
[[routes]]
prefix = "default"
ports = [0, 1]
)",
                   "sw.toml", s);
  ASSERT_EQ(s.ports.size(), 2u);
  EXPECT_EQ(s.ports[0].members.size(), 2u);
  EXPECT_EQ(s.default_rate_bps, 25'000'000'000ull);
  EXPECT_EQ(s.cfg.seed, 7u);
  Flags f;
  f.rate = "40G";
  f.seed = 9;
  f.pfc = true;
  f.ecn_mode = "step";
  f.ports = {"net_memif3"};
  f.load_balance = "adaptive_flowlet";
  f.flowlet_gap = "20us";
  apply_flags(f, s);
  validate(s);
  EXPECT_EQ(s.default_rate_bps, 40'000'000'000ull);
  EXPECT_EQ(s.cfg.seed, 9u);
  EXPECT_EQ(s.cfg.pfc.enabled_priorities, 1u << 3);  // priority 3 unless told
  EXPECT_EQ(s.ecn.mode, fabric::MarkMode::kStep);
  EXPECT_EQ(s.cfg.load_balance, fabric::LoadBalance::kAdaptiveFlowlet);
  EXPECT_EQ(s.cfg.flowlet_gap_ns, 20'000u);
  ASSERT_EQ(s.ports.size(), 3u);
  const fabric::SwitchConfig c = build_switch_config(s);
  ASSERT_EQ(c.ports.size(), 3u);
  EXPECT_EQ(c.ports[0].rate_bps, 100'000'000'000ull);
  EXPECT_EQ(c.ports[1].rate_bps, 40'000'000'000ull);
  // ECN thresholds scale with each port's rate unless given.
  EXPECT_GT(c.ports[0].ecn.kmin_bytes, c.ports[1].ecn.kmin_bytes);
}

TEST(SwitchSettings, FileMistakesNameFileLineAndKey) {
  Settings s;
  EXPECT_NE(config_error_of([&] { load_config_text("[switch]\necnn = 1\n", "sw.toml", s); })
                .find("sw.toml:2:1: switch.ecnn: unknown key"),
            std::string::npos);
  EXPECT_NE(config_error_of([&] {
              load_config_text("[[routes]]\nprefix = \"10.0.0.0/40\"\nports = 0\n", "sw.toml", s);
            }).find("sw.toml:2:"),
            std::string::npos);
  EXPECT_NE(config_error_of([&] { load_config_text("[switch\n", "sw.toml", s); }).find("sw.toml:1:"),
            std::string::npos);
  EXPECT_NE(config_error_of([&] { load_config("/nonexistent.toml", s); }).find("--config"),
            std::string::npos);
}

TEST(SwitchSettings, ValidateRefusesWhatCannotRun) {
  Settings s;
  EXPECT_NE(config_error_of([&] { validate(s); }).find("--port: no ports"), std::string::npos);
  s.ports.push_back(parse_port_spec("--port", "net_null0"));
  EXPECT_NE(config_error_of([&] { validate(s); }).find("--route: no routes"), std::string::npos);
  s.routes.push_back(parse_route_spec("--route", "default=1"));
  EXPECT_NE(config_error_of([&] { validate(s); }).find("port 1 does not exist"), std::string::npos);
  s.routes.back().ports = {0};
  validate(s);
  Flags f;
  f.xon = "2MiB";
  f.xoff = "1MiB";
  apply_flags(f, s);
  EXPECT_NE(config_error_of([&] { validate(s); }).find("--xon"), std::string::npos);
  Flags g;
  g.pfc_priorities = "3";
  Settings t;
  EXPECT_NE(config_error_of([&] { apply_flags(g, t); }).find("given without --pfc"), std::string::npos);
  Flags h;
  h.buffer_mode = "pooled";
  EXPECT_NE(config_error_of([&] { apply_flags(h, t); }).find("--buffer-mode"), std::string::npos);
  Flags lb;
  lb.load_balance = "random";
  EXPECT_NE(config_error_of([&] { apply_flags(lb, t); }).find("--load-balance"), std::string::npos);
  Flags k;
  k.pmax = 1.5;
  EXPECT_NE(config_error_of([&] { apply_flags(k, t); }).find("--pmax"), std::string::npos);
}

}  // namespace
}  // namespace droce::switch_runtime
