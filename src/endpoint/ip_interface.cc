#include "droce/endpoint/ip_interface.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "droce/wire/arp.h"
#include "droce/wire/bytes.h"
#include "droce/wire/icmp.h"
#include "droce/wire/icmpv6.h"

namespace droce::endpoint {

namespace {

// Bits the two addresses share from the top.
unsigned common_prefix(const wire::IpAddress& a, const wire::IpAddress& b) {
  const size_t n = a.v6 ? 16 : 4;
  unsigned bits = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t x = a.bytes[i] ^ b.bytes[i];
    if (x != 0) return bits + static_cast<unsigned>(std::countl_zero(x));
    bits += 8;
  }
  return bits;
}

// Ethernet, 802.1Q, IPv6 and an ICMP message: room for any frame this
// interface builds but echo replies, which are as long as their request.
constexpr size_t kControlFrameMax = 128;

}  // namespace

bool IpInterface::Bucket::take(uint64_t now) {
  if (limit.per_sec == 0) return false;
  const double add = static_cast<double>(now - std::min(now, last_ns)) * limit.per_sec / 1e9;
  tokens = std::min<double>(limit.burst, tokens + add);
  last_ns = now;
  if (tokens < 1) return false;
  tokens -= 1;
  return true;
}

IpInterface::IpInterface(const InterfaceConfig& config, EndpointCounters& counters)
    : config_(config),
      counters_(counters),
      addresses_(config.addresses),
      cache_(config.timers, config.seed),
      echo_bucket_{config.echo_replies, static_cast<double>(config.echo_replies.burst), 0},
      answer_bucket_{config.answers, static_cast<double>(config.answers.burst), 0} {
  // An Ethernet interface with IPv6 has its link-local address (RFC 4862
  // 5.3); Linux gives it one whatever else is configured.
  if (!addresses_.empty()) {
    const wire::IpAddress ll = wire::link_local_address(config.mac);
    if (!owns(ll)) addresses_.push_back(ll);
  }
}

bool IpInterface::owns(const wire::IpAddress& ip) const {
  return std::find(addresses_.begin(), addresses_.end(), ip) != addresses_.end();
}

const wire::IpAddress* IpInterface::source_for(const wire::IpAddress& target) const {
  // The address of the same family sharing the longest prefix with the
  // target (RFC 6724's rule 8, the one that matters on one link).
  const wire::IpAddress* best = nullptr;
  unsigned best_bits = 0;
  for (const wire::IpAddress& a : addresses_) {
    if (a.v6 != target.v6) continue;
    const unsigned bits = common_prefix(a, target);
    if (!best || bits > best_bits) {
      best = &a;
      best_bits = bits;
    }
  }
  return best;
}

bool IpInterface::vlan_ok(const wire::L2Header& l2) {
  if (l2.vlan == config_.vlan && (!l2.vlan || l2.vlan_id == config_.vlan_id)) return true;
  ++counters_.wrong_vlan;
  return false;
}

wire::L2Header IpInterface::l2_to(const wire::MacAddress& dst) const {
  wire::L2Header l2;
  l2.dst = dst;
  l2.src = config_.mac;
  l2.vlan = config_.vlan;
  l2.vlan_id = config_.vlan_id;
  l2.pcp = config_.pcp;
  return l2;
}

template <class Build>
bool IpInterface::queue(size_t max_len, Build&& build) {
  if (tx_.size() >= config_.tx_queue_frames) {
    ++counters_.ctl_tx_queue_full;
    return false;
  }
  std::vector<uint8_t> frame(std::max(max_len, wire::kMinFrameSize));
  const size_t n = build(std::span<uint8_t>(frame));
  if (n == 0) return false;
  frame.resize(n);
  tx_.push_back(std::move(frame));
  return true;
}

template <class Build>
void IpInterface::answer_echo(size_t request_len, uint64_t now, Build&& build) {
  ++counters_.icmp_echo_in;
  if (!echo_bucket_.take(now)) {
    ++counters_.answers_rate_limited;
    return;
  }
  if (queue(request_len + wire::kMinFrameSize, build)) ++counters_.icmp_echo_out;
}

bool IpInterface::receive(std::span<const uint8_t> frame, uint64_t now) {
  if (!enabled()) return false;
  wire::L2Header l2;
  uint16_t ether_type = 0;
  size_t off = 0;
  if (!wire::read_l2(frame, l2, ether_type, off)) return false;
  if (ether_type == wire::kEtherTypeArp) return receive_arp(frame, now);
  // The IP protocol / next header, where parse() left it unread.
  if (ether_type == wire::kEtherTypeIpv4 && frame.size() >= off + wire::kIpv4Size &&
      frame[off + 9] == wire::kIpProtoIcmp)
    return receive_icmp(frame, now);
  if (ether_type == wire::kEtherTypeIpv6 && frame.size() >= off + wire::kIpv6Size &&
      frame[off + 6] == wire::kIpProtoIcmpv6)
    return receive_icmpv6(frame, now);
  return false;
}

