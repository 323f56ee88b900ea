// Scenario files: units, generated topologies, and every class of mistake
// refused with the file, line and key in the message.
#include "droce/sim/scenario.h"

#include <gtest/gtest.h>

namespace droce::sim {
namespace {

// Parses `text` expecting a ScenarioError whose message contains each of
// `needles`; returns the message.
std::string error_of(const std::string& text) {
  try {
    parse_scenario(text, "bad.toml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted:\n" << text;
  return {};
}

constexpr const char* kCustom = R"(
[[hosts]]
name = "a"
[[hosts]]
name = "b"
[[switches]]
name = "s"
[[links]]
a = "a"
b = "s"
[[links]]
a = "b"
b = "s"
)";

TEST(SimScenario, Units) {
  uint64_t v = 0;
  EXPECT_TRUE(parse_rate_bps("100G", v));
  EXPECT_EQ(v, 100'000'000'000u);
  EXPECT_TRUE(parse_rate_bps("25Gbps", v));
  EXPECT_EQ(v, 25'000'000'000u);
  EXPECT_TRUE(parse_rate_bps("400 Gb/s", v));
  EXPECT_EQ(v, 400'000'000'000u);
  EXPECT_TRUE(parse_time_ns("1.5us", v));
  EXPECT_EQ(v, 1500u);
  EXPECT_TRUE(parse_time_ns("10ms", v));
  EXPECT_EQ(v, 10'000'000u);
  EXPECT_TRUE(parse_bytes("4KiB", v));
  EXPECT_EQ(v, 4096u);
  EXPECT_TRUE(parse_bytes("1MB", v));
  EXPECT_EQ(v, 1'000'000u);
  EXPECT_FALSE(parse_rate_bps("fast", v));
  EXPECT_FALSE(parse_time_ns("10 parsecs", v));
  EXPECT_FALSE(parse_bytes("-1KiB", v));
}

TEST(SimScenario, CustomTopologyAndFlow) {
  const Scenario s = parse_scenario(std::string(kCustom) + R"(
[[flows]]
name = "x"
src = "a"
dst = "b"
bytes = "64KiB"
opcode = "send"
cc = "dcqcn"
cc_params = { rp_ai_rate = 10 }
recovery = "sr"
)");
  ASSERT_EQ(s.hosts.size(), 2u);
  ASSERT_EQ(s.switches.size(), 1u);
  ASSERT_EQ(s.links.size(), 2u);
  ASSERT_EQ(s.flows.size(), 1u);
  EXPECT_EQ(s.flows[0].bytes, 65536u);
  EXPECT_EQ(s.flows[0].opcode, Opcode::kSend);
  EXPECT_EQ(s.flows[0].recovery, transport::Recovery::kSelectiveRepeat);
  EXPECT_EQ(s.flows[0].cc_params.at("rp_ai_rate"), "10");
  EXPECT_EQ(s.hosts[0].rate_bps, 100'000'000'000u);  // the link default
}

TEST(SimScenario, IncastIsGenerated) {
  const Scenario s = parse_scenario(R"(
[topology]
kind = "incast"
senders = 16
rate = "100G"
flow_bytes = "1MiB"
[switch]
pfc = { enabled = true, priorities = [3] }
)");
  EXPECT_EQ(s.hosts.size(), 17u);
  EXPECT_EQ(s.switches.size(), 1u);
  EXPECT_EQ(s.links.size(), 17u);
  ASSERT_EQ(s.flows.size(), 16u);
  for (const auto& f : s.flows) EXPECT_EQ(f.dst, "h0");
  EXPECT_EQ(s.switches[0].cfg.pfc.enabled_priorities, 1u << 3);
}

TEST(SimScenario, LeafSpineOversubscription) {
  const Scenario s = parse_scenario(R"(
[topology]
kind = "leaf_spine"
leaves = 4
spines = 2
hosts_per_leaf = 8
host_rate = "100G"
oversubscription = 2
)");
  EXPECT_EQ(s.hosts.size(), 32u);
  EXPECT_EQ(s.switches.size(), 6u);
  EXPECT_EQ(s.links.size(), 32u + 8u);
  // 800 G of hosts per leaf over 2 uplinks at 2:1 -> 200 G each.
  EXPECT_EQ(s.links.back().rate_bps, 200'000'000'000u);
}

TEST(SimScenario, LeafSpineHostsLeaveTheLastLeafPartFull) {
  const Scenario s = parse_scenario(R"(
[topology]
kind = "leaf_spine"
leaves = 3
spines = 2
hosts_per_leaf = 4
hosts = 10
)");
  EXPECT_EQ(s.hosts.size(), 10u);
  EXPECT_EQ(s.links.size(), 10u + 6u);
  EXPECT_EQ(s.hosts.back().name, "h9");
  // Two leaves' worth (8) would leave leaf2 empty.
  const std::string m = error_of("[topology]\nkind = \"leaf_spine\"\nleaves = 3\n"
                                 "hosts_per_leaf = 4\nhosts = 8\n");
  EXPECT_NE(m.find("bad.toml:5:"), std::string::npos) << m;
  EXPECT_NE(m.find("topology.hosts"), std::string::npos) << m;
}

// Nodes are found by name through the index parse_scenario makes, and
// nodes added after it by a search; a name that is no node's gives -1.
TEST(SimScenario, NodesAreFoundByName) {
  Scenario s = parse_scenario(R"(
[topology]
kind = "leaf_spine"
leaves = 3
spines = 2
hosts_per_leaf = 4
)");
  ASSERT_EQ(s.host_names.size(), 12u) << "indexed when parsed";
  for (size_t h = 0; h < s.hosts.size(); ++h)
    EXPECT_EQ(s.host_index(s.hosts[h].name), static_cast<int>(h));
  for (size_t w = 0; w < s.switches.size(); ++w)
    EXPECT_EQ(s.switch_index(s.switches[w].name), static_cast<int>(w));
  EXPECT_EQ(s.host_index("leaf0"), -1);
  EXPECT_EQ(s.switch_index("h0"), -1);
  EXPECT_EQ(s.host_index("h12"), -1);
  s.hosts.push_back(HostSpec{"h12", 0, 0});
  EXPECT_EQ(s.host_index("h12"), 12) << "added after the index";
  EXPECT_EQ(s.host_index("h3"), 3);
  s.index_names();
  EXPECT_EQ(s.host_index("h12"), 12);
  EXPECT_EQ(s.host_index("nobody"), -1);
}

TEST(SimScenario, LinkDownIntervals) {
  // kCustom ends inside links[1] (b - s), so these keys are that link's.
  const Scenario s = parse_scenario(std::string(kCustom) + R"(down = [
  { from = "30us", until = "50us" },
  { from = 1000000 },
])");
  ASSERT_EQ(s.links[1].down.size(), 2u);
  EXPECT_EQ(s.links[1].down[0].from_ns, 30'000u);
  EXPECT_EQ(s.links[1].down[0].until_ns, 50'000u);
  EXPECT_EQ(s.links[1].down[1].from_ns, 1'000'000u);
  EXPECT_EQ(s.links[1].down[1].until_ns, fabric::kNever);  // down to the end
  EXPECT_TRUE(s.links[0].down.empty());
  // The same as TOML's array-of-tables form.
  const Scenario t = parse_scenario(std::string(kCustom) +
                                    "[[links.down]]\nfrom = \"1us\"\nuntil = \"2us\"\n");
  ASSERT_EQ(t.links[1].down.size(), 1u);
  EXPECT_EQ(t.links[1].down[0].until_ns, 2'000u);
}

TEST(SimScenario, LinkDownMistakesNameLineAndKey) {
  // Each: the down value on line 14 (one element per line from 15 on),
  // where the message must point, the key path and a word of the reason.
  struct Case {
    const char* down;
    const char* where;
    const char* key;
    const char* why;
  };
  const Case cases[] = {
      {"[{ from = -5, until = \"50us\" }]", ":14:", "links[1].down[0].from", "expected a value"},
      {"[{ from = \"-5us\" }]", ":14:", "links[1].down[0].from", "expected a value"},
      {"[{ from = \"10 parsecs\" }]", ":14:", "links[1].down[0].from", "expected a value"},
      {"[{ from = \"50us\", until = \"30us\" }]", ":14:", "links[1].down[0].until",
       "must be after from"},
      {"[{ from = \"50us\", until = \"50us\" }]", ":14:", "links[1].down[0].until",
       "must be after from"},
      {"[\n{ from = \"10us\", until = \"50us\" },\n{ from = \"40us\", until = \"60us\" },\n]",
       ":16:", "links[1].down[1].from", "not overlapping"},
      {"[\n{ from = \"100us\", until = \"150us\" },\n{ from = \"10us\", until = \"20us\" },\n]",
       ":16:", "links[1].down[1].from", "in time order"},
      {"[\n{ from = \"10us\", until = \"20us\" },\n{ from = \"20us\", until = \"30us\" },\n]",
       ":16:", "links[1].down[1].from", "previous interval"},
      {"[\n{ from = \"10us\" },\n{ from = \"20us\", until = \"30us\" },\n]", ":16:",
       "links[1].down[1]", "has no until"},
      {"[{ from = \"10us\", to = \"20us\" }]", ":14:", "links[1].down[0].to",
       "unknown key (accepted: from, until)"},
      {"[{ until = \"20us\" }]", ":14:", "links[1].down[0].from", "missing"},
      {"\"10us\"", ":14:", "links[1].down", "expected an array"},
      {"[\"10us\"]", ":14:", "links[1].down[0]", "expected an array"},
  };
  for (const Case& c : cases) {
    const std::string m = error_of(std::string(kCustom) + "down = " + c.down + "\n");
    EXPECT_NE(m.find(std::string("bad.toml") + c.where), std::string::npos) << c.down << ": " << m;
    EXPECT_NE(m.find(std::string(c.key) + ":"), std::string::npos) << c.down << ": " << m;
    EXPECT_NE(m.find(c.why), std::string::npos) << c.down << ": " << m;
  }
  // Not a default for every link: [link] does not take it.
  const std::string m = error_of(std::string(kCustom) + "[link]\ndown = []\n");
  EXPECT_NE(m.find("link.down: unknown key"), std::string::npos) << m;
}

// [[outages]] gives down intervals to a link named by its ends, so a link
// of a generated topology can fail; run.reconverge turns on rerouting.
constexpr char kLeafSpine[] = R"([run]
reconverge = "50us"
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 1
)";

TEST(SimScenario, OutagesAndReconverge) {
  const Scenario s = parse_scenario(std::string(kLeafSpine) +
                                    "[[outages]]\na = \"spine1\"\nb = \"leaf0\"\n"
                                    "down = [{ from = \"1us\", until = \"2us\" }]\n");
  ASSERT_TRUE(s.run.reconverge_ns.has_value());
  EXPECT_EQ(*s.run.reconverge_ns, 50'000u);
  size_t with_down = 0;
  for (const LinkSpec& l : s.links) {
    if (l.down.empty()) continue;
    ++with_down;
    EXPECT_EQ(l.a, "leaf0");  // the ends in either order
    EXPECT_EQ(l.b, "spine1");
    ASSERT_EQ(l.down.size(), 1u);
    EXPECT_EQ(l.down[0].from_ns, 1'000u);
    EXPECT_EQ(l.down[0].until_ns, 2'000u);
  }
  EXPECT_EQ(with_down, 1u);
  EXPECT_FALSE(parse_scenario(kCustom).run.reconverge_ns.has_value());  // static by default
}

TEST(SimScenario, OutageMistakesNameLineAndKey) {
  const std::string base = std::string(kLeafSpine) + "[[outages]]\n";  // line 8
  struct Case {
    const char* text;
    const char* where;
    const char* why;
  };
  const Case cases[] = {
      {"a = \"leaf0\"\nb = \"leaf1\"\ndown = [{ from = \"1us\" }]\n", ":8:",
       "outages[0]: no link between leaf0 and leaf1"},
      {"a = \"leaf0\"\nb = \"spine9\"\ndown = [{ from = \"1us\" }]\n", ":10:",
       "outages[0].b: no host or switch named \"spine9\""},
      {"a = \"leaf0\"\ndown = [{ from = \"1us\" }]\n", ":8:", "outages[0].b: missing"},
      {"a = \"leaf0\"\nb = \"spine0\"\n", ":8:", "outages[0].down: missing"},
      {"a = \"leaf0\"\nb = \"spine0\"\ndown = [{ from = \"1us\" }]\nwhen = 3\n", ":12:",
       "outages[0].when: unknown key"},
      {"a = \"leaf0\"\nb = \"spine0\"\ndown = [{ from = \"5us\", until = \"1us\" }]\n",
       ":11:", "outages[0].down[0].until: must be after from"},
      {"a = \"leaf0\"\nb = \"spine0\"\ndown = [{ from = \"1us\" }]\n[[outages]]\n"
       "a = \"spine0\"\nb = \"leaf0\"\ndown = [{ from = \"9us\" }]\n",
       ":12:", "outages[1]: the link between spine0 and leaf0 already has down intervals"},
  };
  for (const Case& c : cases) {
    const std::string m = error_of(base + c.text);
    EXPECT_NE(m.find(std::string("bad.toml") + c.where), std::string::npos) << c.text << m;
    EXPECT_NE(m.find(c.why), std::string::npos) << c.text << m;
  }
  // Two parallel links between the same pair: the outage cannot tell them apart.
  const std::string m = error_of(std::string(kCustom) +
                                 "[[links]]\na = \"b\"\nb = \"s\"\n"
                                 "[[outages]]\na = \"s\"\nb = \"b\"\ndown = [{ from = \"1us\" }]\n");
  EXPECT_NE(m.find("2 links between s and b"), std::string::npos) << m;
  const std::string r = error_of("[run]\nreconverge = \"soon\"\n");
  EXPECT_NE(r.find("bad.toml:2:"), std::string::npos) << r;
  EXPECT_NE(r.find("run.reconverge"), std::string::npos) << r;
}

TEST(SimScenario, UnknownKeyNamesFileLineAndKey) {
  const std::string m = error_of("[run]\nduration = \"1ms\"\nspeed = 3\n");
  EXPECT_NE(m.find("bad.toml:3:"), std::string::npos) << m;
  EXPECT_NE(m.find("run.speed"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown key"), std::string::npos) << m;
  const std::string m2 = error_of("[switch]\npfc = { enabled = true, xof = 1 }\n");
  EXPECT_NE(m2.find("bad.toml:2:"), std::string::npos) << m2;
  EXPECT_NE(m2.find("switch.pfc.xof"), std::string::npos) << m2;
}

TEST(SimScenario, LinkToMissingNode) {
  std::string text = kCustom;
  text += "[[links]]\na = \"s\"\nb = \"ghost\"\n";
  const std::string m = error_of(text);
  EXPECT_NE(m.find("bad.toml:16:"), std::string::npos) << m;
  EXPECT_NE(m.find("links[2].b"), std::string::npos) << m;
  EXPECT_NE(m.find("ghost"), std::string::npos) << m;
}

TEST(SimScenario, RateOutOfRange) {
  const std::string m =
      error_of("[topology]\nkind = \"incast\"\nsenders = 2\nrate = \"5T\"\n");
  EXPECT_NE(m.find("bad.toml:4:"), std::string::npos) << m;
  EXPECT_NE(m.find("topology.rate"), std::string::npos) << m;
  EXPECT_NE(m.find("out of range"), std::string::npos) << m;
  const std::string m2 = error_of(std::string(kCustom) + "[link]\nrate = \"1K\"\n");
  EXPECT_NE(m2.find("link.rate"), std::string::npos) << m2;
}

TEST(SimScenario, LoopWithoutEcmp) {
  const std::string text = R"([run]
ecmp = false
[[hosts]]
name = "a"
[[switches]]
name = "s1"
[[switches]]
name = "s2"
[[links]]
a = "a"
b = "s1"
[[links]]
a = "s1"
b = "s2"
[[links]]
a = "s2"
b = "s1"
)";
  const std::string m = error_of(text);
  EXPECT_NE(m.find("bad.toml:15:"), std::string::npos) << m;
  EXPECT_NE(m.find("links[2]"), std::string::npos) << m;
  EXPECT_NE(m.find("ECMP"), std::string::npos) << m;
  // The same loop with ECMP (the default) is fine.
  std::string ok = text;
  ok.replace(ok.find("ecmp = false"), 12, "ecmp = true ");
  EXPECT_NO_THROW(parse_scenario(ok));
}

TEST(SimScenario, OtherMistakes) {
  // Wrong type, bad enum, syntax error, flow to a missing host, unknown CC
  // algorithm, unknown CC parameter, host without a link.
  EXPECT_NE(error_of("[run]\nseed = \"x\"\n").find("run.seed"), std::string::npos);
  EXPECT_NE(error_of("[switch]\nbuffer_mode = \"huge\"\n").find("shared, per_port"),
            std::string::npos);
  EXPECT_NE(error_of("[run\n").find("bad.toml:1:"), std::string::npos);
  EXPECT_NE(error_of(std::string(kCustom) + "[[flows]]\nsrc = \"a\"\ndst = \"z\"\n")
                .find("flows[0].dst"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kCustom) + "[flow]\ncc = \"bbr\"\n").find("known: "),
            std::string::npos);
  const std::string m = error_of(std::string(kCustom) +
                                 "[[flows]]\nsrc = \"a\"\ndst = \"b\"\ncc = \"dcqcn\"\n"
                                 "cc_params = { no_such_knob = 1 }\n");
  EXPECT_NE(m.find("no_such_knob"), std::string::npos) << m;
  EXPECT_NE(m.find("bad.toml:14:"), std::string::npos) << m;
  EXPECT_NE(error_of("[[hosts]]\nname = \"lonely\"\n").find("exactly one link"),
            std::string::npos);
}

}  // namespace
}  // namespace droce::sim
