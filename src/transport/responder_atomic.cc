// Responder, atomics (IBA 9.4.5, 9.7.5.2): Compare & Swap and Fetch & Add
// on a naturally aligned 8-byte word of a region granting atomic access,
// answered by an atomic ACK carrying the original value; a duplicate gets
// the saved result, not a second execution (IBA 9.7.5.3.4).
#include <cstring>

#include "responder_steps.h"

namespace droce::transport {

namespace {

Response atomic_ack(uint32_t psn, uint32_t msn, uint64_t original) {
  Response r{};
  r.kind = Response::Kind::kAtomicAck;
  r.psn = psn;
  r.msn = msn;
  r.atomic_original = original;
  return r;
}

}  // namespace

Verdict QueuePair::execute_atomic(const wire::ParsedPacket& pkt) {
  if (!(attr_.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC)) return Verdict::kRemoteAccessError;
  // Atomics address a naturally aligned 8-byte word (IBA 9.4.5); a
  // misaligned VA is an invalid request.
  if (pkt.atomic_va & 7) return Verdict::kInvalidRequest;
  const MemoryRegion* mr = nullptr;
  if (check_remote(pkt.atomic_rkey, pkt.atomic_va, 8, IBV_ACCESS_REMOTE_ATOMIC, &mr) !=
      AccessCheck::kOk)
    return Verdict::kRemoteAccessError;
  uint8_t* p = mr->translate(pkt.atomic_va, 8);
  uint64_t original;
  std::memcpy(&original, p, 8);  // the target is a host-order 64-bit word
  uint64_t value = original;
  if (pkt.info->operation == wire::Operation::kCompareSwap) {
    if (original == pkt.atomic_compare) value = pkt.atomic_swap_add;
  } else {
    value = original + pkt.atomic_swap_add;
  }
  std::memcpy(p, &value, 8);
  if (!atomic_cache_)
    atomic_cache_ = std::make_unique<std::array<AtomicCacheEntry, kAtomicCacheSize>>();
  (*atomic_cache_)[atomic_cache_next_++ % kAtomicCacheSize] =
      AtomicCacheEntry{true, pkt.psn, original};
  msn_ = wire::psn_add(msn_, 1);
  *push_response() = atomic_ack(pkt.psn, msn_, original);
  epsn_ = wire::psn_add(epsn_, 1);
  unacked_ = 0;
  return Verdict::kResponded;
}

// A duplicate atomic: the saved original value again, or nothing when the
// cache no longer holds its PSN.
void QueuePair::replay_atomic(const wire::ParsedPacket& pkt) {
  if (atomic_cache_) {  // none yet: no atomic executed
    for (const AtomicCacheEntry& e : *atomic_cache_) {
      if (e.valid && e.psn == pkt.psn) {
        Response* r = push_response();
        if (!r) return;
        ++rare_counters().rx_duplicate_atomics_replayed;
        *r = atomic_ack(pkt.psn, msn_, e.original);
        return;
      }
    }
  }
  ++rare_counters().rx_duplicate_atomics_unknown;
}

}  // namespace droce::transport
