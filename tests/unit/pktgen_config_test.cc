#include "droce/pktgen/config.h"

#include <gtest/gtest.h>

namespace droce::pktgen {
namespace {

// The message for `option`, or "" if none.
std::string message_for(const std::vector<ValidationError>& errors, const std::string& option) {
  for (const auto& e : errors) {
    if (e.option == option) return e.to_string();
  }
  return "";
}

TEST(PktgenConfig, DefaultsAreValid) {
  PktgenConfig c;
  EXPECT_TRUE(validate(c).empty());
  c.mode = Mode::kStream;
  EXPECT_TRUE(validate(c).empty());
}

TEST(PktgenConfig, CollectiveMessagesNameOptionAndAcceptedValues) {
  PktgenConfig c;
  c.collective.pattern = "butterfly";
  c.collective.ranks = 1;
  auto e = validate(c);
  EXPECT_EQ(message_for(e, "--pattern"),
            "--pattern: unknown pattern 'butterfly' (accepted: ring, halving_doubling, tree, "
            "all_gather, reduce_scatter, all_to_all, incast, permutation)");
  EXPECT_EQ(message_for(e, "--ranks"), "--ranks: must be 2..8192 (got 1)");

  c = {};
  c.collective.ranks = 3;
  c.collective.min_bytes = 1000;  // not a multiple of 12
  e = validate(c);
  EXPECT_EQ(message_for(e, "-b/--minbytes"),
            "-b/--minbytes: 1000 is not a multiple of 4 x ranks = 12 bytes (ring gives every rank an "
            "equal share of float32)");
  c.collective.min_bytes = 1200;
  c.collective.max_bytes = 1200 * 64;
  EXPECT_TRUE(validate(c).empty());
  EXPECT_EQ(sweep_sizes(c.collective).size(), 7u);

  c.collective.pattern = "tree";
  c.collective.min_bytes = 1002;
  EXPECT_EQ(message_for(validate(c), "-b/--minbytes"),
            "-b/--minbytes: 1002 is not a multiple of 4 bytes (float32)");

  c = {};
  c.collective.max_bytes = 1024;
  c.collective.min_bytes = 4096;
  EXPECT_NE(message_for(validate(c), "-e/--maxbytes"), "");
  c = {};
  c.collective.min_bytes = 64;
  c.collective.max_bytes = 4096;
  c.collective.step_factor = 1;
  EXPECT_NE(message_for(validate(c), "-f/--stepfactor"), "");
  c.collective.step_bytes = 6;
  EXPECT_NE(message_for(validate(c), "-i/--stepbytes"), "");
  c.collective.step_bytes = 64;
  EXPECT_TRUE(validate(c).empty());

  c = {};
  c.collective.iters = 0;
  c.collective.channels = 0;
  c.collective.chunk_bytes = 3;
  c.collective.pattern = "incast";
  c.collective.root = 5;
  e = validate(c);
  EXPECT_NE(message_for(e, "-n/--iters"), "");
  EXPECT_NE(message_for(e, "--channels"), "");
  EXPECT_NE(message_for(e, "--chunk"), "");
  EXPECT_EQ(message_for(e, "--root"), "--root: 5 is not a rank (0..1)");

  c = {};
  c.collective.window = 1;
  EXPECT_EQ(message_for(validate(c), "--window"),
            "--window: only for --pattern all_to_all (got ring)");
  c.collective.pattern = "all_to_all";
  c.collective.ranks = 4;
  c.collective.min_bytes = c.collective.max_bytes = 4096;
  EXPECT_TRUE(validate(c).empty());
  c.collective.window = 4;
  EXPECT_EQ(message_for(validate(c), "--window"), "--window: must be 0..3 (below --ranks; got 4)");
}

TEST(PktgenConfig, ScheduleParamsCarryEveryCollectiveOption) {
  CollectiveConfig c;
  c.pattern = "all_to_all";
  c.ranks = 12;
  c.channels = 3;
  c.chunk_bytes = 256;
  c.root = 2;
  c.seed = 9;
  c.window = 5;
  const ScheduleParams p = schedule_params(c, 1 << 20);
  EXPECT_EQ(p.pattern, Pattern::kAllToAll);
  EXPECT_EQ(p.ranks, 12u);
  EXPECT_EQ(p.bytes, uint64_t{1} << 20);
  EXPECT_EQ(p.channels, 3u);
  EXPECT_EQ(p.chunk_bytes, 256u);
  EXPECT_EQ(p.root, 2u);
  EXPECT_EQ(p.seed, 9u);
  EXPECT_EQ(p.window, 5u);
}

TEST(PktgenConfig, StreamMessages) {
  PktgenConfig c;
  c.mode = Mode::kStream;
  c.stream.rate = "200Gbps";
  c.stream.line_rate_gbps = 100;
  auto e = validate(c);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].option, "--rate");
  EXPECT_NE(e[0].message.find("above the line rate of 100.000 Gb/s"), std::string::npos);

  c.stream.rate = "lots";
  EXPECT_NE(message_for(validate(c), "--rate").find("accepted: <n>pps"), std::string::npos);
  c.stream.rate = "100%";
  c.stream.opcode = "RC_TELEPORT";
  EXPECT_NE(message_for(validate(c), "--opcode").find("RC_RDMA_WRITE_ONLY"), std::string::npos);
  c.stream.opcode = "RC_ACKNOWLEDGE";
  EXPECT_NE(message_for(validate(c), "--payload").find("carries no payload"), std::string::npos);
  c.stream.opcode = "RC_SEND_ONLY";
  c.stream.payload_bytes = 8;
  EXPECT_NE(message_for(validate(c), "--payload").find("at least 24"), std::string::npos);
  c.stream.probe = false;
  EXPECT_TRUE(validate(c).empty());
  c.stream.qpn_mode = "sometimes";
  c.stream.vlan = 4095;
  c.stream.pcp = 8;
  c.stream.dscp = 64;
  c.stream.ecn = 4;
  c.stream.line_rate_gbps = 0;
  e = validate(c);
  EXPECT_EQ(message_for(e, "--qpn-mode"), "--qpn-mode: unknown mode 'sometimes' (accepted: fixed, inc, random)");
  EXPECT_NE(message_for(e, "--vlan"), "");
  EXPECT_NE(message_for(e, "--pcp"), "");
  EXPECT_NE(message_for(e, "--dscp"), "");
  EXPECT_NE(message_for(e, "--ecn"), "");
  EXPECT_NE(message_for(e, "--line-rate"), "");
}

}  // namespace
}  // namespace droce::pktgen
