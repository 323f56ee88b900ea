#include "droce/endpoint/neighbour_cache.h"

#include <algorithm>
#include <cstring>

namespace droce::endpoint {

const char* to_string(NeighbourState s) {
  switch (s) {
    case NeighbourState::kIncomplete: return "incomplete";
    case NeighbourState::kReachable: return "reachable";
    case NeighbourState::kStale: return "stale";
    case NeighbourState::kDelay: return "delay";
    case NeighbourState::kProbe: return "probe";
    case NeighbourState::kFailed: return "failed";
  }
  return "unknown";
}

size_t NeighbourCache::KeyHash::operator()(const wire::IpAddress& a) const {
  uint64_t lo, hi;
  std::memcpy(&lo, a.bytes, 8);
  std::memcpy(&hi, a.bytes + 8, 8);
  uint64_t h = (lo ^ (hi * 0x9E3779B97F4A7C15ull) ^ (a.v6 ? 0xA5A5 : 0)) * 0xBF58476D1CE4E5B9ull;
  return static_cast<size_t>(h ^ (h >> 31));
}

NeighbourCache::NeighbourCache(const NeighbourTimers& timers, uint64_t seed)
    : timers_(timers), rng_(seed) {}

uint64_t NeighbourCache::reachable_time() {
  // RFC 4861 6.3.2: ReachableTime is a uniform draw between
  // MIN_RANDOM_FACTOR (0.5) and MAX_RANDOM_FACTOR (1.5) times the base, so
  // that neighbours do not all probe at once. splitmix64: seeded, so a
  // simulation repeats.
  rng_ += 0x9E3779B97F4A7C15ull;
  uint64_t z = rng_;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const uint64_t base = timers_.base_reachable_ns;
  return base / 2 + (base == 0 ? 0 : z % base);
}

void NeighbourCache::set_deadline(Neighbour& n, uint64_t t) {
  n.deadline = t;
  next_deadline_ = std::min(next_deadline_, t);
}

Neighbour* NeighbourCache::lookup(const wire::IpAddress& ip) {
  auto it = entries_.find(ip);
  return it == entries_.end() ? nullptr : &it->second;
}

const Neighbour* NeighbourCache::find(const wire::IpAddress& ip) const {
  auto it = entries_.find(ip);
  return it == entries_.end() ? nullptr : &it->second;
}

bool NeighbourCache::make_room() {
  if (entries_.size() < timers_.max_entries) return true;
  // Full (a flood of requests from addresses nobody talks to, say): the
  // entries no QP waits for or uses go, as Linux's forced collection above
  // gc_thresh3 drops unreferenced entries. The cache never grows past
  // max_entries.
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.users == 0) {
      it = entries_.erase(it);
      ++evicted_;
    } else {
      ++it;
    }
  }
  if (entries_.size() < timers_.max_entries) return true;
  ++no_room_;
  return false;
}

Neighbour* NeighbourCache::insert(const wire::IpAddress& ip, uint64_t now) {
  if (!make_room()) return nullptr;
  Neighbour& n = entries_[ip];
  n.ip = ip;
  n.updated_ns = now;
  return &n;
}

const Neighbour* NeighbourCache::use(const wire::IpAddress& ip, uint64_t now) {
  Neighbour* n = lookup(ip);
  if (!n) return nullptr;
  switch (n->state) {
    case NeighbourState::kIncomplete:
    case NeighbourState::kFailed:
      return nullptr;
    case NeighbourState::kStale:
      n->state = NeighbourState::kDelay;
      n->probes = 0;
      set_deadline(*n, now + timers_.delay_first_probe_ns);
      return n;
    default:
      return n;
  }
}

bool NeighbourCache::resolve(const wire::IpAddress& ip, uint64_t now) {
  Neighbour* n = lookup(ip);
  const bool fresh = n == nullptr;
  if (fresh) n = insert(ip, now);
  if (!n) return false;
  ++n->users;
  // Resolving already, or usable (the caller tried use() first).
  if (!fresh && n->state != NeighbourState::kFailed) return false;
  // RFC 4861 7.2.2: the first solicitation now, then one every
  // RetransTimer up to MAX_MULTICAST_SOLICIT.
  n->state = NeighbourState::kIncomplete;
  n->probes = 1;
  set_deadline(*n, now + timers_.retrans_ns);
  return true;
}

void NeighbourCache::release(const wire::IpAddress& ip) {
  if (Neighbour* n = lookup(ip); n && n->users > 0) --n->users;
}

