// One partition of a run split over processes (partition.h).
//
// Windows. With L the lookahead (the smallest delay of a link between
// partitions) and T the earliest event any partition has, every partition
// runs its events up to E = T + L - 1: a frame another partition sends at
// T or later arrives at T + L at the earliest, so nothing it does in the
// window can reach this one inside it. E stops short at a sample instant
// (the sampler reads link directions that frames from other partitions
// enter: they must all be in) and at run.duration. Then the partitions
// exchange the frames that crossed, each with the earliest time it may
// arrive, and T for the next window is the least of those and of every
// partition's next event: an idle stretch is skipped in one step, its
// sample instants taken by each partition on its own.
//
// Stopping when the work is done (every flow, or a collective's
// transfers). One process stops right after the event that completed the
// last of it, (time, id); the others must stop there too, and cannot know
// where that is until they see it. So a window runs in two phases: the
// partitions with work left run to E but pause after the event that
// completes the last of theirs; all say how much they have left and where
// they paused; if none is left, everyone runs to the latest pause point,
// the one process's stop, hands over the frames sent so far, and the run
// stops there (a collective posts its next iteration and goes on from
// it); else everyone runs on to E. Partitions with no work of their own
// wait during the first phase; that costs only at the tail.
//
// A frame crossing partitions, as stashed: its link direction, length,
// first and last bit times, when it was sent and whether the link was up
// then, the Packet fields a switch set and its unheld payload, then its
// bytes but those of the unheld payload.
// A partition's chunk starts with two words: the earliest it has anything
// to do (an event, or one of these frames arriving) and the frame count.
#include <algorithm>
#include <cstring>
#include <tuple>

#include "simulator_impl.h"

namespace droce::sim {

using fabric::kNever;

namespace {

struct CrossingFrame {
  uint32_t dir, len;
  uint64_t start, end, enqueue_time, tag;
  uint64_t sent_at;  // when the sender handed it to the link
  uint32_t accounted;
  uint16_t ingress_port, l3_offset;
  uint8_t tc, ip_version;
  uint8_t link_up;  // the link's state then
  uint16_t unheld_len, unheld_gap;
};
constexpr size_t kChunkHeader = 2 * sizeof(uint64_t);

uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, sizeof v); }

}  // namespace

void Simulator::Impl::stash(uint32_t l, const fabric::Packet& p, uint64_t start, uint64_t end) {
  std::vector<uint8_t>& b = outbox[dir_part[l]];
  const CrossingFrame h{l,
                        static_cast<uint32_t>(p.size()),
                        start,
                        end,
                        p.enqueue_time,
                        p.tag,
                        self.now_,
                        p.accounted,
                        p.ingress_port,
                        p.l3_offset,
                        p.tc,
                        p.ip_version,
                        dirs[l]->link.up(),
                        p.unheld.len,
                        p.unheld.gap};
  // The bytes before and after the unheld payload (unspecified, unread).
  const auto [first, last] = p.unheld_range();
  const size_t after = p.size() - last;
  const size_t at = b.size();
  b.resize(at + sizeof h + first + after);
  uint8_t* out = b.data() + at;
  std::memcpy(out, &h, sizeof h);
  std::memcpy(out + sizeof h, p.bytes.data(), first);
  std::memcpy(out + sizeof h + first, p.bytes.data() + p.held_offset(last), after);
  store64(b.data() + 8, load64(b.data() + 8) + 1);
  outbound_arrival = std::min(outbound_arrival, end + dir_min_delay[l]);
}

