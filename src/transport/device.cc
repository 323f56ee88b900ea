#include "droce/transport/device.h"

#include <cerrno>

namespace droce::transport {

Device::~Device() = default;

ProtectionDomain* Device::alloc_pd() {
  pds_.push_back(std::make_unique<ProtectionDomain>(static_cast<uint32_t>(pds_.size())));
  return pds_.back().get();
}

MemoryRegion* Device::reg_mr(ProtectionDomain* pd, void* addr, size_t length,
                             uint32_t access, std::optional<uint64_t> iova,
                             std::optional<uint32_t> key) {
  if (!pd || !addr || length == 0 || length > (uint64_t{1} << 32)) return nullptr;
  // IBA 10.6.3.1 (and ibv_reg_mr): remote write or atomic access requires
  // local write access.
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE))
    return nullptr;
  size_t slot = 0;
  uint8_t gen = 0;
  if (key) {
    slot = *key >> 8;
    if (slot > kMaxRequestedKeySlot) return nullptr;
    if (slot >= mrs_.size()) {
      mrs_.resize(slot + 1);
      mr_generation_.resize(slot + 1, 0);
    }
    if (mrs_[slot]) return nullptr;
    gen = static_cast<uint8_t>(*key & 0xFF);
    mr_generation_[slot] = gen;
  } else {
    while (slot < mrs_.size() && mrs_[slot]) ++slot;
    if (slot == mrs_.size()) {
      if (slot >= (size_t{1} << 24)) return nullptr;
      mrs_.emplace_back();
      mr_generation_.push_back(0);
    }
    gen = ++mr_generation_[slot];
  }
  const uint32_t mr_key = (static_cast<uint32_t>(slot) << 8) | gen;
  const uint64_t va = iova ? *iova : reinterpret_cast<uint64_t>(addr);
  mrs_[slot] = std::make_unique<MemoryRegion>(pd, static_cast<uint8_t*>(addr), length, access, va,
                                              mr_key, ++registrations_);
  return mrs_[slot].get();
}

int Device::dereg_mr(MemoryRegion* mr) {
  if (!mr) return EINVAL;
  const size_t slot = mr->lkey() >> 8;
  if (slot >= mrs_.size() || mrs_[slot].get() != mr) return EINVAL;
  mrs_[slot].reset();
  return 0;
}

CompletionQueue* Device::create_cq(uint32_t capacity) {
  cqs_.push_back(std::make_unique<CompletionQueue>(capacity));
  return cqs_.back().get();
}

QueuePair* Device::create_qp(const QpInitAttr& init, std::optional<uint32_t> qpn) {
  if (!init.pd || !init.send_cq || !init.recv_cq || init.caps.max_send_wr == 0 ||
      init.caps.max_recv_wr == 0)
    return nullptr;
  if (qpn) {
    if (*qpn < kFirstQpn || *qpn > kQpnMask || qps_.count(*qpn)) return nullptr;
    auto qp = std::make_unique<QueuePair>(*this, *qpn, init);
    QueuePair* raw = qp.get();
    qps_.emplace(*qpn, std::move(qp));
    return raw;
  }
  // 24-bit QPN space, 0 and 1 reserved; skip numbers still in use.
  for (uint32_t tries = 0; tries < kQpnMask; ++tries) {
    const uint32_t qpn = next_qpn_;
    next_qpn_ = (next_qpn_ + 1) & kQpnMask;
    if (next_qpn_ < kFirstQpn) next_qpn_ = kFirstQpn;
    if (qps_.count(qpn)) continue;
    auto qp = std::make_unique<QueuePair>(*this, qpn, init);
    QueuePair* raw = qp.get();
    qps_.emplace(qpn, std::move(qp));
    return raw;
  }
  return nullptr;
}

int Device::destroy_qp(QueuePair* qp) {
  if (!qp) return EINVAL;
  return qps_.erase(qp->qpn()) ? 0 : EINVAL;
}

QueuePair* Device::find_qp(uint32_t qpn) const {
  auto it = qps_.find(qpn);
  return it == qps_.end() ? nullptr : it->second.get();
}

}  // namespace droce::transport
