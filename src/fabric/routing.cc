#include "droce/fabric/routing.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace droce::fabric {

FlowKey flow_key(const FrameInfo& info) {
  FlowKey k;
  k.ip_version = info.ip_version;
  std::memcpy(k.src_ip, info.src_ip, 16);
  std::memcpy(k.dst_ip, info.dst_ip, 16);
  k.protocol = info.protocol;
  if (info.has_ports) {
    k.src_port = info.src_port;
    k.dst_port = info.dst_port;
  }
  return k;
}

namespace {
// splitmix64's finalizer: every input bit affects every output bit, so
// neighbouring UDP source ports land on unrelated members.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
}  // namespace

uint32_t ecmp_hash(const FlowKey& k, uint64_t seed) {
  uint64_t h = mix(seed ^ 0x6A09E667F3BCC909ull);
  const size_t n = k.ip_version == 6 ? 16 : 4;
  if (n == 16) {
    h = mix(h ^ load64(k.src_ip)) ^ load64(k.src_ip + 8);
    h = mix(h ^ load64(k.dst_ip)) ^ load64(k.dst_ip + 8);
  } else {
    uint32_t s, d;
    std::memcpy(&s, k.src_ip, 4);
    std::memcpy(&d, k.dst_ip, 4);
    h ^= uint64_t{s} << 32 | d;
  }
  h = mix(h ^ (uint64_t{k.protocol} << 32 | uint64_t{k.src_port} << 16 | k.dst_port));
  return static_cast<uint32_t>(h >> 32);
}

namespace {
bool prefix_match(const uint8_t* a, const uint8_t* b, uint8_t len) {
  const size_t full = len / 8;
  if (std::memcmp(a, b, full) != 0) return false;
  if (len % 8 == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xFF << (8 - len % 8));
  return (a[full] & mask) == (b[full] & mask);
}
}  // namespace

uint32_t RouteTable::intern(std::vector<uint16_t> ports) {
  auto [it, added] = group_index_.try_emplace(ports, static_cast<uint32_t>(groups_.size()));
  if (added) groups_.push_back(std::move(ports));
  return it->second;
}

uint32_t RouteTable::host_group(uint32_t ip) const {
  if (ip - dense_base_ < dense_.size()) {
    const uint32_t g = dense_[ip - dense_base_];
    if (g != kNoGroup) return g;
  }
  if (sparse_.empty()) return kNoGroup;
  const auto it = sparse_.find(ip);
  return it == sparse_.end() ? kNoGroup : it->second;
}

const std::vector<uint16_t>* RouteTable::host_ports(const wire::IpAddress& host) const {
  if (host.v6) return nullptr;
  const uint32_t g = host_group(load_be32_host(host.bytes));
  return g == kNoGroup ? nullptr : &groups_[g];
}

void RouteTable::add(const wire::IpAddress& prefix, uint8_t len,
                     std::vector<uint16_t> ports) {
  if (len > (prefix.v6 ? 128 : 32))
    throw std::invalid_argument("route prefix_len: at most 32 (IPv4) or 128 (IPv6)");
  if (ports.empty()) throw std::invalid_argument("route ports: at least one port");
  if (!prefix.v6 && len == 32) {
    const uint32_t ip = load_be32_host(prefix.bytes);
    const uint32_t g = intern(std::move(ports));
    if (dense_.empty()) dense_base_ = ip;
    // Grow the array over the new address while it stays at least a
    // quarter full (counting what it would hold); else the hash map.
    const uint64_t lo = std::min(ip, dense_base_);
    const uint64_t hi = std::max<uint64_t>(ip, dense_base_ + std::max<size_t>(dense_.size(), 1) - 1);
    if (ip - dense_base_ >= dense_.size() && hi - lo + 1 <= 4 * (dense_filled_ + 1) + 64) {
      if (lo < dense_base_) {
        dense_.insert(dense_.begin(), dense_base_ - lo, kNoGroup);
        dense_base_ = static_cast<uint32_t>(lo);
      }
      if (hi - lo + 1 > dense_.size()) dense_.resize(hi - lo + 1, kNoGroup);
    }
    if (ip - dense_base_ < dense_.size()) {
      uint32_t& slot = dense_[ip - dense_base_];
      dense_filled_ += slot == kNoGroup;
      slot = g;
      sparse_.erase(ip);
    } else {
      sparse_[ip] = g;
    }
    return;
  }
  Route r;
  r.v6 = prefix.v6;
  std::memcpy(r.prefix, prefix.bytes, 16);
  r.len = len;
  r.ports = std::move(ports);
  auto it = std::find_if(routes_.begin(), routes_.end(), [&](const Route& o) {
    return o.v6 == r.v6 && o.len == r.len && std::memcmp(o.prefix, r.prefix, 16) == 0;
  });
  if (it != routes_.end()) {
    *it = std::move(r);
    return;
  }
  routes_.push_back(std::move(r));
  std::stable_sort(routes_.begin(), routes_.end(),
                   [](const Route& a, const Route& b) { return a.len > b.len; });
}

int RouteTable::choose(const std::vector<uint16_t>& ports, const FlowKey& key, uint64_t seed,
                       const std::vector<bool>& up) const {
  auto is_up = [&](uint16_t p) { return up.empty() || (p < up.size() && up[p]); };
  if (ports.size() == 1) return is_up(ports[0]) ? ports[0] : -1;
  const uint32_t h = ecmp_hash(key, seed);
  size_t live = 0;
  for (uint16_t p : ports) live += is_up(p);
  if (live == 0) return -1;
  // Map the hash onto the live members (multiply-shift, no modulo bias).
  size_t pick = static_cast<size_t>((uint64_t{h} * live) >> 32);
  for (uint16_t p : ports) {
    if (!is_up(p)) continue;
    if (pick-- == 0) return p;
  }
  return -1;
}

const std::vector<uint16_t>* RouteTable::group(const FlowKey& key) const {
  const bool v6 = key.ip_version == 6;
  if (!v6 && !groups_.empty()) {
    if (const uint32_t g = host_group(load_be32_host(key.dst_ip)); g != kNoGroup)
      return &groups_[g];
  }
  for (const Route& r : routes_) {
    if (r.v6 == v6 && prefix_match(r.prefix, key.dst_ip, r.len)) return &r.ports;
  }
  return nullptr;
}

int RouteTable::lookup(const FlowKey& key, uint64_t seed,
                       const std::vector<bool>& up) const {
  const std::vector<uint16_t>* ports = group(key);
  return ports ? choose(*ports, key, seed, up) : -1;
}

}  // namespace droce::fabric