void Simulator::Impl::enter_partition(uint32_t index, PartitionPlan p) {
  plan = std::move(p);
  part = index;
  dir_part.resize(dirs.size());
  dir_min_delay.resize(dirs.size());
  dir_last_down.assign(dirs.size(), kNever);
  for (size_t l = 0; l < dirs.size(); ++l) {
    const NodeRef to = dirs[l]->to;
    dir_part[l] = to.kind == Kind::kHost ? plan.host[to.index] : plan.sw[to.index];
    const fabric::LinkConfig& c = dirs[l]->link.config();
    dir_min_delay[l] = c.propagation_ns + c.impairments.extra_delay_ns;
  }
  outbox.assign(plan.count, std::vector<uint8_t>(kChunkHeader, 0));
  // What the other partitions run is never due here.
  for (uint32_t h = 0; h < hosts.size(); ++h)
    if (!owns_host(h)) schedule(h, kNever);
  for (uint32_t s = 0; s < sws.size(); ++s)
    if (!owns_switch(s)) schedule(id_switch0 + s, kNever);
  for (uint32_t l = 0; l < dirs.size(); ++l)
    if (!owns_dir(l)) schedule(id_link0 + l, kNever);
}

bool Simulator::Impl::run_window(uint64_t t, uint32_t id_last,
                                 const std::function<uint64_t()>* left) {
  while (!events.empty()) {
    const uint64_t time = events.top_time();
    const uint32_t id = events.top_id();
    if (time > t || (time == t && id > id_last)) break;
    events.take_top();
    self.now_ = time;
    dispatch(id);
    events.settle();
    last_id = id;
    if (left && (*left)() == 0) return true;
  }
  return false;
}

uint64_t Simulator::Impl::apply_inbound(std::span<const uint8_t> in, uint64_t earliest) {
  const uint8_t* p = in.data();
  const uint8_t* const end = p + in.size();
  while (p < end) {
    earliest = std::min(earliest, load64(p));
    const uint64_t frames = load64(p + 8);
    p += kChunkHeader;
    for (uint64_t i = 0; i < frames; ++i) {
      CrossingFrame h;
      std::memcpy(&h, p, sizeof h);
      p += sizeof h;
      // Elided when its payload is unheld, and in a buffer of its size
      // class, as when it was sent.
      const wire::UnheldPayload unheld{h.unheld_len, h.unheld_gap};
      const auto [first, last] = wire::unheld_range(h.len, unheld);
      fabric::Packet pk = first != last || h.len <= kHeldBytes ? take_held() : take();
      pk.bytes.resize(h.len - (last - first));
      std::memcpy(pk.bytes.data(), p, pk.bytes.size());
      p += pk.bytes.size();
      pk.unheld = unheld;
      pk.elided = static_cast<uint16_t>(last - first);
      pk.enqueue_time = h.enqueue_time;
      pk.tag = h.tag;
      pk.accounted = h.accounted;
      pk.ingress_port = h.ingress_port;
      pk.l3_offset = h.l3_offset;
      pk.tc = h.tc;
      pk.ip_version = h.ip_version;
      // The frame enters the link as it would have when it was sent: the
      // link's draws (loss, jitter) come in the same order, and it
      // arrives after this window. Sent while the link was up, it was in
      // flight if the link went down since; a change at the same time
      // came after it (a link change's component id is above every
      // host's and switch's).
      const uint64_t down = dir_last_down[h.dir];
      const bool cut = h.link_up && down != kNever && down >= h.sent_at;
      dirs[h.dir]->send_as_of(std::move(pk), h.start, h.end, h.link_up, cut);
      reschedule_link(h.dir);
    }
  }
  return earliest;
}

std::function<uint64_t()> Simulator::Impl::stop_condition() const {
  if (work_left) return work_left;
  if (!sc.run.stop_when_done || flows.empty()) return {};
  return [this, owned = owned_flows()] { return owned - self.flows_done_; };
}

uint64_t Simulator::Impl::exchange_frames() {
  const uint64_t own = std::min(events.empty() ? kNever : events.top_time(), outbound_arrival);
  for (std::vector<uint8_t>& b : outbox) store64(b.data(), own);
  const std::span<const uint8_t> in = comm->exchange(outbox);
  for (std::vector<uint8_t>& b : outbox) b.assign(kChunkHeader, 0);
  outbound_arrival = kNever;
  return apply_inbound(in, own);
}