void IpInterface::learnt(const wire::IpAddress& ip, const wire::MacAddress& mac,
                         NeighbourCache::Learned result, uint64_t now) {
  switch (result) {
    case NeighbourCache::Learned::kResolved:
      ++counters_.neigh_resolved;
      events_.push_back({ip, Event::Kind::kResolved, mac});
      if (!pending_pings_.empty()) resolution_done(events_.back(), now);
      break;
    case NeighbourCache::Learned::kChanged:
      ++counters_.neigh_changed;
      events_.push_back({ip, Event::Kind::kChanged, mac});
      break;
    case NeighbourCache::Learned::kNoRoom:
      ++counters_.neigh_no_room;
      break;
    default:
      break;
  }
}

bool IpInterface::receive_arp(std::span<const uint8_t> frame, uint64_t now) {
  wire::L2Header l2;
  wire::ArpPacket arp;
  if (wire::parse_arp(frame, l2, arp) != wire::ArpError::kOk) {
    ++counters_.arp_bad;
    return true;
  }
  if (!vlan_ok(l2)) return true;
  const wire::IpAddress sender = wire::IpAddress::v4(arp.sender_ip);
  const wire::IpAddress target = wire::IpAddress::v4(arp.target_ip);
  // A sender claiming a group or our own MAC is a misconfiguration or an
  // attack, never a neighbour.
  if (wire::is_group_mac(arp.sender_mac) || arp.sender_mac == config_.mac) {
    ++counters_.arp_bad;
    return true;
  }
  // 0.0.0.0 is an address probe (RFC 5227 2.1.1): it names no neighbour.
  const bool has_sender = arp.sender_ip != 0;
  if (arp.op == wire::ArpOp::kRequest && owns(target)) {
    ++counters_.arp_requests_in;
    if (has_sender)
      learnt(sender, arp.sender_mac, cache_.on_solicitation(sender, arp.sender_mac, now), now);
    if (!answer_bucket_.take(now)) {
      ++counters_.answers_rate_limited;
      return true;
    }
    wire::ArpPacket reply;
    reply.op = wire::ArpOp::kReply;
    reply.sender_mac = config_.mac;
    reply.sender_ip = arp.target_ip;
    reply.target_mac = arp.sender_mac;
    reply.target_ip = arp.sender_ip;
    if (queue(kControlFrameMax, [&](std::span<uint8_t> out) {
          return wire::build_arp(l2_to(arp.sender_mac), reply, out);
        }))
      ++counters_.arp_replies_out;
    return true;
  }
  if (arp.op == wire::ArpOp::kReply && owns(target)) {
    ++counters_.arp_replies_in;
    const auto r = cache_.on_advertisement(sender, arp.sender_mac, true, true, now);
    if (r == NeighbourCache::Learned::kIgnored) ++counters_.spoofed_answers;
    learnt(sender, arp.sender_mac, r, now);
    return true;
  }
  // Someone else's request or reply, or a gratuitous ARP: RFC 826's merge
  // updates an entry we have and adds none.
  ++counters_.arp_other;
  if (has_sender && !owns(sender))
    learnt(sender, arp.sender_mac,
           cache_.on_advertisement(sender, arp.sender_mac, false, true, now), now);
  return true;
}

bool IpInterface::receive_icmp(std::span<const uint8_t> frame, uint64_t now) {
  wire::IcmpEcho echo;
  const wire::IcmpError e = wire::parse_icmp_echo(frame, echo);
  if (e == wire::IcmpError::kOtherType) {
    ++counters_.icmp_other;
    return true;
  }
  if (e != wire::IcmpError::kOk) {
    ++counters_.icmp_bad;
    return true;
  }
  if (!vlan_ok(echo.l2)) return true;
  if (echo.type == wire::kIcmpEchoReply && owns(wire::IpAddress::v4(echo.dst_ip))) {
    echo_reply_in(wire::IpAddress::v4(echo.src_ip), echo.identifier, echo.sequence, echo.data, now);
    return true;
  }
  // Requests to a broadcast or group address are not answered (Linux's
  // icmp_echo_ignore_broadcasts).
  if (echo.type != wire::kIcmpEchoRequest || !owns(wire::IpAddress::v4(echo.dst_ip)) ||
      wire::is_group_mac(echo.l2.dst) || wire::is_group_mac(echo.l2.src)) {
    ++counters_.icmp_other;
    return true;
  }
  answer_echo(frame.size(), now, [&](std::span<uint8_t> out) {
    return wire::build_icmp_echo_reply(echo, config_.mac, out);
  });
  return true;
}

