#include "bw_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace droce::perf {

BwResult bw_result(uint64_t size, uint64_t msgs, uint64_t t0, uint64_t t1,
                   const std::vector<std::pair<uint64_t, uint64_t>>& events) {
  BwResult r;
  r.msgs = msgs;
  r.secs = std::max<double>(1e-9, static_cast<double>(t1 - t0) / 1e9);
  r.avg_bps = static_cast<double>(msgs) * static_cast<double>(size) / r.secs;
  r.peak_bps = r.avg_bps;
  const uint64_t window = std::max<uint64_t>((t1 - t0) / 20, 100'000);
  size_t j = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    if (j < i) j = i;
    while (j < events.size() && events[j].first - events[i].first < window) ++j;
    if (j >= events.size()) break;
    const double dt = static_cast<double>(events[j].first - events[i].first) / 1e9;
    const double b = static_cast<double>(events[j].second - events[i].second) *
                     static_cast<double>(size);
    r.peak_bps = std::max(r.peak_bps, b / dt);
  }
  return r;
}

std::string bw_header(bool gbits, const std::string& suffix) {
  return fmt::format(" #bytes     #iterations    BW peak[{0}/sec]    BW average[{0}/sec]   "
                     "MsgRate[Mpps]{1}\n",
                     gbits ? "Gb" : "MB", suffix);
}

std::string bw_row(uint64_t size, const BwResult& r, bool gbits, const std::string& suffix) {
  const auto unit = [&](double bps) { return gbits ? bps * 8 / 1e9 : bps / (1024.0 * 1024.0); };
  return fmt::format(" {:<10} {:<10}     {:>14.2f}     {:>16.2f}     {:>12.6f}{}\n", size,
                     r.msgs, unit(r.peak_bps), unit(r.avg_bps),
                     static_cast<double>(r.msgs) / r.secs / 1e6, suffix);
}

}  // namespace droce::perf
