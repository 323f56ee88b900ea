// The runner's internals, shared by the files that make up Simulator (one
// concern each):
//
//   simulator.cc  building hosts, switches and link directions from a
//                 Scenario; accessors
//   event_loop.cc run_until: the next component's event, one step per kind
//   workload.cc   the scenario's flows (QP pairs, memory, posting, their
//                 completions) and the programmatic API (connect, post_*)
//   sampler.cc    the time series: recording changes, rebuilding the rows
//   outputs.cc    summary, summary.json and the CSV files
//   partitioned_run.cc  one partition of a run split over processes
//                 (partition.h): windows, the frame exchange, the merge
//
// Routes come from fabric::shortest_path_routes over `graph`.
#pragma once

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "droce/fabric/shortest_paths.h"
#include "droce/sim/partition.h"
#include "droce/sim/simulator.h"
#include "droce/transport/device.h"
#include "droce/transport/zeroed_array.h"
#include "event_queue.h"
#include "link_schedule.h"
#include "sample_log.h"

namespace droce::sim {

// Room for a 4096-byte MTU frame with IPv6 headers, extension headers and
// an echoed INT stack on an ACK.
inline constexpr size_t kBufBytes = 4096 + 512;
// Room for what an elided frame holds (fabric::elide): headers up to an
// IPv6 RETH, an INT stack of five hops, and the ICRC. Five cache lines: an
// odd number, so that the headers of frames side by side spread over the
// cache's sets.
inline constexpr size_t kHeldBytes = 320;
// Messages larger than this are not kept whole: offsets wrap in a window
// of this size and the flow is not verified.
inline constexpr uint64_t kVerifyWindow = 64ull << 20;
inline constexpr size_t kTxBatch = 4;
inline constexpr uint32_t kPacerSlots = 256;

// Seeds and the flows' source patterns: a splitmix64-style mix of two words.
uint64_t mix(uint64_t a, uint64_t b);

enum class Kind : uint8_t { kHost, kSwitch };
struct NodeRef {
  Kind kind = Kind::kHost;
  uint32_t index = 0;
  uint16_t port = 0;  // switch port
};

struct Simulator::Impl {
  explicit Impl(Simulator& s) : self(s) {}
  Simulator& self;  // the public state: flows_, now_, events_, handlers

  struct Host {
    // MR keys from the run's seed: the same scenario and seed give the
    // same keys, so the same bytes on the wire.
    explicit Host(uint64_t mr_key_seed) : device(mr_key_seed) {}
    transport::Device device;
    std::unique_ptr<endpoint::Endpoint> ep;
    transport::ProtectionDomain* pd = nullptr;
    transport::CompletionQueue* cq = nullptr;
    // Completions of QPs made by Simulator::connect (created on first use).
    transport::CompletionQueue* wcq = nullptr;
    // Set by the CQs' notifier when a completion is pushed; poll_cq polls
    // only then, and re-arms them (watch_cq). Most host events complete
    // nothing, and an empty poll still reads each CQ's lines.
    bool completions = true;
    uint32_t out_link = 0;
    wire::MacAddress mac{};
    wire::IpAddress ip;
    bool resolve_macs = false;  // QPs name peers by IP only
    // qpn -> (flow << 1) | is_initiator; -1 when unknown.
    std::vector<int64_t> qp_role;
  };
  struct Sw {
    std::unique_ptr<fabric::Switch> sw;
    std::vector<uint32_t> out_link;  // per port
    std::vector<std::string> peer;   // per port
  };
  struct Dir {
    fabric::Link link;
    uint64_t rate_bps = 0;
    NodeRef to;
    std::string name;
    // Serialisation time of what was sent, for the utilisation samples: a
    // frame counts in the interval its bits left in, not whole in the one
    // it arrived in (that read up to a frame per interval above 1).
    uint64_t busy_ns = 0;
    uint64_t last_start = 0, last_end = 0;  // the latest frame on the wire
    explicit Dir(const fabric::LinkConfig& c) : link(c) {}
    void send(fabric::Packet&& p, uint64_t start, uint64_t end) {
      send_as_of(std::move(p), start, end, link.up(), false);
    }
    // A frame sent at a time when the link was `up_then`: now (send), or
    // by another process and handed over later (partitioned_run.cc), with
    // `cut_since` saying the link went down after it left. A down link
    // carries no bits: the frame is lost (Link counts it) and the interval
    // shows no utilisation.
    void send_as_of(fabric::Packet&& p, uint64_t start, uint64_t end, bool up_then,
                    bool cut_since) {
      if (up_then) {
        busy_ns += end - start;
        last_start = start;
        last_end = end;
      }
      link.send_as_of(std::move(p), end, up_then, cut_since);
    }
    // Serialisation time up to `t`: one frame at most is still going out.
    uint64_t busy_by(uint64_t t) const {
      return last_end > t ? busy_ns - (last_end - std::max(t, last_start)) : busy_ns;
    }
  };
  struct Flow {
    const FlowSpec* spec = nullptr;
    uint32_t src = 0, dst = 0, initiator = 0;
    transport::QueuePair* src_qp = nullptr;
    transport::QueuePair* dst_qp = nullptr;
    // Anonymous zero pages, paid for when touched: a virtual-payload flow
    // never touches them (a 1 MiB message each way per flow was 2 GiB and
    // most of the set-up time at 1024 flows). Its source pattern is
    // written when first asked for (source_memory).
    transport::ZeroedArray<uint8_t> src_mem, dst_mem;
    bool pattern_written = false;
    transport::MemoryRegion* src_mr = nullptr;
    transport::MemoryRegion* dst_mr = nullptr;
    uint64_t msg = 0;       // bytes per message (the last may be shorter)
    uint64_t slots = 1;     // messages the window holds
    uint64_t recvs_posted = 0;
    uint64_t recvs_done = 0;  // receive completions at the sink, errors too
    bool whole = true;      // the window holds the whole flow
  };

