// A port's neighbour cache: IP address -> MAC, with the states and timers
// of IPv6 neighbour unreachability detection (RFC 4861 section 7.3), used
// for IPv4's ARP too, as Linux's neighbour table does. DPDK-free and
// driven by the caller's clock: the owner (IpInterface) sends what tick()
// asks for and acts on what it reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "droce/wire/packet.h"

namespace droce::endpoint {

// Linux's defaults (net.ipv4.neigh.default.* / net.ipv6.neigh.default.*),
// which are RFC 4861 section 10's constants.
struct NeighbourTimers {
  uint64_t base_reachable_ns = 30'000'000'000;  // REACHABLE_TIME, drawn from 0.5x..1.5x (6.3.2)
  uint64_t retrans_ns = 1'000'000'000;          // RETRANS_TIMER
  uint32_t multicast_solicits = 3;              // MAX_MULTICAST_SOLICIT (mcast_solicit)
  uint32_t unicast_solicits = 3;                // MAX_UNICAST_SOLICIT (ucast_solicit)
  uint64_t delay_first_probe_ns = 5'000'000'000;  // DELAY_FIRST_PROBE_TIME
  uint64_t gc_stale_ns = 60'000'000'000;        // unused entries go after this (gc_stale_time)
  size_t max_entries = 1024;                    // gc_thresh3: never more
};

enum class NeighbourState : uint8_t {
  kIncomplete,  // resolving: solicitations sent, no answer yet
  kReachable,   // confirmed within the reachable time
  kStale,       // known, not confirmed lately; used as is
  kDelay,       // used while stale: a probe follows unless confirmed
  kProbe,       // unicast solicitations sent
  kFailed,      // no answer: unusable until resolved again
};
const char* to_string(NeighbourState s);

struct Neighbour {
  wire::IpAddress ip;
  wire::MacAddress mac{};
  NeighbourState state = NeighbourState::kIncomplete;
  uint64_t deadline = UINT64_MAX;  // the state's timer
  uint64_t updated_ns = 0;         // last confirmation or change
  uint32_t probes = 0;             // solicitations sent in this state
  uint32_t users = 0;              // QPs waiting for or using it
};

class NeighbourCache {
 public:
  explicit NeighbourCache(const NeighbourTimers& timers = {}, uint64_t seed = 1);

  // A usable entry (not incomplete or failed), or null. Using a stale
  // entry starts the delay timer (RFC 4861 7.3.3).
  const Neighbour* use(const wire::IpAddress& ip, uint64_t now);
  const Neighbour* find(const wire::IpAddress& ip) const;

  // Starts resolving `ip` (an incomplete entry, one user more); true if a
  // multicast solicitation should go out now. false: already resolving,
  // or no room (every entry has users).
  bool resolve(const wire::IpAddress& ip, uint64_t now);
  // One user fewer (a QP that no longer waits for or uses the entry).
  void release(const wire::IpAddress& ip);

  enum class Learned : uint8_t {
    kIgnored,    // an answer for an address nobody asked about
    kUnchanged,  // confirmed, the same MAC
    kResolved,   // an incomplete entry now has a MAC
    kChanged,    // a known entry's MAC changed
    kNoRoom,
  };
  // An answer: an ARP reply, an ARP request's sender for an entry that
  // exists, a neighbour advertisement (RFC 4861 7.2.5). Only entries that
  // exist are updated: a spoofed answer cannot add one. `solicited`
  // confirms reachability; an unsolicited one with a new MAC makes the
  // entry stale; a new MAC replaces the old only with `override_flag`
  // or when the entry was incomplete.
  Learned on_advertisement(const wire::IpAddress& ip, const wire::MacAddress& mac,
                           bool solicited, bool override_flag, uint64_t now);
  // A request for one of our addresses from `ip` at `mac` (RFC 826's
  // merge, RFC 4861 7.2.3): creates or updates a stale entry, since the
  // sender is about to need our answer and we likely its address.
  Learned on_solicitation(const wire::IpAddress& ip, const wire::MacAddress& mac, uint64_t now);

  struct Probe {
    wire::IpAddress ip;
    bool unicast = false;  // to the known MAC (probe) or to the group
    wire::MacAddress mac{};
  };
  // Runs the timers due by `now`: solicitations to send into `probes`,
  // entries that failed to resolve (with users waiting) into `failed`.
  void tick(uint64_t now, std::vector<Probe>& probes, std::vector<wire::IpAddress>& failed);
  uint64_t next_deadline() const { return next_deadline_; }

  size_t size() const { return entries_.size(); }
  // Visits the entries in a deterministic order (by address).
  void for_each(const std::function<void(const Neighbour&)>& f) const;

  uint64_t evicted() const { return evicted_; }
  uint64_t no_room() const { return no_room_; }

  struct KeyHash {
    size_t operator()(const wire::IpAddress& a) const;
  };

 private:
  Neighbour* lookup(const wire::IpAddress& ip);
  Neighbour* insert(const wire::IpAddress& ip, uint64_t now);
  bool make_room();
  uint64_t reachable_time();
  void set_deadline(Neighbour& n, uint64_t t);

  NeighbourTimers timers_;
  uint64_t rng_;
  std::unordered_map<wire::IpAddress, Neighbour, KeyHash> entries_;
  uint64_t next_deadline_ = UINT64_MAX;
  uint64_t evicted_ = 0;
  uint64_t no_room_ = 0;
};

}  // namespace droce::endpoint
