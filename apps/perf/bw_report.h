// perftest's bandwidth row (#bytes, #iterations, BW peak, BW average,
// MsgRate) from completion events, and the rows a server with several
// clients prints (docs/DROCE-PERF.md "Output").
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace droce::perf {

struct BwResult {
  uint64_t msgs = 0;
  double secs = 0;
  double avg_bps = 0;   // bytes per second
  double peak_bps = 0;  // bytes per second
};

// Average = bytes / (t1 - t0). perftest's "BW peak" is the best rate over
// its sampling; here it is the best rate over any window of at least 1/20
// of the run (and >= 100 us) between completion events (time, messages
// done), so one lucky completion does not make a peak.
BwResult bw_result(uint64_t size, uint64_t msgs, uint64_t t0, uint64_t t1,
                   const std::vector<std::pair<uint64_t, uint64_t>>& events);

// The column header; `suffix` is appended (a server's "client" column).
std::string bw_header(bool gbits, const std::string& suffix = "");
// One row in MB/sec (2^20) or Gb/s; `suffix` is appended.
std::string bw_row(uint64_t size, const BwResult& r, bool gbits,
                   const std::string& suffix = "");

}  // namespace droce::perf
