#include "droce/memory/heap_huge_pages.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace droce::memory {

namespace {
constexpr std::string_view kHeapHugePages = "glibc.malloc.hugetlb";
// Set for the second start, which must not start a third.
constexpr const char* kStarted = "DROCE_HEAP_HUGE_PAGES_STARTED";
}  // namespace

std::optional<std::string> tunables_with_heap_huge_pages(const char* current) {
  const std::string_view now = current ? current : "";
  // A name only counts as a whole name before '=' (a longer tunable that
  // starts the same is another one).
  for (size_t at = 0; at <= now.size();) {
    const size_t end = std::min(now.find(':', at), now.size());
    const std::string_view pair = now.substr(at, end - at);
    if (pair.substr(0, pair.find('=')) == kHeapHugePages) return std::nullopt;
    at = end + 1;
  }
  std::string v(now);
  if (!v.empty()) v += ':';
  v += kHeapHugePages;
  v += "=1";
  return v;
}

void exec_with_heap_huge_pages(char** argv) {
  if (const char* off = std::getenv("DROCE_HEAP_HUGE_PAGES"); off && std::strcmp(off, "0") == 0)
    return;
  if (const char* pre = std::getenv("LD_PRELOAD"); pre && std::strstr(pre, "vgpreload")) return;
  // Started once already: never a second time, even where the C library
  // dropped the tunable from the environment (a secure-mode start does).
  if (std::getenv(kStarted)) return;
  const char* before = std::getenv("GLIBC_TUNABLES");
  const std::optional<std::string> tunables = tunables_with_heap_huge_pages(before);
  if (!tunables) return;
  const std::optional<std::string> kept =
      before ? std::optional<std::string>(before) : std::nullopt;
  if (::setenv("GLIBC_TUNABLES", tunables->c_str(), 1) != 0 || ::setenv(kStarted, "1", 1) != 0)
    return;
  ::execv("/proc/self/exe", argv);
  // Not executed (no /proc, say): the variable as it was, and the run goes
  // on without; it is the same run, only slower.
  if (kept)
    ::setenv("GLIBC_TUNABLES", kept->c_str(), 1);
  else
    ::unsetenv("GLIBC_TUNABLES");
  ::unsetenv(kStarted);
}

}  // namespace droce::memory
