// libFuzzer target for droce-sim's scenario files: any byte string is a
// scenario. parse_scenario must either return a scenario whose every cross
// reference holds (links and flows name nodes that exist, each host has
// exactly one link) or throw ScenarioError with a message naming the file;
// any other exception, a crash or a sanitizer report is a bug. A scenario
// small enough to build (the simulator allocates the flows' memory) is
// then handed to the Simulator, whose own refusals must also be
// ScenarioError.
//
// Built only with -Dfuzz=true (clang, see docs/FUZZING.md). Seeds: the
// shipped scenarios and the refused ones under tests/sim/bad.
#include <cstdint>
#include <string>
#include <string_view>

#include "droce/sim/scenario.h"
#include "droce/sim/simulator.h"
#include "fuzz_check.h"

namespace droce::sim {
namespace {

constexpr char kName[] = "fuzz.toml";

void check_references(const Scenario& sc) {
  const auto node_exists = [&](const std::string& n) {
    return sc.host_index(n) >= 0 || sc.switch_index(n) >= 0;
  };
  std::vector<int> host_links(sc.hosts.size(), 0);
  for (const LinkSpec& l : sc.links) {
    FUZZ_CHECK(node_exists(l.a) && node_exists(l.b) && l.a != l.b);
    for (const std::string* end : {&l.a, &l.b})
      if (const int h = sc.host_index(*end); h >= 0) ++host_links[static_cast<size_t>(h)];
  }
  for (int n : host_links) FUZZ_CHECK(n == 1);
  for (const FlowSpec& f : sc.flows)
    FUZZ_CHECK(sc.host_index(f.src) >= 0 && sc.host_index(f.dst) >= 0);
}

// Building allocates each flow's source and destination memory and a QP
// pair per flow: only scenarios that stay small are built.
bool small_enough(const Scenario& sc) {
  if (sc.hosts.size() > 64 || sc.switches.size() > 32 || sc.links.size() > 256 ||
      sc.flows.size() > 64)
    return false;
  uint64_t bytes = 0;
  for (const FlowSpec& f : sc.flows) {
    if (f.bytes > (16u << 20)) return false;
    bytes += f.bytes;
  }
  return bytes <= (64u << 20);
}

}  // namespace
}  // namespace droce::sim

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace droce::sim;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Scenario sc;
  try {
    sc = parse_scenario(text, kName);
  } catch (const ScenarioError& e) {
    FUZZ_CHECK(std::string_view(e.what()).find(kName) != std::string_view::npos);
    return 0;
  }
  check_references(sc);
  if (!small_enough(sc)) return 0;
  try {
    Simulator s(sc);
  } catch (const ScenarioError&) {
  }
  return 0;
}
