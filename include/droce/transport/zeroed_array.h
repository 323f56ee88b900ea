// A fixed-size array whose memory starts as zero bytes and is only paid
// for when it is touched: the storage of work-queue and completion rings.
//
// A ring is sized for the most a QP or CQ may ever hold (ibv_qp_cap,
// ibv_create_cq), but most rings use a few slots: a simulated host with a
// 4096-entry CQ and two 256-WR rings posted one 1 MiB WRITE. Built as
// std::vector, every slot was constructed (zeroed) up front, which at 1024
// simulated hosts was a quarter of a run's CPU time in page faults and
// memset, and most of its memory. calloc does not avoid it: it clears
// whatever heap memory it hands out unless it is fresh from the system,
// and rings this size rarely are. So the storage comes from anonymous
// pages (memory/zeroed_memory.h), which the kernel maps only when a slot
// is first written.
//
// The elements are zero bytes, not T{}: meant for slots that are written
// before they are read (a ring's producer fills a slot before it publishes
// it). T must be an implicit-lifetime type (C++20 [basic.types.general]),
// whose objects the storage holds without a constructor call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "droce/memory/zeroed_memory.h"

namespace droce::transport {

template <class T>
class ZeroedArray {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T> &&
                    (std::is_aggregate_v<T> || std::is_trivially_default_constructible_v<T>),
                "the slots must be implicit-lifetime objects");
  static_assert(alignof(T) <= 64, "zeroed_memory aligns to a cache line");

 public:
  ZeroedArray() = default;
  explicit ZeroedArray(size_t n)
      : data_(n ? static_cast<T*>(memory::zeroed_memory(n * sizeof(T))) : nullptr), size_(n) {}
  ZeroedArray(ZeroedArray&& o) noexcept { swap(o); }
  ZeroedArray& operator=(ZeroedArray&& o) noexcept {
    ZeroedArray gone(std::move(o));
    swap(gone);
    return *this;
  }
  ZeroedArray(const ZeroedArray&) = delete;
  ZeroedArray& operator=(const ZeroedArray&) = delete;
  ~ZeroedArray() {
    if (data_) memory::free_zeroed_memory(data_, size_ * sizeof(T));
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  void swap(ZeroedArray& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
  }
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace droce::transport
