// The deterministic virtual-time runner (docs/DESIGN.md "Time"). It steps the
// same endpoint core the DPDK engine runs (one endpoint::Endpoint per host)
// and fabric::Switch / fabric::Link objects, discrete-event: an event queue
// (a tournament tree, src/sim/event_queue.h) holds each component's next
// event time (endpoint next_deadline, switch next_event_time, link
// next_event_time, link down/up times, flow starts, samples) and the
// clock jumps from one to the next. Ties are broken by component id, and
// every random draw comes from seeded generators, so the same scenario and
// seed give bit-identical results.
//
// The runner only moves frames: whatever an endpoint or switch does with a
// frame (PFC, INT strip/echo, ECN, CNPs) is theirs.
//
//   sim::Simulator s(sim::load_scenario("incast.toml"));
//   s.run();                                  // to run.duration or all done
//   s.flow(0).fct_ns(); s.queue_bytes(0, 0, 3); s.summary();
//   s.write_outputs("out/");                  // CSV time series + summary.json
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "droce/endpoint/endpoint.h"
#include "droce/fabric/link.h"
#include "droce/fabric/switch.h"
#include "droce/sim/partition.h"
#include "droce/sim/scenario.h"

namespace droce::sim {

// Progress of one flow, readable at any time.
struct FlowState {
  uint64_t start_ns = 0;
  uint64_t finish_ns = 0;       // last message completed; 0 while running
  uint64_t messages = 0;        // in the flow
  uint64_t posted = 0;
  uint64_t completed = 0;       // successful completions
  uint64_t failed = 0;          // completions with an error status
  uint64_t completed_bytes = 0;
  bool done() const { return completed + failed == messages; }
  uint64_t fct_ns() const { return finish_ns ? finish_ns - start_ns : 0; }
};

// One row per sample and item; all times in ns, rates in bit/s.
struct FlowSample {
  uint64_t time_ns;
  uint32_t flow;
  uint64_t tx_bytes;       // payload bytes the data source sent (retransmits included)
  uint64_t tx_rate_bps;    // over the last interval
  uint64_t done_bytes;     // bytes of completed messages
  uint64_t cc_rate_bps;    // the sender's CC rate at the sample
  friend bool operator==(const FlowSample&, const FlowSample&) = default;
};
struct QueueSample {
  uint64_t time_ns;
  uint32_t sw, port;
  uint8_t tc;
  uint64_t bytes;
  friend bool operator==(const QueueSample&, const QueueSample&) = default;
};
struct LinkSample {
  uint64_t time_ns;
  uint32_t link;           // index into link_names()
  uint64_t bytes;          // frame bytes delivered in the interval
  double utilisation;      // time the sender was serialising frames (+24 B wire
                           // overhead each) / the interval
  friend bool operator==(const LinkSample&, const LinkSample&) = default;
};

// Options of a QP pair made by Simulator::connect (the programmatic
// workload API): the per-QP keys of a [flow] in a scenario.
struct QpOptions {
  std::string cc = "none";
  cc::ParamMap cc_params;
  transport::Recovery recovery = transport::Recovery::kGoBackN;
  uint32_t mtu = 4096;
  uint8_t dscp = 26;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint32_t ack_every_n = 0;
  transport::EntropyConfig entropy;  // needs selective repeat unless fixed
  uint32_t reorder_tolerance = 0;
  uint64_t reorder_window_ns = 0;
  uint64_t reorder_window_min_ns = 0;
  bool tail_probe = false;
  bool reth_every_packet = false;
  uint64_t rto_low_ns = 100'000;
  uint32_t sack_window = 1024;
  uint32_t rto_low_threshold = 3;
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  // Entries of the host's workload CQ, created by the host's first
  // connect(). The runner polls after every event, so it only has to hold
  // what one event completes (a cumulative ACK: up to max_send_wr).
  uint32_t cq_entries = 4096;
};

// Two connected RC QPs: `a` on host_a sends to `b` on host_b and back.
struct QpPairRef {
  transport::QueuePair* a = nullptr;
  transport::QueuePair* b = nullptr;
};

struct QueueSummary {
  uint32_t sw, port;
  uint8_t tc;
  uint64_t max_bytes;      // high-water mark (switch counter, exact)
  uint64_t p99_bytes;      // over the samples
  uint64_t drops;
  uint64_t ecn_marked;
};

struct Summary {
  uint64_t end_ns = 0;
  bool all_done = false;
  uint64_t flows_completed = 0;
  uint64_t flows_failed = 0;       // a message completed with an error
  uint64_t flows_verified = 0;     // destination memory matched the source
  uint64_t flows_corrupt = 0;      // ... and did not
  uint64_t fct_p50_ns = 0, fct_p99_ns = 0, fct_max_ns = 0;
  uint64_t switch_drops = 0;       // tail + watchdog drops
  uint64_t link_losses = 0;        // impairments and down links
  uint64_t ecn_marks = 0;
  uint64_t xoff_sent = 0;          // PFC XOFF frames sent by switches
  uint64_t xon_sent = 0;
  uint64_t pfc_rx_switches = 0;    // PFC frames received by switch ports
  // Sum over hosts and priorities of the time PFC held the priority
  // (Endpoint::paused_ns): what switches' XOFFs cost the senders.
  uint64_t host_paused_ns = 0;
  uint64_t switch_paused_ns = 0;   // sum over egress queues of paused time
  // retransmits, timeouts, cnps: flows' QPs and those made by connect().
  uint64_t retransmits = 0;        // request packets sent more than once
  uint64_t timeouts = 0;
  uint64_t cnps = 0;
  uint64_t max_queue_bytes = 0;
  uint64_t p99_queue_bytes = 0;    // the largest per-queue p99
  uint64_t packet_events = 0;      // see Simulator::packet_events()
  // ACKs that reached a QP whose CC steers by INT without INT on them
  // (EndpointCounters::cc_acks_without_int): switches' INT was off.
  uint64_t acks_without_int = 0;
  std::vector<QueueSummary> queues;  // every queue that carried traffic
};

// The warning a tool prints once when a CC that steers by INT ran without
// it (Summary::acks_without_int); empty when there is nothing to say.
std::string missing_int_warning(const Summary& s);

// Which optional files Simulator::write_outputs writes. With thousands of
// flows flows.csv is most of the output and of the time spent writing it.
struct OutputFiles {
  bool flows = true;  // flows.csv
  bool links = true;  // links.csv
};

class Simulator {
 public:
  explicit Simulator(const Scenario& scenario);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // Runs to run.duration, or until every flow is done when
  // run.stop_when_done. Returns the final virtual time.
  uint64_t run();
  // Processes every event at or before `t`; the clock ends at `t` (or at
  // the time all flows completed, with stop_when_done). Returns false when
  // nothing is left to do at all.
  bool run_until(uint64_t t);
  uint64_t now() const { return now_; }
  bool all_done() const { return flows_done_ == flows_.size(); }

