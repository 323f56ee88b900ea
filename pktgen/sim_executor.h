// The virtual-time executor of collective schedules: runs a
// pktgen::Schedule over RC QPs between simulator hosts, so congestion
// control, the switch model and loss recovery are all in the loop.
//
// Each Transfer is one RDMA WRITE from the source rank's registered buffer
// (src_offset) into the destination rank's buffer (dst_offset), with
// immediate for the last chunk of a step's message. A transfer is posted
// the moment every transfer it depends on has completed.
//
// Completion = the sender's WRITE completion. The responder ACKs a WRITE
// only after placing its data (IBA 9.7.5.1), so when the requester sees the
// completion the bytes are in the destination buffer: the receiver's action
// (VerifyBuffers::apply_landed: the reduction for kReduce) is applied then,
// and dependents are released then. This is the sender completion used as a
// proxy for the receiver's knowledge; a real receiver learns from the
// WRITE-with-immediate receive completion, about half an RTT earlier. Those
// receive completions are consumed and counted (imm_received, imm_bad) but
// do not gate anything.
//
// That is the sender trigger (Trigger::kSender), where a completion at one
// host releases a transfer at another in the same nanosecond. With the
// receiver trigger each rank acts only on what reaches it, as NCCL's ranks
// do: its own WRITEs' completions; WRITEs that arrive at it (every transfer
// is a WRITE with immediate carrying its id, and the receiver applies the
// action on the receive completion); and, for what the destination must
// have done first (the target range read out or filled by other
// transfers), a credit from the destination: a zero-length SEND with
// immediate (the transfer's id) on the same QP, as NCCL's receiver posts
// its buffer to the sender. Every signal then crosses the simulated
// network, so the replay also runs split over processes (sim/partition.h).
//
// Channels: C QPs per rank pair (one RC QP pair per unordered pair and
// channel, used in both directions), created on first use and kept across
// sizes, as a communicator keeps its connections (and their CC state).
//
// An all-to-all with a window (ScheduleParams::window) keeps no
// connections: each transfer goes over a QP pair of its own, made when it
// is posted and closed when it completes, as with a dynamically connected
// transport, so at most ranks x window x a message's transfers are open
// and a run of thousands of ranks does not hold a QP pair per rank pair.
// Each starts with fresh congestion-control state. One process, the
// sender trigger.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "droce/pktgen/index_lists.h"
#include "droce/pktgen/report.h"
#include "droce/pktgen/schedule.h"
#include "droce/pktgen/verify.h"
#include "droce/sim/simulator.h"
#include "droce/transport/zeroed_array.h"

