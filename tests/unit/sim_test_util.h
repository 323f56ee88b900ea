// Helpers shared by the simulator's tests (tests/unit and tests/sim): a
// file's bytes, and the output files of a whole run.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "droce/sim/simulator.h"

namespace droce::sim::testing {

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// What Simulator::write_outputs writes.
inline constexpr const char* kOutputFiles[] = {"flows.csv", "queues.csv", "links.csv", "fct.csv",
                                               "summary.json"};

// Runs `sc` to its end (every flow must complete), writes its outputs into
// `dir` and returns their contents, in kOutputFiles order.
inline std::vector<std::string> run_outputs(const Scenario& sc, const std::filesystem::path& dir) {
  Simulator s(sc);
  s.run();
  EXPECT_TRUE(s.all_done());
  s.write_outputs(dir.string());
  std::vector<std::string> out;
  for (const char* f : kOutputFiles) out.push_back(slurp(dir / f));
  return out;
}

}  // namespace droce::sim::testing