  // Flows, in scenario order.
  size_t num_flows() const { return flows_.size(); }
  const FlowSpec& flow_spec(size_t f) const;
  const FlowState& flow(size_t f) const;
  // Payload bytes the flow's data source has sent so far, and its CC rate.
  uint64_t flow_tx_bytes(size_t f) const;
  uint64_t flow_cc_rate_bps(size_t f) const;
  // Destination memory equals the source pattern (flows with verify and a
  // size that fits the verification window; false otherwise).
  bool verify(size_t f) const;
  // What became of the flow's check: its memory matched or did not, or it
  // was not checked, and why (verify off with the payload moved or, the
  // default then, virtual; too large for the window; not completed).
  enum class Verification { kMatched, kCorrupt, kOff, kOffVirtual, kTooLarge, kNotDone };
  Verification verification(size_t f) const;
  // The flow's memory windows (one message for unverified flows): the
  // source pattern and what arrived. A payload = "virtual" flow leaves the
  // sink as it was set up (zeros).
  std::span<const uint8_t> source_memory(size_t f) const;
  std::span<const uint8_t> sink_memory(size_t f) const;
  // Request packets the flow's two QPs sent more than once.
  uint64_t flow_retransmits(size_t f) const;
  // The flow's QPs: data source and data sink.
  const transport::QueuePair& source_qp(size_t f) const;
  const transport::QueuePair& sink_qp(size_t f) const;

