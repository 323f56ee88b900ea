// The scenario's link down/up times ([[links]] down, docs/SIM.md) as one
// list of state changes in (time, link) order, which the runner's event
// queue steps through like any other component: one pending time, the
// earliest change not yet applied.
#pragma once

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "droce/fabric/packet.h"
#include "droce/sim/scenario.h"

namespace droce::sim {

struct LinkChange {
  uint64_t time;
  uint32_t link;  // index into Scenario::links
  bool up;
};

class LinkSchedule {
 public:
  LinkSchedule() = default;
  explicit LinkSchedule(const std::vector<LinkSpec>& links) {
    for (size_t l = 0; l < links.size(); ++l) {
      for (const DownInterval& d : links[l].down) {
        changes_.push_back({d.from_ns, static_cast<uint32_t>(l), false});
        if (d.until_ns != fabric::kNever)
          changes_.push_back({d.until_ns, static_cast<uint32_t>(l), true});
      }
    }
    // A link's own changes are strictly increasing (the scenario checks);
    // changes of different links at the same time go in link order.
    std::sort(changes_.begin(), changes_.end(), [](const LinkChange& a, const LinkChange& b) {
      return std::tie(a.time, a.link) < std::tie(b.time, b.link);
    });
  }

  // When the next change is due; kNever when all have been applied.
  uint64_t next_time() const {
    return next_ < changes_.size() ? changes_[next_].time : fabric::kNever;
  }
  // Calls apply(const LinkChange&) for every change due at or before `now`.
  template <class F>
  void pop_due(uint64_t now, F&& apply) {
    while (next_ < changes_.size() && changes_[next_].time <= now) apply(changes_[next_++]);
  }

 private:
  std::vector<LinkChange> changes_;
  size_t next_ = 0;
};

}  // namespace droce::sim
