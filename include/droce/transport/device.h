// Device (a verbs "context"): owns PDs, MRs, CQs, SRQs and QPs and answers
// the lookups the data path needs — QP by QPN for dispatch, MR by key for
// the responder and requester. Single-threaded like everything in an
// lcore, with one exception: posters on other threads check their SGEs
// (check_sges) against copies of the regions that they read without a
// lock (mr_views.h); registrations are serialised among themselves, and
// the data path reads the table itself on its lcore.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "droce/transport/cq.h"
#include "droce/transport/mr.h"
#include "droce/transport/mr_views.h"
#include "droce/transport/pd.h"
#include "droce/transport/qp.h"
#include "droce/transport/srq.h"

namespace droce::transport {

// QPNs are 24-bit; 0 (SMI) and 1 (GSI) are reserved (IBA 10.2.4).
constexpr uint32_t kFirstQpn = 2;
constexpr uint32_t kQpnMask = 0xFFFFFF;
// Requested MR keys keep the key layout (slot << 8 | key byte, mr.h); the
// slot table grows to the slot asked for, so it is bounded.
constexpr uint32_t kMaxRequestedKeySlot = (1u << 20) - 1;

class Device {
 public:
  // The key bytes of automatically assigned MR keys are drawn from a
  // generator seeded from std::random_device, or from `mr_key_seed`
  // (seed_mr_keys): the simulator and tests seed it for runs that repeat.
  Device();
  explicit Device(uint64_t mr_key_seed) : mr_key_state_(mr_key_seed) {}
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device();

  ProtectionDomain* alloc_pd();
  // EBUSY while a QP, MR or SRQ uses it (ibv_dealloc_pd), EINVAL if not
  // this Device's.
  int dealloc_pd(ProtectionDomain* pd);
  bool pd_in_use(const ProtectionDomain* pd) const { return used(pd); }
  // Registers [addr, addr + length); iova defaults to the pointer value
  // (see mr.h). nullptr if length is 0 or > 2^32 or access is invalid
  // (remote write/atomic need local write, IBA 10.6.3.1).
  // `key` asks for a given lkey/rkey (a config file or a replayed capture
  // names it): nullptr if its slot (key >> 8) is in use or beyond
  // kMaxRequestedKeySlot. Otherwise the key is the first free slot and a
  // random key byte (mr.h).
  MemoryRegion* reg_mr(ProtectionDomain* pd, void* addr, size_t length,
                       uint32_t access, std::optional<uint64_t> iova = {},
                       std::optional<uint32_t> key = {});
  // After it returns the data path neither reads nor writes the region's
  // memory: a request naming its key is NAKed, a WQE naming its lkey
  // completes with a local protection error.
  int dereg_mr(MemoryRegion* mr);
  // Any thread: every SGE with a length names a region of `pd` with
  // `access` that holds it; their total length in *total.
  bool check_sges(const ProtectionDomain* pd, const Sge* sge, uint32_t n, uint32_t access,
                  uint64_t* total) const;
  // Restarts the draw of key bytes from `seed` (same seed, same keys for
  // the same registrations).
  void seed_mr_keys(uint64_t seed) { mr_key_state_ = seed; }
  CompletionQueue* create_cq(uint32_t capacity);
  // EBUSY while a QP of this Device sends or receives into it.
  int destroy_cq(CompletionQueue* cq);
  // nullptr for max_wr 0.
  SharedReceiveQueue* create_srq(ProtectionDomain* pd, uint32_t max_wr);
  // EBUSY while a QP is attached.
  int destroy_srq(SharedReceiveQueue* srq);
  // `qpn` asks for a given QPN: nullptr if it is reserved (0, 1), wider
  // than 24 bits or in use.
  QueuePair* create_qp(const QpInitAttr& init, std::optional<uint32_t> qpn = {});
  // Completes the QP's outstanding WRs with IBV_WC_WR_FLUSH_ERR (IBA
  // 10.3.1: destroy takes the QP through the error state), then frees it.
  int destroy_qp(QueuePair* qp);

  QueuePair* find_qp(uint32_t qpn) const;
  // Inline: every RDMA request's key check goes through it.
  const MemoryRegion* find_mr(uint32_t key) const {
    const size_t slot = key >> 8;
    if (slot >= mrs_.size() || !mrs_[slot]) return nullptr;
    const MemoryRegion* mr = mrs_[slot].get();
    return mr->lkey() == key ? mr : nullptr;
  }
  // Calls f(QueuePair&) for each QP.
  template <class F>
  void for_each_qp(F&& f) {
    for (auto& [qpn, qp] : qps_) f(*qp);
  }

 private:
  // Users of each PD and CQ: they cannot go while something uses them.
  std::unordered_map<const void*, uint32_t> users_;
  void use(const void* p) { ++users_[p]; }
  void unuse(const void* p) {
    if (auto it = users_.find(p); it != users_.end() && --it->second == 0) users_.erase(it);
  }
  bool used(const void* p) const { return users_.count(p) != 0; }
  std::mutex mr_mu_;  // serialises reg_mr and dereg_mr
  MrViews mr_views_;  // what check_sges reads
  std::vector<std::unique_ptr<ProtectionDomain>> pds_;
  std::vector<std::unique_ptr<SharedReceiveQueue>> srqs_;
  std::vector<std::unique_ptr<MemoryRegion>> mrs_;  // slot = key >> 8
  uint8_t next_key_byte(uint8_t previous);
  std::vector<uint8_t> mr_key_byte_;  // per slot: its last key's low byte
  uint64_t mr_key_state_;             // splitmix64 state for the key bytes
  uint64_t registrations_ = 0;        // MemoryRegion::registration of the last one
  std::vector<std::unique_ptr<CompletionQueue>> cqs_;
  std::unordered_map<uint32_t, std::unique_ptr<QueuePair>> qps_;
  uint32_t next_qpn_ = kFirstQpn;
};

}  // namespace droce::transport
