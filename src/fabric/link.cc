#include "droce/fabric/link.h"

#include <cstddef>
#include <iterator>

namespace droce::fabric {

void Link::set_up(bool up) {
  if (!up) {
    counters_.lost_down += in_flight_.size();
    in_flight_.clear();
  }
  up_ = up;
}

void Link::enqueue(Packet&& p, uint64_t arrival) {
  // After every packet arriving at or before this one (ties in send order).
  size_t at = in_flight_.size();
  if (at == 0 || in_flight_.back().arrival <= arrival) {
    in_flight_.push_back(InFlight{arrival, std::move(p)});
    return;
  }
  auto it = in_flight_.end();
  while (it != in_flight_.begin() && std::prev(it)->arrival > arrival) --it, --at;
  in_flight_.insert_at(at, InFlight{arrival, std::move(p)});
}

void Link::send(Packet&& packet, uint64_t departure_time) {
  transmit(std::move(packet), departure_time, up_, true);
}

void Link::send_as_of(Packet&& packet, uint64_t departure_time, bool up_then, bool cut_since) {
  transmit(std::move(packet), departure_time, up_then, !cut_since);
}

void Link::transmit(Packet&& packet, uint64_t departure_time, bool up, bool arrives) {
  ++counters_.sent;
  if (!up) {
    ++counters_.lost_down;
    return;
  }
  const Impairments& im = cfg_.impairments;
  // Gilbert-Elliott: move the chain one step per packet, then lose with the
  // new state's probability.
  if (im.burst.enabled()) {
    ge_bad_ = ge_bad_ ? !rng_.chance(im.burst.p_bad_to_good)
                      : rng_.chance(im.burst.p_good_to_bad);
    if (rng_.chance(ge_bad_ ? im.burst.loss_bad : im.burst.loss_good)) {
      ++counters_.lost_burst;
      return;
    }
  }
  if (rng_.chance(im.loss)) {
    ++counters_.lost_random;
    return;
  }
  if (rng_.chance(im.corrupt)) {
    // Past the Ethernet header (and any VLAN tag).
    size_t l3 = wire::kEthSize;
    if (packet.size() >= 18 && wire::load_be16(packet.bytes.data() + 12) ==
                                   wire::kEtherTypeVlan)
      l3 += wire::kVlanTagSize;
    if (packet.size() > l3) {
      const uint64_t bit = rng_.below((packet.size() - l3) * 8);
      size_t at = l3 + bit / 8;
      // A bit of payload the frame does not hold: its ICRC, computed over
      // zeros there, no longer matches what the frame carries, as with
      // the flipped bit itself (CRC-32 catches every single-bit error).
      const auto [first, last] = packet.unheld_range();
      if (at >= first && at < last) at = packet.size() - 1;
      packet.bytes[packet.held_offset(at)] ^= static_cast<uint8_t>(1u << (bit % 8));
      ++counters_.corrupted;
    }
  }
  const bool dup = rng_.chance(im.duplicate);
  auto delay = [&]() {
    uint64_t d = cfg_.propagation_ns + im.extra_delay_ns;
    if (im.jitter_ns) d += rng_.below(im.jitter_ns + 1);
    if (rng_.chance(im.reorder)) {
      d += im.reorder_delay_ns;
      ++counters_.reordered;
    }
    return d;
  };
  auto place = [&](Packet&& p, uint64_t arrival) {
    if (arrives) {
      enqueue(std::move(p), arrival);
    } else {
      ++counters_.lost_down;  // in flight when the link went down
    }
  };
  if (dup) {
    ++counters_.duplicated;
    Packet copy = packet;
    const uint64_t d1 = delay();
    place(std::move(packet), departure_time + d1);
    place(std::move(copy), departure_time + delay());
    return;
  }
  place(std::move(packet), departure_time + delay());
}

}  // namespace droce::fabric
