// The TX watchdog's rule (docs/ENGINE.md "Ports"): when frames a port's
// queue has refused stop waiting and are discarded. DPDK-free, so that the
// rule is tested without a port (tests/unit/tx_watchdog_test.cc).
#pragma once

#include <algorithm>
#include <cstdint>

namespace droce::engine {

// A TX queue that takes nothing for this long while its link is up is
// stuck, not busy (a link down that the PMD does not report: af_packet on
// a downed interface refuses every frame and keeps saying "up"). Its frames
// are discarded then, as a NIC's TX watchdog gives up on a hung queue, so
// that the QPs send again and their retries run out. Far above any
// backpressure a live peer exerts, even one descheduled for a time slice
// or two.
inline constexpr uint64_t kTxStuckNs = 200'000'000;

// Until the link first comes up (a memif port whose peer process has not
// connected yet), frames wait for it this long instead: the port reports
// active once started (a NIC with its cable in), so a program may send
// before its peer's port exists, and a datagram discarded then is lost for
// good. Long enough for a peer started at the same time on a loaded CPU.
inline constexpr uint64_t kFirstLinkUpWaitNs = 5'000'000'000;

// Whether frames held since `held_since` have waited too long at `now`.
// `last_tx_ns`: when the queue last took a frame; `link_up_ns`: when the
// link last came up, 0 if it never has. The watchdog counts only time the
// queue took nothing while the link was up: frames held before the link
// came up (a datagram posted before its peer's port existed) get the whole
// kTxStuckNs from the link-up on, however long they waited for it.
constexpr bool tx_held_too_long(uint64_t held_since, uint64_t last_tx_ns, uint64_t link_up_ns,
                                uint64_t now) {
  if (link_up_ns == 0) return now - held_since > kFirstLinkUpWaitNs;
  return now - std::max({held_since, last_tx_ns, link_up_ns}) > kTxStuckNs;
}

}  // namespace droce::engine
