#include "droce/endpoint/endpoint.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "droce/wire/packet.h"

namespace droce::endpoint {

Endpoint::Endpoint(transport::Device& device, const EndpointConfig& config)
    : device_(device),
      config_(config),
      pacer_(config.pacer_granularity_ns, config.pacer_slots),
      timers_(config.pacer_granularity_ns * 16, config.pacer_slots),
      interface_(config.interface, counters_) {}

namespace {
// The PFC priority of a QP's traffic: PCP when tagged, else the DSCP's
// class-selector bits (RFC 2474 4.2.2), as the switch model classifies.
uint8_t priority_of(const wire::PathSpec& path) {
  return path.vlan ? static_cast<uint8_t>(path.pcp & 7)
                   : static_cast<uint8_t>((path.dscp >> 3) & 7);
}
}  // namespace

void Endpoint::attach(transport::QueuePair& qp, std::unique_ptr<cc::Algorithm> cc) {
  QpSlot& s = slots_[qp.qpn()];
  s.qp = &qp;
  s.cc = std::make_unique<CcBinding>(std::move(cc), config_.tx_run_ahead_ns,
                                     config_.tx_catch_up_ns);
  qp.set_cc_hooks(&s.cc->hooks(), s.cc.get());
  s.priority = priority_of(qp.attr().path);
  s.needs_int = s.cc->needs_int();
  classify_mac(s);
  activate(s);
}

void Endpoint::classify_mac(QpSlot& s) {
  // A connected QP past RTR whose path names its peer by IP address only.
  // UD names its peer per WR (the application's address handle).
  const transport::QueuePair& qp = *s.qp;
  const wire::PathSpec& path = qp.attr().path;
  const bool by_address = interface_.enabled() && qp.type() != transport::QpType::kUd &&
                          qp.state() != transport::QpState::kReset &&
                          qp.state() != transport::QpState::kInit &&
                          wire::is_zero_mac(path.dst_mac) &&
                          path.dst_ip != wire::IpAddress{.v6 = path.dst_ip.v6};
  if (!by_address) {
    if (s.mac != QpSlot::Mac::kWaiting) s.mac = QpSlot::Mac::kGiven;
  } else if (s.mac == QpSlot::Mac::kGiven) {
    s.mac = QpSlot::Mac::kToResolve;
  }
}

bool Endpoint::peer_mac_ready(QpSlot& s, uint64_t now) {
  if (s.mac == QpSlot::Mac::kWaiting) return false;
  const wire::IpAddress& ip = s.qp->attr().path.dst_ip;
  if (auto mac = interface_.lookup(ip, now)) {
    s.qp->set_dest_mac(*mac);
    s.mac = QpSlot::Mac::kResolved;
    return true;
  }
  // Its frames wait in the QP (its WRs stay queued, nothing is built) until
  // the address resolves: bounded by the QP's queues, not by a buffer here.
  s.mac = QpSlot::Mac::kWaiting;
  waiting_[ip].push_back(s.qp->qpn());
  interface_.resolve(ip, now);
  on_interface_events();
  return false;
}

void Endpoint::on_interface_events() {
  if (!interface_.has_events()) return;
  events_.clear();
  interface_.take_events(events_);
  for (const IpInterface::Event& e : events_) {
    if (e.kind == IpInterface::Event::Kind::kChanged) {
      // A neighbour moved (a new MAC advertised with Override): the QPs
      // that took its old address from the cache follow it.
      slots_.for_each([&e](uint32_t, QpSlot& s) {
        if (s.mac == QpSlot::Mac::kResolved && s.qp->attr().path.dst_ip == e.ip)
          s.qp->set_dest_mac(e.mac);
      });
    }
    auto it = waiting_.find(e.ip);
    if (it == waiting_.end()) continue;
    std::vector<uint32_t> qpns = std::move(it->second);
    waiting_.erase(it);
    for (uint32_t qpn : qpns) {
      QpSlot* s = slot(qpn);
      interface_.release(e.ip);
      if (!s || s->mac != QpSlot::Mac::kWaiting) continue;
      if (e.kind == IpInterface::Event::Kind::kFailed) {
        // No answer after the solicitations: the QP's WRs fail as a
        // NIC's do when its peer never answers (retries exhausted); a
        // new WR after the error is flushed, the address tried anew only
        // for a QP that is connected again.
        s->mac = QpSlot::Mac::kToResolve;
        s->qp->fail_unresolved();
        ++counters_.unresolved_qps_failed;
      } else {
        s->qp->set_dest_mac(e.mac);
        s->mac = QpSlot::Mac::kResolved;
      }
      activate(*s);
      file_timer(qpn, *s);
    }
  }
}

void Endpoint::take_doorbells() {
  doorbells_.drain([this](DoorbellNode& node) {
    QpSlot* s = slot(node.qpn);
    if (!s) {
      DoorbellQueue::rearm(node);  // its QP is gone; the QPN may come back
      return;
    }
    s->doorbell = &node;     // held (rings do nothing) until the QP parks
    s->qp->take_posted();  // in ERR this flushes what was posted
    notify(node.qpn);
  });
}

void Endpoint::park(QpSlot& s, uint64_t now) {
  s.active = false;
  if (!s.doorbell) return;
  // Rings from now on queue the QP again; work published before this is
  // found here (DoorbellQueue::rearm).
  DoorbellQueue::rearm(*std::exchange(s.doorbell, nullptr));
  s.qp->take_posted();
  if (s.qp->has_work(now)) activate(s);
}

void Endpoint::detach(uint32_t qpn) {
  QpSlot* s = slots_.find(qpn);
  if (!s) return;
  if (s->doorbell) DoorbellQueue::rearm(*s->doorbell);
  std::erase(active_, s);
  for (auto& held : held_) std::erase(held, s);
  // Its entries in the timing wheels and the resolution waits name the
  // QPN: they find no slot and are dropped when they come up.
  // The next burst starts its matching from the last predicted slot: not
  // from one that is gone (verbs programs destroy QPs while others run).
  if (rx_last_predicted_ == s) rx_last_predicted_ = nullptr;
  slots_.erase(qpn);
  // Its wheel entries would wait for their time (an RTO tens of ms out)
  // and be scanned meanwhile: an application that opens and closes QPs
  // all the time (an all-to-all over connections per transfer) left
  // thousands per endpoint. Swept once the detached QPs are as many as
  // the live ones, so the cost per detach stays constant.
  if (++detached_since_sweep_ > std::max<size_t>(64, slots_.size())) {
    auto gone = [this](uint32_t qpn) { return !slots_.contains(qpn); };
    timers_.erase_if(gone);
    pacer_.erase_if(gone);
    detached_since_sweep_ = 0;
  }
}

Endpoint::QpSlot* Endpoint::slot(uint32_t qpn) { return slots_.find(qpn); }

CcBinding* Endpoint::cc_of(uint32_t qpn) {
  QpSlot* s = slot(qpn);
  return s ? s->cc.get() : nullptr;
}

int Endpoint::post_send(transport::QueuePair& qp, const transport::SendWr& wr) {
  const int rc = qp.post_send(wr);
  notify(qp.qpn());
  return rc;
}

void Endpoint::notify(uint32_t qpn) {
  if (QpSlot* s = slot(qpn)) {
    s->priority = priority_of(s->qp->attr().path);
    classify_mac(*s);
    activate(*s);
    file_timer(qpn, *s);
  }
}

void Endpoint::activate(QpSlot& s) {
  if (s.active) return;
  s.active = true;
  active_.push_back(&s);
}

uint64_t Endpoint::slot_deadline(const QpSlot& s) const {
  uint64_t t = s.qp->next_deadline();
  if (auto cc_t = s.cc->algorithm().next_timer()) t = std::min(t, *cc_t);
  return t;
}

void Endpoint::file_timer(uint32_t qpn, QpSlot& s) {
  const uint64_t t = slot_deadline(s);
  // File only an earlier deadline than the one already filed; a stale
  // entry that pops early is re-checked and re-filed in run_timers.
  if (t == UINT64_MAX || t >= s.timer_filed) return;
  s.timer_filed = t;
  timers_.schedule(qpn, t);
}

void Endpoint::run_timers(uint64_t now) {
  due_.clear();
  timers_.pop_due(now, due_);
  for (uint32_t qpn : due_) {
    QpSlot* s = slot(qpn);
    if (!s) continue;
    s->timer_filed = UINT64_MAX;
    bool fired = false;
    if (s->qp->next_deadline() <= now) {
      s->qp->on_timer(now);
      ++counters_.timers_fired;
      fired = true;
    }
    if (auto t = s->cc->algorithm().next_timer(); t && *t <= now) {
      s->cc->on_timer(now);
      fired = true;
    }
    // Most entries that come up are stale: the ACK the retransmit timer
    // waited for came first. Such a QP joins the round robin only if it has
    // work, as in schedule_slot: with 64K QPs each one's stale timer came
    // up once per round and woke it to send nothing.
    if (fired || s->qp->has_work(now)) activate(*s);
    file_timer(qpn, *s);
  }
}

void Endpoint::receive(std::span<const uint8_t> frame, uint64_t now,
                       wire::UnheldPayload unheld) {
  ++counters_.rx_frames;
  counters_.rx_bytes += frame.size();
  receive_counted(frame, now, unheld);
}

void Endpoint::receive_counted(std::span<const uint8_t> frame, uint64_t now,
                               wire::UnheldPayload unheld) {
  if (wire::is_pfc(frame)) {
    receive_pfc(frame, now);
    return;
  }
  wire::ParsedPacket& pkt = rx_packet_;
  wire::ParseError err = wire::parse(frame, pkt, {.unheld = unheld});
  size_t hop_count = 0;
  bool echo = false;
  if (err == wire::ParseError::kNotRoceV2Port && pkt.udp_dst_port == wire::kIntUdpPort) {
    const auto plain = strip_int(frame, hop_count, echo, unheld);
    if (plain.empty()) return;
    // The unheld payload is measured from the ICRC, which the INT header
    // before the BTH does not move.
    err = wire::parse(plain, pkt, {.unheld = unheld});
  }
  if (err != wire::ParseError::kOk) {
    if (wire::is_not_roce(err)) {
      // ARP, neighbour discovery and ICMP for the port's addresses.
      if (interface_.receive(frame, now)) {
        on_interface_events();
        return;
      }
      // Other protocols (and 802.3x PAUSE, other MAC control) are not ours.
      const bool mac_control = frame.size() >= wire::kEthSize &&
                               wire::load_be16(frame.data() + 12) == wire::kEtherTypeMacControl;
      ++(mac_control ? counters_.rx_mac_control_other : counters_.rx_not_roce);
    } else {
      ++counters_.rx_malformed;
      ++counters_.rx_parse_errors[static_cast<size_t>(err)];
    }
    return;
  }
  deliver(pkt, now, hop_count, echo);
}

Endpoint::QpSlot* Endpoint::predict(std::span<const uint8_t> frame, wire::PredictedWrite& w) {
  const size_t bth = wire::predicted_bth_offset(frame);
  if (bth == 0) return nullptr;
  QpSlot* s = slot(wire::load_be24(frame.data() + bth + 5));  // BTH DestQP
  return s && wire::rx_template_match(s->qp->rx_template(), frame, w) ? s : nullptr;
}

void Endpoint::receive_burst(std::span<const std::span<const uint8_t>> frames, uint64_t now) {
  // Each frame takes one of three ways: predicted (its QP's header template
  // matched: a plain RDMA WRITE packet, wire/rx_template.h), parsed (parse()
  // accepted it), or receive() at its place in the order for everything
  // else (PFC, INT, a failed check, a predicted frame the QP turns down),
  // which parses again and counts the exact reason.
  if (!rx_burst_) rx_burst_ = std::make_unique<RxBurstScratch>();
  auto& rx_batch = rx_burst_->parsed;
  auto& rx_predicted = rx_burst_->predicted;
  std::array<QpSlot*, kRxBatch> predicted;
  std::array<bool, kRxBatch> parsed;
  // At the first frame of a run of frames one template call matched, the
  // run's length; 0 elsewhere.
  std::array<uint8_t, kRxBatch> run_length;
  while (!frames.empty()) {
    // Large frames in small groups: a group's frames should still be in
    // L1 when they are placed (32 x 4 KiB would not be; 4 x 4 KiB is).
    size_t n = 1, bytes = frames[0].size();
    while (n < std::min(frames.size(), kRxBatch) && bytes + frames[n].size() <= kRxBatchBytes)
      bytes += frames[n++].size();
    // Every frame is counted here, once; receive_counted() below does not.
    counters_.rx_frames += n;
    counters_.rx_bytes += bytes;
    parsed.fill(false);
    run_length.fill(0);
    // Each frame that passes its header checks queues its ICRC check; the
    // ICRCs then run in one pass (independent CRC chains the CPU overlaps).
    // A frame failing its check goes to receive(), which counts it.
    auto& checks = rx_burst_->checks;
    std::array<uint8_t, kRxBatch> checked;  // frame index of checks[j]
    size_t k = 0, parsed_count = 0;
    // Frames in a row for the QP of the previous predicted frame (of this
    // burst or the one before) are matched against its template in one call
    // (the template compares the destination QP too, so a match is the slot
    // predict() would find, without the lookup; detach() forgets a removed
    // slot).
    QpSlot*& last = rx_last_predicted_;
    for (size_t i = 0; i < n; ++i) {
      if (last) {
        const size_t m = wire::rx_template_match_run(last->qp->rx_template(),
                                                     frames.subspan(i, n - i),
                                                     &rx_predicted[i], &checks[k]);
        if (m > 0) run_length[i] = static_cast<uint8_t>(m);
        for (const size_t end = i + m; i < end; ++i) {
          predicted[i] = last;
          checked[k++] = static_cast<uint8_t>(i);
        }
        if (i == n) break;
      }
      QpSlot* s = config_.header_prediction ? predict(frames[i], rx_predicted[i]) : nullptr;
      predicted[i] = s;
      if (s) {
        last = s;
        run_length[i] = 1;
        checks[k] = wire::icrc_check(s->qp->rx_template(), frames[i], rx_predicted[i]);
      } else if (!wire::is_pfc(frames[i]) &&
                 wire::parse(frames[i], rx_batch[i], {.verify_icrc = false}) ==
                     wire::ParseError::kOk) {
        parsed[i] = true;
        ++parsed_count;
        checks[k] = wire::icrc_check(frames[i], rx_batch[i]);
      } else {
        continue;
      }
      checked[k++] = static_cast<uint8_t>(i);
    }
    std::array<bool, kRxBatch> icrc_ok;
    wire::icrc_check_many(checks.data(), icrc_ok.data(), k);
    // Usually every ICRC is good and no frame was parsed: nothing to mark.
    const bool all_good =
        std::all_of(icrc_ok.begin(), icrc_ok.begin() + k, [](bool ok) { return ok; });
    if (!all_good || parsed_count > 0) {
      for (size_t j = 0; j < k; ++j) {
        const size_t i = checked[j];
        if (!icrc_ok[j]) {
          predicted[i] = nullptr;
          parsed[i] = false;
        } else if (parsed[i]) {
          rx_batch[i].icrc_checked = true;
        }
      }
    }
    // A run of frames for one QP wakes its scheduling (round robin, timer
    // wheel) once, after the run, not per frame; anything else in between
    // ends the run first, so QPs are woken in the order frame by frame gives.
    // Consecutive predicted frames of one QP go to it together; the first
    // it does not take goes to receive_counted().
    QpSlot* run = nullptr;
    for (size_t i = 0; i < n;) {
      QpSlot* s = predicted[i];
      size_t took = 0;
      if (s) {
        // A failed ICRC may have cut a matched run short: then look.
        size_t end = i + 1;
        if (all_good && run_length[i] > 0) end = i + run_length[i];
        while (end < n && predicted[end] == s) ++end;
        took = s->qp->try_predicted_writes(std::span(rx_predicted).subspan(i, end - i));
        counters_.rx_delivered += took;
      } else if (parsed[i]) {
        s = deliver_to_qp(rx_batch[i], now, 0, false);
        took = 1;
      }
      if (took == 0) {
        if (run) schedule_slot(*run, now);
        run = nullptr;
        receive_counted(frames[i++], now);
        continue;
      }
      i += took;
      if (s != run) {
        if (run) schedule_slot(*run, now);
        run = s;
      }
    }
    if (run) schedule_slot(*run, now);
    frames = frames.subspan(n);
  }
}

void Endpoint::receive_pfc(std::span<const uint8_t> frame, uint64_t now) {
  wire::PfcFrame pfc;
  if (wire::parse_pfc(frame, pfc) != wire::PfcParseError::kOk) {
    ++counters_.rx_mac_control_other;
    return;
  }
  ++counters_.rx_pfc_frames;
  if (!config_.honour_pfc) return;
  // IEEE 802.1Qbb: each enabled priority pauses for quanta x 512 bit times
  // at this port's speed from now; quanta 0 resumes it at once (XON).
  const uint64_t rate_bps = config_.port_rate_bytes_per_sec * 8;
  for (unsigned p = 0; p < wire::kPfcPriorities; ++p) {
    if (!pfc.enabled(p)) continue;
    if (pfc.quanta[p] == 0 || rate_bps == 0) {
      pause_[p].resume(now);
    } else {
      pause_[p].pause(now, now + wire::pfc_quanta_to_ns(pfc.quanta[p], rate_bps));
    }
  }
}

uint64_t Endpoint::paused_ns(uint8_t priority, uint64_t now) const {
  return pause_[priority & 7].paused_ns(now);
}

void Endpoint::link_down(uint64_t now) {
  for (wire::PauseTimer& t : pause_) t.resume(now);
}

std::span<const uint8_t> Endpoint::strip_int(std::span<const uint8_t> frame,
                                             size_t& hop_count, bool& echo,
                                             wire::UnheldPayload unheld) {
  wire::IntLocation loc;
  if (frame.size() > kIntScratchBytes || wire::int_locate(frame, loc) != wire::IntError::kOk ||
      !loc.has_int) {
    ++counters_.rx_int_bad;
    return {};
  }
  // Made at the first INT frame: most endpoints never see one, and a
  // simulation of 8192 hosts zeroed 128 MiB for them at set-up.
  if (scratch_.empty()) scratch_.resize(kIntScratchBytes);
  // All but the unheld payload, whose bytes are unspecified anyway.
  const auto [first, last] = wire::unheld_range(frame.size(), unheld);
  std::copy(frame.begin(), frame.begin() + first, scratch_.begin());
  std::copy(frame.begin() + last, frame.end(), scratch_.begin() + last);
  size_t len = frame.size();
  if (wire::int_read_hops(frame, hops_, hop_count) != wire::IntError::kOk ||
      wire::int_strip(scratch_, len, unheld) != wire::IntError::kOk) {
    ++counters_.rx_int_bad;
    return {};
  }
  ++counters_.rx_int_stripped;
  echo = loc.echo;
  if (echo) ++counters_.rx_int_echoes;
  return {scratch_.data(), len};
}

void Endpoint::deliver(const wire::ParsedPacket& pkt, uint64_t now, size_t hop_count,
                       bool echo) {
  if (QpSlot* s = deliver_to_qp(pkt, now, hop_count, echo)) schedule_slot(*s, now);
}

void Endpoint::schedule_slot(QpSlot& s, uint64_t now) {
  // Only a QP with something to send joins the round robin. Most packets
  // a responder takes queue no answer (ACKs are coalesced), and a QP that
  // joined anyway only left it again in transmit() after producing nothing,
  // at the cost of a wake-up of its own: in the simulator's 16-to-1 incast
  // the receiver was woken once per data packet to send nothing.
  // has_work() is the QP's gate for produce() (qp.h), so nothing that
  // produce() would send is left waiting; timers are filed as before.
  if (s.qp->has_work(now)) activate(s);
  file_timer(s.qp->qpn(), s);
}

Endpoint::QpSlot* Endpoint::deliver_to_qp(const wire::ParsedPacket& pkt, uint64_t now,
                                          size_t hop_count, bool echo) {
  QpSlot* s = slot(pkt.dest_qp);
  if (!s) {
    ++counters_.rx_unknown_qpn;
    return nullptr;
  }
  ++counters_.rx_delivered;
  if (echo) {
    cc::IntRecord& record = int_record_;
    record.n_hops = 0;
    // Hops our data collected, reflected by the receiver: the algorithm sees
    // them with the ACK that acknowledges new data (if this is one).
    for (size_t i = 0; i < hop_count; ++i) {
      const wire::IntHop& h = hops_[i];
      record.push({h.timestamp_ns, h.tx_bytes, h.qlen_bytes, uint64_t{h.rate_mbps} * 1'000'000 / 8,
                   uint64_t{h.node_id} << 16 | h.egress_port});
    }
    s->cc->set_pending_int(&record);
  } else if (s->needs_int && pkt.info->op_class != wire::OpClass::kRequest &&
             pkt.info->op_class != wire::OpClass::kCnp) {
    ++counters_.cc_acks_without_int;
  } else if (hop_count > 0 && config_.echo_int) {
    if (!s->echo) s->echo = std::make_unique<std::array<wire::IntHop, wire::kIntDefaultMaxHops>>();
    std::copy_n(hops_.begin(), hop_count, s->echo->begin());
    s->echo_count = static_cast<uint8_t>(hop_count);  // <= kIntDefaultMaxHops
  }
  s->qp->on_packet(pkt, now);
  s->cc->set_pending_int(nullptr);
  return s;
}

void Endpoint::maybe_echo_int(QpSlot& s, std::span<uint8_t> buf, uint32_t& len) {
  if (s.echo_count == 0) return;
  // Only ACKs carry the echo back (HPCC section 3.2: the receiver copies
  // the INT records of the data packet into its ACK).
  // The BTH offset follows from the QP's own path (VLAN tag, IP version).
  const wire::PathSpec& path = s.qp->attr().path;
  const size_t bth = wire::kEthSize + (path.vlan ? wire::kVlanTagSize : 0) +
                     (path.src_ip.v6 ? wire::kIpv6Size : wire::kIpv4Size) + wire::kUdpSize;
  if (len <= bth || wire::opcode_info(buf[bth]).op_class != wire::OpClass::kAck) return;
  size_t frame_len = len;
  if (wire::int_insert_echo(buf, frame_len, {s.echo->data(), s.echo_count}) !=
      wire::IntError::kOk) {
    ++counters_.tx_int_echo_no_room;
    return;
  }
  len = static_cast<uint32_t>(frame_len);
  s.echo_count = 0;
  ++counters_.tx_int_echoed;
}

void Endpoint::release_paused(uint64_t now) {
  for (unsigned held = held_mask_; held != 0; held &= held - 1) {
    const unsigned p = static_cast<unsigned>(std::countr_zero(held));
    if (pause_[p].paused(now)) continue;
    for (QpSlot* s : held_[p]) activate(*s);
    held_[p].clear();
    held_mask_ &= static_cast<uint8_t>(~(1u << p));
  }
}

size_t Endpoint::transmit(uint64_t now, std::span<const std::span<uint8_t>> bufs,
                          std::span<uint32_t> lens, std::span<wire::UnheldPayload> unheld) {
  tx_icrc_.keep_unheld(true);
  const size_t n = transmit(now, bufs.first(std::min(bufs.size(), unheld.size())), lens);
  tx_icrc_.keep_unheld(false);
  std::fill_n(unheld.begin(), n, wire::UnheldPayload{});
  // The log is in the order the frames were built, one entry per frame
  // with unheld payload; each belongs to the frame its datagram lies in.
  size_t i = 0;
  for (const wire::IcrcBatch::Unheld& u : tx_icrc_.unheld_log()) {
    while (i < n && !(u.l3 >= bufs[i].data() && u.l3 < bufs[i].data() + lens[i])) ++i;
    if (i < n) unheld[i] = u.payload;
  }
  tx_icrc_.clear_unheld_log();
  return n;
}

// The round robin's length from which transmit() looks one QP ahead. Its
// prefetches cost 2-3 % of a 64 B frame with 8 QPs (all in cache) and
// nothing measurable with 256 (droce-bench-transmit --qps).
constexpr size_t kLookAheadQps = 128;

size_t Endpoint::transmit(uint64_t now, std::span<const std::span<uint8_t>> bufs,
                          std::span<uint32_t> lens) {
  take_doorbells();
  run_timers(now);
  due_.clear();
  pacer_.pop_due(now, due_);
  for (uint32_t qpn : due_) {
    if (QpSlot* s = slot(qpn)) activate(*s);
  }
  release_paused(now);
  size_t n = 0;
  if (interface_.enabled()) {
    interface_.tick(now);
    on_interface_events();
    n = emit_control(now, bufs, lens);
  }
  // Each QP that produces goes to the back of the line (round robin); one
  // that produces nothing leaves the line until its pacer time, a timer or
  // a received packet brings it back.
  while (n < bufs.size() && n < lens.size() && !active_.empty() &&
         port_free_ns_ <= now + config_.tx_run_ahead_ns) {
    QpSlot* s = active_.front();
    active_.pop_front();
    // The next QP's lines are asked for now and arrive while this one
    // sends; the one after it, its slot (QueuePair::prefetch_for_send).
    // Only for a line long enough to leave the cache (kLookAheadQps).
    if (active_.size() >= kLookAheadQps) {
      active_.front()->qp->prefetch_for_send();
      __builtin_prefetch(active_[1]);
    }
    if (pause_[s->priority].paused(now)) {
      s->active = false;
      s->cc->mark_idle();  // a pause is not lost time to make up
      held_[s->priority].push_back(s);
      held_mask_ |= static_cast<uint8_t>(1u << s->priority);
      ++counters_.tx_pfc_held;
      continue;
    }
    // A QP that names its peer by address only is resolved when it first
    // has something to send (an idle one asks nobody).
    if (s->mac != QpSlot::Mac::kGiven && s->mac != QpSlot::Mac::kResolved) {
      if (!s->qp->has_work(now)) {
        park(*s, now);
        continue;
      }
      if (!peer_mac_ready(*s, now)) {
        s->active = false;  // the resolution brings it back
        continue;
      }
    }
    // The QP's turn: up to tx_frames_per_turn frames, while the port and
    // the caller's buffers have room: runs of new requests where it has
    // them, any other frame one at a time.
    size_t made = 0;
    s->qp->begin_burst(&tx_icrc_);
    while (made < config_.tx_frames_per_turn) {
      const size_t room = std::min({config_.tx_frames_per_turn - made, bufs.size() - n,
                                    lens.size() - n, port_frames(now, s->qp->mtu())});
      size_t k =
          config_.tx_runs ? s->qp->produce_run(now, bufs.subspan(n, room), lens.data() + n) : 0;
      if (k == 0) {
        uint32_t len = static_cast<uint32_t>(s->qp->produce_in_burst(now, bufs[n]));
        if (len == 0) break;
        if (config_.echo_int) maybe_echo_int(*s, bufs[n], len);
        lens[n] = len;
        k = 1;
      }
      for (size_t i = n; i < n + k; ++i) book_port(lens[i], now);
      n += k;
      made += k;
      if (n == bufs.size() || n == lens.size() ||
          port_free_ns_ > now + config_.tx_run_ahead_ns)
        break;
    }
    s->qp->end_burst();
    if (made != 0) {
      s->cc->mark_waiting(now);
      active_.push_back(s);
      file_timer(s->qp->qpn(), *s);
      continue;
    }
    if (s->qp->has_work(now) && s->cc->next_allowed_ns() > now) {
      s->active = false;  // the pacer brings it back
      ++counters_.tx_paced;
      s->cc->mark_waiting(now);
      pacer_.schedule(s->qp->qpn(), s->cc->next_allowed_ns());
    } else {
      s->cc->mark_idle();
      park(*s, now);
    }
    file_timer(s->qp->qpn(), *s);
  }
  tx_icrc_.flush();
  // Whatever is still in line waits for the port (or for the caller's next
  // buffers): the port is backlogged from now, unless it already was.
  port_backlog_since_ = active_.empty() ? UINT64_MAX : std::min(port_backlog_since_, now);
  return n;
}

void Endpoint::book_port(uint32_t len, uint64_t now) {
  ++counters_.tx_frames;
  counters_.tx_bytes += len;
  if (config_.port_rate_bytes_per_sec != 0) {
    port_free_ns_ =
        pacing_start(port_free_ns_, now, port_backlog_since_, config_.tx_catch_up_ns) +
        port_time_ns(len);
  }
}

size_t Endpoint::port_frames(uint64_t now, uint32_t mtu) {
  if (config_.port_rate_bytes_per_sec == 0) return SIZE_MAX;
  // What book_port would let go frame by frame, counting each frame as
  // long as the largest a QP of this MTU sends (its headers are under 128
  // bytes), so never more. The caller checked that the first may go.
  const uint64_t start =
      pacing_start(port_free_ns_, now, port_backlog_since_, config_.tx_catch_up_ns);
  const uint64_t latest = now + config_.tx_run_ahead_ns;
  if (start > latest) return 1;
  if (mtu != port_frames_mtu_) {
    port_frames_mtu_ = mtu;
    port_frames_time_ = std::max<uint64_t>(
        1, uint64_t{mtu + 128 + config_.wire_overhead_bytes} * 1'000'000'000ull /
               config_.port_rate_bytes_per_sec);
  }
  return static_cast<size_t>((latest - start) / port_frames_time_ + 1);
}

uint64_t Endpoint::port_time_ns(uint32_t len) {
  if (len != port_time_len_) {
    port_time_len_ = len;
    port_time_ = uint64_t{len + config_.wire_overhead_bytes} * 1'000'000'000ull /
                 config_.port_rate_bytes_per_sec;
  }
  return port_time_;
}

size_t Endpoint::emit_control(uint64_t now, std::span<const std::span<uint8_t>> bufs,
                              std::span<uint32_t> lens) {
  // The interface's frames (answers, solicitations) go first: few, small,
  // and what a QP waiting for resolution needs to go on.
  size_t n = 0;
  while (n < bufs.size() && n < lens.size() && interface_.has_frames() &&
         port_free_ns_ <= now + config_.tx_run_ahead_ns) {
    const auto len = static_cast<uint32_t>(interface_.emit(bufs[n]));
    if (len == 0) continue;
    lens[n++] = len;
    book_port(len, now);
  }
  return n;
}

uint64_t Endpoint::next_deadline() const {
  uint64_t t = std::min(pacer_.next_deadline(), timers_.next_deadline());
  if (interface_.enabled()) {
    t = std::min(t, interface_.next_deadline());
    if (interface_.has_frames()) {
      const uint64_t ra = config_.tx_run_ahead_ns;
      t = std::min(t, port_free_ns_ > ra ? port_free_ns_ - ra : 0);
    }
  }
  if (!active_.empty()) {
    const uint64_t ra = config_.tx_run_ahead_ns;
    t = std::min(t, port_free_ns_ > ra ? port_free_ns_ - ra : 0);
  }
  for (unsigned held = held_mask_; held != 0; held &= held - 1)
    t = std::min(t, pause_[std::countr_zero(held)].until);
  return t;
}

}  // namespace droce::endpoint
