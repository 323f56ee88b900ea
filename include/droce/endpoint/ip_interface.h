// A port's IP interface: what a host's network stack does for an RDMA NIC
// on Ethernet. It answers ARP (RFC 826) and IPv6 neighbour solicitations
// (RFC 4861) for the port's addresses, announces them when the port comes
// up, answers ICMP echo (RFC 792, RFC 4443) at a bounded rate, and
// resolves peers' addresses into MACs through its neighbour cache.
// DPDK-free, driven by the endpoint: received frames in, frames to send
// out through a bounded queue, resolution results as events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "droce/endpoint/counters.h"
#include "droce/endpoint/neighbour_cache.h"
#include "droce/wire/ethernet.h"

namespace droce::endpoint {

// At most `burst` at once and `per_sec` on average (a token bucket).
struct RateLimit {
  uint32_t per_sec = 0;  // 0 = none allowed
  uint32_t burst = 0;
};

struct InterfaceConfig {
  wire::MacAddress mac{};
  // The IPv4 and IPv6 addresses the port owns. None: the interface is off
  // and ARP, ND and ICMP frames are counted as other protocols, as before.
  // With any address, the IPv6 link-local address of `mac` is owned too.
  std::vector<wire::IpAddress> addresses;
  // The port's VLAN: frames are sent tagged with it and only frames
  // tagged with it are answered. Untagged otherwise.
  bool vlan = false;
  uint16_t vlan_id = 0;
  uint8_t pcp = 0;
  NeighbourTimers timers;
  // Linux's defaults for ICMP (net.ipv4.icmp_msgs_per_sec 1000,
  // icmp_msgs_burst 50).
  RateLimit echo_replies{1000, 50};
  // ARP replies and neighbour advertisements: far more than any peer
  // needs, few enough that a flood of requests cannot take the port.
  RateLimit answers{10'000, 256};
  // Frames waiting to be sent (answers, solicitations); more are dropped
  // and counted.
  size_t tx_queue_frames = 64;
  uint64_t seed = 1;  // draws of the reachable time (NeighbourCache)
};

class IpInterface {
 public:
  IpInterface(const InterfaceConfig& config, EndpointCounters& counters);

  bool enabled() const { return !addresses_.empty(); }
  bool owns(const wire::IpAddress& ip) const;
  const std::vector<wire::IpAddress>& addresses() const { return addresses_; }

  // A frame parse() found not to be RoCEv2: an ARP, ICMP or ICMPv6 frame
  // is taken (counted, answered, learnt from) and true returned; anything
  // else is the caller's.
  bool receive(std::span<const uint8_t> frame, uint64_t now);
  // The port came up: a gratuitous ARP (an ARP announcement, RFC 5227
  // section 2.3) for each IPv4 address and an unsolicited neighbour
  // advertisement to all nodes (RFC 4861 7.2.6) for each IPv6 one.
  void announce(uint64_t now);

  // The MAC of `ip` if the cache has a usable entry.
  std::optional<wire::MacAddress> lookup(const wire::IpAddress& ip, uint64_t now);
  // Starts resolving `ip` for a QP (one user more); the result comes as
  // an event.
  void resolve(const wire::IpAddress& ip, uint64_t now);
  void release(const wire::IpAddress& ip) { cache_.release(ip); }

  // Runs the neighbour timers (solicitations, failures).
  void tick(uint64_t now);
  uint64_t next_deadline() const;

  // Resolution events since the last take: addresses that now have a MAC
  // (or a new one) and addresses that failed to resolve.
  struct Event {
    wire::IpAddress ip;
    enum class Kind : uint8_t { kResolved, kChanged, kFailed } kind;
    wire::MacAddress mac{};
  };
  bool has_events() const { return !events_.empty(); }
  void take_events(std::vector<Event>& out);

  // Sends an ICMP echo request to `dst` (resolving its MAC first if need
  // be: the request waits for it, and is dropped if it fails), identifier
  // kPingIdentifier, from the address of ours closest to it.
  void ping(const wire::IpAddress& dst, uint16_t sequence, uint64_t now);
  static constexpr uint16_t kPingIdentifier = 0xD0CE;
  struct PingReply {
    wire::IpAddress from;
    uint16_t sequence = 0;
    uint64_t rtt_ns = 0;
  };
  // Echo replies to our pings since the last take (at most 1024 kept).
  void take_ping_replies(std::vector<PingReply>& out);

  bool has_frames() const { return !tx_.empty(); }
  // Copies the oldest queued frame into `buf` and returns its length (0 if
  // none, or if `buf` is too small: that frame is dropped and counted).
  size_t emit(std::span<uint8_t> buf);

  const NeighbourCache& neighbours() const { return cache_; }

 private:
  struct Bucket {
    RateLimit limit;
    double tokens = 0;
    uint64_t last_ns = 0;
    bool take(uint64_t now);
  };
  bool vlan_ok(const wire::L2Header& l2);
  wire::L2Header l2_to(const wire::MacAddress& dst) const;
  const wire::IpAddress* source_for(const wire::IpAddress& target) const;
  bool receive_arp(std::span<const uint8_t> frame, uint64_t now);
  bool receive_icmp(std::span<const uint8_t> frame, uint64_t now);
  bool receive_icmpv6(std::span<const uint8_t> frame, uint64_t now);
  void learnt(const wire::IpAddress& ip, const wire::MacAddress& mac,
              NeighbourCache::Learned result, uint64_t now);
  void solicit(const wire::IpAddress& target, bool unicast, const wire::MacAddress& mac);
  void send_echo_request(const wire::IpAddress& dst, const wire::MacAddress& mac,
                         uint16_t sequence, uint64_t now);
  void echo_reply_in(const wire::IpAddress& from, uint16_t identifier, uint16_t sequence,
                     std::span<const uint8_t> data, uint64_t now);
  void resolution_done(const Event& e, uint64_t now);
  // Queues a frame `build` writes into a buffer of `max_len` bytes.
  template <class Build>
  bool queue(size_t max_len, Build&& build);
  // An echo request for us: answered within the echo rate limit.
  template <class Build>
  void answer_echo(size_t request_len, uint64_t now, Build&& build);

  InterfaceConfig config_;
  EndpointCounters& counters_;
  std::vector<wire::IpAddress> addresses_;
  NeighbourCache cache_;
  Bucket echo_bucket_;
  Bucket answer_bucket_;
  std::deque<std::vector<uint8_t>> tx_;
  std::vector<Event> events_;
  std::vector<NeighbourCache::Probe> probes_;
  std::vector<wire::IpAddress> failed_;
  struct PendingPing {
    wire::IpAddress dst;
    uint16_t sequence;
  };
  std::vector<PendingPing> pending_pings_;  // waiting for their MAC
  std::vector<PingReply> ping_replies_;
};

}  // namespace droce::endpoint
