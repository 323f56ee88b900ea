// The runner's event queue: one pending time per component (host, switch,
// link direction, workload, sampler), ordered by (time, component id).
//
// A tournament tree over the component ids: leaf i holds component i's
// (time, id), each inner node the earlier of its two children, the root the
// next event. Setting a time rewrites one leaf and the log2(n) nodes above
// it, one branch-free comparison of times per level; finding the next event
// reads the root. Ties need no id comparison: every id under a left child is
// smaller than every id under its right sibling, so a tie goes left, which
// is the (time, id) order. The walk is a chain of dependent levels, so its
// latency is what counts, not its instructions: the winner is carried up in
// registers against each level's sibling (walk()). Reading both children
// back from the tree at each level (each load waiting for the store just
// made) ran ~7 % slower in the incast bench, packed 128-bit
// (time << 32 | id) keys compared with borrow ~4 % slower still, and
// selecting the winner by a computed index (a load that waits for the
// compare) slower again.
//
// The runner reschedules components 1.5 M times for 0.6 M packet events in
// the 16-to-1 incast bench. The binary heap with lazy deletion this replaces
// (and an indexed heap, tried) spent more instructions and a third more
// mispredicted branches (callgrind --branch-sim) sifting. Stopping the walk
// where a node's winner is unchanged was tried too: more instructions and
// mispredictions than always walking to the root. The order is the same
// strict (time, id) order, so runs are identical.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace droce::sim {

class EventQueue {
 public:
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

  explicit EventQueue(uint32_t components = 0) { resize(components); }
  // Forgets every pending time.
  void resize(uint32_t components) {
    leaves_ = 1;
    while (leaves_ < components) leaves_ *= 2;
    tree_.assign(2 * leaves_, Node{});
    for (size_t i = 0; i < leaves_; ++i) tree_[leaves_ + i].id = i;
    for (size_t i = leaves_ - 1; i >= 1; --i) tree_[i] = tree_[2 * i];
    taken_ = kNone;
  }

  // The pending time of `id`; kNever when none.
  uint64_t at(uint32_t id) const { return tree_[leaves_ + id].time; }
  // Sets (or with kNever clears) the pending time of `id`.
  void set(uint32_t id, uint64_t t) {
    size_t i = leaves_ + id;
    if (id == taken_) {
      taken_ = kNone;  // this walk repairs the path take_top() left stale
    } else if (tree_[i].time == t) {
      return;
    }
    tree_[i] = Node{t, id};
    walk(i);
  }
  // The top, empty() and pop() need a settled queue (see take_top()).
  bool empty() const { return tree_[1].time == kNever; }
  uint64_t top_time() const { return tree_[1].time; }
  uint32_t top_id() const { return static_cast<uint32_t>(tree_[1].id); }
  // Removes the earliest event; its component has no pending time after.
  void pop() { set(top_id(), kNever); }
  // pop() for the runner's loop: the component's leaf is cleared at once
  // (at() says kNever), but the walk to the root waits, because the runner
  // nearly always sets that component's next time when it has run it, and
  // that set walks the same path: one walk per event instead of two.
  // Nodes off that path are never stale; settle() repairs the path if no
  // set() did, and must come before the top is read again.
  uint32_t take_top() {
    const uint32_t id = top_id();
    tree_[leaves_ + id] = Node{kNever, id};
    taken_ = id;
    return id;
  }
  void settle() {
    if (taken_ == kNone) return;
    const size_t i = leaves_ + taken_;
    taken_ = kNone;
    walk(i);
  }

 private:
  // A leaf's id is its component; an inner node's is its winner's. A
  // component with no pending time is a leaf at kNever (it never wins
  // against a pending one, and empty() is a root at kNever).
  struct Node {
    uint64_t time = kNever;
    uint64_t id = 0;
  };
  static constexpr uint32_t kNone = ~uint32_t{0};
  // Recomputes the nodes above leaf index i: the right child wins only when
  // strictly earlier. The winner so far stays in registers and each level
  // loads only the sibling, which this walk has not written: the loads do
  // not wait for the previous level's store, so the chain per level is a
  // compare and two conditional moves.
  void walk(size_t i) {
    Node w = tree_[i];
    for (; i > 1; i /= 2) {
      const Node s = tree_[i ^ 1];
      // w is the right child: the sibling wins ties; else it must be earlier.
      const bool w_right = i & 1;
      const bool take = (s.time < w.time) | (w_right & (s.time == w.time));
      w = Node{take ? s.time : w.time, take ? s.id : w.id};
      tree_[i / 2] = w;
    }
  }
  uint32_t taken_ = kNone;  // leaf cleared by take_top(), path not yet walked

  size_t leaves_ = 1;
  std::vector<Node> tree_;  // [1] root, [leaves_ + id] component id
};

}  // namespace droce::sim
