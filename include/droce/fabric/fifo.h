// A FIFO (of packets, in the fabric) that grows by doubling and never
// shrinks.
//
// The fabric's queues (a link's packets in flight, a switch port's class
// queues) stream millions of packets through a few hundred places. A
// std::deque allocates a 512-byte node for every few elements that pass and
// frees it behind them: in the simulator's 16-to-1 incast that was ~0.5
// malloc/free pairs per data packet (a uprobe on malloc). A ring buffer
// (boost::circular_buffer) reaches its high-water mark once and then
// allocates nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>

#include <boost/circular_buffer.hpp>

namespace droce::fabric {

template <class T>
class Fifo {
 public:
  using iterator = typename boost::circular_buffer<T>::iterator;

  bool empty() const { return buf_.empty(); }
  size_t size() const { return buf_.size(); }
  T& front() { return buf_.front(); }
  const T& front() const { return buf_.front(); }
  T& back() { return buf_.back(); }
  const T& back() const { return buf_.back(); }
  iterator begin() { return buf_.begin(); }
  iterator end() { return buf_.end(); }

  void push_back(T&& v) {
    // A full circular_buffer would overwrite its front instead.
    if (buf_.full()) grow();
    buf_.push_back(std::move(v));
  }
  void pop_front() { buf_.pop_front(); }
  void clear() { buf_.clear(); }
  // Inserts before the element at `index` (0 = front, size() = back).
  void insert_at(size_t index, T&& v) {
    if (buf_.full()) grow();  // invalidates iterators, so by index
    buf_.insert(buf_.begin() + static_cast<std::ptrdiff_t>(index), std::move(v));
  }

 private:
  void grow() { buf_.set_capacity(std::max<size_t>(16, 2 * buf_.capacity())); }
  boost::circular_buffer<T> buf_;
};

}  // namespace droce::fabric
