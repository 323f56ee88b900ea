// The NIC without its I/O (docs/DESIGN.md "Data path"): given `now` and
// received frames, it parses them, dispatches by destination QPN, runs due
// timers, and fills transmit buffers with what each QP's rate and window and
// the port's link rate allow. The DPDK engine hands it mbuf data areas; the
// simulator hands it plain buffers. Single-threaded: one endpoint per lcore.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "droce/cc/algorithm.h"
#include "droce/endpoint/cc_binding.h"
#include "droce/endpoint/counters.h"
#include "droce/endpoint/doorbell.h"
#include "droce/endpoint/ip_interface.h"
#include "droce/endpoint/qpn_table.h"
#include "droce/endpoint/timing_wheel.h"
#include "droce/transport/device.h"
#include "droce/transport/qp.h"
#include "droce/wire/int.h"
#include "droce/wire/pfc.h"
#include "droce/wire/tx_template.h"

namespace droce::endpoint {

struct EndpointConfig {
  // The port's link rate: frames leave no faster than this (a vdev can so
  // emulate a 10/25/100/400 G link). 0 = unlimited.
  uint64_t port_rate_bytes_per_sec = 100'000'000'000ull / 8;
  // Bytes a frame occupies on the wire beyond its own length: preamble and
  // SFD (8), FCS (4), inter-frame gap (12).
  uint32_t wire_overhead_bytes = 24;
  uint64_t pacer_granularity_ns = 64;
  // How far ahead of `now` the port and each QP's pacer may be booked.
  // 0 books exactly, as virtual time needs. A real-time poll loop reads its
  // clock once per iteration; booking exactly, the next frame's start is
  // always after that reading, so a port (or QP) sent one frame per loop
  // iteration. With a run-ahead the average rate is the same and a burst
  // is at most this long at line rate.
  uint64_t tx_run_ahead_ns = 0;
  // Link time a late poll loop lost while frames waited, reclaimed up to
  // this much. A NIC's TX ring keeps its link busy while the host is
  // descheduled for a moment; a vdev has no ring, so a loop that stalls (a
  // shared CPU, an interrupt) for longer than the run-ahead lost that link
  // time for good and the average fell below the rate: droce-perf capped
  // at 4 Gb/s, its control thread and worker sharing one CPU, moved 2.1.
  // So the port, and each QP's pacer, book a frame from when it could have
  // started: the end of the one before, or when the work began to wait,
  // if at most this long ago (pacing_start in cc_binding.h). Idle time
  // (nothing waiting) and PFC pauses are never reclaimed. 0 books from
  // `now` (the simulator: virtual time is never late).
  uint64_t tx_catch_up_ns = 0;
  uint32_t pacer_slots = 4096;
  // Frames a QP may send in a row before the next QP with work gets its
  // turn (round robin). 1 interleaves frame by frame, as the simulator
  // keeps it; a larger turn lets a QP build its frames in one go, with
  // their ICRCs computed together (a poll loop on a port: the engine).
  uint32_t tx_frames_per_turn = 1;
  // The requester's runs (QueuePair::produce_run): new SEND and WRITE
  // packets built in a row from the QP's send template. Off: every frame
  // through produce_request (the same frames, slower; for comparison in
  // tests and benches, as header_prediction is on the receive side).
  bool tx_runs = true;
  // Honour IEEE 802.1Qbb PFC frames from the switch: a QP whose priority is
  // paused sends nothing until the pause expires or XON arrives. A QP's
  // priority is its VLAN PCP when tagged, else DSCP >> 3 (the class-selector
  // bits, as the switch model classifies by default).
  bool honour_pfc = true;
  // Echo INT records (HPCC, Li et al. SIGCOMM 2019 section 3.2) from the
  // last data packet of a QP on the ACKs it sends back.
  bool echo_int = true;
  // Header prediction in receive_burst (wire/rx_template.h): a plain RDMA
  // WRITE packet is matched against its QP's header template instead of being
  // parsed. Off: every frame is parsed (the same effects, slower; for
  // comparison in tests and benches).
  bool header_prediction = true;
  // The port's addresses, VLAN and MAC for ARP, neighbour discovery and
  // ICMP echo (ip_interface.h). With addresses, a connected QP whose path
  // has an IP address but no MAC (all zeros) is resolved before its first
  // frame: its WRs wait, and fail with IBV_WC_RETRY_EXC_ERR if the peer
  // never answers. Without, nothing changes.
  InterfaceConfig interface;
};

class Endpoint {
 public:
  Endpoint(transport::Device& device, const EndpointConfig& config);
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // Puts `qp` under this endpoint's scheduler with its own congestion
  // control instance (cc::make_algorithm). Installs the QP's CC hooks.
  void attach(transport::QueuePair& qp, std::unique_ptr<cc::Algorithm> cc);
  // Control plane: post a send WR and wake the QP's scheduling.
  int post_send(transport::QueuePair& qp, const transport::SendWr& wr);
  // Wake a QP after anything changed it from outside the data path.
  void notify(uint32_t qpn);
  // Any thread, after posting to a QP of this endpoint (QueuePair's work
  // queues are shared with posters): the next transmit() takes its work.
  void ring(DoorbellNode& n) { doorbells_.ring(n); }
  // Takes the rung QPs now (transmit() does it first).
  void take_doorbells();
  bool doorbells_pending() const { return doorbells_.maybe_pending(); }
  // Takes `qpn` out of the scheduler (its rounds, timers, pauses), before
  // the Device destroys the QP.
  void detach(uint32_t qpn);

