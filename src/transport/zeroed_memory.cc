// Zeroed ring memory (zeroed_array.h): anonymous mappings, carved.
//
// Blocks of 1 MiB and more get a mapping each. Smaller ones are cut from
// 64 MiB pieces, mapped with MAP_NORESERVE so that what is never written
// costs neither memory nor swap reservation: thousands of QPs make one
// mapping per 64 MiB instead of one each, which keeps well below the
// kernel's limit on mappings per process (vm.max_map_count). A freed
// block goes on a list of its size and is cleared when reused; pieces are
// kept for the life of the process, as malloc keeps its arenas.
#include <sys/mman.h>

#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "droce/transport/zeroed_array.h"

namespace droce::transport {

namespace {

constexpr size_t kLine = 64;
constexpr size_t kOwnMapping = size_t{1} << 20;
constexpr size_t kPiece = size_t{64} << 20;

size_t rounded(size_t bytes) { return (bytes + kLine - 1) & ~(kLine - 1); }

void* map_zeroed(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

struct Pieces {
  std::mutex mu;
  char* next = nullptr;  // the current piece's first free byte
  size_t left = 0;
  std::unordered_map<size_t, std::vector<void*>> freed;  // by rounded size
};

Pieces& pieces() {
  static Pieces* p = new Pieces;  // never destroyed: rings may outlive statics
  return *p;
}

}  // namespace

void* zeroed_memory(size_t bytes) {
  bytes = rounded(bytes);
  if (bytes >= kOwnMapping) return map_zeroed(bytes);
  Pieces& ps = pieces();
  std::lock_guard lock(ps.mu);
  if (auto it = ps.freed.find(bytes); it != ps.freed.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    std::memset(p, 0, bytes);
    return p;
  }
  if (ps.left < bytes) {
    ps.next = static_cast<char*>(map_zeroed(kPiece));
    ps.left = kPiece;
  }
  void* p = ps.next;
  ps.next += bytes;
  ps.left -= bytes;
  return p;
}

void free_zeroed_memory(void* p, size_t bytes) {
  bytes = rounded(bytes);
  if (bytes >= kOwnMapping) {
    munmap(p, bytes);
    return;
  }
  Pieces& ps = pieces();
  std::lock_guard lock(ps.mu);
  ps.freed[bytes].push_back(p);
}

}  // namespace droce::transport
