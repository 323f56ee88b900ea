// droce-pktgen's options as plain data, and their validation. The app parses
// the command line into PktgenConfig, calls validate(), prints every message
// and exits 2 if there is any (docs/DESIGN.md "Error handling").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "droce/pktgen/busbw.h"
#include "droce/pktgen/schedule.h"
#include "droce/pktgen/stream.h"

namespace droce::pktgen {

enum class Mode : uint8_t { kCollective, kStream };

// Option spellings are the ones the messages name (docs/PKTGEN.md "Options").
struct CollectiveConfig {
  std::string pattern = "ring";   // --pattern
  uint32_t ranks = 2;             // --ranks
  uint64_t min_bytes = 32 << 20;  // -b, --minbytes
  uint64_t max_bytes = 32 << 20;  // -e, --maxbytes
  uint64_t step_factor = 2;       // -f, --stepfactor (used when > 1)
  uint64_t step_bytes = 0;        // -i, --stepbytes (used when -f is 1)
  uint32_t iters = 20;            // -n, --iters
  uint32_t warmup_iters = 5;      // -w, --warmup_iters
  uint32_t channels = 1;          // --channels
  uint64_t chunk_bytes = 0;       // --chunk (0: one chunk per step)
  uint32_t root = 0;              // --root (incast)
  uint64_t seed = 1;              // --seed (permutation)
  uint32_t window = 0;            // --window (all_to_all; 0: every message at once)
};

struct StreamConfig {
  std::string opcode = "RC_RDMA_WRITE_ONLY";  // --opcode (name or number)
  uint32_t payload_bytes = 1024;               // --payload
  bool ipv6 = false;                           // --ipv6
  int32_t vlan = -1;                           // --vlan (-1: untagged; 0..4094)
  uint32_t pcp = 0;                            // --pcp 0..7
  uint32_t dscp = 0;                           // --dscp 0..63
  uint32_t ecn = 2;                            // --ecn 0..3
  std::string rate = "100%";                   // --rate
  double line_rate_gbps = 100;                 // --line-rate
  std::string qpn_mode = "fixed";              // --qpn-mode fixed|inc|random
  uint32_t qpn_count = 1;                      // --qpn-count
  std::string psn_mode = "inc";                // --psn-mode
  std::string udp_sport_mode = "fixed";        // --sport-mode
  uint32_t udp_sport_count = 1;                // --sport-count
  std::string ip_mode = "fixed";               // --ip-mode (source and destination)
  uint32_t ip_count = 1;                       // --ip-count
  bool probe = true;                           // --no-probe clears it
};

struct PktgenConfig {
  Mode mode = Mode::kCollective;
  CollectiveConfig collective;
  StreamConfig stream;
};

struct ValidationError {
  std::string option;   // "--pattern", "-b/--minbytes", ...
  std::string message;  // what is wrong and what is accepted
  std::string to_string() const { return option + ": " + message; }
};

// Every problem found, in option order; empty when the config is usable.
std::vector<ValidationError> validate(const PktgenConfig& config);

// The sizes a valid collective config sweeps (validate() first).
std::vector<uint64_t> sweep_sizes(const CollectiveConfig& c);

// The schedule a valid collective config asks for at `bytes` (validate()
// first).
ScheduleParams schedule_params(const CollectiveConfig& c, uint64_t bytes);

// A size as nccl-tests spells it: plain bytes, or K/M/G (powers of 1024,
// either case), or KiB/MiB/GiB. False for anything else, or on overflow.
bool parse_size(const std::string& s, uint64_t& out);

// "fixed" | "inc" | "random" -> field range of `count` values from `start`.
bool parse_field_mode(const std::string& mode, FieldRange::Mode* out);

}  // namespace droce::pktgen
