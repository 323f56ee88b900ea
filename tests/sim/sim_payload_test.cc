// [flow] payload = "virtual" (docs/SIM.md): the transport does not depend on
// payload bytes, so a run that moves none gives the same outputs as one that
// does, byte for byte (through loss, corruption, duplicates and INT), while
// the destination memory stays untouched; the
// option is refused together with verify = true; and the default ("auto")
// moves payload exactly for the flows that verify it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

#include "droce/endpoint/endpoint.h"
#include "droce/fabric/link.h"
#include "droce/sim/simulator.h"
#include "droce/wire/packet.h"

namespace droce::sim {
namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A 4-to-1 incast; `buffer` small and PFC off gives drops and go-back-N
// retransmissions, so the comparison covers recovery too. `payload` "":
// no payload key (the default). `impaired`: links that corrupt and
// duplicate frames, and HPCC, whose switches insert INT headers before
// the BTH: a virtual payload frame carries its payload as a length
// (fabric::Packet::unheld) through all of these.
std::string scenario(const char* opcode, const char* payload, bool lossy,
                     bool impaired = false) {
  const std::string payload_key =
      *payload ? std::string("payload = \"") + payload + "\"\n" : std::string();
  return std::string("[run]\nduration = \"50ms\"\ncsv_interval = \"5us\"\n") +
         "[topology]\nkind = \"incast\"\nsenders = 4\nrate = \"100G\"\ndelay = \"1us\"\n" +
         "flow_bytes = \"512KiB\"\n" +
         (lossy ? "[switch]\nbuffer = \"64KiB\"\npfc = { enabled = false }\n"
                : "[switch]\nbuffer = \"4MiB\"\n"
                  "pfc = { enabled = true, priorities = [3], xoff = \"64KiB\", xon = \"32KiB\" }\n") +
         (impaired ? "int = { enabled = true }\n"
                     "[link]\ncorrupt = 0.002\nduplicate = 0.002\n"
                   : "") +
         "[flow]\ncc = \"" + (impaired ? "hpcc" : "dcqcn") + "\"\nmtu = 1024\n" +
         "message = \"128KiB\"\ntimeout = 8\nverify = false\n" +
         "opcode = \"" + opcode + "\"\n" + payload_key;
}

struct Outputs {
  std::string files[5];
  bool sink_untouched = true;
  bool sink_has_source = true;
  uint64_t corrupted = 0;  // frames the links flipped a bit of
  uint64_t bad_icrc = 0;   // frames the hosts dropped for their ICRC
};

Outputs run(const char* opcode, const char* payload, bool lossy, bool impaired = false) {
  Simulator s(parse_scenario(scenario(opcode, payload, lossy, impaired), "payload.toml"));
  s.run();
  EXPECT_TRUE(s.all_done()) << opcode << " " << payload;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("droce-payload-" + std::to_string(::getpid()) + "-" + opcode + "-" + payload);
  s.write_outputs(dir.string());
  Outputs o;
  const char* names[5] = {"flows.csv", "queues.csv", "links.csv", "fct.csv", "summary.json"};
  for (int i = 0; i < 5; ++i) o.files[i] = slurp(dir / names[i]);
  std::filesystem::remove_all(dir);
  for (size_t l = 0; l < s.num_links(); ++l) o.corrupted += s.link_at(l).counters().corrupted;
  for (size_t h = 0; h < s.num_hosts(); ++h)
    o.bad_icrc += s.host_endpoint(h)
                      .counters()
                      .rx_parse_errors[static_cast<size_t>(wire::ParseError::kBadIcrc)];
  for (size_t f = 0; f < s.num_flows(); ++f) {
    const auto src = s.source_memory(f), dst = s.sink_memory(f);
    o.sink_untouched &= std::all_of(dst.begin(), dst.end(), [](uint8_t b) { return b == 0; });
    o.sink_has_source &= std::equal(src.begin(), src.end(), dst.begin(), dst.end());
  }
  return o;
}

class VirtualPayload : public ::testing::TestWithParam<std::tuple<const char*, bool>> {};

TEST_P(VirtualPayload, SameRunNoBytesMoved) {
  const auto [opcode, lossy] = GetParam();
  const Outputs real = run(opcode, "real", lossy);
  const Outputs virt = run(opcode, "virtual", lossy);
  const char* names[5] = {"flows.csv", "queues.csv", "links.csv", "fct.csv", "summary.json"};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(real.files[i], virt.files[i]) << names[i] << " differs";
  EXPECT_NE(real.files[3].find(",done\n"), std::string::npos);
  if (lossy) {
    EXPECT_EQ(real.files[4].find("\"retransmits\": 0,"), std::string::npos);
  }
  // Real payload lands in the sink; virtual payload leaves it as set up.
  EXPECT_TRUE(real.sink_has_source);
  EXPECT_FALSE(real.sink_untouched);
  EXPECT_TRUE(virt.sink_untouched);
  // These flows are not verified, so by default they move no payload.
  const Outputs unset = run(opcode, "", lossy);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(real.files[i], unset.files[i]) << names[i] << " differs";
  EXPECT_TRUE(unset.sink_untouched);
}

// Corrupted and duplicated frames, INT headers inserted on the way: the
// same outputs, and the corruption did happen (frames dropped for their
// ICRC at the hosts, which a bit flipped in virtual payload must cause
// too).
TEST_P(VirtualPayload, SameRunThroughCorruptionDuplicatesAndInt) {
  const auto [opcode, lossy] = GetParam();
  const Outputs real = run(opcode, "real", lossy, true);
  const Outputs virt = run(opcode, "virtual", lossy, true);
  const char* names[5] = {"flows.csv", "queues.csv", "links.csv", "fct.csv", "summary.json"};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(real.files[i], virt.files[i]) << names[i] << " differs";
  EXPECT_NE(real.files[3].find(",done\n"), std::string::npos);
  EXPECT_GT(real.corrupted, 0u);
  EXPECT_GT(real.bad_icrc, 0u);
  EXPECT_EQ(virt.corrupted, real.corrupted);
  EXPECT_EQ(virt.bad_icrc, real.bad_icrc);
  EXPECT_TRUE(virt.sink_untouched);
}

INSTANTIATE_TEST_SUITE_P(Opcodes, VirtualPayload,
                         ::testing::Combine(::testing::Values("write", "send", "read"),
                                            ::testing::Bool()));

// Two hosts on one switch, 12 lines of TOML.
const std::string kTwoHosts =
    "[[hosts]]\nname = \"a\"\n[[hosts]]\nname = \"b\"\n[[switches]]\nname = \"s\"\n"
    "[[links]]\na = \"a\"\nb = \"s\"\n[[links]]\na = \"b\"\nb = \"s\"\n";

std::string refusal(const std::string& text) {
  try {
    parse_scenario(text, "v.toml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(VirtualPayloadScenario, RefusedWithVerify) {
  const std::string head = kTwoHosts;  // 12 lines
  // verify defaults to true: the payload key is blamed.
  EXPECT_NE(refusal("[flow]\npayload = \"virtual\"\n" + head).find("v.toml:2:"),
            std::string::npos);
  EXPECT_NE(refusal("[flow]\npayload = \"virtual\"\n" + head).find("flow.payload"),
            std::string::npos);
  // Inherited virtual payload, verify switched back on in the flow: verify is.
  const std::string msg = refusal(
      "[flow]\npayload = \"virtual\"\nverify = false\n" + head +
      "[[flows]]\nsrc = \"a\"\ndst = \"b\"\nbytes = \"1MiB\"\nverify = true\n");
  EXPECT_NE(msg.find("v.toml:20:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("flows[0].verify"), std::string::npos) << msg;
  EXPECT_NE(refusal("[flow]\npayload = \"none\"\n" + head).find("one of: auto, real, virtual"),
            std::string::npos);
  EXPECT_EQ(refusal("[flow]\npayload = \"virtual\"\nverify = false\n" + head), "(accepted)");
}

// payload = "auto" (the default): real where the flow verifies, virtual
// where it does not, decided per flow after [flow]'s defaults apply.
TEST(VirtualPayloadScenario, DefaultMovesPayloadOnlyForVerifiedFlows) {
  const auto flows = [](const std::string& defaults, const std::string& flow_keys) {
    const std::string flow = "[[flows]]\nsrc = \"a\"\ndst = \"b\"\n" + flow_keys;
    return parse_scenario(defaults + kTwoHosts + flow, "v.toml").flows;
  };
  EXPECT_FALSE(flows("", "")[0].virtual_payload());                 // verified
  EXPECT_TRUE(flows("", "verify = false\n")[0].virtual_payload());  // nothing reads it
  EXPECT_TRUE(flows("[flow]\nverify = false\n", "")[0].virtual_payload());
  EXPECT_FALSE(flows("[flow]\nverify = false\n", "verify = true\n")[0].virtual_payload());
  EXPECT_TRUE(flows("[flow]\npayload = \"auto\"\n", "verify = false\n")[0].virtual_payload());
  // Explicit choices hold, inherited or not.
  EXPECT_FALSE(flows("[flow]\npayload = \"real\"\n", "verify = false\n")[0].virtual_payload());
  EXPECT_FALSE(flows("", "verify = false\npayload = \"real\"\n")[0].virtual_payload());
  EXPECT_TRUE(flows("", "verify = false\npayload = \"virtual\"\n")[0].virtual_payload());
  // A scenario built in code, not parsed, has the same default.
  FlowSpec f;
  EXPECT_FALSE(f.virtual_payload());
  f.verify = false;
  EXPECT_TRUE(f.virtual_payload());
}

}  // namespace
}  // namespace droce::sim
