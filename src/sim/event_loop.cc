// The discrete-event loop: take the component with the earliest time from
// the event queue (ties by id), run its step, re-file what it touched.
// After a step only the components it touched are rescheduled (the link a
// frame went into, the switch or host a frame was delivered to); the rest
// keep their times (docs/SIM.md "How it runs").
#include "simulator_impl.h"

namespace droce::sim {

using fabric::kNever;

namespace {

// The lines a switch or host reads first of a frame it receives: the
// headers (Ethernet to the RETH), and at a host also the ICRC at the end,
// which parse() loads before the ICRC check streams through the rest. A
// frame has usually waited in a switch queue (over a MiB of frames in the
// 16-to-1 incast bench), long enough to leave L2; perf put a fifth of a
// virtual-payload run on a host's first loads, and 9 % of a 1024-host run
// on a switch's. Asked for one delivery ahead, when the frame before it on
// the same link is handed over.
void prefetch_headers(const fabric::Packet& p, bool with_icrc) {
  const uint8_t* b = p.bytes.data();
  const size_t n = p.bytes.size();  // an elided frame's ICRC too
  if (n < 4) return;
  __builtin_prefetch(b, 0, 3);
  __builtin_prefetch(b + 64, 0, 3);
  if (with_icrc) __builtin_prefetch(b + n - 4, 0, 3);
}

}  // namespace

void Simulator::Impl::reschedule_host(uint32_t h) {
  schedule(h, std::max(hosts[h]->ep->next_deadline(), self.now_));
}

void Simulator::Impl::reschedule_switch(uint32_t s) {
  schedule(id_switch0 + s, std::max(sws[s].sw->next_event_time(), self.now_));
}

// Endpoint: timers and transmission, its completions, its next deadline.
void Simulator::Impl::run_host(uint32_t h) {
  const uint64_t now = self.now_;
  Host& host = *hosts[h];
  const uint64_t rate = dirs[host.out_link]->rate_bps / 8;
  for (;;) {
    // The endpoint writes into pooled packets (staging) directly.
    const size_t n = host.ep->transmit(now, spans, lens, unheld);
    for (size_t i = 0; i < n; ++i) {
      fabric::Packet p = sent_frame(i, unheld[i]);
      // The endpoint paces its port at `rate`: each frame starts once
      // the previous one has left, so it ends one frame time after now.
      const uint64_t wire = lens[i] + fabric::kEthWireOverhead;
      const uint64_t end = now + wire * 1'000'000'000ull / rate;
      send_on(host.out_link, std::move(p), now, end);
    }
    self.events_ += n;
    if (n < kTxBatch) break;
  }
  poll_cq(h);
  uint64_t next = host.ep->next_deadline();
  if (next <= now) next = now + 1;  // nothing more can happen at now
  schedule(h, next);
  reschedule_link(host.out_link);
}

// Switch: departures due now go into their ports' links.
void Simulator::Impl::run_switch(uint32_t s) {
  const uint64_t now = self.now_;
  Sw& sw = sws[s];
  sw.sw->advance(now, [&](fabric::Departure&& d) {
    ++self.events_;
    const uint32_t l = sw.out_link[d.port];
    send_on(l, std::move(d.packet), d.start_time, d.time);
    reschedule_link(l);
  });
  uint64_t next = sw.sw->next_event_time();
  if (next <= now) next = now + 1;
  schedule(id_switch0 + s, next);
}

// Link direction: frames that arrive now go to the switch port or host at
// its far end.
void Simulator::Impl::run_link(uint32_t l) {
  Dir& dir = *dirs[l];
  const NodeRef to = dir.to;
  dir.link.advance(self.now_, [&](fabric::Packet&& p, uint64_t arrival) {
    ++self.events_;
    const bool to_host = to.kind == Kind::kHost;
    if (const fabric::Packet* next = dir.link.next_arrival()) prefetch_headers(*next, to_host);
    if (!to_host) {
      sws[to.index].sw->receive(to.port, std::move(p), arrival);
    } else {
      const std::span<const uint8_t> frame = p.elided ? fabric::restore(p, whole) : p.bytes;
      hosts[to.index]->ep->receive(frame, arrival, p.unheld);
      give(std::move(p));
    }
  });
  reschedule_link(l);
  if (to.kind == Kind::kSwitch) {
    reschedule_switch(to.index);
  } else {
    poll_cq(to.index);
    reschedule_host(to.index);
  }
}

// A cable goes down or comes back: both directions (frames in flight are
// lost while down, as Link::set_up does it) and, at a switch end, the port
// (queues flushed, arrivals for it dropped, ECMP avoids it:
// Switch::set_port_up, which also ends PFC on the link). A host end only
// loses its PFC pauses (Endpoint::link_down): what it sends while down is
// lost, and RC retransmission recovers.
//
// Split over processes (partitioned_run.cc), every partition runs every
// change, so each knows every link's state (routes, and whether a frame it
// sends into another partition's link is lost), but only its own switches
// and hosts act on it.
void Simulator::Impl::run_link_changes() {
  const uint64_t now = self.now_;
  link_schedule.pop_due(now, [&](const LinkChange& c) {
    for (uint32_t l : {2 * c.link, 2 * c.link + 1}) {
      Dir& dir = *dirs[l];
      dir.link.set_up(c.up);
      if (!c.up && !dir_last_down.empty()) dir_last_down[l] = now;
      reschedule_link(l);
      // Each direction's receiving end: between the two, both ends.
      if (dir.to.kind == Kind::kSwitch) {
        if (!owns_switch(dir.to.index)) continue;
        sws[dir.to.index].sw->set_port_up(dir.to.port, c.up, now);
        reschedule_switch(dir.to.index);
      } else if (!c.up && owns_host(dir.to.index)) {
        hosts[dir.to.index]->ep->link_down(now);
        reschedule_host(dir.to.index);
      }
    }
    // run.reconverge: the routing protocol learns of it that much later.
    if (sc.run.reconverge_ns) {
      if (reroutes.empty()) schedule(id_reroute, now + *sc.run.reconverge_ns);
      reroutes.push_back(now + *sc.run.reconverge_ns);
    }
  });
  schedule(id_link_state, link_schedule.next_time());
}

// Routes over the links up now, installed in every switch at once (packets
// already queued stay where they are).
void Simulator::Impl::run_reroute() {
  while (!reroutes.empty() && reroutes.front() <= self.now_) reroutes.pop_front();
  std::vector<fabric::RouteTable> tables = compute_routes();
  for (size_t s = 0; s < sws.size(); ++s) sws[s].sw->routes() = std::move(tables[s]);
  ++self.route_updates_;
  schedule(id_reroute, reroutes.empty() ? kNever : reroutes.front());
}

// Flows whose start time has come post their first messages.
void Simulator::Impl::run_workload() {
  const uint64_t now = self.now_;
  while (next_start < start_order.size() && sc.flows[start_order[next_start]].start_ns <= now) {
    const size_t f = start_order[next_start++];
    self.flows_[f].start_ns = now;
    // Each end posts where it runs: the sink its receive buffers first.
    if (flows[f].spec->opcode == Opcode::kSend && owns_host(flows[f].dst)) post_recvs(f);
    if (owns_flow(f)) post_more(f);  // else another partition posts it
    // Each end woken where it runs (partition.h).
    for (uint32_t h : {flows[f].initiator, flows[f].dst})
      if (owns_host(h)) reschedule_host(h);
  }
  if (next_start < start_order.size())
    schedule(id_workload, sc.flows[start_order[next_start]].start_ns);
}

void Simulator::Impl::dispatch(uint32_t id) {
  if (id < id_switch0) {
    run_host(id);
  } else if (id < id_link0) {
    run_switch(id - id_switch0);
  } else if (id < id_link_state) {
    run_link(id - id_link0);
  } else if (id == id_link_state) {
    run_link_changes();
  } else if (id == id_reroute) {
    run_reroute();
  } else if (id == id_workload) {
    run_workload();
  } else {
    sample();
  }
}

bool Simulator::run_until(uint64_t t) {
  Impl& m = *impl_;
  // A partition alone would run without the frames the others send it.
  if (m.comm)
    throw ScenarioError("run_until: this Simulator runs one partition: run_partitioned_until");
  pause_ = false;
  // The flows finished while a collective still ran: the run ends where
  // the collective did.
  if (m.flows_ended_run()) m.stopped = true;
  while (!m.events.empty() && !m.stopped && !pause_) {
    const uint64_t time = m.events.top_time();
    const uint32_t id = m.events.top_id();
    if (time > t) break;
    m.events.take_top();  // settled below, usually by the component's own reschedule
    now_ = time;
    m.dispatch(id);
    m.events.settle();
    // A pause is a collective between iterations: it decides what is next.
    if (!pause_ && m.flows_ended_run()) m.stopped = true;
  }
  if (pause_) return true;
  if (!m.stopped) now_ = std::max(now_, t);
  // Nothing left but the sampler: the run is over.
  bool only_sampler = true;
  for (uint32_t id = 0; id < m.id_sampler; ++id) only_sampler &= m.events.at(id) == kNever;
  return !m.stopped && !only_sampler;
}

uint64_t Simulator::run() {
  run_until(impl_->sc.run.duration_ns);
  return now_;
}

}  // namespace droce::sim
