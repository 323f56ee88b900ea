// memory/heap_huge_pages.h: the GLIBC_TUNABLES value, and a real second
// start of this test binary (a child runs one test that re-executes it and
// reports the environment it then has).
#include "droce/memory/heap_huge_pages.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace droce::memory {
namespace {

TEST(HeapHugePages, TunableAddedToWhatIsThere) {
  EXPECT_EQ(tunables_with_heap_huge_pages(nullptr), "glibc.malloc.hugetlb=1");
  EXPECT_EQ(tunables_with_heap_huge_pages(""), "glibc.malloc.hugetlb=1");
  EXPECT_EQ(tunables_with_heap_huge_pages("glibc.malloc.arena_max=2"),
            "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
  // A longer name that starts the same is another tunable.
  EXPECT_EQ(tunables_with_heap_huge_pages("glibc.malloc.hugetlbx=0"),
            "glibc.malloc.hugetlbx=0:glibc.malloc.hugetlb=1");
}

TEST(HeapHugePages, TheUsersChoiceStands) {
  EXPECT_EQ(tunables_with_heap_huge_pages("glibc.malloc.hugetlb=0"), std::nullopt);
  EXPECT_EQ(tunables_with_heap_huge_pages("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=2"),
            std::nullopt);
}

// The child's half: run only when the parent test starts this binary with
// DROCE_TEST_REEXEC_CHILD set. Prints the tunables it ends up with.
TEST(HeapHugePages, ChildReexecutesItself) {
  if (!std::getenv("DROCE_TEST_REEXEC_CHILD")) GTEST_SKIP() << "run by ExecutesItselfOnce";
  static char self[] = "heap_huge_pages_test";
  static char filter[] = "--gtest_filter=HeapHugePages.ChildReexecutesItself";
  char* argv[] = {self, filter, nullptr};
  exec_with_heap_huge_pages(argv);
  // Reached in the second start only (or if the exec was refused).
  const char* t = std::getenv("GLIBC_TUNABLES");
  std::printf("TUNABLES=[%s]\n", t ? t : "");
}

std::string child_output(const std::string& env) {
  const std::string cmd = env + " DROCE_TEST_REEXEC_CHILD=1 /proc/" + std::to_string(::getpid()) +
                          "/exe --gtest_filter=HeapHugePages.ChildReexecutesItself";
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return out;
  std::array<char, 256> buf;
  while (std::fgets(buf.data(), buf.size(), f)) out += buf.data();
  ::pclose(f);
  return out;
}

TEST(HeapHugePages, ExecutesItselfOnce) {
  // Expect: started without, it starts again with the tunable added to
  // the caller's (and the second start does not start a third: the test
  // would print nothing or hang).
  const std::string out = child_output(
      "env -u LD_PRELOAD -u DROCE_HEAP_HUGE_PAGES_STARTED GLIBC_TUNABLES=glibc.malloc.arena_max=4");
  EXPECT_NE(out.find("TUNABLES=[glibc.malloc.arena_max=4:glibc.malloc.hugetlb=1]"),
            std::string::npos)
      << out;
  // Expect: DROCE_HEAP_HUGE_PAGES=0 and the user's own setting are left
  // as they are.
  const std::string off =
      child_output("env -u LD_PRELOAD -u GLIBC_TUNABLES DROCE_HEAP_HUGE_PAGES=0");
  EXPECT_NE(off.find("TUNABLES=[]"), std::string::npos) << off;
  const std::string own = child_output("env -u LD_PRELOAD GLIBC_TUNABLES=glibc.malloc.hugetlb=0");
  EXPECT_NE(own.find("TUNABLES=[glibc.malloc.hugetlb=0]"), std::string::npos) << own;
  // Expect: a second start whose tunable went missing runs on as it is.
  const std::string again =
      child_output("env -u LD_PRELOAD -u GLIBC_TUNABLES DROCE_HEAP_HUGE_PAGES_STARTED=1");
  EXPECT_NE(again.find("TUNABLES=[]"), std::string::npos) << again;
}

}  // namespace
}  // namespace droce::memory