  Scenario sc;
  std::vector<std::unique_ptr<Host>> hosts;
  std::vector<Sw> sws;
  std::vector<std::unique_ptr<Dir>> dirs;
  std::vector<Flow> flows;
  // Made by connect() and not yet disconnected; the summary's sums read
  // them, and what disconnected ones counted (retired).
  std::unordered_set<transport::QueuePair*> workload_qps;
  // The QP counters the summary sums.
  struct QpTotals {
    uint64_t retransmits = 0, timeouts = 0, cnps = 0;
    void add(const transport::QpCounters& c) {
      retransmits += c.tx_retransmit_packets;
      timeouts += c.retransmit_timeouts;
      cnps += c.cnps_received;
    }
  };
  QpTotals retired;
  std::vector<size_t> start_order;  // flows by start time
  size_t next_start = 0;
  EventQueue events;
  uint32_t id_switch0 = 0, id_link0 = 0, id_link_state = 0, id_workload = 0, id_sampler = 0,
           id_reroute = 0;
  LinkSchedule link_schedule;  // [[links]] down
  fabric::FabricGraph graph{0, 0};  // what routes are computed on
  std::deque<uint64_t> reroutes;  // run.reconverge: when routes are recomputed
  bool pcp_tagged = false;     // some switch classifies by PCP: hosts tag (set_class_marks)
  std::vector<uint8_t> tracked_tcs;

  // The time series, as changes (sample_log.h). Cumulative counters are
  // stored and the per-interval deltas taken when rows are rebuilt.
  std::vector<uint64_t> sample_times;
  std::vector<ChangeSeries> flow_tx, flow_done, flow_cc;  // per flow
  std::vector<ChangeSeries> queue_len;  // per (switch, port, class), flattened
  std::vector<uint8_t> port_was_empty;  // per (switch, port): every class recorded 0
  std::vector<ChangeSeries> link_bytes, link_busy;  // per link direction
  // tracked_tcs from an instant on (connect() may add a class mid-run).
  std::vector<std::pair<uint32_t, std::vector<uint8_t>>> tracked_from;
  // How far the public rows have been rebuilt, and the replay state.
  struct Replay {
    uint32_t instants = 0;
    std::vector<ChangeSeries::Reader> a, b, c;
    std::vector<uint64_t> prev_a, prev_b;
  };
  Replay flow_rows, queue_rows, link_rows;
  // The rows from where `r` stopped to the latest instant, each to `sink`
  // (sampler.cc).
  template <class Sink>
  void replay_flows(Replay& r, Sink&& sink) const;
  template <class Sink>
  void replay_queues(Replay& r, Sink&& sink) const;
  template <class Sink>
  void replay_links(Replay& r, Sink&& sink) const;
  bool stopped = false;

  std::vector<fabric::Packet> pool;
  // Buffers of elided frames (kHeldBytes or more), and the room an elided
  // frame is restored in for the endpoint that receives it.
  std::vector<fabric::Packet> held_pool;
  fabric::FrameBytes whole;
  std::array<fabric::Packet, kTxBatch> staging;
  std::array<std::span<uint8_t>, kTxBatch> spans;
  std::array<uint32_t, kTxBatch> lens{};
  std::array<wire::UnheldPayload, kTxBatch> unheld{};
  std::array<transport::WorkCompletion, 64> wcs;

  // ---- building (simulator.cc) -------------------------------------------
  std::vector<fabric::SwitchConfig> switch_configs();
  void build_hosts();
  void build_links(std::vector<fabric::SwitchConfig>& cfgs);
  void build_switches(std::vector<fabric::SwitchConfig>& cfgs);
  void build_series();
  void prefill_pool();
  void schedule_start();
  // Shortest-path routes over the links that are up now.
  std::vector<fabric::RouteTable> compute_routes() const;

