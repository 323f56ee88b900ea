// droce-perf's test, shared by its files: the options, the data pattern,
// the QPs and peers, and class PerfTest. Its methods live by concern:
// session.cc (set-up, the out-of-band exchange, posting and polling),
// bandwidth.cc, latency.cc, and droce-perf.cc (the data check, the run, the
// command line).
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "app_options.h"
#include "droce/engine/engine.h"
#include "droce/oob/channel.h"
#include "droce/oob/fields.h"
#include "droce/options/multipath.h"
#include "droce/options/values.h"
#include "droce/telemetry/latency_histogram.h"
#include "perf/bw_report.h"

namespace droce::perf {

using droce::ConfigError;
using oob::field;
using oob::field_u64;
using oob::parse_fields;

// A runtime failure (peer vanished, completion error, data mismatch,
// timeout): "error: ..." and exit code 1. The out-of-band channel's
// oob::Error is one too; both are std::runtime_errors.
class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
using transport::Sge;
using transport::WorkCompletion;

constexpr int kExitOk = droce::kExitOk;
constexpr int kExitFailure = droce::kExitFailure;
constexpr int kExitUsage = droce::kExitConfig;
constexpr uint64_t kMaxSize = uint64_t{1} << 23;  // -a goes 2..2^23
constexpr uint16_t kDefaultOobPort = 18515;       // perftest's default
constexpr uint32_t kMaxClients = 64;              // --clients

enum class Verb : uint8_t { kWrite, kRead, kSend };
enum class Kind : uint8_t { kBw, kLat };

struct TestName {
  const char* name;
  Verb verb;
  Kind kind;
  const char* title;
};
constexpr TestName kTests[] = {
    {"write_bw", Verb::kWrite, Kind::kBw, "RDMA_Write BW Test"},
    {"read_bw", Verb::kRead, Kind::kBw, "RDMA_Read BW Test"},
    {"send_bw", Verb::kSend, Kind::kBw, "Send BW Test"},
    {"write_lat", Verb::kWrite, Kind::kLat, "RDMA_Write Latency Test"},
    {"read_lat", Verb::kRead, Kind::kLat, "RDMA_Read Latency Test"},
    {"send_lat", Verb::kSend, Kind::kLat, "Send Latency Test"},
};

struct Options {
  std::string test;
  const TestName* t = nullptr;
  bool server = false;
  std::optional<uint32_t> clients;  // server: clients served at once (default 1)
  std::string connect;
  std::string bind = "127.0.0.1";
  uint16_t oob_port = kDefaultOobPort;
  std::optional<uint64_t> size;
  std::optional<uint64_t> iters;
  double duration = 0;
  uint32_t qps = 1;
  // Bandwidth client: application threads posting and polling, the QPs
  // dealt out among them round robin, each thread with a CQ of its own.
  uint32_t threads = 1;
  bool all = false;
  bool report_gbits = false;
  uint32_t mtu = 1024;
  std::string cc = "none";
  bool check = false;
  uint32_t tx_depth = 128;
  uint32_t rx_depth = 512;
  uint32_t cq_mod = 64;
  std::string connection = "RC";
  std::string dev = "0";
  std::string ip;
  // Find the peer's MAC by ARP / neighbour discovery, as an RDMA NIC's
  // driver does from a GID, instead of taking the one the peer announced
  // out of band.
  bool resolve = false;
  double rate_gbps = 0;
  // Local ACK timeout exponent (IBA 9.7.6.1.3: 4.096 us * 2^N), perftest -u.
  uint32_t qp_timeout = 14;
  // End-to-end credits (IBA 9.7.7.2): SENDs wait for the peer's receive
  // queue instead of meeting RNR NAKs.
  bool honour_credits = false;
  double timeout = 120;
  uint32_t idle_sleep_us = 0;
  std::optional<uint32_t> poll_sleep_us;  // default: 100 (bw), 2 (lat)
  bool no_peer = false;
  // One lcore: the test's own thread runs the data path (run to
  // completion) instead of a worker thread beside it on the same CPU.
  bool run_to_completion = true;
  bool counters = false;
  uint32_t shards = 1;  // worker lcores the port's QPs are sharded over
  std::string shard_rx = "auto";  // --shard-rx
  // What the QPs' packets carry: --dscp, --ecn, --vlan, --pcp, the same
  // flags as droce-endpoint's (app_options.h).
  options::PacketMarks marks;
  // --recovery, --entropy, --entropy-paths, --flowlet-gap,
  // --reorder-tolerance as given, and parsed (validate()). The client's
  // recovery is the server's too (it travels in the HELLO); the entropy is
  // each side's own requests'.
  options::MultipathText multipath_text;
  options::Multipath multipath;
  std::string capture;  // pcap of what the port sends and receives
};

inline bool is_lat(const Options& o) { return o.t->kind == Kind::kLat; }

// ---- addresses ---------------------------------------------------------------

// ---- data pattern ------------------------------------------------------------

// Byte i of a message of `size` bytes: depends on the run's seed, the QP and
// the size, so that a stale buffer from an earlier size or run never passes.
inline uint8_t pattern_byte(uint64_t seed, uint32_t qp, uint64_t size, uint64_t i) {
  uint64_t x = seed ^ (uint64_t{qp} << 40) ^ (size * 0x9E3779B97F4A7C15ull) ^ (i >> 3);
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 29;
  return static_cast<uint8_t>(x >> (8 * (i & 7)));
}

inline void fill_pattern(uint8_t* p, uint64_t seed, uint32_t qp, uint64_t size, uint64_t len) {
  for (uint64_t i = 0; i < len; ++i) p[i] = pattern_byte(seed, qp, size, i);
}

// First differing offset, or nullopt.
inline std::optional<uint64_t> verify_pattern(const uint8_t* p, uint64_t seed, uint32_t qp,
                                              uint64_t size, uint64_t len) {
  for (uint64_t i = 0; i < len; ++i)
    if (p[i] != pattern_byte(seed, qp, size, i)) return i;
  return std::nullopt;
}

// The registered memory is written by the engine's worker thread; the app
// polls it (write_lat), so reads go through atomic_ref.
inline uint8_t load_byte(uint8_t* p) {
  return std::atomic_ref<uint8_t>(*p).load(std::memory_order_acquire);
}

inline uint8_t lat_tag(uint64_t i) { return static_cast<uint8_t>(i % 255 + 1); }

// ---- the test -----------------------------------------------------------------

struct LocalQp {
  engine::QpHandle h;
  engine::MrInfo mr;  // [0, max) source area, [max, 2 max) destination area
  uint32_t psn = 0;
};

struct RemoteQp {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t rkey = 0;
  uint64_t va = 0;   // of the peer's MR (its source area)
  uint64_t len = 0;  // of the peer's MR
};

inline const char* wc_status_name(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "WR flushed";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_OP_ERR: return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    case IBV_WC_GENERAL_ERR: return "general error";
    default: return "error";
  }
}

