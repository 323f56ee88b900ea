#include "droce/fabric/ecn.h"

namespace droce::fabric {

EcnConfig ecn_defaults_for_rate(uint64_t rate_bps, MarkMode mode) {
  constexpr uint64_t kBaseRate = 25 * kGbps;
  EcnConfig c;
  c.mode = mode;
  auto scale = [&](uint64_t v) {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(v) * rate_bps / kBaseRate);
  };
  c.kmin_bytes = scale(c.kmin_bytes);
  c.kmax_bytes = scale(c.kmax_bytes);
  c.step_bytes = scale(c.step_bytes);
  return c;
}

double mark_probability(const EcnConfig& cfg, uint64_t q) {
  switch (cfg.mode) {
    case MarkMode::kOff:
      return 0;
    case MarkMode::kStep:
      return q > cfg.step_bytes ? 1.0 : 0.0;
    case MarkMode::kRed:
      if (q <= cfg.kmin_bytes) return 0;
      if (q >= cfg.kmax_bytes) return 1;
      return cfg.pmax * static_cast<double>(q - cfg.kmin_bytes) /
             static_cast<double>(cfg.kmax_bytes - cfg.kmin_bytes);
  }
  return 0;
}

}  // namespace droce::fabric