bool Simulator::Impl::run_windows(uint64_t until, const std::function<uint64_t()>* left) {
  constexpr uint32_t kAll = ~uint32_t{0};
  while (window_start <= until) {
    const uint64_t t = window_start;
    uint64_t e = until;
    if (plan.lookahead_ns - 1 < until - t) e = t + plan.lookahead_ns - 1;
    e = std::min(e, sample_next);
    if (!left) {
      run_window(e, kAll, nullptr);
    } else {
      // Phase 1: partitions with something left pause where it runs out.
      const bool paused = (*left)() > 0 && run_window(e, kAll, left);
      const uint64_t mine[4] = {(*left)(), paused, self.now_, last_id};
      const std::vector<uint64_t> all = comm->allgather(mine);
      uint64_t total = 0, stop_time = 0, stop_id = 0;
      bool any_paused = false;
      for (size_t q = 0; q < plan.count; ++q) {
        const uint64_t* w = &all[4 * q];
        total += w[0];
        if (w[1] && (!any_paused || w[2] > stop_time || (w[2] == stop_time && w[3] >= stop_id))) {
          stop_time = w[2];
          stop_id = w[3];
          any_paused = true;
        }
      }
      // Nothing was left when the window began: stop where it began.
      if (total == 0 && !any_paused) return true;
      if (total == 0) {
        // Phase 2, the stop: everyone to the latest pause, the event one
        // process would have stopped after; the frames sent before it
        // are handed over, so the run can go on from there.
        run_window(stop_time, static_cast<uint32_t>(stop_id), nullptr);
        events_left = exchange_frames() != kNever;
        self.now_ = stop_time;
        window_start = stop_time;
        return true;
      }
      run_window(e, kAll, nullptr);
    }
    const uint64_t next = exchange_frames();
    events_left = next != kNever;
    self.now_ = e;
    // Nothing runs in any partition before `next`, so every instant
    // before it (the window's end, and an idle stretch's, such as a wait
    // for a retransmit timeout) is sampled here and now: a window and an
    // exchange each would only confirm that nothing happened.
    while (sample_next < next && sample_next <= until) {
      self.now_ = sample_next;
      sample();
      sample_next = events.at(id_sampler);
      schedule(id_sampler, kNever);
    }
    window_start = std::min(next, sample_next);
  }
  self.now_ = std::max(self.now_, until);
  return false;
}

// A partition's report, in words: the Summary's component sums and maxima,
// its queues (8 words each), the flows it keeps (index and 7 words each),
// per flow the retransmits of its QPs here and whether its sink memory
// here matched (2: not here), per link direction the bytes it delivered
// (0: not here), then the time series this partition recorded (each is
// recorded where what it reads runs, and empty elsewhere): per flow its
// sent, done and CC rate series, per queue one, per link direction two,
// each as its count of changes and (instant, value) pairs. Only changes
// go, not rows: a long quiet stretch (a wait for a retransmit timeout)
// sampled every few microseconds costs nothing here.
namespace {

void put_series(std::vector<uint64_t>& w, const ChangeSeries& s) {
  w.push_back(s.changes().size());
  for (const auto& [k, v] : s.changes()) w.insert(w.end(), {k, v});
}

// A series another partition recorded (none of them were recorded here).
void take_series(const uint64_t*& w, ChangeSeries& s) {
  const uint64_t n = *w++;
  if (n == 0) return;
  ChangeSeries::Changes c(n);
  for (auto& [k, v] : c) {
    k = static_cast<uint32_t>(*w++);
    v = *w++;
  }
  s.adopt(std::move(c));
}

}  // namespace