  // ---- the event loop (event_loop.cc) ------------------------------------
  // Runs component `id`'s step at self.now_.
  void dispatch(uint32_t id);
  void run_host(uint32_t h);
  void run_switch(uint32_t s);
  void run_link(uint32_t l);
  void run_link_changes();
  void run_reroute();
  void run_workload();
  void reschedule_host(uint32_t h);
  void reschedule_switch(uint32_t s);
  void reschedule_link(uint32_t l) { schedule(id_link0 + l, dirs[l]->link.next_event_time()); }

  // ---- the workload (workload.cc) ----------------------------------------
  void build_flows();
  // Posts what flow f's window allows: messages on the initiator, and for
  // SEND the matching receive buffers on the sink.
  void post_more(size_t f);
  void post_recvs(size_t f);
  // Completions of host h: the workload CQ's to the handler, the flows'
  // to their progress (and more messages posted).
  void poll_cq(uint32_t h);
  // Arms `cq` to raise host.completions at its next completion.
  static void watch_cq(Host& host, transport::CompletionQueue& cq);
  void on_flow_completion(size_t f, const transport::WorkCompletion& wc);
  uint64_t flow_tx_bytes(size_t f) const { return flows[f].src_qp->counters().tx_bytes; }
  uint64_t flow_cc_rate_bps(size_t f) const;

  // ---- the sampler (sampler.cc) ------------------------------------------
  void sample();

  // ---- outputs (outputs.cc) ----------------------------------------------
  // The Summary's sums and maxima over the components this process runs
  // (QPs, switches, queues, links, hosts): everything but the flows' part.
  void count_components(Summary& s) const;
  // Whether flow f's sink memory holds its source pattern (its whole size).
  bool sink_matches(size_t f) const;
  uint64_t flow_retransmits(size_t f) const {
    return flows[f].src_qp->counters().tx_retransmit_packets +
           flows[f].dst_qp->counters().tx_retransmit_packets;
  }

  // ---- partitions (partitioned_run.cc) -----------------------------------
  // The partition this process runs; with one, every component is its own.
  PartitionPlan plan;
  uint32_t part = 0;
  std::vector<uint32_t> dir_part;       // per link direction; empty: all here
  std::vector<uint64_t> dir_min_delay;  // per link direction
  // Per link direction, when it last went down (kNever: not yet): a frame
  // handed over from another partition that was sent before then was in
  // flight when it went down, and is lost.
  std::vector<uint64_t> dir_last_down;
  bool owns_host(size_t h) const { return plan.count == 1 || plan.host[h] == part; }
  bool owns_switch(size_t s) const { return plan.count == 1 || plan.sw[s] == part; }
  bool owns_dir(size_t l) const { return dir_part.empty() || dir_part[l] == part; }
  // A flow's progress is kept where its initiator runs.
  bool owns_flow(size_t f) const { return owns_host(flows[f].initiator); }
  size_t owned_flows() const {
    size_t n = 0;
    for (size_t f = 0; f < flows.size(); ++f) n += owns_flow(f);
    return n;
  }
  // Frames sent into another partition's link directions this window,
  // serialised per partition (partitioned_run.cc has the format), and the
  // earliest any of them can arrive.
  std::vector<std::vector<uint8_t>> outbox;
  uint64_t outbound_arrival = fabric::kNever;
  void stash(uint32_t l, const fabric::Packet& p, uint64_t start, uint64_t end);
  // Sends a frame into link direction l: into the link when this process
  // runs it, else into the outbox.
  void send_on(uint32_t l, fabric::Packet&& p, uint64_t start, uint64_t end) {
    if (owns_dir(l)) {
      dirs[l]->send(std::move(p), start, end);
    } else {
      stash(l, p, start, end);
      give(std::move(p));
    }
  }
  uint32_t last_id = 0;  // the component run_window() ran last
  PartitionComm* comm = nullptr;  // set by Simulator::enter_partition
  // Where the next window starts (a lower bound of every partition's next
  // event), whether any partition has an event left but the sampler, and
  // the sampler's next instant (it runs between windows, not as an event).
  uint64_t window_start = 0;
  bool events_left = true;
  uint64_t sample_next = fabric::kNever;
  // The work a collective has left (in this partition, when split;
  // Simulator::set_work); empty: none.
  std::function<uint64_t()> work_left;
  // What stops a partitioned run early: the work above, or with
  // run.stop_when_done the flows this partition keeps that are not done;
  // empty: nothing (the run goes to its end time).
  std::function<uint64_t()> stop_condition() const;
  // run.stop_when_done in one process: every flow is done and no
  // collective has work left.
  bool flows_ended_run() const {
    return sc.run.stop_when_done && !self.flows_.empty() && self.all_done() &&
           !(work_left && work_left() > 0);
  }
  // Takes partition `index` of `p`: the others' components never run here.
  void enter_partition(uint32_t index, PartitionPlan p);
  // Runs the events up to (t, id_last) in (time, id) order; with `left`,
  // returns true right after an event that left it at 0 (else false when
  // there is none left to run).
  bool run_window(uint64_t t, uint32_t id_last, const std::function<uint64_t()>* left);
  // Windows up to `until` (run_until over the partitions): true when they
  // stopped early, every partition's `left` at 0 (the clock at the event
  // that made it so, the run resumable from there).
  bool run_windows(uint64_t until, const std::function<uint64_t()>* left);
  // The crossing frames handed over between windows; returns the earliest
  // any partition has anything to do.
  uint64_t exchange_frames();
  // Frames other partitions sent into this one's link directions (the
  // exchange's chunks); returns the earliest next event any partition had.
  uint64_t apply_inbound(std::span<const uint8_t> in, uint64_t own_earliest);
  // What this partition's components counted, as words (partitioned_run.cc
  // has the layout), and partition 0 adding another's to its own.
  std::vector<uint64_t> report() const;
  void merge_report(const uint64_t*& w);
  void merge_reports(PartitionComm& comm);

