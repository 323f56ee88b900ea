// How much memory this process has resident, for the tests and benchmarks
// that measure what a structure makes resident (rings paid for when
// written, idle QPs).
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>

namespace droce::memory {

// Resident bytes of this process now (/proc/self/statm); 0 when it cannot
// be read.
inline uint64_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long long size = 0, resident = 0;
  if (!f) return 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace droce::memory
