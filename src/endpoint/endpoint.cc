#include "droce/endpoint/endpoint.h"

#include <algorithm>

#include "droce/wire/packet.h"

namespace droce::endpoint {

Endpoint::Endpoint(transport::Device& device, const EndpointConfig& config)
    : device_(device),
      config_(config),
      pacer_(config.pacer_granularity_ns, config.pacer_slots),
      timers_(config.pacer_granularity_ns * 16, config.pacer_slots) {}

void Endpoint::attach(transport::QueuePair& qp, std::unique_ptr<cc::Algorithm> cc) {
  QpSlot& s = slots_[qp.qpn()];
  s.qp = &qp;
  s.cc = std::make_unique<CcBinding>(std::move(cc));
  qp.set_cc_hooks(s.cc->hooks());
  activate(s);
}

Endpoint::QpSlot* Endpoint::slot(uint32_t qpn) {
  auto it = slots_.find(qpn);
  return it == slots_.end() ? nullptr : &it->second;
}

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
    if (s->qp->next_deadline() <= now) {
      s->qp->on_timer(now);
      ++counters_.timers_fired;
    }
    auto& cc = s->cc->algorithm();
    if (auto t = cc.next_timer(); t && *t <= now) cc.on_timer(now);
    activate(*s);
    file_timer(qpn, *s);
  }
}

void Endpoint::receive(std::span<const uint8_t> frame, uint64_t now) {
  ++counters_.rx_frames;
  counters_.rx_bytes += frame.size();
  wire::ParsedPacket pkt;
  const wire::ParseError err = wire::parse(frame, pkt);
  if (err != wire::ParseError::kOk) {
    if (wire::is_not_roce(err)) {
      ++counters_.rx_not_roce;
    } else {
      ++counters_.rx_malformed;
      ++counters_.rx_parse_errors[static_cast<size_t>(err)];
    }
    return;
  }
  QpSlot* s = slot(pkt.dest_qp);
  if (!s) {
    ++counters_.rx_unknown_qpn;
    return;
  }
  ++counters_.rx_delivered;
  s->qp->on_packet(pkt, now);
  activate(*s);
  file_timer(pkt.dest_qp, *s);
}

size_t Endpoint::transmit(uint64_t now, std::span<const std::span<uint8_t>> bufs,
                          std::span<uint32_t> lens) {
  run_timers(now);
  due_.clear();
  pacer_.pop_due(now, due_);
  for (uint32_t qpn : due_) {
    if (QpSlot* s = slot(qpn)) activate(*s);
  }
  size_t n = 0;
  // Each QP that produces goes to the back of the line (round robin); one
  // that produces nothing leaves the line until its pacer time, a timer or
  // a received packet brings it back.
  while (n < bufs.size() && n < lens.size() && !active_.empty() &&
         port_free_ns_ <= now) {
    QpSlot* s = active_.front();
    active_.pop_front();
    const size_t len = s->qp->produce(now, bufs[n]);
    if (len != 0) {
      lens[n++] = static_cast<uint32_t>(len);
      ++counters_.tx_frames;
      counters_.tx_bytes += len;
      if (config_.port_rate_bytes_per_sec != 0) {
        const uint64_t wire = len + config_.wire_overhead_bytes;
        port_free_ns_ = std::max(port_free_ns_, now) +
                        wire * 1'000'000'000ull / config_.port_rate_bytes_per_sec;
      }
      active_.push_back(s);
      file_timer(s->qp->qpn(), *s);
      continue;
    }
    s->active = false;
    if (s->qp->has_work(now) && s->cc->next_send_ns() > now) {
      ++counters_.tx_paced;
      pacer_.schedule(s->qp->qpn(), s->cc->next_send_ns());
    }
    file_timer(s->qp->qpn(), *s);
  }
  return n;
}

uint64_t Endpoint::next_deadline() const {
  uint64_t t = std::min(pacer_.next_deadline(), timers_.next_deadline());
  if (!active_.empty()) t = std::min(t, port_free_ns_);
  return t;
}

}  // namespace droce::endpoint
