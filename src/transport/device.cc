#include "droce/transport/device.h"

#include <algorithm>
#include <cerrno>
#include <mutex>
#include <random>

namespace droce::transport {

Device::Device() {
  std::random_device rd;
  mr_key_state_ = (uint64_t{rd()} << 32) ^ rd();
}

Device::~Device() = default;

// The low byte of an automatically assigned key (mr.h): uniform over the
// values other than 0 and `previous`, the slot's last key byte, so a stale
// key of a re-used slot never names the new region. Random, as Linux rxe
// draws it, so the registration order does not tell a key in advance.
// splitmix64 (Steele, Lea, Flood 2014): small, seedable, and the same
// sequence on every platform.
uint8_t Device::next_key_byte(uint8_t previous) {
  for (;;) {
    uint64_t z = (mr_key_state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    const uint8_t b = static_cast<uint8_t>((z ^ (z >> 31)) >> 56);
    if (b != 0 && b != previous) return b;
  }
}

ProtectionDomain* Device::alloc_pd() {
  pds_.push_back(std::make_unique<ProtectionDomain>(static_cast<uint32_t>(pds_.size())));
  return pds_.back().get();
}

// Frees `p` from `v` if it is there: EINVAL if it is not, EBUSY if in use.
template <class T>
static int release(std::vector<std::unique_ptr<T>>& v, const T* p, bool in_use) {
  auto it = std::find_if(v.begin(), v.end(), [p](const auto& e) { return e.get() == p; });
  if (!p || it == v.end()) return EINVAL;
  if (in_use) return EBUSY;
  v.erase(it);
  return 0;
}

int Device::dealloc_pd(ProtectionDomain* pd) { return release(pds_, pd, used(pd)); }

MemoryRegion* Device::reg_mr(ProtectionDomain* pd, void* addr, size_t length,
                             uint32_t access, std::optional<uint64_t> iova,
                             std::optional<uint32_t> key) {
  if (!pd || !addr || length == 0 || length > (uint64_t{1} << 32)) return nullptr;
  std::lock_guard lock(mr_mu_);
  // IBA 10.6.3.1 (and ibv_reg_mr): remote write or atomic access requires
  // local write access.
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE))
    return nullptr;
  size_t slot = 0;
  uint8_t key_byte = 0;
  if (key) {
    slot = *key >> 8;
    if (slot > kMaxRequestedKeySlot) return nullptr;
    if (slot >= mrs_.size()) {
      mrs_.resize(slot + 1);
      mr_key_byte_.resize(slot + 1, 0);
    }
    if (mrs_[slot]) return nullptr;
    key_byte = static_cast<uint8_t>(*key & 0xFF);
  } else {
    while (slot < mrs_.size() && mrs_[slot]) ++slot;
    if (slot == mrs_.size()) {
      if (slot >= (size_t{1} << 24)) return nullptr;
      mrs_.emplace_back();
      mr_key_byte_.push_back(0);
    }
    key_byte = next_key_byte(mr_key_byte_[slot]);
  }
  mr_key_byte_[slot] = key_byte;
  const uint32_t mr_key = (static_cast<uint32_t>(slot) << 8) | key_byte;
  const uint64_t va = iova ? *iova : reinterpret_cast<uint64_t>(addr);
  mrs_[slot] = std::make_unique<MemoryRegion>(pd, static_cast<uint8_t*>(addr), length, access, va,
                                              mr_key, ++registrations_);
  mr_views_.publish(*mrs_[slot]);
  use(pd);
  return mrs_[slot].get();
}

int Device::dereg_mr(MemoryRegion* mr) {
  if (!mr) return EINVAL;
  std::lock_guard lock(mr_mu_);
  const size_t slot = mr->lkey() >> 8;
  if (slot >= mrs_.size() || mrs_[slot].get() != mr) return EINVAL;
  mr_views_.clear(mr->lkey());
  unuse(mr->pd());
  mrs_[slot].reset();
  return 0;
}

bool Device::check_sges(const ProtectionDomain* pd, const Sge* sge, uint32_t n,
                        uint32_t access, uint64_t* total) const {
  uint64_t sum = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (sge[i].length == 0) continue;
    if (!mr_views_.allows(sge[i].lkey, pd, access, sge[i].addr, sge[i].length)) return false;
    sum += sge[i].length;
  }
  *total = sum;
  return true;
}

CompletionQueue* Device::create_cq(uint32_t capacity) {
  cqs_.push_back(std::make_unique<CompletionQueue>(capacity));
  return cqs_.back().get();
}

int Device::destroy_cq(CompletionQueue* cq) { return release(cqs_, cq, used(cq)); }

SharedReceiveQueue* Device::create_srq(ProtectionDomain* pd, uint32_t max_wr) {
  if (!pd || max_wr == 0) return nullptr;
  srqs_.push_back(std::make_unique<SharedReceiveQueue>(*this, pd, max_wr));
  use(pd);
  return srqs_.back().get();
}

int Device::destroy_srq(SharedReceiveQueue* srq) {
  const ProtectionDomain* pd = srq ? srq->pd() : nullptr;
  const int rc = release(srqs_, srq, srq && srq->users() > 0);
  if (rc == 0) unuse(pd);
  return rc;
}

QueuePair* Device::create_qp(const QpInitAttr& init, std::optional<uint32_t> qpn) {
  if (!init.pd || !init.send_cq || !init.recv_cq || init.caps.max_send_wr == 0 ||
      (init.caps.max_recv_wr == 0 && !init.srq) || init.caps.max_inline_data > kMaxInlineData ||
      init.caps.max_send_sge > kMaxSge || init.caps.max_recv_sge > kMaxSge)
    return nullptr;
  // IBA 10.2.9.1: an SRQ serves QPs of its own PD; UD and RC alike.
  if (init.srq && init.srq->pd() != init.pd) return nullptr;
  if (qpn) {
    if (*qpn < kFirstQpn || *qpn > kQpnMask || qps_.count(*qpn)) return nullptr;
  } else {
    // 24-bit QPN space, 0 and 1 reserved; skip numbers still in use.
    uint32_t tries = 0;
    for (; tries < kQpnMask && qps_.count(next_qpn_); ++tries) {
      next_qpn_ = (next_qpn_ + 1) & kQpnMask;
      if (next_qpn_ < kFirstQpn) next_qpn_ = kFirstQpn;
    }
    if (tries == kQpnMask) return nullptr;
    qpn = next_qpn_;
    next_qpn_ = (next_qpn_ + 1) & kQpnMask;
    if (next_qpn_ < kFirstQpn) next_qpn_ = kFirstQpn;
  }
  auto qp = std::make_unique<QueuePair>(*this, *qpn, init);
  QueuePair* raw = qp.get();
  qps_.emplace(*qpn, std::move(qp));
  use(init.pd);
  use(init.send_cq);
  use(init.recv_cq);
  if (init.srq) init.srq->add_user();
  return raw;
}

int Device::destroy_qp(QueuePair* qp) {
  if (!qp) return EINVAL;
  auto it = qps_.find(qp->qpn());
  if (it == qps_.end() || it->second.get() != qp) return EINVAL;
  qp->destroy();
  unuse(qp->pd());
  unuse(qp->send_cq());
  unuse(qp->recv_cq());
  if (qp->srq()) qp->srq()->remove_user();
  qps_.erase(it);
  return 0;
}

QueuePair* Device::find_qp(uint32_t qpn) const {
  auto it = qps_.find(qpn);
  return it == qps_.end() ? nullptr : it->second.get();
}

}  // namespace droce::transport
