// One direction of a cable between a switch port and its peer: propagation
// delay plus impairments. A full-duplex cable is two Links. The link holds
// packets in flight (ordered by arrival time) so that taking it down loses
// them, and so that reordering and jitter are just different arrival times.
#pragma once

#include <cstdint>
#include <vector>

#include "droce/fabric/fifo.h"
#include "droce/fabric/packet.h"
#include "droce/fabric/rng.h"

namespace droce::fabric {

// Two-state Markov loss model (Gilbert 1960, Elliott 1963): bursts of loss
// while in the bad state. Mean burst length is 1 / p_bad_to_good packets;
// the stationary loss rate is
//   (pi_good * loss_good + pi_bad * loss_bad),  pi_bad = p_gb / (p_gb + p_bg).
struct GilbertElliott {
  double p_good_to_bad = 0;  // per packet
  double p_bad_to_good = 1;
  double loss_good = 0;
  double loss_bad = 1;
  bool enabled() const { return p_good_to_bad > 0; }
  double stationary_loss() const {
    const double pb = p_good_to_bad / (p_good_to_bad + p_bad_to_good);
    return (1 - pb) * loss_good + pb * loss_bad;
  }
};

// Per-packet probabilities and delays, applied in this order: burst loss,
// random loss, corruption, duplication, then the delays of each copy.
struct Impairments {
  double loss = 0;
  GilbertElliott burst{};
  // One bit flipped at a uniform position between the IP header and the end
  // of the frame: corruption inside a switch that the next hop's Ethernet
  // FCS regeneration hides, which is the case the RoCE ICRC exists for.
  double corrupt = 0;
  double duplicate = 0;     // a second copy right behind the first
  double reorder = 0;       // this packet is held back by reorder_delay_ns
  uint64_t reorder_delay_ns = 10'000;
  uint64_t extra_delay_ns = 0;
  uint64_t jitter_ns = 0;   // uniform extra delay in [0, jitter_ns]; reorders
};

struct LinkConfig {
  uint64_t propagation_ns = 500;  // ~100 m of fibre at 5 ns/m
  Impairments impairments{};
  uint64_t seed = 1;
};

struct LinkCounters {
  uint64_t sent = 0;
  uint64_t delivered = 0;
  uint64_t delivered_bytes = 0;
  uint64_t lost_random = 0;
  uint64_t lost_burst = 0;
  uint64_t lost_down = 0;  // sent while down, or in flight when it went down
  uint64_t corrupted = 0;
  uint64_t duplicated = 0;
  uint64_t reordered = 0;
};

class Link {
 public:
  explicit Link(const LinkConfig& cfg = {}) : cfg_(cfg), rng_(cfg.seed) {}

  // `departure_time`: when the last bit left the sender (Departure::time).
  // The packet arrives propagation_ns (+ impairment delays) later.
  void send(Packet&& packet, uint64_t departure_time);
  // The same send made later than it happened, for a sender that runs
  // elsewhere (a simulation split over processes hands frames over in
  // batches): `up_then` is whether the link was up when the packet was
  // sent, `cut_since` whether it went down after that, with the packet in
  // flight (then it is lost, as set_up(false) would have dropped it). The
  // impairment draws are the ones send() makes then, in the same order.
  void send_as_of(Packet&& packet, uint64_t departure_time, bool up_then, bool cut_since);

  uint64_t next_event_time() const {
    return in_flight_.empty() ? kNever : in_flight_.front().arrival;
  }
  // Delivers every packet with arrival <= now, in arrival order (ties in
  // send order): deliver(Packet&&, uint64_t arrival_time).
  template <class Deliver>
  void advance(uint64_t now, Deliver&& deliver) {
    while (!in_flight_.empty() && in_flight_.front().arrival <= now) {
      InFlight f = std::move(in_flight_.front());
      in_flight_.pop_front();
      ++counters_.delivered;
      counters_.delivered_bytes += f.packet.size();
      deliver(std::move(f.packet), f.arrival);
    }
  }

  // Down drops everything in flight and everything sent until it is up.
  void set_up(bool up);
  bool up() const { return up_; }

  Impairments& impairments() { return cfg_.impairments; }
  const LinkConfig& config() const { return cfg_; }
  const LinkCounters& counters() const { return counters_; }
  size_t in_flight() const { return in_flight_.size(); }
  // The packet that arrives next (for a prefetch), or nullptr.
  const Packet* next_arrival() const {
    return in_flight_.empty() ? nullptr : &in_flight_.front().packet;
  }

 private:
  struct InFlight {
    uint64_t arrival;
    Packet packet;
  };
  void enqueue(Packet&& p, uint64_t arrival);
  // send(): the draws of a packet sent while `up`; what survives them is
  // in flight, or lost to a later outage when not `arrives`.
  void transmit(Packet&& packet, uint64_t departure_time, bool up, bool arrives);

  LinkConfig cfg_;
  Rng rng_;
  bool up_ = true;
  bool ge_bad_ = false;
  LinkCounters counters_;
  // In (arrival, send order) order. Without jitter or reordering every
  // packet arrives after those already in flight and is appended; others
  // are inserted after the last one arriving no later (enqueue). A heap
  // (as before) cost a sift per send and per delivery, for the same order.
  Fifo<InFlight> in_flight_;
};

}  // namespace droce::fabric
