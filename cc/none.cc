// `none`: no congestion control, a fixed line-rate pacer. The baseline every
// experiment compares against, and the smallest complete algorithm.
#include "droce/cc/registry.h"

namespace droce::cc {
namespace {

class NoCc final : public Algorithm {
 public:
  using Algorithm::Algorithm;
  std::string_view name() const override { return "none"; }
  uint64_t rate_bytes_per_sec() const override {
    return line_rate_bytes_per_sec();
  }
};

std::unique_ptr<Algorithm> create(const Params& /*params*/,
                                  uint64_t line_rate_bytes_per_sec) {
  return std::make_unique<NoCc>(line_rate_bytes_per_sec);
}

}  // namespace

const AlgorithmInfo& none_algorithm() {
  static const AlgorithmInfo kInfo{
      "none", "fixed line rate, no reaction to any event", {}, &create};
  return kInfo;
}

}  // namespace droce::cc
