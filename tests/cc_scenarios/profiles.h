// The per-algorithm parameters the CC experiments run with on the example
// fabric (examples/cc/: 100 G links, 1 us each, base RTT about 4.7 us): the
// named profiles dcqcn-100g, timely-100g and hpcc-100g (cc/profiles/, one
// file each, docs/CC.md "Profiles"), which scripts/cc-experiment uses too.
#pragma once

#include <string>
#include <string_view>

#include "droce/cc/params.h"
#include "droce/cc/profile.h"
#include "droce/sim/scenario.h"

namespace droce::cc_experiments {

// The name of `cc`'s profile for the examples; empty: registry defaults.
inline std::string profile_name(std::string_view cc) {
  if (cc == "dcqcn" || cc == "timely" || cc == "hpcc") return std::string(cc) + "-100g";
  return {};
}

inline cc::ParamMap profile(std::string_view cc) {
  const std::string name = profile_name(cc);
  return name.empty() ? cc::ParamMap{} : cc::load_profile(name).params;
}

// Every flow runs `cc` with its profile.
inline void use_cc(sim::Scenario& sc, std::string_view cc) {
  const cc::ParamMap params = profile(cc);
  for (auto& f : sc.flows) {
    f.cc = std::string(cc);
    f.cc_params = params;
  }
}

}  // namespace droce::cc_experiments