  // Nodes, in scenario order.
  size_t num_hosts() const;
  endpoint::Endpoint& host_endpoint(size_t h);
  size_t num_switches() const;
  const fabric::Switch& switch_at(size_t s) const;
  uint64_t queue_bytes(size_t s, uint16_t port, uint8_t tc) const {
    return switch_at(s).queue_bytes(port, tc);
  }
  // Switch port `p` of switch `s` faces this node ("h3", "spine1").
  const std::string& port_peer(size_t s, uint16_t p) const;
  // Link directions: 2 per scenario link ("a->b" then "b->a").
  size_t num_links() const;
  const fabric::Link& link_at(size_t l) const;
  const std::string& link_name(size_t l) const;

  // Time series, recorded every run.csv_interval. The runner stores only
  // what changed; these rows are rebuilt up to now() on each call (the
  // reference stays valid, the vector grows).
  const std::vector<FlowSample>& flow_samples() const;
  const std::vector<QueueSample>& queue_samples() const;
  const std::vector<LinkSample>& link_samples() const;
  // The same rows one at a time, from the first instant, none of them
  // kept: what the CSV files are written from (a long run's rows are
  // gigabytes).
  void each_flow_sample(const std::function<void(const FlowSample&)>& visit) const;
  void each_queue_sample(const std::function<void(const QueueSample&)>& visit) const;
  void each_link_sample(const std::function<void(const LinkSample&)>& visit) const;
  // Called after each sample is recorded (live plots, early stops).
  void set_sample_hook(std::function<void(uint64_t now)> hook) { hook_ = std::move(hook); }

  Summary summary() const;
  // flows.csv, queues.csv, links.csv, fct.csv, summary.json in `dir`
  // (created). Throws std::runtime_error when a file cannot be written.
  // The per-flow and per-link series can be left out (OutputFiles).
  void write_outputs(const std::string& dir, OutputFiles files = {}) const;
  std::string summary_json() const;

  // ---- Programmatic workloads --------------------------------------------
  // Besides the scenario's flows, a caller (droce-pktgen's collective
  // replay) can connect QPs between hosts, register memory, post work
  // requests and receive their completions, all in virtual time:
  //
  //   sim::Simulator s(scenario);            // hosts and topology, maybe no flows
  //   auto [qa, qb] = s.connect(0, 1, {.cc = "dcqcn"});
  //   auto* mr = s.reg_mr(1, buf, len);
  //   s.set_completion_handler([&](size_t host, const transport::WorkCompletion& wc) {
  //     ... s.post_send(host, *qa, wr) ...; s.pause();
  //   });
  //   s.post_send(0, *qa, wr);
  //   while (!done && s.run_until(deadline)) {}
  //
  // Completions of these QPs go to a per-host CQ (QpOptions::cq_entries)
  // and to the handler, in virtual-time order (the handler runs
  // inside run_until; it may post and pause). Flows keep working alongside.
  // Throws ScenarioError for unknown hosts, host_a == host_b, a CC name or
  // parameter the registry refuses, or a QP the transport refuses.
  QpPairRef connect(size_t host_a, size_t host_b, const QpOptions& options = {});
  // Closes a connection made by connect(host_a, host_b): both QPs leave
  // their endpoints and are destroyed (outstanding WRs flushed); frames
  // still in flight for them are dropped as for an unknown QP. Their
  // counters stay in the summary. The pointers are invalid after it.
  // Throws ScenarioError when the pair is not an open connection of those
  // hosts.
  void disconnect(size_t host_a, size_t host_b, QpPairRef pair);
  // Local write, remote write and remote read access; nullptr if refused.
  // With `iova`, the region's addresses (local SGEs and remote VAs) start
  // there instead of at the pointer (ibv_reg_mr_iova): a partitioned run
  // needs them the same in every process.
  transport::MemoryRegion* reg_mr(size_t host, void* addr, size_t length,
                                  std::optional<uint64_t> iova = {});
  int dereg_mr(size_t host, transport::MemoryRegion* mr);
  // Post on a QP of `host` (from connect) and wake the host at now().
  int post_send(size_t host, transport::QueuePair& qp, const transport::SendWr& wr);
  int post_recv(size_t host, transport::QueuePair& qp, const transport::RecvWr& wr);
  using CompletionHandler = std::function<void(size_t host, const transport::WorkCompletion&)>;
  void set_completion_handler(CompletionHandler handler) { on_completion_ = std::move(handler); }
  // Makes the running run_until() return after the current event (the
  // clock stays at that event's time; the next run_until carries on).
  void pause() { pause_ = true; }
  // Frame bytes the host's link has delivered so far (all QPs; lost frames
  // not counted).
  uint64_t host_tx_bytes(size_t h) const;

