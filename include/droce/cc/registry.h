// Algorithms by name. Adding one: write cc/<name>.cc defining
// `const AlgorithmInfo& <name>_algorithm()` and add one X(<name>) line to the
// list in cc/registry.cc (docs/CC.md walks through it).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "droce/cc/algorithm.h"
#include "droce/cc/params.h"

namespace droce::cc {

struct AlgorithmInfo {
  std::string_view name;
  std::string_view summary;
  std::span<const ParamSpec> params;
  // `params` already validated against the table above.
  std::unique_ptr<Algorithm> (*create)(const Params& params,
                                       uint64_t line_rate_bytes_per_sec);
  // The algorithm steers by INT hop records echoed on ACKs (HPCC): switches
  // must stamp them (fabric IntConfig) and the receiver should ACK every
  // packet. Without them it still runs, on what it has, and the endpoint
  // counts the ACKs that came without (cc_acks_without_int).
  bool needs_int = false;
  // The algorithm steers by RTT samples (TIMELY, Swift): the requester asks
  // for an ACK on the packet it times (transport::CcHooks::samples_rtt).
  bool samples_rtt = false;
};

// All registered algorithms, in registry order.
std::span<const AlgorithmInfo* const> algorithms();

// nullptr when unknown.
const AlgorithmInfo* find_algorithm(std::string_view name);

// "dcqcn, hpcc, ..." in registry order (for error and help messages).
std::string algorithm_names();

// Creates `name` with `params` (string->string, validated and defaulted).
// Throws ConfigError for an unknown algorithm, unknown parameter, a value
// that is not a number, out of its range, or inconsistent with the line
// rate; the message lists the accepted names or the range.
std::unique_ptr<Algorithm> make_algorithm(std::string_view name,
                                          const ParamMap& params,
                                          uint64_t line_rate_bytes_per_sec);

}  // namespace droce::cc