  // One received frame (no FCS): RoCEv2, RoCEv2 carrying INT, or PFC. Bad
  // input is counted and dropped. `unheld`: the payload the frame carries
  // as a length only (wire/icrc.h; the simulator's virtual payload).
  void receive(std::span<const uint8_t> frame, uint64_t now, wire::UnheldPayload unheld = {});
  // The same for a burst, in order, with the same counters and effects as
  // receive() frame by frame. Plain RoCEv2 frames are parsed first (an
  // RDMA WRITE packet its QP predicts, by a compare against the QP's header
  // template instead), then their ICRCs checked in one pass (independent
  // CRC chains the CPU overlaps), then delivered; anything else (PFC, INT,
  // a frame that fails a check or that its QP turns down) goes through
  // receive() at its place in the order.
  void receive_burst(std::span<const std::span<const uint8_t>> frames, uint64_t now);
  static constexpr size_t kRxBatch = 32;
  static constexpr size_t kRxBatchBytes = 16 * 1024;

  // Runs due timers and writes up to bufs.size() frames, one per buffer,
  // their lengths into lens. Returns how many were written.
  size_t transmit(uint64_t now, std::span<const std::span<uint8_t>> bufs,
                  std::span<uint32_t> lens);
  // The same, for a caller that carries each frame's unheld payload with it
  // (the simulator): virtual payload (transport::MemoryRegion) is then not
  // read for the ICRC, and unheld[i] says where frame i's is (empty: none).
  // Writes at most unheld.size() frames.
  size_t transmit(uint64_t now, std::span<const std::span<uint8_t>> bufs,
                  std::span<uint32_t> lens, std::span<wire::UnheldPayload> unheld);

  // When transmit() next has something to do: timers, pacer, port, the end
  // of a PFC pause.
  // UINT64_MAX when idle until a frame arrives or a WR is posted.
  uint64_t next_deadline() const;