// The other side of this process's test: a client has one peer (its
// server); a server has one per client (--clients), each with its own OOB
// connection, QPs and data seed, all on the server's one DPDK port.
struct Peer {
  oob::Channel oob;
  uint64_t seed = 0;  // the client's: it chooses the data pattern
  wire::MacAddress mac{};
  wire::IpAddress ip;
  std::vector<LocalQp> qps;
  std::vector<RemoteQp> remote;
  // The loss recovery of the QPs with this peer: the client's (its
  // --recovery, go-back-N by default), which a server adopts: a selective
  // repeat requester needs a responder that SACKs.
  transport::Recovery recovery = transport::Recovery::kGoBackN;
  // Server, bandwidth tests: this client's progress in the current size.
  bool ended = false;    // its "SYNC end" arrived
  bool replied = false;  // and was answered
  uint64_t expected = UINT64_MAX;
  uint64_t received = 0;  // SEND: receive completions
  uint64_t t_end = 0;     // when its end line was read
  BwResult report;        // its own measurement, from its end line
};

class PerfTest {
 public:
  PerfTest(const Options& o, engine::Engine& eng, engine::PortIndex port)
      : o_(o), eng_(eng), port_(port) {
    max_size_ = o.all ? kMaxSize : size();
  }

  int run();

 private:
  uint64_t size() const { return o_.size.value_or(is_lat(o_) ? 2 : 65536); }
  uint64_t iters() const { return o_.iters.value_or(is_lat(o_) ? 1000 : 5000); }
  bool client() const { return !o_.server; }
  bool multi() const { return peers_.size() > 1; }
  // "client 1 (192.168.77.4): " before a server's message about one of
  // several clients; nothing with one peer, so one-client output is as before.
  std::string who(size_t p) const {
    return multi() ? fmt::format("client {} ({}): ", p, options::format_ip(peers_[p].ip)) : "";
  }

