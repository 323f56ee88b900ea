// The time series (flows.csv, queues.csv, links.csv): every csv_interval
// the sampler records each flow's, queue's and link direction's cumulative
// counters as changes (sample_log.h); the public rows are rebuilt from
// them on demand, interval deltas taken then.
#include "simulator_impl.h"

namespace droce::sim {

void Simulator::Impl::sample() {
  const uint64_t now = self.now_;
  const uint32_t k = static_cast<uint32_t>(sample_times.size());
  sample_times.push_back(now);
  // In a partitioned run each series is recorded where what it reads is
  // kept, and stays 0 elsewhere (partitioned_run.cc adds the rows up).
  for (size_t f = 0; f < flows.size(); ++f) {
    if (owns_host(flows[f].src)) flow_tx[f].record(k, flow_tx_bytes(f));
    if (!owns_flow(f)) continue;
    flow_done[f].record(k, self.flows_[f].completed_bytes);
    flow_cc[f].record(k, flow_cc_rate_bps(f));
  }
  // A port whose queues were all empty at the last sample and are now
  // records nothing: most ports of a large fabric are idle at any instant,
  // and reading every class's series of every port each interval was a
  // quarter of a 1024-host run.
  size_t qh = 0, port = 0;
  for (size_t s = 0; s < sws.size(); ++s) {
    const fabric::Switch& sw = *sws[s].sw;
    if (!owns_switch(s)) {
      port += sw.num_ports();
      qh += sw.num_ports() * fabric::kNumClasses;
      continue;
    }
    for (uint16_t p = 0; p < sw.num_ports(); ++p, ++port, qh += fabric::kNumClasses) {
      const bool empty = sw.port_queue_bytes(p) == 0;
      if (empty && port_was_empty[port]) continue;
      for (uint8_t c = 0; c < fabric::kNumClasses; ++c)
        queue_len[qh + c].record(k, sw.queue_bytes(p, c));
      port_was_empty[port] = empty;
    }
  }
  if (tracked_from.empty() || tracked_from.back().second != tracked_tcs)
    tracked_from.emplace_back(k, tracked_tcs);
  for (size_t l = 0; l < dirs.size(); ++l) {
    if (!owns_dir(l)) continue;
    const Dir& d = *dirs[l];
    link_bytes[l].record(k, d.link.counters().delivered_bytes);
    link_busy[l].record(k, d.busy_by(now));
  }
  schedule(id_sampler, now + sc.run.csv_interval_ns);
  if (self.hook_) self.hook_(now);
}

// Queues sampled: the classes the flows use (connect() adds its own); one
// series per flow, switch queue and link direction.
void Simulator::Impl::build_series() {
  std::vector<bool> used(fabric::kNumClasses, false);
  for (const auto& f : sc.flows) used[f.dscp >> 3] = true;
  for (size_t c = 0; c < fabric::kNumClasses; ++c)
    if (used[c]) tracked_tcs.push_back(static_cast<uint8_t>(c));
  size_t queues = 0;
  for (auto& s : sws) queues += s.sw->num_ports() * fabric::kNumClasses;
  queue_len.resize(queues);
  port_was_empty.assign(queues / fabric::kNumClasses, 1);
  flow_tx.resize(flows.size());
  flow_done.resize(flows.size());
  flow_cc.resize(flows.size());
  link_bytes.resize(dirs.size());
  link_busy.resize(dirs.size());
}

namespace {

// Room for `more` rows at once: a long run's rows are gigabytes, and
// growing to them row by row copied each one several times. Never less
// than doubling, for callers that ask after every instant.
template <class Row>
void reserve_rows(std::vector<Row>& rows, size_t more) {
  const size_t need = rows.size() + more;
  if (need > rows.capacity()) rows.reserve(std::max(need, 2 * rows.capacity()));
}

}  // namespace

// The public rows, rebuilt from the changes up to the latest instant:
// what recording a full row per value at each sample gave. Each replay
// goes on from where `r` stopped and hands the rows to `sink`: the row
// vectors (kept, so each call adds only the new instants) or a caller's
// visitor (from the start, nothing kept).
template <class Sink>
void Simulator::Impl::replay_flows(Replay& r, Sink&& sink) const {
  const Impl& m = *this;
  const size_t F = m.flows.size();
  r.a.resize(F), r.b.resize(F), r.c.resize(F), r.prev_a.resize(F);
  const uint64_t iv = m.sc.run.csv_interval_ns;
  for (; r.instants < m.sample_times.size(); ++r.instants) {
    const uint32_t k = r.instants;
    for (size_t f = 0; f < F; ++f) {
      const uint64_t tx = r.a[f].at(m.flow_tx[f], k);
      sink(FlowSample{m.sample_times[k], static_cast<uint32_t>(f), tx,
                      (tx - r.prev_a[f]) * 8 * 1'000'000'000ull / iv, r.b[f].at(m.flow_done[f], k),
                      r.c[f].at(m.flow_cc[f], k)});
      r.prev_a[f] = tx;
    }
  }
}

template <class Sink>
void Simulator::Impl::replay_queues(Replay& r, Sink&& sink) const {
  const Impl& m = *this;
  r.a.resize(m.queue_len.size());
  size_t epoch = 0;  // tracked_from entry in force
  for (; r.instants < m.sample_times.size(); ++r.instants) {
    const uint32_t k = r.instants;
    while (epoch + 1 < m.tracked_from.size() && m.tracked_from[epoch + 1].first <= k) ++epoch;
    const std::vector<uint8_t>& tcs = m.tracked_from[epoch].second;
    size_t qh = 0;
    for (size_t s = 0; s < m.sws.size(); ++s) {
      const uint16_t ports = static_cast<uint16_t>(m.sws[s].sw->num_ports());
      for (uint16_t p = 0; p < ports; ++p) {
        for (uint8_t c : tcs) {
          const size_t q = qh + p * fabric::kNumClasses + c;
          sink(QueueSample{m.sample_times[k], static_cast<uint32_t>(s), p, c,
                           r.a[q].at(m.queue_len[q], k)});
        }
      }
      qh += ports * fabric::kNumClasses;
    }
  }
}

template <class Sink>
void Simulator::Impl::replay_links(Replay& r, Sink&& sink) const {
  const Impl& m = *this;
  const size_t L = m.dirs.size();
  r.a.resize(L), r.b.resize(L), r.prev_a.resize(L), r.prev_b.resize(L);
  const uint64_t iv = m.sc.run.csv_interval_ns;
  for (; r.instants < m.sample_times.size(); ++r.instants) {
    const uint32_t k = r.instants;
    for (size_t l = 0; l < L; ++l) {
      const uint64_t bytes = r.a[l].at(m.link_bytes[l], k);
      const uint64_t busy = r.b[l].at(m.link_busy[l], k);
      sink(LinkSample{m.sample_times[k], static_cast<uint32_t>(l), bytes - r.prev_a[l],
                      static_cast<double>(busy - r.prev_b[l]) / static_cast<double>(iv)});
      r.prev_a[l] = bytes;
      r.prev_b[l] = busy;
    }
  }
}

const std::vector<FlowSample>& Simulator::flow_samples() const {
  Impl& m = *impl_;
  reserve_rows(flow_samples_, (m.sample_times.size() - m.flow_rows.instants) * m.flows.size());
  m.replay_flows(m.flow_rows, [&](const FlowSample& s) { flow_samples_.push_back(s); });
  return flow_samples_;
}

const std::vector<QueueSample>& Simulator::queue_samples() const {
  Impl& m = *impl_;
  reserve_rows(queue_samples_, (m.sample_times.size() - m.queue_rows.instants) *
                                   m.port_was_empty.size() * m.tracked_tcs.size());
  m.replay_queues(m.queue_rows, [&](const QueueSample& s) { queue_samples_.push_back(s); });
  return queue_samples_;
}

const std::vector<LinkSample>& Simulator::link_samples() const {
  Impl& m = *impl_;
  reserve_rows(link_samples_, (m.sample_times.size() - m.link_rows.instants) * m.dirs.size());
  m.replay_links(m.link_rows, [&](const LinkSample& s) { link_samples_.push_back(s); });
  return link_samples_;
}

void Simulator::each_flow_sample(const std::function<void(const FlowSample&)>& visit) const {
  Impl::Replay r;
  impl_->replay_flows(r, visit);
}

void Simulator::each_queue_sample(const std::function<void(const QueueSample&)>& visit) const {
  Impl::Replay r;
  impl_->replay_queues(r, visit);
}

void Simulator::each_link_sample(const std::function<void(const LinkSample&)>& visit) const {
  Impl::Replay r;
  impl_->replay_links(r, visit);
}

}  // namespace droce::sim