  const EndpointCounters& counters() const { return counters_; }
  // PFC state, for tests and telemetry.
  bool paused(uint8_t priority, uint64_t now) const {
    return pause_[priority & 7].paused(now);
  }
  // Total time `priority` has been paused by PFC frames, up to `now`: from
  // each XOFF until XON or the pause running out, a refresh extending it.
  // Counts whether or not a QP was waiting (as Switch::paused_ns does for
  // a switch's egress); 0 unless the endpoint honours PFC.
  uint64_t paused_ns(uint8_t priority, uint64_t now) const;
  // The port's link went down at `now`: PFC state lives on the link (IEEE
  // 802.1Qbb), so every pause ends there, as an XON for all priorities
  // would end it. QPs held by a pause send again at the next transmit().
  void link_down(uint64_t now);
  // The port came up: announce its addresses (IpInterface::announce).
  void announce(uint64_t now) { interface_.announce(now); }
  const IpInterface& interface() const { return interface_; }
  // ping from the port (IpInterface::ping); replies in take_ping_replies.
  void ping(const wire::IpAddress& dst, uint16_t sequence, uint64_t now) {
    interface_.ping(dst, sequence, now);
  }
  void take_ping_replies(std::vector<IpInterface::PingReply>& out) {
    interface_.take_ping_replies(out);
  }
  CcBinding* cc_of(uint32_t qpn);
  transport::Device& device() { return device_; }

 private:
  // One per attached QP; the small fields last, packed (40 bytes).
  struct QpSlot {
    transport::QueuePair* qp = nullptr;
    std::unique_ptr<CcBinding> cc;
    uint64_t timer_filed = UINT64_MAX;  // deadline filed in timers_
    // Hops of the last INT-stamped packet received, echoed on the next ACK;
    // allocated with the first such packet (most QPs never see INT).
    std::unique_ptr<std::array<wire::IntHop, wire::kIntDefaultMaxHops>> echo;
    // Its doorbell while drained and not yet re-armed (take_doorbells,
    // park): posts to the QP ring nothing meanwhile.
    DoorbellNode* doorbell = nullptr;
    uint8_t echo_count = 0;
    static_assert(wire::kIntDefaultMaxHops <= UINT8_MAX);
    bool active = false;        // in active_ (has or may have work)
    uint8_t priority = 0;       // PFC priority of the QP's traffic
    bool needs_int = false;     // its CC steers by INT (cc::AlgorithmInfo)
    // The peer's MAC: given (or no interface to resolve it), to be looked
    // up, waiting for the neighbour cache, or taken from it.
    enum class Mac : uint8_t { kGiven, kToResolve, kWaiting, kResolved };
    Mac mac = Mac::kGiven;
  };
  QpSlot* slot(uint32_t qpn);
  // The slot whose header template `frame` matches (filling `w`), or null.
  QpSlot* predict(std::span<const uint8_t> frame, wire::PredictedWrite& w);
  void activate(QpSlot& s);
  // Out of active_ with nothing to send: its doorbell, if held, is re-armed
  // and the QP looked at once more (it goes back in line if work came).
  void park(QpSlot& s, uint64_t now);
  void file_timer(uint32_t qpn, QpSlot& s);
  uint64_t slot_deadline(const QpSlot& s) const;
  void run_timers(uint64_t now);
  void receive_pfc(std::span<const uint8_t> frame, uint64_t now);
  // receive() for a frame already counted in rx_frames and rx_bytes.
  void receive_counted(std::span<const uint8_t> frame, uint64_t now,
                       wire::UnheldPayload unheld = {});
  // Takes the INT header off `frame` into scratch_; returns the plain frame
  // (empty if it was not usable) and fills the hops. The unheld payload's
  // bytes are not copied.
  std::span<const uint8_t> strip_int(std::span<const uint8_t> frame, size_t& hop_count,
                                     bool& echo, wire::UnheldPayload unheld);
  void deliver(const wire::ParsedPacket& pkt, uint64_t now, size_t hop_count, bool echo);
  // deliver() in two steps: the packet to its QP (the slot, or null for an
  // unknown QPN), then the QP's wake-up (round robin and timer wheel).
  QpSlot* deliver_to_qp(const wire::ParsedPacket& pkt, uint64_t now, size_t hop_count,
                        bool echo);
  void schedule_slot(QpSlot& s, uint64_t now);
  void maybe_echo_int(QpSlot& s, std::span<uint8_t> buf, uint32_t& len);
  void release_paused(uint64_t now);
  // Neighbour resolution of QPs whose path has no MAC.
  void classify_mac(QpSlot& s);
  bool peer_mac_ready(QpSlot& s, uint64_t now);
  void on_interface_events();
  size_t emit_control(uint64_t now, std::span<const std::span<uint8_t>> bufs,
                      std::span<uint32_t> lens);
  void book_port(uint32_t len, uint64_t now);
  // The link time of a frame of `len` bytes at the port rate, remembered
  // for the last length (a run of one QP's frames is mostly one length).
  uint64_t port_time_ns(uint32_t len);
  // How many frames of a QP with this path MTU the port lets go now, at
  // least 1 (transmit's loop checked the port before asking).
  size_t port_frames(uint64_t now, uint32_t mtu);