namespace droce::pktgen {

struct SimTraceEvent {
  enum class Kind : uint8_t { kPost, kComplete };
  Kind kind = Kind::kPost;
  uint64_t time_ns = 0;
  uint32_t iteration = 0;  // 0-based, warm-up iterations first
  uint32_t transfer = 0;   // Transfer::id
};

enum class Trigger : uint8_t { kSender, kReceiver };

struct SimExecutorOptions {
  sim::QpOptions qp;
  Trigger trigger = Trigger::kSender;
  // A partitioned run: the simulator has entered a partition of `comm`
  // (Simulator::enter_partition) and each partition posts its own ranks'
  // transfers. Needs the receiver trigger. Partition 0's SizeRun is the
  // whole run's; the other partitions' timings are their share.
  sim::PartitionComm* comm = nullptr;
  bool verify = false;      // real float32 data; the last iteration of a size is checked
  uint32_t iters = 1;       // timed iterations per size
  uint32_t warmup = 0;      // untimed iterations before them
  // Keep every timed transfer's latency in SizeRun::transfer_latencies
  // (droce-pktgen's transfers.csv). Without it only the histograms of
  // SizeRun::stats hold them: 16 bytes per transfer and timed iteration
  // less, 0.7 GB for a 1024-rank ring's 20 iterations.
  bool keep_transfer_latencies = true;
  // Each connection's queues as deep as the schedule can fill them, up to
  // qp's depths (the run is the same; see size_queues). false: every QP at
  // qp's depths.
  bool size_queues = true;
  // An iteration that has not finished after this much virtual time is
  // abandoned (stalled: a QP went to the error state, or a bug).
  uint64_t iteration_timeout_ns = 10'000'000'000ull;
  // Every post and completion, in virtual-time order (tests).
  std::function<void(const SimTraceEvent&)> trace;
};

// One iteration's timing, for time series.
struct IterationRecord {
  uint32_t iteration = 0;
  bool warmup = false;
  uint64_t start_ns = 0, end_ns = 0;
  int64_t wrong = -1;  // -1: not the checked iteration
  bool stalled = false;  // did not finish: end_ns is its last completion
  uint64_t jct_ns() const { return end_ns - start_ns; }
};

struct SizeRun {
  // The timed iterations that finished; stats.stalled() counts the one
  // that did not (warm-up or timed; the size stops there).
  IterationStats stats;
  std::vector<IterationRecord> iterations;  // warm-up and timed, stalled included
  // Per-transfer latencies of the finished timed iterations: (step, ns);
  // empty unless SimExecutorOptions::keep_transfer_latencies.
  std::vector<std::pair<uint32_t, uint64_t>> transfer_latencies;
  int64_t wrong = -1;         // verify: #wrong of the checked (last) iteration
  uint64_t failed_wrs = 0;    // completions with an error status
  uint64_t imm_received = 0;  // WRITE-with-immediate receive completions
  uint64_t imm_bad = 0;       // ... whose immediate matched no expected one
  uint64_t credits = 0;       // receiver trigger: credits received
  // With a window: the connections made (one per transfer and iteration)
  // and the most open at once.
  uint64_t connections = 0, connections_open_max = 0;
  bool stalled = false;
  uint64_t start_ns = 0, end_ns = 0;
};

class SimExecutor {
 public:
  // rank_host[r] is the simulator host of rank r. The simulator must
  // outlive the executor; the executor installs its completion handler.
  SimExecutor(sim::Simulator& sim, std::vector<uint32_t> rank_host, SimExecutorOptions options);
  ~SimExecutor();
  SimExecutor(const SimExecutor&) = delete;
  SimExecutor& operator=(const SimExecutor&) = delete;

  // Runs warm-up + timed iterations of the schedule, back to back.
  // Throws std::invalid_argument when the schedule needs more ranks than
  // rank_host has, its dependencies are missing or out of order
  // (check_dependencies), a transfer is larger than an RC message may be,
  // (receiver trigger) a transfer waits for one between two other ranks,
  // or it has a window and the run is split or has the receiver trigger.
  SizeRun run(const Schedule& schedule);

  // QPs created so far (rank pairs x channels, two QPs each).
  size_t num_qp_pairs() const { return qps_.size(); }
  // Bytes of their work queues (transport::QueuePair::queue_bytes).
  size_t queue_bytes() const;