std::vector<uint64_t> Simulator::Impl::report() const {
  std::vector<uint64_t> w;
  Summary s;
  count_components(s);
  w.insert(w.end(),
           {s.packet_events, s.switch_drops, s.link_losses, s.ecn_marks, s.xoff_sent, s.xon_sent,
            s.pfc_rx_switches, s.host_paused_ns, s.switch_paused_ns, s.retransmits, s.timeouts,
            s.cnps, s.max_queue_bytes, s.p99_queue_bytes, s.acks_without_int, s.queues.size()});
  for (const QueueSummary& q : s.queues)
    w.insert(w.end(), {q.sw, q.port, q.tc, q.max_bytes, q.p99_bytes, q.drops, q.ecn_marked, 0});
  w.push_back(owned_flows());
  for (size_t f = 0; f < flows.size(); ++f) {
    if (!owns_flow(f)) continue;
    const FlowState& st = self.flows_[f];
    w.insert(w.end(), {f, st.start_ns, st.finish_ns, st.messages, st.posted, st.completed,
                       st.failed, st.completed_bytes});
  }
  for (size_t f = 0; f < flows.size(); ++f) {
    uint64_t r = 0;
    if (owns_host(flows[f].src)) r += flows[f].src_qp->counters().tx_retransmit_packets;
    if (owns_host(flows[f].dst)) r += flows[f].dst_qp->counters().tx_retransmit_packets;
    w.push_back(r);
  }
  for (size_t f = 0; f < flows.size(); ++f)
    w.push_back(!owns_host(flows[f].dst)                  ? 2
                : flows[f].spec->verify && flows[f].whole ? sink_matches(f)
                                                          : 0);  // never asked
  for (size_t l = 0; l < dirs.size(); ++l)
    w.push_back(owns_dir(l) ? dirs[l]->link.counters().delivered_bytes : 0);
  for (size_t f = 0; f < flows.size(); ++f)
    for (const ChangeSeries* c : {&flow_tx[f], &flow_done[f], &flow_cc[f]}) put_series(w, *c);
  for (const ChangeSeries& c : queue_len) put_series(w, c);
  for (size_t l = 0; l < dirs.size(); ++l)
    for (const ChangeSeries* c : {&link_bytes[l], &link_busy[l]}) put_series(w, *c);
  w.insert(w.begin(), w.size() + 1);  // its own length first
  return w;
}

void Simulator::Impl::merge_report(const uint64_t*& w) {
  const uint64_t* const next = w + w[0];
  ++w;
  Summary& s = merged->components;
  for (uint64_t* sum : {&s.packet_events, &s.switch_drops, &s.link_losses, &s.ecn_marks,
                        &s.xoff_sent, &s.xon_sent, &s.pfc_rx_switches, &s.host_paused_ns,
                        &s.switch_paused_ns, &s.retransmits, &s.timeouts, &s.cnps})
    *sum += *w++;
  s.max_queue_bytes = std::max(s.max_queue_bytes, *w++);
  s.p99_queue_bytes = std::max(s.p99_queue_bytes, *w++);
  s.acks_without_int += *w++;
  const uint64_t queues = *w++;
  for (uint64_t i = 0; i < queues; ++i, w += 8)
    s.queues.push_back(QueueSummary{static_cast<uint32_t>(w[0]), static_cast<uint32_t>(w[1]),
                                    static_cast<uint8_t>(w[2]), w[3], w[4], w[5], w[6]});
  const uint64_t owned = *w++;
  for (uint64_t i = 0; i < owned; ++i, w += 8)
    self.flows_[w[0]] = FlowState{w[1], w[2], w[3], w[4], w[5], w[6], w[7]};
  for (size_t f = 0; f < flows.size(); ++f) merged->flow_retransmits[f] += *w++;
  for (size_t f = 0; f < flows.size(); ++f, ++w)
    if (*w != 2) merged->sink_matches[f] = static_cast<uint8_t>(*w);
  for (size_t l = 0; l < dirs.size(); ++l) merged->link_delivered_bytes[l] += *w++;
  for (size_t f = 0; f < flows.size(); ++f)
    for (ChangeSeries* c : {&flow_tx[f], &flow_done[f], &flow_cc[f]}) take_series(w, *c);
  for (ChangeSeries& c : queue_len) take_series(w, c);
  for (size_t l = 0; l < dirs.size(); ++l)
    for (ChangeSeries* c : {&link_bytes[l], &link_busy[l]}) take_series(w, *c);
  w = next;
}