  // After a partitioned run, on partition 0: what the other partitions'
  // components counted, merged with this one's (the outputs read it).
  struct Merged {
    Summary components;  // count_components over every partition
    std::vector<uint64_t> flow_retransmits;
    std::vector<uint8_t> sink_matches;
    std::vector<uint64_t> link_delivered_bytes;  // per link direction
  };
  std::unique_ptr<Merged> merged;

  // Pooled packets are kept at kBufBytes so the endpoint can write a frame
  // straight into one; a frame is then only shrunk to its length. Growing
  // it back when it returns to the pool writes nothing (FrameBytes). A new
  // buffer is zeroed once: with payload = "virtual" nothing writes the
  // payload bytes, and they must still be defined (a UD frame's ICRC
  // reads them; runs must not depend on what the heap held).
  static fabric::Packet fresh() {
    fabric::Packet p;
    p.bytes.assign(kBufBytes, 0);
    return p;
  }
  fabric::Packet take() {
    if (pool.empty()) return fresh();
    fabric::Packet p = std::move(pool.back());
    pool.pop_back();
    return p;
  }
  // A packet for an elided frame, or a whole one of at most kHeldBytes (an
  // ACK, a CNP); elide() or the caller sizes and fills it.
  fabric::Packet take_held() {
    fabric::Packet p;
    if (held_pool.empty()) {
      p.bytes.reserve(kHeldBytes);
    } else {
      p = std::move(held_pool.back());
      held_pool.pop_back();
    }
    return p;
  }
  void give(fabric::Packet&& p) {
    p.unheld = {};
    p.elided = 0;
    if (p.bytes.capacity() >= kBufBytes) {
      p.bytes.resize(kBufBytes);
      pool.push_back(std::move(p));
    } else if (p.bytes.capacity() >= kHeldBytes) {
      held_pool.push_back(std::move(p));
    }  // else e.g. a switch's PFC frame
  }
  // Frame i of a transmit burst (staging), as it goes on the wire: elided
  // when its payload is unheld, or copied when small, the staging buffer
  // then kept for the next burst; else in the staging buffer itself,
  // replaced by a pooled one.
  fabric::Packet sent_frame(size_t i, wire::UnheldPayload unheld) {
    const std::span<const uint8_t> frame(spans[i].data(), lens[i]);
    const auto [first, last] = wire::unheld_range(frame.size(), unheld);
    // A frame of at most kHeldBytes (an ACK, a CNP) is copied whole into a
    // held buffer too (elide copies what has no unheld payload whole): a
    // fabric with thousands of connections has as many ACKs in flight,
    // each of which held a whole 4.5 KiB buffer.
    if (first != last || frame.size() <= kHeldBytes) {
      fabric::Packet p = take_held();
      fabric::elide(frame, unheld, p);
      return p;
    }
    fabric::Packet p = std::move(staging[i]);
    p.bytes.resize(lens[i]);
    p.unheld = unheld;
    staging[i] = take();
    spans[i] = staging[i].bytes;
    return p;
  }

  // Never later than an event already filed (a spurious wake-up is harmless,
  // a lost one is not).
  void wake(uint32_t id, uint64_t t) { schedule(id, std::min(t, events.at(id))); }
  void schedule(uint32_t id, uint64_t t) { events.set(id, t); }
};

}  // namespace droce::sim