NeighbourCache::Learned NeighbourCache::on_advertisement(const wire::IpAddress& ip,
                                                         const wire::MacAddress& mac,
                                                         bool solicited, bool override_flag,
                                                         uint64_t now) {
  Neighbour* n = lookup(ip);
  if (!n) return Learned::kIgnored;
  const bool waiting =
      n->state == NeighbourState::kIncomplete || n->state == NeighbourState::kFailed;
  const bool same = n->mac == mac;
  // RFC 4861 7.2.5: without Override a different address is not taken
  // (the entry only goes stale if it was reachable).
  if (!waiting && !same && !override_flag) {
    if (n->state == NeighbourState::kReachable) {
      n->state = NeighbourState::kStale;
      set_deadline(*n, now + timers_.gc_stale_ns);
    }
    return Learned::kUnchanged;
  }
  n->mac = mac;
  n->probes = 0;
  n->updated_ns = now;
  if (solicited) {
    n->state = NeighbourState::kReachable;
    set_deadline(*n, now + reachable_time());
  } else if (waiting || !same) {
    n->state = NeighbourState::kStale;
    set_deadline(*n, now + timers_.gc_stale_ns);
  }
  if (waiting) return Learned::kResolved;
  return same ? Learned::kUnchanged : Learned::kChanged;
}

NeighbourCache::Learned NeighbourCache::on_solicitation(const wire::IpAddress& ip,
                                                        const wire::MacAddress& mac,
                                                        uint64_t now) {
  Neighbour* n = lookup(ip);
  if (n) {
    const bool waiting =
        n->state == NeighbourState::kIncomplete || n->state == NeighbourState::kFailed;
    if (!waiting && n->mac == mac) return Learned::kUnchanged;
    n->mac = mac;
    n->probes = 0;
    n->updated_ns = now;
    n->state = NeighbourState::kStale;
    set_deadline(*n, now + timers_.gc_stale_ns);
    return waiting ? Learned::kResolved : Learned::kChanged;
  }
  n = insert(ip, now);
  if (!n) return Learned::kNoRoom;
  n->mac = mac;
  n->state = NeighbourState::kStale;
  set_deadline(*n, now + timers_.gc_stale_ns);
  return Learned::kUnchanged;
}

void NeighbourCache::tick(uint64_t now, std::vector<Probe>& probes,
                          std::vector<wire::IpAddress>& failed) {
  if (now < next_deadline_) return;
  uint64_t next = UINT64_MAX;
  for (auto it = entries_.begin(); it != entries_.end();) {
    Neighbour& n = it->second;
    if (n.deadline <= now) {
      switch (n.state) {
        case NeighbourState::kIncomplete:
          if (n.probes < timers_.multicast_solicits) {
            ++n.probes;
            probes.push_back({n.ip, false, {}});
            n.deadline = now + timers_.retrans_ns;
          } else {
            n.state = NeighbourState::kFailed;
            n.deadline = now + timers_.gc_stale_ns;
            if (n.users > 0) failed.push_back(n.ip);
          }
          break;
        case NeighbourState::kReachable:
          n.state = NeighbourState::kStale;
          n.deadline = now + timers_.gc_stale_ns;
          break;
        case NeighbourState::kDelay:
          n.state = NeighbourState::kProbe;
          n.probes = 1;
          probes.push_back({n.ip, true, n.mac});
          n.deadline = now + timers_.retrans_ns;
          break;
        case NeighbourState::kProbe:
          if (n.probes < timers_.unicast_solicits) {
            ++n.probes;
            probes.push_back({n.ip, true, n.mac});
            n.deadline = now + timers_.retrans_ns;
          } else {
            // Unreachable: QPs that use it keep the last address (their
            // transport's retries decide), new ones resolve again.
            n.state = NeighbourState::kFailed;
            n.deadline = now + timers_.gc_stale_ns;
          }
          break;
        case NeighbourState::kStale:
        case NeighbourState::kFailed:
          if (n.users == 0) {
            it = entries_.erase(it);
            continue;
          }
          n.deadline = now + timers_.gc_stale_ns;
          break;
      }
    }
    next = std::min(next, n.deadline);
    ++it;
  }
  next_deadline_ = next;
}

void NeighbourCache::for_each(const std::function<void(const Neighbour&)>& f) const {
  std::vector<const Neighbour*> sorted;
  sorted.reserve(entries_.size());
  for (const auto& [ip, n] : entries_) sorted.push_back(&n);
  std::sort(sorted.begin(), sorted.end(), [](const Neighbour* a, const Neighbour* b) {
    if (a->ip.v6 != b->ip.v6) return !a->ip.v6;
    return std::memcmp(a->ip.bytes, b->ip.bytes, 16) < 0;
  });
  for (const Neighbour* n : sorted) f(*n);
}

}  // namespace droce::endpoint