  [[noreturn]] void fail_timeout(const std::string& what) const {
    throw Failure(fmt::format("timed out after {} s {}", o_.timeout, what));
  }
  // `what` names the wait in the timeout message. Poll loops call this on
  // every empty poll, so they pass a callable that formats the message only
  // on timeout (formatting it every time was a third of the client loop).
  template <class What>
  void check_deadline(What&& what) const {
    if (engine::now_ns() <= deadline_ns_) return;
    if constexpr (std::is_invocable_v<What>) {
      fail_timeout(what());
    } else {
      fail_timeout(what);
    }
  }
  void arm_deadline() {
    deadline_ns_ = engine::now_ns() + static_cast<uint64_t>(o_.timeout * 1e9);
  }

  void setup();
  void exchange();
  void hello_from(Peer& p, const std::string& line);
  void recovery_from(Peer& p, const oob::Fields& kv);
  void exchange_qps(Peer& p);
  void connect_qps();
  // A barrier with every peer: a server hears all its clients, then answers.
  void barrier_all(const std::string& tag);
  void print_header() const;
  void print_addresses() const;

  void post_send_or_fail(const LocalQp& q, const transport::SendWr& wr);
  void post_recv_or_fail(const LocalQp& q, uint64_t wr_id);
  // Polls completions; returns how many, with wc_peer_[i] / wc_qp_[i] the
  // peer and its local QP index.
  size_t poll();
  void require_ok(const WorkCompletion& wc) const;

  bool run_size(uint64_t size);
  void bw_client(uint64_t size);
  // What one client thread's QPs did in one size: messages completed and,
  // per poll that found some, (time, messages done so far).
  struct BwPart {
    uint64_t done = 0;
    std::vector<std::pair<uint64_t, uint64_t>> events;
  };
  // The QPs q with q % stride == first, their completions from `cq` (none:
  // the port's CQ, through poll()).
  BwPart bw_client_part(uint64_t size, size_t first, size_t stride, engine::CqHandle cq,
                        uint64_t t0);
  void bw_server(uint64_t size);
  bool bw_server_step(Peer& p, uint64_t size, bool send);
  void print_server_rows(uint64_t size, uint64_t t_start) const;
  void lat_run(uint64_t size);
  void lat_end(uint64_t size, uint64_t done, bool client_ended,
               const telemetry::LatencyHistogram& hist);
  bool verify_after(uint64_t size);
  std::string check_peer(const Peer& p, uint64_t size) const;

  void print_lat_row(uint64_t size, uint64_t iters, const telemetry::LatencyHistogram& h) const;

  transport::SendWr make_wr(const Peer& p, size_t q, uint64_t wr_id, bool signaled) const;

  const Options& o_;
  engine::Engine& eng_;
  engine::PortIndex port_;
  uint64_t max_size_ = 0;
  uint64_t seed_ = 0;
  uint64_t deadline_ns_ = UINT64_MAX;
  wire::MacAddress mac_{};
  wire::IpAddress ip_;
  std::vector<Peer> peers_;
  std::map<uint32_t, std::pair<size_t, size_t>> qp_index_;  // QPN -> (peer, QP)
  std::vector<WorkCompletion> wc_;
  std::vector<engine::PortIndex> wc_port_;
  std::vector<size_t> wc_peer_;
  std::vector<size_t> wc_qp_;
  std::vector<engine::CqHandle> thread_cqs_;  // --threads: one per client thread
};

// --ip, or the default of each side.
inline std::string local_ip(const Options& o) {
  return o.ip.empty() ? (o.server ? "192.168.77.1" : "192.168.77.2") : o.ip;
}

// Local SGE: WRITE and SEND gather from the source area, READ scatters into
// the destination area.
inline transport::Sge local_sge(const LocalQp& q, Verb v, uint64_t max_size, uint64_t size) {
  return transport::Sge{q.mr.iova + (v == Verb::kRead ? max_size : 0),
                        static_cast<uint32_t>(size), q.mr.lkey};
}

}  // namespace droce::perf
