// Memory regions (IBA 10.6) over caller-owned host memory.
//
// Addressing choice: an MR covers [addr, addr + length) of host memory, and
// the virtual address the peer puts in a RETH / AtomicETH is the MR's `iova`
// plus the offset. By default iova == the pointer value (what ibv_reg_mr
// does), so a local SGE and a remote VA use the same numbers; reg_mr can be
// given another iova (as ibv_reg_mr_iova does), e.g. 0 for offset-based VAs,
// which keeps simulations deterministic across runs.
//
// Keys: lkey == rkey == (slot index << 8) | 8-bit key byte, so a lookup is
// an index plus a compare. An automatically assigned key's byte is random
// (as Linux rxe draws it: the first region's key is not known in advance)
// and never that of the slot's previous key, so a stale key of a re-used
// slot does not match; a requested key is taken as it is (Device::reg_mr).
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

#include "droce/transport/pd.h"

namespace droce::transport {

class MemoryRegion {
 public:
  MemoryRegion(const ProtectionDomain* pd, uint8_t* addr, size_t length, uint32_t access,
               uint64_t iova, uint32_t key, uint64_t registration = 0)
      : pd_(pd),
        addr_(addr),
        length_(length),
        access_(access),
        iova_(iova),
        key_(key),
        registration_(registration) {}

  const ProtectionDomain* pd() const { return pd_; }
  uint8_t* addr() const { return addr_; }
  size_t length() const { return length_; }
  uint32_t access() const { return access_; }  // ibv_access_flags bits
  uint64_t iova() const { return iova_; }
  uint32_t lkey() const { return key_; }
  uint32_t rkey() const { return key_; }
  // Which registration of its Device this is (Device::reg_mr counts them;
  // never reused): tells a live region from an earlier one that held the
  // same key, without keeping a pointer to a region that may be freed.
  uint64_t registration() const { return registration_; }
  // SEND_WITH_INV (IBA 10.6.7.2) invalidates the rkey: remote access is
  // refused from then on; local access continues.
  bool remote_valid() const { return remote_valid_; }
  void invalidate_remote() { remote_valid_ = false; }
  // A region whose contents are not modelled (the simulator's payload =
  // "virtual" flows, docs/SIM.md): keys, bounds and access are checked as
  // usual, but requests gathered from it carry unspecified payload bytes
  // and payload placed into it is discarded. Saves the copies where nobody
  // looks at the data.
  bool virtual_payload() const { return virtual_payload_; }
  void set_virtual_payload(bool v) { virtual_payload_ = v; }

  // Host pointer for [va, va + len) if it lies inside the region, else
  // nullptr. Overflow-safe: va and len come from the network. Always
  // inlined: in the responder's larger functions GCC left it a call
  // through the PLT (the library is -fPIC), per packet on the receive path.
  [[gnu::always_inline]] uint8_t* translate(uint64_t va, uint64_t len) const {
    return holds(iova_, length_, va, len) ? addr_ + (va - iova_) : nullptr;
  }
  // Whether a region at `iova` of `length` bytes holds [va, va + len),
  // overflow-safe (translate, and the posters' copies in mr_views.h).
  [[gnu::always_inline]] static bool holds(uint64_t iova, uint64_t length, uint64_t va,
                                           uint64_t len) {
    if (va < iova) return false;
    const uint64_t off = va - iova;
    return off <= length && len <= length - off;
  }
  bool allows(uint32_t needed) const { return (access_ & needed) == needed; }

 private:
  const ProtectionDomain* pd_;
  uint8_t* addr_;
  size_t length_;
  uint32_t access_;
  uint64_t iova_;
  uint32_t key_;
  uint64_t registration_;
  bool remote_valid_ = true;
  bool virtual_payload_ = false;
};

// Result of checking a remote request against an MR (IBA 9.7.5.2: which NAK
// the responder returns).
enum class AccessCheck : uint8_t {
  kOk,
  kBadKey,        // no such rkey, invalidated, or another PD
  kNoPermission,  // MR lacks the remote access flag
  kOutOfRange,    // [va, va+len) not inside the MR
};

}  // namespace droce::transport
