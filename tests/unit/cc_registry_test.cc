// The cc registry: creation by name, parameter validation and its messages,
// and properties every registered algorithm must have (determinism, rate
// within [min, line]).
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "droce/cc/registry.h"

namespace droce::cc {
namespace {

constexpr uint64_t kLine = 12'500'000'000;

std::string error_of(std::string_view name, const ParamMap& params,
                     uint64_t line = kLine) {
  try {
    make_algorithm(name, params, line);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(CcRegistry, ListsEveryAlgorithm) {
  EXPECT_EQ(algorithm_names(), "none, dcqcn, timely, hpcc, swift");
  for (const AlgorithmInfo* info : algorithms()) {
    auto cc = make_algorithm(info->name, {}, kLine);
    ASSERT_NE(cc, nullptr);
    EXPECT_EQ(cc->name(), info->name);
    EXPECT_EQ(find_algorithm(info->name), info);
    for (const ParamSpec& spec : info->params) {
      EXPECT_GE(spec.default_value, spec.min_value) << spec.name;
      EXPECT_LE(spec.default_value, spec.max_value) << spec.name;
      EXPECT_FALSE(spec.help.empty()) << spec.name;
    }
  }
}

TEST(CcRegistry, UnknownAlgorithmListsAcceptedNames) {
  const std::string msg = error_of("cubic", {});
  EXPECT_NE(msg.find("'cubic'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("none, dcqcn, timely, hpcc, swift"), std::string::npos)
      << msg;
  EXPECT_EQ(find_algorithm("cubic"), nullptr);
}

TEST(CcRegistry, UnknownParameterListsAcceptedParameters) {
  const std::string msg = error_of("dcqcn", {{"rp_bogus", "1"}});
  EXPECT_NE(msg.find("'rp_bogus'"), std::string::npos) << msg;
  for (const char* name :
       {"rp_time_reset", "rp_byte_reset", "rp_threshold", "rp_ai_rate",
        "rp_hai_rate", "rp_gd", "rp_min_rate", "rp_initial_alpha_value",
        "rp_dce_tcp_rtt", "rp_dce_tcp_g", "rp_rate_to_set_on_first_cnp",
        "rate_to_set_on_first_cnp", "rp_min_dec_fac",
        "rp_rate_reduce_monitor_period", "np_min_time_between_cnps"}) {
    EXPECT_NE(msg.find(name), std::string::npos) << name << " in " << msg;
  }
  const std::string none_msg = error_of("none", {{"rate", "1"}});
  EXPECT_NE(none_msg.find("no parameters"), std::string::npos) << none_msg;
  const std::string hpcc_msg = error_of("hpcc", {{"alpha", "1"}});
  for (const char* name : {"eta", "max_stage", "w_ai", "base_rtt"}) {
    EXPECT_NE(hpcc_msg.find(name), std::string::npos) << hpcc_msg;
  }
}

TEST(CcRegistry, OutOfRangeValueStatesTheRange) {
  std::string msg = error_of("dcqcn", {{"rp_gd", "16"}});
  EXPECT_NE(msg.find("'rp_gd'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[0, 15]"), std::string::npos) << msg;
  msg = error_of("hpcc", {{"eta", "1.5"}});
  EXPECT_NE(msg.find("[0.01, 1]"), std::string::npos) << msg;
  msg = error_of("timely", {{"beta", "-0.1"}});
  EXPECT_NE(msg.find("'beta'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[0, 1]"), std::string::npos) << msg;
}

TEST(CcRegistry, RejectsNonNumbersAndFractionsOfIntegers) {
  std::string msg = error_of("hpcc", {{"eta", "high"}});
  EXPECT_NE(msg.find("not a number"), std::string::npos) << msg;
  EXPECT_FALSE(error_of("hpcc", {{"eta", "0.9x"}}).empty());
  EXPECT_FALSE(error_of("hpcc", {{"eta", ""}}).empty());
  EXPECT_FALSE(error_of("hpcc", {{"eta", "nan"}}).empty());
  msg = error_of("dcqcn", {{"rp_threshold", "1.5"}});
  EXPECT_NE(msg.find("integer"), std::string::npos) << msg;
}

TEST(CcRegistry, RejectsSettingsInconsistentWithLineRate) {
  // 200 Gbit/s floor on a 100 Gbit/s line.
  EXPECT_FALSE(error_of("dcqcn", {{"rp_min_rate", "200000"}}).empty());
  EXPECT_FALSE(error_of("timely", {{"min_rate", "200000"}}).empty());
  EXPECT_FALSE(error_of("hpcc", {{"min_rate", "200000"}}).empty());
  EXPECT_FALSE(error_of("none", {}, 0).empty());
}

TEST(CcRegistry, ValuesReachTheAlgorithm) {
  auto cc = make_algorithm("dcqcn",
                           {{"rate_to_set_on_first_cnp", "8000"},
                            {"np_min_time_between_cnps", "50"}},
                           kLine);
  EXPECT_EQ(cc->np_min_time_between_cnps_ns(), 50'000u);
  cc->on_cnp(0);
  // Expect: 8000 Mbit/s = 1e9 B/s set by the first CNP (alias name).
  EXPECT_EQ(cc->rate_bytes_per_sec(), 1'000'000'000u);

  auto hpcc = make_algorithm("hpcc", {{"base_rtt", "4"}}, kLine);
  // Expect: W_init = 12.5e9 B/s * 4us = 50000 B.
  EXPECT_EQ(hpcc->window_bytes(), 50'000u);
}

TEST(CcRegistry, NoneIsAFixedLineRate) {
  auto cc = make_algorithm("none", {}, kLine);
  cc->on_cnp(0);
  AckEvent ack;
  ack.acked_bytes = 1000;
  ack.rtt_ns = 1'000'000;
  cc->on_ack(1, ack);
  cc->on_send(2, 1 << 30);
  EXPECT_EQ(cc->rate_bytes_per_sec(), kLine);
  EXPECT_FALSE(cc->window_bytes().has_value());
  EXPECT_FALSE(cc->next_timer().has_value());
}

TEST(CcRegistry, ParseAssignment) {
  EXPECT_EQ(parse_assignment("eta=0.9"),
            (std::pair<std::string, std::string>{"eta", "0.9"}));
  EXPECT_EQ(parse_assignment("k=").second, "");
  EXPECT_THROW(parse_assignment("eta"), ConfigError);
  EXPECT_THROW(parse_assignment("=1"), ConfigError);
}

// One row of observable output after an event.
struct Output {
  uint64_t rate;
  std::optional<uint64_t> window;
  std::optional<uint64_t> timer;
  bool operator==(const Output&) const = default;
};

// A fixed pseudo-random mix of every event type (a local LCG, so the
// sequence itself is deterministic), with timers fired when due.
std::vector<Output> run(Algorithm& cc) {
  std::vector<Output> out;
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  };
  uint64_t now = 0;
  uint64_t tx = 0;
  for (int i = 0; i < 5000; ++i) {
    now += 1 + next() % 20'000;
    while (auto deadline = cc.next_timer()) {
      if (*deadline > now) break;
      cc.on_timer(*deadline);
      out.push_back(
          {cc.rate_bytes_per_sec(), cc.window_bytes(), cc.next_timer()});
    }
    switch (next() % 4) {
      case 0:
        cc.on_cnp(now);
        break;
      case 1:
        cc.on_send(now, 1 + next() % 100'000);
        break;
      default: {
        AckEvent ack;
        ack.acked_bytes = next() % 65'536;
        if (next() % 4 != 0) ack.rtt_ns = 2'000 + next() % 600'000;
        tx += next() % 200'000;
        ack.int_hops.push({now, tx, next() % 300'000, kLine});
        cc.on_ack(now, ack);
      }
    }
    out.push_back(
        {cc.rate_bytes_per_sec(), cc.window_bytes(), cc.next_timer()});
  }
  return out;
}

TEST(CcRegistry, EveryAlgorithmIsDeterministicAndWithinLineRate) {
  for (const AlgorithmInfo* info : algorithms()) {
    SCOPED_TRACE(std::string(info->name));
    auto a = make_algorithm(info->name, {}, kLine);
    auto b = make_algorithm(info->name, {}, kLine);
    const std::vector<Output> first = run(*a);
    const std::vector<Output> second = run(*b);
    ASSERT_EQ(first.size(), second.size());
    EXPECT_TRUE(first == second);
    uint64_t lowest = kLine;
    for (const Output& o : first) {
      ASSERT_LE(o.rate, kLine);
      ASSERT_GT(o.rate, 0u);
      lowest = std::min(lowest, o.rate);
    }
    // The mix of CNPs, long RTTs and full queues must move every algorithm
    // but `none` off line rate, or the run above proves nothing.
    if (info->name != "none") {
      EXPECT_LT(lowest, kLine);
    }
  }
}

}  // namespace
}  // namespace droce::cc