  transport::Device& device_;
  EndpointConfig config_;
  EndpointCounters counters_;
  QpnTable<QpSlot> slots_;  // slots never move while attached
  DoorbellQueue doorbells_;
  std::deque<QpSlot*> active_;   // round robin over QPs with work
  TimingWheel pacer_;            // QPs waiting for their CC rate
  TimingWheel timers_;           // QPs with a transport or CC timer
  // QPs detached since the wheels last dropped their entries (detach()).
  size_t detached_since_sweep_ = 0;
  uint64_t port_free_ns_ = 0;    // the link is busy until then
  uint32_t port_time_len_ = 0;   // port_time_ns's last length ...
  uint64_t port_time_ = 0;       // ... and its time
  uint32_t port_frames_mtu_ = 0;  // port_frames's last MTU ...
  uint64_t port_frames_time_ = 1; // ... and its largest frame's time
  // ICRCs of the frames a transmit() built from send templates.
  wire::IcrcBatch tx_icrc_;
  // Frames have waited for the port since then (UINT64_MAX: none did).
  uint64_t port_backlog_since_ = UINT64_MAX;
  std::vector<uint32_t> due_;
  std::array<wire::PauseTimer, wire::kPfcPriorities> pause_;  // PFC, per priority
  std::array<std::vector<QpSlot*>, wire::kPfcPriorities> held_;  // by PFC
  uint8_t held_mask_ = 0;  // bit p: held_[p] is not empty (read per event)
  // INT frames are stripped here (made at the first one); a frame longer
  // than this is counted bad.
  static constexpr size_t kIntScratchBytes = 16384;
  std::vector<uint8_t> scratch_;
  std::array<wire::IntHop, wire::kIntDefaultMaxHops> hops_{};
  // Per-frame scratch kept here rather than on the stack: both are a few
  // hundred bytes whose zero-initialisation per frame showed in profiles.
  // receive_burst's (9 KiB) is made at the first burst: an endpoint handed
  // its frames one at a time, as the simulator's thousands are, never
  // needs it.
  wire::ParsedPacket rx_packet_;
  struct RxBurstScratch {
    std::array<wire::ParsedPacket, kRxBatch> parsed;
    std::array<wire::PredictedWrite, kRxBatch> predicted;
    std::array<wire::IcrcCheck, kRxBatch> checks;
  };
  std::unique_ptr<RxBurstScratch> rx_burst_;
  QpSlot* rx_last_predicted_ = nullptr;  // the slot of the last predicted frame
  cc::IntRecord int_record_;
  IpInterface interface_;
  // QPs waiting for each address to resolve.
  std::unordered_map<wire::IpAddress, std::vector<uint32_t>, NeighbourCache::KeyHash> waiting_;
  std::vector<IpInterface::Event> events_;
};

}  // namespace droce::endpoint