  // ---- Partitioned runs (partition.h) -------------------------------------
  // One scenario split over processes (or threads): each Simulator is built
  // from the same scenario, runs one partition and reaches the others
  // through `comm`; every partition makes the same calls in the same order.
  //
  //   s.enter_partition(comm);       // before running (connect() before or after)
  //   s.run_partitioned_until(t);    // as often as run_until(t) would be
  //   s.merge_partitions();          // partition 0 now has the whole run
  //
  // Partition 0's results are then what one process's run gives, byte for
  // byte: summary(), summary_json(), write_outputs(), flow(),
  // verification(), flow_retransmits(), link_delivered_bytes() and the
  // samples; the other partitions' are their share. Throws ScenarioError
  // when the scenario cannot be split (plan_partitions).
  void enter_partition(PartitionComm& comm);
  // Whether this partition runs host h (all do, unpartitioned): only that
  // partition may post to its QPs, and sees its completions.
  bool runs_host(size_t h) const;
  // The work a driver beside the flows has left (a collective: its
  // transfers still to complete, in this partition when split). While it
  // is above 0, flows that are all done do not end the run
  // (run.stop_when_done waits for both). Split over processes, the
  // partitions' sum reaching 0 stops run_partitioned_until early, as
  // pause() does in one process; unset, the flows stop the run. Cleared
  // with an empty function.
  void set_work(std::function<uint64_t()> left);
  // run_until(t) over the partitions: returns true right after the event
  // that left no work anywhere (the clock at its time), or when t is
  // reached with events left; false when nothing is left to do, or the
  // flows stopped the run.
  bool run_partitioned_until(uint64_t t);
  void merge_partitions();
  // The three above for a scenario's flows: to run.duration, or until
  // every flow is done. Returns the final time.
  uint64_t run_partitioned(PartitionComm& comm);
  // Frame bytes link direction l delivered (lost ones not counted).
  uint64_t link_delivered_bytes(size_t l) const;

  // Frames handled: every endpoint transmit and receive, every switch
  // arrival and departure (a 1-switch path is 4 events per packet).
  uint64_t packet_events() const { return events_; }
  // Times the routes were recomputed after link changes (run.reconverge).
  uint64_t route_updates() const { return route_updates_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<FlowState> flows_;
  size_t flows_done_ = 0;
  uint64_t now_ = 0;
  uint64_t events_ = 0;
  uint64_t route_updates_ = 0;
  // Rebuilt on demand by the accessors above.
  mutable std::vector<FlowSample> flow_samples_;
  mutable std::vector<QueueSample> queue_samples_;
  mutable std::vector<LinkSample> link_samples_;
  std::function<void(uint64_t)> hook_;
  CompletionHandler on_completion_;
  bool pause_ = false;
};

}  // namespace droce::sim