// Partition 0 takes every other's report and keeps the whole run's
// results.
void Simulator::Impl::merge_reports(PartitionComm& comm) {
  std::vector<std::vector<uint8_t>> out(plan.count);
  std::vector<uint64_t> mine;
  if (part != 0) {
    mine = report();
    out[0].resize(mine.size() * sizeof(uint64_t));
    std::memcpy(out[0].data(), mine.data(), out[0].size());
  }
  const std::span<const uint8_t> in = comm.exchange(out);
  if (part != 0) return;
  // Its own report too, added to zeros like every other. The rows are
  // rebuilt from the merged series when next asked for.
  mine = report();
  self.flow_samples_.clear();
  self.queue_samples_.clear();
  self.link_samples_.clear();
  flow_rows = queue_rows = link_rows = Replay{};
  std::vector<uint64_t> words(in.size() / sizeof(uint64_t));
  std::memcpy(words.data(), in.data(), words.size() * sizeof(uint64_t));
  merged = std::make_unique<Merged>();
  merged->flow_retransmits.assign(flows.size(), 0);
  merged->sink_matches.assign(flows.size(), 0);
  merged->link_delivered_bytes.assign(dirs.size(), 0);
  const uint64_t* w = mine.data();
  merge_report(w);
  w = words.data();
  while (w < words.data() + words.size()) merge_report(w);
  std::sort(merged->components.queues.begin(), merged->components.queues.end(),
            [](const QueueSummary& a, const QueueSummary& b) {
              return std::tie(a.sw, a.port, a.tc) < std::tie(b.sw, b.port, b.tc);
            });
  self.flows_done_ = 0;
  for (const FlowState& st : self.flows_) self.flows_done_ += st.done() ? 1 : 0;
  self.events_ = merged->components.packet_events;
}

void Simulator::enter_partition(PartitionComm& comm) {
  Impl& m = *impl_;
  if (m.comm) throw ScenarioError("partitions: this run is split already");
  m.enter_partition(comm.index(), plan_partitions(m.sc, comm.count()));
  m.comm = &comm;
  m.window_start = now_;
  m.sample_next = m.events.at(m.id_sampler);
  m.schedule(m.id_sampler, kNever);
}

bool Simulator::runs_host(size_t h) const { return impl_->owns_host(h); }

void Simulator::set_work(std::function<uint64_t()> left) {
  impl_->work_left = std::move(left);
}

bool Simulator::run_partitioned_until(uint64_t t) {
  Impl& m = *impl_;
  if (!m.comm) throw ScenarioError("run_partitioned_until: enter_partition first");
  if (m.stopped) return false;  // as run_until: the flows ended the run
  const std::function<uint64_t()> left = m.stop_condition();
  const bool early = m.run_windows(t, left ? &left : nullptr);
  // Stopped by the flows: as run_until's stop_when_done (no more running).
  if (early && !m.work_left) m.stopped = true;
  if (early) return !m.stopped;
  return m.events_left;
}

void Simulator::merge_partitions() {
  Impl& m = *impl_;
  if (!m.comm) return;
  m.merge_reports(*m.comm);
}

uint64_t Simulator::run_partitioned(PartitionComm& comm) {
  enter_partition(comm);
  run_partitioned_until(impl_->sc.run.duration_ns);
  merge_partitions();
  return now_;
}

uint64_t Simulator::link_delivered_bytes(size_t l) const {
  const Impl& m = *impl_;
  if (m.merged) return m.merged->link_delivered_bytes.at(l);
  return m.dirs.at(l)->link.counters().delivered_bytes;
}

}  // namespace droce::sim
