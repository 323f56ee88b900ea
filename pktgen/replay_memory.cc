#include "replay_memory.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace droce::pktgen {

uint64_t replay_connections(const ScheduleParams& params, const ScheduleSize& size) {
  const uint64_t kept = size.rank_pairs * params.channels;
  if (params.window == 0) return kept;
  return std::min(kept, uint64_t{params.ranks} * params.window * params.channels);
}

uint64_t replay_memory_floor(const ScheduleParams& params, const ScheduleSize& size,
                             uint32_t kept_iterations, uint64_t hosts) {
  const uint64_t per_transfer =
      kReplayBytesPerTransfer + uint64_t{kept_iterations} * kReplayBytesPerKeptLatency;
  const uint64_t per_connection =
      params.window ? kReplayBytesPerWindowConnection : kReplayBytesPerConnection;
  return size.transfers * per_transfer + replay_connections(params, size) * per_connection +
         hosts * kReplayBytesPerHost;
}

uint64_t memory_for_this_process(uint32_t processes_here) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t bytes = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : UINT64_MAX;
  // "max" when unlimited; absent outside cgroup v2.
  std::ifstream limit("/sys/fs/cgroup/memory.max");
  std::string text;
  if (limit >> text && !text.empty() && text.find_first_not_of("0123456789") == std::string::npos)
    bytes = std::min<uint64_t>(bytes, std::stoull(text));
  return bytes / std::max<uint32_t>(processes_here, 1);
}

}  // namespace droce::pktgen
