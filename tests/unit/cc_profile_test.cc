// Named CC profiles (cc/profiles/*.toml): every shipped profile loads and
// builds its algorithm at 100 G; the values the docs promise reach the
// algorithm; unknown names and malformed files are ConfigErrors that name
// what is wrong and what is accepted.
#include "droce/cc/profile.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config_error_util.h"
#include "droce/cc/dcqcn.h"
#include "droce/cc/registry.h"

namespace droce::cc {
namespace {

constexpr uint64_t kLine = 12'500'000'000;  // 100 Gbit/s in bytes/s

using droce::testing::config_error_of;

TEST(CcProfile, EveryShippedProfileLoadsAndBuildsItsAlgorithm) {
  const std::vector<Profile> all = list_profiles();
  std::vector<std::string> names;
  for (const Profile& p : all) {
    names.push_back(p.name);
    EXPECT_FALSE(p.summary.empty()) << p.name;
    EXPECT_FALSE(p.source.empty()) << p.name;
    EXPECT_FALSE(p.params.empty()) << p.name;
    auto algo = make_algorithm(p.algorithm, p.params, kLine);
    EXPECT_EQ(algo->name(), p.algorithm) << p.name;
    EXPECT_EQ(load_profile(p.name).params, p.params) << p.name;
  }
  for (const char* want : {"dcqcn-paper", "dcqcn-hpcc-ns3", "dcqcn-mlx5", "hpcc-paper",
                           "timely-paper", "dcqcn-100g", "timely-100g", "hpcc-100g",
                           "hpcc-ns3", "timely-hpcc-ns3"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  const std::string listing = describe_profiles(all);
  for (const std::string& n : names) EXPECT_NE(listing.find(n), std::string::npos) << n;
}

TEST(CcProfile, PaperValuesReachTheAlgorithm) {
  const Profile ns3 = load_profile("dcqcn-hpcc-ns3");
  EXPECT_EQ(ns3.algorithm, "dcqcn");
  EXPECT_EQ(ns3.params.at("clamp_tgt_rate"), "0");
  EXPECT_EQ(ns3.params.at("rp_time_reset"), "300");
  EXPECT_EQ(ns3.params.at("rp_ai_rate"), "20");
  EXPECT_EQ(ns3.params.at("rp_hai_rate"), "200");
  EXPECT_EQ(ns3.params.at("rp_min_rate"), "1000");
  EXPECT_EQ(ns3.params.at("rp_byte_reset"), "0");
  // The 1000 Mb/s floor: a flow cut again and again stops at 1.25e8 B/s.
  auto cc = make_algorithm("dcqcn", ns3.params, kLine);
  for (uint64_t t = 0; t < 400'000; t += 5'000) cc->on_cnp(t);
  EXPECT_EQ(cc->rate_bytes_per_sec(), 125'000'000u);
  // clamp_tgt_rate 0: cuts in a row keep the line rate as the target.
  EXPECT_DOUBLE_EQ(dynamic_cast<Dcqcn&>(*cc).target_rate(), 12.5e9);

  EXPECT_EQ(load_profile("dcqcn-paper").params.at("rp_min_rate"), "100");
  EXPECT_EQ(load_profile("hpcc-paper").params.at("eta"), "0.95");
  EXPECT_EQ(load_profile("hpcc-paper").params.at("max_stage"), "5");
  const Profile timely = load_profile("timely-paper");
  EXPECT_EQ(timely.params.at("t_low"), "50");
  EXPECT_EQ(timely.params.at("t_high"), "500");
  EXPECT_EQ(timely.params.at("beta"), "0.8");
  EXPECT_EQ(timely.params.at("alpha"), "0.875");
}

TEST(CcProfile, UnknownNameListsTheAcceptedOnes) {
  const std::string e = config_error_of([] { load_profile("dcqcn-bogus"); });
  EXPECT_NE(e.find("unknown cc profile 'dcqcn-bogus'"), std::string::npos) << e;
  EXPECT_NE(e.find("accepted: "), std::string::npos) << e;
  EXPECT_NE(e.find("dcqcn-paper"), std::string::npos) << e;
  EXPECT_NE(config_error_of([] { load_profile("/nonexistent/x.toml"); }).find("cannot read"),
            std::string::npos);
}

TEST(CcProfile, MalformedFilesNameTheProblem) {
  const auto parse = [](const char* text) {
    return config_error_of([&] { parse_profile(text, "t", "t.toml"); });
  };
  const char* head = "algorithm = \"dcqcn\"\nsummary = \"s\"\nsource = \"x\"\n";
  EXPECT_NE(parse("algorithm = \"cubic\"\nsummary = \"s\"\nsource = \"x\"\n")
                .find("unknown cc algorithm 'cubic'; accepted: none, dcqcn"),
            std::string::npos);
  EXPECT_NE(parse("summary = \"s\"\nsource = \"x\"\n").find("missing key 'algorithm'"),
            std::string::npos);
  EXPECT_NE(parse((std::string(head) + "colour = 1\n").c_str()).find("t.toml:4:1: colour: unknown key"),
            std::string::npos);
  EXPECT_NE(parse((std::string(head) + "[params]\nrp_gd = 99\n").c_str())
                .find("t.toml: cc 'dcqcn' parameter 'rp_gd': 99 is out of range"),
            std::string::npos);
  EXPECT_NE(parse((std::string(head) + "[params]\nrp_gd = \"x\"\n").c_str())
                .find("params.rp_gd: expected a number"),
            std::string::npos);
  EXPECT_NE(parse((std::string(head) + "[params]\nrp_bogus = 1\n").c_str())
                .find("unknown parameter 'rp_bogus'"),
            std::string::npos);
  EXPECT_NE(parse("algorithm = ").find("t.toml:1:"), std::string::npos);
}

TEST(CcProfile, EnvironmentDirectoryComesFirst) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("droce-cc-profile-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "dcqcn-paper.toml")
      << "algorithm = \"dcqcn\"\nsummary = \"mine\"\nsource = \"here\"\n[params]\nrp_gd = 10\n";
  ::setenv("DROCE_CC_PROFILES", dir.c_str(), 1);
  const Profile p = load_profile("dcqcn-paper");
  ::unsetenv("DROCE_CC_PROFILES");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(p.summary, "mine");
  EXPECT_EQ(p.params.at("rp_gd"), "10");
}

}  // namespace
}  // namespace droce::cc
