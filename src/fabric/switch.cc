// The switch model's event loop. Every port caches the time of its next
// event (compute_next); run_until() repeatedly processes the earliest one,
// so ports interact in time order (a dequeue on one port can release
// ingress credit and send XON out of another at that same instant).
#include "droce/fabric/switch.h"

#include <algorithm>
#include <bit>
#include <string>

#include "droce/wire/opcode.h"
#include "droce/wire/pfc.h"

namespace droce::fabric {

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("SwitchConfig: " + what);
}

uint64_t mix_seed(uint64_t seed, uint32_t node) {
  uint64_t z = seed ^ (uint64_t{node} * 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t mac_key(const wire::MacAddress& m) {
  uint64_t k = 0;
  for (uint8_t b : m) k = k << 8 | b;
  return k;
}

// IEEE 802.1D reserved group addresses 01:80:C2:00:00:0x (bridge protocols,
// LLDP, PAUSE): link-local, never relayed.
bool link_local_group(std::span<const uint8_t> f) {
  return f[0] == 0x01 && f[1] == 0x80 && f[2] == 0xC2 && f[3] == 0 && f[4] == 0 &&
         (f[5] & 0xF0) == 0;
}

uint64_t wire_bits(size_t frame_bytes) {
  return (std::max<uint64_t>(frame_bytes, kEthMinFrame) + kEthWireOverhead) * 8;
}

}  // namespace

uint64_t Switch::serialization_ns(size_t frame_bytes, uint64_t rate_bps) {
  return wire_bits(frame_bytes) * 1'000'000'000ull / rate_bps;
}

Switch::Switch(SwitchConfig cfg) : cfg_(std::move(cfg)), rng_(cfg_.seed) {
  require(!cfg_.ports.empty() && cfg_.ports.size() <= 0xFFFF,
          "ports: between 1 and 65535 ports");
  for (size_t i = 0; i < cfg_.ports.size(); ++i) {
    const PortConfig& pc = cfg_.ports[i];
    const std::string name = "ports[" + std::to_string(i) + "].";
    // 10..800 Gb/s is the modelled range; slower rates are allowed for tests.
    require(pc.rate_bps >= 1'000'000 && pc.rate_bps <= 1600 * kGbps,
            name + "rate_bps: 1 Mb/s .. 1.6 Tb/s");
    for (size_t c = 0; c < kNumClasses; ++c)
      require(pc.scheduler.strict[c] || pc.scheduler.weights[c] > 0,
              name + "scheduler.weights: > 0 for DWRR classes");
    require(pc.scheduler.quantum_bytes > 0, name + "scheduler.quantum_bytes: > 0");
    require(pc.ecn.pmax >= 0 && pc.ecn.pmax <= 1, name + "ecn.pmax: 0..1");
    require(pc.ecn.mode != MarkMode::kRed || pc.ecn.kmin_bytes < pc.ecn.kmax_bytes,
            name + "ecn: kmin_bytes < kmax_bytes");
  }
  require(cfg_.pfc.xon_bytes <= cfg_.pfc.xoff_bytes, "pfc: xon_bytes <= xoff_bytes");
  require(cfg_.pfc.pause_quanta > 0, "pfc.pause_quanta: > 0");
  require(cfg_.pfc.refresh_fraction > 0 && cfg_.pfc.refresh_fraction <= 1,
          "pfc.refresh_fraction: (0, 1]");
  require(cfg_.int_cfg.max_hops > 0 && cfg_.int_cfg.max_hops <= wire::kIntMaxHops,
          "int_cfg.max_hops: 1.." + std::to_string(wire::kIntMaxHops));
  for (uint8_t& t : cfg_.dscp_to_tc) t &= 7;
  for (uint8_t& t : cfg_.pcp_to_tc) t &= 7;
  ports_.resize(cfg_.ports.size());
  for (size_t i = 0; i < ports_.size(); ++i) {
    ports_[i].cfg = cfg_.ports[i];
    ports_[i].sched = ClassScheduler(ports_[i].cfg.scheduler);
  }
  port_up_.assign(ports_.size(), true);
  next_.assign(ports_.size(), kNever);
  hash_seed_ = mix_seed(cfg_.seed, cfg_.node_id);
  if (cfg_.load_balance == LoadBalance::kAdaptiveFlowlet) flowlets_ = FlowletTable(4096);
}

// The egress port of a routed packet: the route's only port, or a member
// of its ECMP group by hash or by load (load_balance.h); -1: no route.
int Switch::route(const FrameInfo& info, uint64_t now) {
  const FlowKey key = flow_key(info);
  if (cfg_.load_balance == LoadBalance::kEcmp) return cfg_.routes.lookup(key, hash_seed_, port_up_);
  const std::vector<uint16_t>* ports = cfg_.routes.group(key);
  if (!ports) return -1;
  if (ports->size() == 1) return cfg_.routes.lookup(key, hash_seed_, port_up_);
  const uint32_t h = ecmp_hash(key, hash_seed_);
  const auto load = [this](uint16_t p) { return ports_[p].bytes; };
  if (cfg_.load_balance == LoadBalance::kAdaptivePacket)
    return least_loaded(*ports, h, port_up_, load);
  const int kept = flowlets_.lookup(h, now, cfg_.flowlet_gap_ns);
  if (kept >= 0 && static_cast<size_t>(kept) < port_up_.size() && port_up_[kept]) return kept;
  const int p = least_loaded(*ports, h, port_up_, load);
  if (p >= 0) flowlets_.assign(h, static_cast<uint16_t>(p));
  return p;
}

bool Switch::paused(uint16_t port, uint8_t prio, uint64_t now) const {
  return is_paused(ports_[port], prio, now);
}

uint64_t Switch::paused_ns(uint16_t port, uint8_t prio, uint64_t now) const {
  return ports_[port].pause[prio].paused_ns(now);
}

uint64_t Switch::next_event_time() const {
  // Departures started inside receive() are waiting to be emitted.
  if (!outbox_.empty()) return clock_;
  uint16_t p;
  return earliest_port(p);
}

void Switch::refresh_next(uint16_t p) {
  const uint64_t t = compute_next(ports_[p]);
  next_[p] = t;
  if (min_stale_) return;
  if (t < min_next_ || (t == min_next_ && p < min_port_)) {
    min_next_ = t;
    min_port_ = p;
  } else if (p == min_port_ && t > min_next_) {
    min_stale_ = true;  // another port may now be the earliest
  }
}

uint64_t Switch::earliest_port(uint16_t& port) const {
  if (min_stale_) {
    uint64_t best = kNever;
    size_t bp = 0;
    for (size_t i = 0; i < next_.size(); ++i) {
      if (next_[i] < best) {
        best = next_[i];
        bp = i;
      }
    }
    min_next_ = best;
    min_port_ = static_cast<uint16_t>(bp);
    min_stale_ = false;
  }
  port = min_port_;
  return min_next_;
}

uint64_t Switch::compute_next(const Port& port) const {
  uint64_t t = kNever;
  if (!port.ctrl.empty())
    t = std::max(port.busy_until, port.ctrl.front().enqueue_time);
  const PfcConfig& pfc = cfg_.pfc;
  // Only classes with a queue, a watchdog or an XOFF can have an event.
  for (unsigned m = port.queued | port.wd_active | port.xoff_sent; m != 0; m &= m - 1) {
    const int c = std::countr_zero(m);
    const unsigned bit = 1u << c;
    if (port.queued & bit) {
      uint64_t e = std::max(port.busy_until, port.q[c].front().enqueue_time);
      if (is_paused(port, c, e)) e = port.pause[c].until;
      t = std::min(t, e);
      if (pfc.watchdog_ns && !(port.wd_active & bit)) {
        const uint64_t d =
            std::max(port.pause[c].start + pfc.watchdog_ns, clock_);
        if (is_paused(port, c, d)) t = std::min(t, d);
      }
    }
    if (port.wd_active & bit) {
      const uint64_t restore =
          pfc.watchdog_restore_ns ? pfc.watchdog_restore_ns : pfc.watchdog_ns;
      t = std::min(t, port.wd_last_pause[c] + restore);
    }
    if (port.xoff_sent & bit) t = std::min(t, port.refresh_at[c]);
  }
  return t;
}

void Switch::run_until(uint64_t now) {
  for (;;) {
    uint16_t bp;
    const uint64_t best = earliest_port(bp);
    if (best == kNever || best > now) break;
    clock_ = std::max(clock_, best);
    process_port(bp, clock_);
  }
  clock_ = std::max(clock_, now);
}

void Switch::process_port(uint16_t p, uint64_t t) {
  Port& port = ports_[p];
  const PfcConfig& pfc = cfg_.pfc;
  // In class order, only the classes the checks below can apply to (each
  // step changes only its own class's bits).
  const unsigned todo = port.xoff_sent | port.wd_active | (pfc.watchdog_ns ? port.queued : 0);
  for (unsigned m = todo; m != 0; m &= m - 1) {
    const size_t c = static_cast<size_t>(std::countr_zero(m));
    const uint8_t bit = static_cast<uint8_t>(1u << c);
    // Keep the peer paused while we are still above XON: resend XOFF before
    // its timer (pause_quanta) runs out.
    if ((port.xoff_sent & bit) && port.refresh_at[c] <= t) {
      if (port.in_bytes[c] > pfc.xon_bytes) {
        send_pfc(p, static_cast<uint8_t>(c), pfc.pause_quanta, t);
      } else {
        send_pfc(p, static_cast<uint8_t>(c), 0, t);
      }
    }
    if (port.wd_active & bit) {
      const uint64_t restore = pfc.watchdog_restore_ns ? pfc.watchdog_restore_ns
                                                       : pfc.watchdog_ns;
      if (port.wd_last_pause[c] + restore <= t) port.wd_active &= static_cast<uint8_t>(~bit);
    }
    if (pfc.watchdog_ns && !(port.wd_active & bit) && (port.queued & bit) &&
        is_paused(port, c, t) && port.pause[c].start + pfc.watchdog_ns <= t) {
      // PFC storm: the peer has held this priority longer than any healthy
      // congestion episode. Stop honouring it so the deadlock/storm cannot
      // spread upstream.
      port.wd_active |= bit;
      port.wd_last_pause[c] = t;
      ++port.counters.watchdog_triggers[c];
      port.pause[c].resume(t);
      if (pfc.watchdog_action == WatchdogAction::kDrop)
        flush_class(p, static_cast<int>(c), t, true);
    }
  }
  if (port.busy_until <= t) {
    if (!port.ctrl.empty() && port.ctrl.front().enqueue_time <= t) {
      Packet ctrl = std::move(port.ctrl.front());
      port.ctrl.pop_front();
      transmit(p, std::move(ctrl), t, false);
    } else {
      uint8_t eligible = 0;
      std::array<uint32_t, kNumClasses> head{};
      for (unsigned m = port.queued; m != 0; m &= m - 1) {
        const int c = std::countr_zero(m);
        if (is_paused(port, c, t)) continue;
        eligible |= static_cast<uint8_t>(1u << c);
        head[c] = static_cast<uint32_t>(port.q[c].front().size());
      }
      const int c = port.sched.select(eligible, head);
      if (c >= 0) {
        Packet pkt = dequeue(port, c);
        release(pkt, t);
        if (port.cfg.ecn.point == MarkPoint::kDequeue)
          maybe_mark(port, pkt, port.q_bytes[c]);
        stamp_int(p, pkt, t);
        QueueCounters& qc = port.counters.queues[c];
        ++qc.tx_packets;
        qc.tx_bytes += pkt.size();
        transmit(p, std::move(pkt), t, true);
      }
    }
  }
  refresh_next(p);
}

void Switch::receive(uint16_t port, Packet&& pkt, uint64_t now) {
  if (port >= ports_.size()) throw std::out_of_range("Switch::receive: port");
  run_until(now);
  Port& in = ports_[port];
  ++in.counters.rx_packets;
  in.counters.rx_bytes += pkt.size();
  if (!in.up) {
    ++in.counters.down_drops;
    return;
  }
  FrameInfo info;
  if (!classify_frame(pkt.bytes, info)) {
    ++in.counters.rx_bad;
    return;
  }
  if (info.ether_type == wire::kEtherTypeMacControl) {
    on_pfc(port, pkt.bytes, now);
    refresh_next(port);
    return;
  }
  pkt.tc = cfg_.classifier == Classifier::kDscp
               ? cfg_.dscp_to_tc[info.dscp]
               : (info.vlan ? cfg_.pcp_to_tc[info.pcp] : 0);
  // The I/G bit of the destination MAC. IP to a group address arriving on a
  // port that is not a flood port is routed, as by a pure L3 switch.
  const bool group = (pkt.bytes[0] & 1) && in.cfg.flood;
  if (group || info.ip_version == 0) {
    switch_l2(port, std::move(pkt), info, now);
    return;
  }
  const int out = route(info, now);
  if (out < 0 || static_cast<size_t>(out) >= ports_.size()) {
    ++in.counters.no_route;
    return;
  }
  pkt.ingress_port = port;
  pkt.ip_version = info.ip_version;
  pkt.l3_offset = info.l3_offset;
  enqueue(static_cast<uint16_t>(out), std::move(pkt), now);
  refresh_next(static_cast<uint16_t>(out));
  refresh_next(port);
}

int Switch::learned_port(const wire::MacAddress& mac) const {
  const auto it = macs_.find(mac_key(mac));
  return it == macs_.end() ? -1 : it->second;
}

void Switch::learn(const wire::MacAddress& src, uint16_t port) {
  if (src[0] & 1) return;  // a group address is never a source
  const uint64_t k = mac_key(src);
  const auto it = macs_.find(k);
  if (it != macs_.end()) {
    it->second = port;  // the station moved
  } else if (macs_.size() < cfg_.mac_table_size) {
    macs_.emplace(k, port);
  } else {
    ++mac_full_;
  }
}

// A learning bridge (IEEE 802.1D 8.7, 8.8) for what neighbour discovery
// needs: group-addressed frames are flooded, non-IP unicast follows the MAC
// table. Only flood ports take part, so a spanning tree keeps floods
// loop-free; frames arriving on any other port are not relayed.
void Switch::switch_l2(uint16_t port, Packet&& pkt, const FrameInfo& info, uint64_t now) {
  Port& in = ports_[port];
  const std::span<const uint8_t> f(pkt.bytes.data(), pkt.bytes.size());
  if (!in.cfg.flood || link_local_group(f)) {
    ++in.counters.no_route;
    return;
  }
  learn({f[6], f[7], f[8], f[9], f[10], f[11]}, port);
  pkt.ingress_port = port;
  pkt.ip_version = info.ip_version;
  pkt.l3_offset = info.l3_offset;
  if (!(f[0] & 1)) {
    const int out = learned_port({f[0], f[1], f[2], f[3], f[4], f[5]});
    if (out >= 0) {
      if (out != port) {  // else the destination is behind the ingress port
        ++in.counters.l2_forwarded;
        enqueue(static_cast<uint16_t>(out), std::move(pkt), now);
        refresh_next(static_cast<uint16_t>(out));
      }
      refresh_next(port);
      return;
    }
  }
  ++in.counters.flooded;
  uint16_t last = port;
  for (size_t i = 0; i < ports_.size(); ++i) {
    if (i != port && ports_[i].cfg.flood) last = static_cast<uint16_t>(i);
  }
  for (size_t i = 0; i < ports_.size(); ++i) {
    const auto out = static_cast<uint16_t>(i);
    if (out == port || !ports_[i].cfg.flood) continue;
    if (out == last) {
      enqueue(out, std::move(pkt), now);
    } else {
      Packet copy;
      copy.bytes = pkt.bytes;
      copy.ingress_port = pkt.ingress_port;
      copy.tc = pkt.tc;
      copy.ip_version = pkt.ip_version;
      copy.l3_offset = pkt.l3_offset;
      copy.tag = pkt.tag;
      copy.unheld = pkt.unheld;
      copy.elided = pkt.elided;
      enqueue(out, std::move(copy), now);
    }
    refresh_next(out);
  }
  refresh_next(port);
}

void Switch::on_pfc(uint16_t p, std::span<const uint8_t> frame, uint64_t now) {
  Port& port = ports_[p];
  wire::PfcFrame f;
  const wire::PfcParseError e = wire::parse_pfc(frame, f);
  if (e == wire::PfcParseError::kNotPfc) {
    ++port.counters.rx_pause_8023x;
    return;
  }
  if (e != wire::PfcParseError::kOk) {
    ++port.counters.rx_bad;
    return;
  }
  ++port.counters.rx_pfc;
  for (size_t c = 0; c < kNumClasses; ++c) {
    if (!f.enabled(static_cast<unsigned>(c))) continue;
    const uint16_t q = f.quanta[c];
    if (port.wd_active >> c & 1) {
      ++port.counters.pauses_ignored[c];
      if (q) port.wd_last_pause[c] = now;
      continue;
    }
    if (q == 0) {  // XON: resume now (802.1Qbb 36.1.3.2, timer set to zero)
      port.pause[c].resume(now);
      continue;
    }
    // A new PFC frame restarts the pause timer with its own value.
    port.pause[c].pause(now, now + wire::pfc_quanta_to_ns(q, port.cfg.rate_bps));
  }
}

void Switch::enqueue(uint16_t out, Packet&& pkt, uint64_t now) {
  Port& port = ports_[out];
  const uint8_t c = pkt.tc;
  QueueCounters& qc = port.counters.queues[c];
  if (!port.up) {
    ++port.counters.down_drops;
    return;
  }
  if ((port.wd_active >> c & 1) && cfg_.pfc.watchdog_action == WatchdogAction::kDrop) {
    ++qc.watchdog_drops;
    return;
  }
  const uint64_t size = pkt.size();
  const bool full = cfg_.buffer_mode == BufferMode::kShared
                        ? used_ + size > cfg_.shared_buffer_bytes
                        : port.bytes + size > port.cfg.buffer_bytes;
  if (full) {
    ++qc.drops;
    qc.drop_bytes += size;
    return;
  }
  if (port.cfg.ecn.point == MarkPoint::kEnqueue) maybe_mark(port, pkt, port.q_bytes[c]);
  pkt.accounted = static_cast<uint32_t>(size);
  pkt.enqueue_time = now;
  ++qc.enq_packets;
  qc.enq_bytes += size;
  port.q_bytes[c] += size;
  qc.max_bytes = std::max(qc.max_bytes, port.q_bytes[c]);
  port.bytes += size;
  used_ += size;
  Port& in = ports_[pkt.ingress_port];
  in.in_bytes[c] += size;
  port.q[c].push_back(std::move(pkt));
  port.queued |= static_cast<uint8_t>(1u << c);
  if ((cfg_.pfc.enabled_priorities >> c & 1) && !(in.xoff_sent >> c & 1) &&
      in.in_bytes[c] >= cfg_.pfc.xoff_bytes) {
    send_pfc(ports_[out].q[c].back().ingress_port, c, cfg_.pfc.pause_quanta, now);
  }
}

Packet Switch::dequeue(Port& port, int c) {
  Packet pkt = std::move(port.q[c].front());
  port.q[c].pop_front();
  port.q_bytes[c] -= pkt.accounted;
  port.bytes -= pkt.accounted;
  if (port.q[c].empty()) port.queued &= static_cast<uint8_t>(~(1u << c));
  port.sched.sent(c, port.q[c].empty());
  return pkt;
}

void Switch::release(Packet& pkt, uint64_t now) {
  used_ -= pkt.accounted;
  Port& in = ports_[pkt.ingress_port];
  const uint8_t c = pkt.tc;
  in.in_bytes[c] -= pkt.accounted;
  if ((in.xoff_sent >> c & 1) && in.in_bytes[c] <= cfg_.pfc.xon_bytes)
    send_pfc(pkt.ingress_port, c, 0, now);
}

void Switch::send_pfc(uint16_t p, uint8_t prio, uint16_t quanta, uint64_t now) {
  Port& port = ports_[p];
  if (!port.up) return;  // nothing to pause or resume: the counters say what was sent
  if (quanta) {
    const uint64_t pause = wire::pfc_quanta_to_ns(quanta, port.cfg.rate_bps);
    port.xoff_sent |= static_cast<uint8_t>(1u << prio);
    port.refresh_at[prio] =
        now + std::max<uint64_t>(1, static_cast<uint64_t>(pause * cfg_.pfc.refresh_fraction));
    ++port.counters.tx_xoff;
  } else {
    port.xoff_sent &= static_cast<uint8_t>(~(1u << prio));
    ++port.counters.tx_xon;
  }
  wire::PfcFrame f;
  f.src_mac = port.cfg.mac;
  f.enable = static_cast<uint8_t>(1u << prio);
  f.quanta[prio] = quanta;
  Packet pkt;
  pkt.bytes.resize(wire::kPfcFrameSize);
  wire::build_pfc(f, pkt.bytes);
  pkt.ingress_port = p;
  pkt.tc = prio;
  pkt.enqueue_time = now;
  port.ctrl.push_back(std::move(pkt));
  refresh_next(p);
}

void Switch::transmit(uint16_t p, Packet&& pkt, uint64_t t, bool /*data*/) {
  Port& port = ports_[p];
  if (t > port.busy_until) port.ser_rem = 0;  // the link idled: no carry
  // Exact long-run rate: carry the sub-nanosecond remainder between frames.
  const unsigned __int128 num =
      static_cast<unsigned __int128>(wire_bits(pkt.size())) * 1'000'000'000ull +
      port.ser_rem;
  const uint64_t ns = static_cast<uint64_t>(num / port.cfg.rate_bps);
  port.ser_rem = static_cast<uint64_t>(num % port.cfg.rate_bps);
  port.busy_until = t + ns;
  port.tx_total += pkt.size();
  ++port.counters.tx_packets;
  port.counters.tx_bytes += pkt.size();
  outbox_.push_back(Departure{p, t, t + ns, std::move(pkt)});
}

void Switch::maybe_mark(Port& port, Packet& pkt, uint64_t qlen) {
  if (!(port.cfg.ecn_classes >> pkt.tc & 1)) return;
  if (!should_mark(port.cfg.ecn, qlen, rng_)) return;
  QueueCounters& qc = port.counters.queues[pkt.tc];
  switch (mark_ce(pkt.bytes, pkt.l3_offset, pkt.ip_version)) {
    case MarkResult::kMarked: ++qc.ecn_marked; break;
    case MarkResult::kNotEct: ++qc.ecn_not_ect; break;
    default: break;
  }
}

void Switch::stamp_int(uint16_t p, Packet& pkt, uint64_t t) {
  const IntConfig& ic = cfg_.int_cfg;
  if (!ic.enabled || pkt.ip_version == 0) return;
  wire::IntLocation loc;
  if (wire::int_locate(pkt.bytes, loc, pkt.elided) != wire::IntError::kOk || loc.echo) return;
  if (ic.data_only) {
    const size_t bth = loc.bth_offset();
    if (bth >= pkt.bytes.size()) return;
    const wire::OpClass cls = wire::opcode_info(pkt.bytes[bth]).op_class;
    if (cls != wire::OpClass::kRequest && cls != wire::OpClass::kResponse) return;
  }
  Port& port = ports_[p];
  wire::IntHop hop;
  hop.node_id = cfg_.node_id;
  hop.ingress_port = pkt.ingress_port;
  hop.egress_port = p;
  hop.timestamp_ns = t;
  hop.tx_bytes = port.tx_total;
  hop.qlen_bytes = static_cast<uint32_t>(std::min<uint64_t>(port.bytes, UINT32_MAX));
  hop.rate_mbps = static_cast<uint32_t>(port.cfg.rate_bps / 1'000'000);
  size_t len = pkt.bytes.size();
  pkt.bytes.resize(len + wire::kIntHeaderSize + wire::kIntHopSize);
  const wire::IntError e =
      wire::int_push_hop(pkt.bytes, len, hop, ic.max_hops, pkt.unheld, pkt.elided);
  pkt.bytes.resize(len);
  if (e == wire::IntError::kOk) {
    ++port.counters.int_stamped;
  } else {
    ++port.counters.int_full;
  }
}

void Switch::flush_class(uint16_t p, int c, uint64_t now, bool watchdog) {
  Port& port = ports_[p];
  QueueCounters& qc = port.counters.queues[c];
  while (!port.q[c].empty()) {
    Packet pkt = std::move(port.q[c].front());
    port.q[c].pop_front();
    port.q_bytes[c] -= pkt.accounted;
    port.bytes -= pkt.accounted;
    if (watchdog) {
      ++qc.watchdog_drops;
    } else {
      ++port.counters.down_drops;
    }
    release(pkt, now);
  }
  port.queued &= static_cast<uint8_t>(~(1u << c));
  port.sched.emptied(c);
}

void Switch::set_port_up(uint16_t p, bool up, uint64_t now) {
  if (p >= ports_.size()) throw std::out_of_range("Switch::set_port_up: port");
  run_until(now);
  Port& port = ports_[p];
  port.up = up;
  port_up_[p] = up;
  if (!up) {
    for (size_t c = 0; c < kNumClasses; ++c) {
      flush_class(p, static_cast<int>(c), now, false);
      // PFC state lives on the link (IEEE 802.1Qbb): a link that goes down
      // ends the peer's pause of this egress (the interval closes now) and
      // the pause this port asked of the peer, which needs no XON later.
      port.pause[c].resume(now);
    }
    port.xoff_sent = 0;
    port.ctrl.clear();
  }
  for (size_t i = 0; i < ports_.size(); ++i) refresh_next(static_cast<uint16_t>(i));
}

}  // namespace droce::fabric