bool IpInterface::receive_icmpv6(std::span<const uint8_t> frame, uint64_t now) {
  wire::Icmpv6Message m;
  const wire::Icmpv6Error e = wire::parse_icmpv6(frame, m);
  if (e == wire::Icmpv6Error::kOtherType) {
    ++counters_.nd_other;
    return true;
  }
  if (e != wire::Icmpv6Error::kOk) {
    ++(e == wire::Icmpv6Error::kBadNd ? counters_.nd_bad : counters_.icmp_bad);
    return true;
  }
  if (!vlan_ok(m.l2)) return true;
  if (m.type == wire::kIcmpv6EchoRequest) {
    if (!owns(m.dst_ip) || wire::is_group_mac(m.l2.src)) {
      ++counters_.icmp_other;
      return true;
    }
    answer_echo(frame.size(), now, [&](std::span<uint8_t> out) {
      return wire::build_icmpv6_echo_reply(m, config_.mac, m.dst_ip, out);
    });
    return true;
  }
  if (m.type == wire::kIcmpv6EchoReply) {
    if (owns(m.dst_ip)) {
      echo_reply_in(m.src_ip, m.identifier, m.sequence, m.data, now);
    } else {
      ++counters_.icmp_other;
    }
    return true;
  }
  if (m.has_link_layer && (wire::is_group_mac(m.link_layer) || m.link_layer == config_.mac)) {
    ++counters_.nd_bad;
    return true;
  }
  if (m.type == wire::kIcmpv6NeighbourAdvertisement) {
    ++counters_.nd_adverts_in;
    // RFC 4861 7.2.5: an advertisement without the target's link-layer
    // address cannot resolve anything.
    if (!m.has_link_layer) return true;
    const auto r =
        cache_.on_advertisement(m.target, m.link_layer, m.solicited, m.override_flag, now);
    if (r == NeighbourCache::Learned::kIgnored && m.solicited) ++counters_.spoofed_answers;
    learnt(m.target, m.link_layer, r, now);
    return true;
  }
  // A neighbour solicitation.
  if (!owns(m.target)) {
    ++counters_.nd_other;
    return true;
  }
  ++counters_.nd_solicits_in;
  const bool dad = wire::is_ipv6_unspecified(m.src_ip);
  if (!dad && m.has_link_layer)
    learnt(m.src_ip, m.link_layer, cache_.on_solicitation(m.src_ip, m.link_layer, now), now);
  if (!answer_bucket_.take(now)) {
    ++counters_.answers_rate_limited;
    return true;
  }
  // RFC 4861 7.2.4: to the solicitation's source, Solicited and Override
  // set; to a duplicate address detection (from ::), to all nodes with
  // Solicited clear.
  const wire::IpAddress dst = dad ? wire::all_nodes_address() : m.src_ip;
  const wire::MacAddress dst_mac =
      dad ? wire::ipv6_multicast_mac(dst) : (m.has_link_layer ? m.link_layer : m.l2.src);
  if (queue(kControlFrameMax, [&](std::span<uint8_t> out) {
        return wire::build_neighbour_advertisement(l2_to(dst_mac), m.target, dst, m.target, !dad,
                                                   true, out);
      }))
    ++counters_.nd_adverts_out;
  return true;
}

void IpInterface::announce(uint64_t) {
  for (const wire::IpAddress& a : addresses_) {
    if (!a.v6) {
      wire::ArpPacket arp;
      arp.op = wire::ArpOp::kRequest;
      arp.sender_mac = config_.mac;
      arp.sender_ip = arp.target_ip = a.v4_host_order();
      if (queue(kControlFrameMax, [&](std::span<uint8_t> out) {
            return wire::build_arp(l2_to(wire::kBroadcastMac), arp, out);
          }))
        ++counters_.arp_requests_out;
    } else {
      const wire::IpAddress all = wire::all_nodes_address();
      if (queue(kControlFrameMax, [&](std::span<uint8_t> out) {
            return wire::build_neighbour_advertisement(l2_to(wire::ipv6_multicast_mac(all)), a, all,
                                                       a, false, true, out);
          }))
        ++counters_.nd_adverts_out;
    }
  }
}

std::optional<wire::MacAddress> IpInterface::lookup(const wire::IpAddress& ip, uint64_t now) {
  if (const Neighbour* n = cache_.use(ip, now)) return n->mac;
  return std::nullopt;
}

void IpInterface::resolve(const wire::IpAddress& ip, uint64_t now) {
  if (!cache_.resolve(ip, now)) {
    if (!cache_.find(ip)) {
      ++counters_.neigh_no_room;
      events_.push_back({ip, Event::Kind::kFailed, {}});
      resolution_done(events_.back(), now);
    }
    return;
  }
  solicit(ip, false, {});
}

