// Forwarding: longest-prefix match on the destination IP, each route naming
// one port or an ECMP group. Within a group the member is chosen by a hash
// of the 5-tuple; RoCEv2 puts per-QP entropy in the UDP source port, so QPs
// between the same two hosts spread over the paths of a leaf-spine fabric
// while each QP stays on one path (no reordering within a flow).
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "droce/fabric/packet.h"
#include "droce/wire/packet.h"

namespace droce::fabric {

struct FlowKey {
  uint8_t ip_version = 4;
  uint8_t src_ip[16] = {};
  uint8_t dst_ip[16] = {};
  uint8_t protocol = 0;
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
};
FlowKey flow_key(const FrameInfo& info);

// Seeded 5-tuple hash. Switches in a fabric should use different seeds, or
// every tier makes the same choice and some paths stay unused (hash
// polarization).
uint32_t ecmp_hash(const FlowKey& key, uint64_t seed);

class RouteTable {
 public:
  // Routes `prefix`/`prefix_len` to `ports` (one port, or an ECMP group).
  void add(const wire::IpAddress& prefix, uint8_t prefix_len,
           std::vector<uint16_t> ports);
  void add_host(const wire::IpAddress& host, uint16_t port) {
    add(host, host.v6 ? 128 : 32, {port});
  }
  // A default route (0/0) for the IP family of `v6`.
  void add_default(bool v6, std::vector<uint16_t> ports) {
    wire::IpAddress any;
    any.v6 = v6;
    add(any, 0, std::move(ports));
  }

  // The egress port for `key`, or -1 if no route matches or all members are
  // down. `port_up` may be empty (all up).
  int lookup(const FlowKey& key, uint64_t seed,
             const std::vector<bool>& port_up = {}) const;

  // The ports of the route `key` matches (one port or an ECMP group, down
  // ones included), or nullptr when none does: for a caller that chooses
  // among them itself (adaptive routing, load_balance.h).
  const std::vector<uint16_t>* group(const FlowKey& key) const;

  size_t size() const { return routes_.size(); }
  // The ports of the IPv4 /32 route to `host` (an ECMP group in the order
  // given), or nullptr when there is none.
  const std::vector<uint16_t>* host_ports(const wire::IpAddress& host) const;

 private:
  struct Route {
    bool v6 = false;
    uint8_t prefix[16] = {};
    uint8_t len = 0;
    std::vector<uint16_t> ports;
  };
  int choose(const std::vector<uint16_t>& ports, const FlowKey& key, uint64_t seed,
             const std::vector<bool>& port_up) const;
  // The group of the /32 route to `ip`, or kNoGroup.
  uint32_t host_group(uint32_t ip) const;
  uint32_t intern(std::vector<uint16_t> ports);
  std::vector<Route> routes_;  // longest prefix first
  static uint32_t load_be32_host(const uint8_t* p) { return wire::load_be32(p); }

  // IPv4 /32 routes, the fast path: a fabric has one per host in every
  // switch, so they are kept small. The distinct port sets (a leaf has one
  // per local host and one ECMP group over its uplinks) are stored once;
  // hosts whose addresses are dense (a simulated fabric numbers them
  // 10.0.0.1, .2, ...) map to their group through an array from
  // `dense_base_`, 4 bytes a host; the rest through a hash map.
  static constexpr uint32_t kNoGroup = UINT32_MAX;
  std::vector<std::vector<uint16_t>> groups_;
  std::map<std::vector<uint16_t>, uint32_t> group_index_;
  uint32_t dense_base_ = 0;
  std::vector<uint32_t> dense_;  // group per address from dense_base_, or kNoGroup
  size_t dense_filled_ = 0;
  std::unordered_map<uint32_t, uint32_t> sparse_;  // address -> group
};

}  // namespace droce::fabric
