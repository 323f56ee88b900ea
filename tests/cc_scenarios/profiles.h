// The per-algorithm parameters the CC experiments run with on the example
// fabric (examples/cc/: 100 G links, 1 us each, base RTT about 4.7 us).
// scripts/cc-experiment carries the same table; docs/CC.md "Experiments"
// says where each value comes from.
#pragma once

#include <string_view>

#include "droce/cc/params.h"
#include "droce/sim/scenario.h"

namespace droce::cc_experiments {

inline cc::ParamMap profile(std::string_view cc) {
  if (cc == "dcqcn")  // the DCQCN paper's settings (SIGCOMM'15 §5)
    return {{"rp_time_reset", "55"},        {"rp_dce_tcp_rtt", "55"},
            {"rp_byte_reset", "10000000"},  {"rp_threshold", "5"},
            {"rp_ai_rate", "40"},           {"rp_dce_tcp_g", "1020"},
            {"rp_initial_alpha_value", "1024"}, {"np_min_time_between_cnps", "50"}};
  if (cc == "timely")  // thresholds for a 5 us fabric, delta x10 for 100 G
    return {{"t_low", "10"}, {"t_high", "50"}, {"delta", "100"}, {"min_rtt", "20"}};
  if (cc == "hpcc") return {{"base_rtt", "5"}};  // T = the fabric's base RTT
  return {};
}

// Every flow runs `cc` with its profile.
inline void use_cc(sim::Scenario& sc, std::string_view cc) {
  for (auto& f : sc.flows) {
    f.cc = std::string(cc);
    f.cc_params = profile(cc);
  }
}

}  // namespace droce::cc_experiments