void IpInterface::solicit(const wire::IpAddress& target, bool unicast,
                          const wire::MacAddress& mac) {
  const wire::IpAddress* src = source_for(target);
  if (!src) return;  // no address of that family: nothing to ask from
  if (!target.v6) {
    wire::ArpPacket arp;
    arp.op = wire::ArpOp::kRequest;
    arp.sender_mac = config_.mac;
    arp.sender_ip = src->v4_host_order();
    arp.target_ip = target.v4_host_order();
    if (queue(kControlFrameMax, [&](std::span<uint8_t> out) {
          return wire::build_arp(l2_to(unicast ? mac : wire::kBroadcastMac), arp, out);
        }))
      ++counters_.arp_requests_out;
    return;
  }
  const wire::IpAddress dst = unicast ? target : wire::solicited_node_address(target);
  if (queue(kControlFrameMax, [&](std::span<uint8_t> out) {
        return wire::build_neighbour_solicitation(
            l2_to(unicast ? mac : wire::ipv6_multicast_mac(dst)), *src, dst, target, out);
      }))
    ++counters_.nd_solicits_out;
}

void IpInterface::tick(uint64_t now) {
  if (now < cache_.next_deadline()) return;
  probes_.clear();
  failed_.clear();
  cache_.tick(now, probes_, failed_);
  for (const NeighbourCache::Probe& p : probes_) solicit(p.ip, p.unicast, p.mac);
  for (const wire::IpAddress& ip : failed_) {
    ++counters_.neigh_failed;
    events_.push_back({ip, Event::Kind::kFailed, {}});
    if (!pending_pings_.empty()) resolution_done(events_.back(), now);
  }
}

uint64_t IpInterface::next_deadline() const { return cache_.next_deadline(); }

void IpInterface::ping(const wire::IpAddress& dst, uint16_t sequence, uint64_t now) {
  if (auto mac = lookup(dst, now)) {
    send_echo_request(dst, *mac, sequence, now);
    return;
  }
  if (pending_pings_.size() >= config_.tx_queue_frames) {
    ++counters_.ctl_tx_queue_full;
    return;
  }
  pending_pings_.push_back({dst, sequence});
  resolve(dst, now);
}

void IpInterface::send_echo_request(const wire::IpAddress& dst, const wire::MacAddress& mac,
                                    uint16_t sequence, uint64_t now) {
  const wire::IpAddress* src = source_for(dst);
  if (!src) return;
  // The send time travels in the payload, as ping's does: the reply
  // brings it back and no state is kept per request.
  uint8_t stamp[8];
  wire::store_be64(stamp, now);
  if (queue(kControlFrameMax, [&](std::span<uint8_t> out) {
        return dst.v6 ? wire::build_icmpv6_echo_request(l2_to(mac), *src, dst, kPingIdentifier,
                                                        sequence, stamp, out)
                      : wire::build_icmp_echo_request(l2_to(mac), src->v4_host_order(),
                                                      dst.v4_host_order(), kPingIdentifier,
                                                      sequence, stamp, out);
      }))
    ++counters_.icmp_pings_out;
}

void IpInterface::echo_reply_in(const wire::IpAddress& from, uint16_t identifier, uint16_t sequence,
                                std::span<const uint8_t> data, uint64_t now) {
  if (identifier != kPingIdentifier || data.size() < 8) {
    ++counters_.icmp_other;
    return;
  }
  ++counters_.icmp_ping_replies_in;
  const uint64_t sent = wire::load_be64(data.data());
  if (ping_replies_.size() < 1024)
    ping_replies_.push_back({from, sequence, now >= sent ? now - sent : 0});
}

void IpInterface::take_ping_replies(std::vector<PingReply>& out) {
  out.insert(out.end(), ping_replies_.begin(), ping_replies_.end());
  ping_replies_.clear();
}

void IpInterface::resolution_done(const Event& e, uint64_t now) {
  // Pings that waited for this address go now, or are dropped with it.
  for (auto it = pending_pings_.begin(); it != pending_pings_.end();) {
    if (it->dst != e.ip) {
      ++it;
      continue;
    }
    if (e.kind != Event::Kind::kFailed) send_echo_request(e.ip, e.mac, it->sequence, now);
    it = pending_pings_.erase(it);
  }
}

void IpInterface::take_events(std::vector<Event>& out) {
  out.insert(out.end(), events_.begin(), events_.end());
  events_.clear();
}

size_t IpInterface::emit(std::span<uint8_t> buf) {
  if (tx_.empty()) return 0;
  const std::vector<uint8_t>& f = tx_.front();
  size_t n = 0;
  if (f.size() <= buf.size()) {
    std::copy(f.begin(), f.end(), buf.begin());
    n = f.size();
  } else {
    ++counters_.ctl_tx_queue_full;
  }
  tx_.pop_front();
  return n;
}

}  // namespace droce::endpoint