 private:
  struct QpSide {
    transport::QueuePair* qp = nullptr;
    QpSide* peer = nullptr;  // the other rank's side of the connection
    uint32_t host = 0;
    uint32_t index = 0;  // in sides_
    // Transfers (and credits: kCreditBit) the send queue had no room for.
    std::vector<uint32_t> backlog;
    size_t backlog_head = 0;
    // Receiver trigger, this iteration: messages that arrive here, and
    // receive WRs posted and consumed.
    uint32_t recv_expected = 0, recv_posted = 0, recv_done = 0;
  };
  struct Conn {
    QpSide side[2];          // [0]: the lower rank's QP (a window's: the sender's)
    uint32_t transfers = 0;  // the schedule's, both ways (size_queues)
    // The two sides on their hosts, each the other's peer (QPs not made).
    void join(uint32_t host0, uint32_t host1) {
      side[0].host = host0;
      side[1].host = host1;
      side[0].peer = &side[1];
      side[1].peer = &side[0];
    }
  };
  bool receiver() const { return opt_.trigger == Trigger::kReceiver; }
  bool windowed() const { return s_ && s_->params.window > 0; }
  void open_connection(uint32_t id);
  void close_connection(uint32_t id);
  bool local(uint32_t rank) const { return sim_.runs_host(rank_host_[rank]); }
  Conn& conn_for(uint32_t src, uint32_t dst, uint32_t channel);
  void size_queues();
  void register_buffers(const Schedule& s, uint64_t max_bytes);
  void plan_receiver_trigger(const Schedule& s);
  void start_iteration();
  bool wait_iteration(uint64_t deadline);
  void gather_latencies(IterationRecord& rec);
  uint64_t wrong_now();
  uint64_t summed(uint64_t mine);
  void gather_counters(SizeRun& result);
  void post(uint32_t id);
  void enqueue(QpSide& side, uint32_t entry);
  bool try_post(QpSide& side, uint32_t entry);
  void drain(QpSide& side);
  void top_up_recvs(QpSide& side);
  void release(uint32_t id);
  void credit_step(uint32_t id);
  void on_completion(const transport::WorkCompletion& wc);
  void on_receive(const transport::WorkCompletion& wc);
  void on_sent(const transport::WorkCompletion& wc);

  sim::Simulator& sim_;
  std::vector<uint32_t> rank_host_;
  SimExecutorOptions opt_;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, Conn> qps_;
  std::vector<QpSide*> sides_;
  std::vector<Conn*> conns_;  // in the order made

  // Per run() / iteration.
  const Schedule* s_ = nullptr;
  std::unique_ptr<VerifyBuffers> verify_;
  // Buffers without verify: anonymous pages (memory/zeroed_memory.h)
  // that nothing writes (their MRs carry virtual payload: no byte moves),
  // so they take no memory. calloc gave heap memory it had to clear once
  // glibc's mmap threshold had risen past their size: 8192 ranks' windows
  // then took a gigabyte.
  std::vector<transport::ZeroedArray<uint8_t>> plain_;
  std::vector<uint8_t*> base_;
  std::vector<uint64_t> window_;  // usable bytes of base_[r]
  std::vector<transport::MemoryRegion*> mr_;
  // What each transfer's completion at its sender releases (the sender
  // trigger: every dependent); with the receiver trigger, also what its
  // arrival releases. Entries with kCreditBit count down a credit instead.
  IndexLists dependents_, after_arrival_;
  std::vector<uint32_t> remaining_, remaining_at_start_;
  std::vector<uint32_t> credit_left_, credits_at_start_;  // receiver trigger
  uint64_t local_total_ = 0;  // transfers this partition posts (all, unsplit)
  std::vector<uint64_t> posted_at_;
  // Each transfer's sending side, as its index in sides_ (half a pointer:
  // an 8192-rank ring has 134 M transfers).
  std::vector<uint32_t> side_index_;
  // With a window: each posted transfer's own connection, side[0] its
  // sender's, until it completes.
  std::unordered_map<uint32_t, std::unique_ptr<Conn>> open_;
  QpSide& side_of(uint32_t id) const {
    return windowed() ? open_.at(id)->side[0] : *sides_[side_index_[id]];
  }
  uint64_t completed_ = 0;
  uint32_t iteration_ = 0;
  bool timed_ = false;
  bool checking_ = false;  // verify mode, the checked (last) iteration
  SizeRun* run_ = nullptr;
  uint64_t last_completion_ns_ = 0;
  // This iteration's transfer latencies, with when and which.
  struct Latency {
    uint64_t at_ns = 0;
    uint32_t id = 0, step = 0;
    uint64_t ns = 0;
  };
  std::vector<Latency> iteration_latencies_;
};

}  // namespace droce::pktgen
