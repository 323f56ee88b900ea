#include "sample_log.h"

namespace droce::sim {

std::vector<uint64_t> ChangeSeries::expand(uint32_t instants) const {
  std::vector<uint64_t> out(instants);
  Reader r;
  for (uint32_t i = 0; i < instants; ++i) out[i] = r.at(*this, i);
  return out;
}

}  // namespace droce::sim
