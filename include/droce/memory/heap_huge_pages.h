// The heap in transparent huge pages for the simulator's processes.
//
// A simulated fabric of thousands of hosts keeps its hosts' QPs, endpoints
// and CC state on the heap, touched in no order a cache or TLB can follow:
// with the heap in 2 MiB pages a 1024-host permutation takes 5-25 % less
// CPU, run against run (docs/PERFORMANCE.md "At scale"). glibc does it
// with its tunable glibc.malloc.hugetlb=1 (madvise of what malloc maps),
// but reads tunables only when a process starts, from GLIBC_TUNABLES. So a
// program that wants it sets the variable and executes itself again,
// before it has done anything else (before MPI_Init too: an MPI process
// may exec itself as long as it has not initialised MPI).
//
// It does not, and runs on as it is, when:
// - GLIBC_TUNABLES already says glibc.malloc.hugetlb (the user's choice,
//   0 included);
// - this is the second start (DROCE_HEAP_HUGE_PAGES_STARTED is set);
// - DROCE_HEAP_HUGE_PAGES=0 is set;
// - it runs under valgrind (its preload is in LD_PRELOAD): executing the
//   program itself would leave valgrind behind;
// - the program cannot be executed again (/proc/self/exe).
#pragma once

#include <optional>
#include <string>

namespace droce::memory {

// GLIBC_TUNABLES' value with the heap in huge pages added to `current`
// (null: unset), or nullopt when `current` already sets the heap's huge
// pages either way. Tunables are colon-separated name=value pairs.
std::optional<std::string> tunables_with_heap_huge_pages(const char* current);

// Executes the program again with the heap in huge pages unless one of the
// cases above holds; returns only when it did not.
void exec_with_heap_huge_pages(char** argv);

}  // namespace droce::memory
