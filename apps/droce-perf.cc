// droce-perf: perftest-style bandwidth and latency tests between two droce
// processes (ib_write_bw, ib_read_bw, ib_send_bw, ib_write_lat, ib_read_lat,
// ib_send_lat), with perftest's flags where they apply and its output
// columns. Set-up is out of band over TCP, as perftest does: the client
// connects to the server, both exchange QPN, PSN, MAC, IP, rkey, VA and
// buffer size, then meet at a barrier before and after every measurement.
//
//   droce-perf [EAL options] -- --test write_bw --server [options]
//   droce-perf [EAL options] -- --test write_bw --connect 127.0.0.1 [options]
//
// The client is the requester of every test; in the latency tests of WRITE
// and SEND both sides take turns (ping-pong) and report half the round trip,
// as perftest does. See docs/DROCE-PERF.md.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <rte_ethdev.h>
#include <sys/prctl.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "app_options.h"
#include "droce/engine/app_main.h"
#include "droce/engine/engine.h"
#include "droce/options/values.h"
#include "droce/telemetry/latency_histogram.h"
#include "perf/bw_report.h"
#include "perf/oob.h"

namespace droce::perf {

namespace {

using droce::ConfigError;
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
  uint64_t rate_gbps = 0;
  // Local ACK timeout exponent (IBA 9.7.6.1.3: 4.096 us * 2^N), perftest -u.
  uint32_t qp_timeout = 14;
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
  std::string capture;  // pcap of what the port sends and receives
};

bool is_lat(const Options& o) { return o.t->kind == Kind::kLat; }

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

void fill_pattern(uint8_t* p, uint64_t seed, uint32_t qp, uint64_t size, uint64_t len) {
  for (uint64_t i = 0; i < len; ++i) p[i] = pattern_byte(seed, qp, size, i);
}

// First differing offset, or nullopt.
std::optional<uint64_t> verify_pattern(const uint8_t* p, uint64_t seed, uint32_t qp,
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

const char* wc_status_name(ibv_wc_status s) {
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
  Oob oob;
  uint64_t seed = 0;  // the client's: it chooses the data pattern
  wire::MacAddress mac{};
  wire::IpAddress ip;
  std::vector<LocalQp> qps;
  std::vector<RemoteQp> remote;
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
std::string local_ip(const Options& o) {
  return o.ip.empty() ? (o.server ? "192.168.77.1" : "192.168.77.2") : o.ip;
}

void PerfTest::setup() {
  mac_ = eng_.port_mac(port_);
  ip_ = options::parse_ip("ip", local_ip(o_));
  std::mt19937_64 rng(std::random_device{}());
  peers_.resize(o_.server ? o_.clients.value_or(1) : 1);
  if (client() && o_.threads > 1) {
    // Each thread's CQ holds every completion its QPs can have unpolled.
    const uint32_t per_thread = (o_.qps + o_.threads - 1) / o_.threads;
    for (uint32_t t = 0; t < o_.threads; ++t)
      thread_cqs_.push_back(eng_.create_cq((o_.tx_depth + 1 + o_.rx_depth) * per_thread));
  }
  for (size_t p = 0; p < peers_.size(); ++p) {
    for (uint32_t i = 0; i < o_.qps; ++i) {
      engine::QpSpec spec;
      if (!thread_cqs_.empty()) spec.send_cq = spec.recv_cq = thread_cqs_[i % o_.threads];
      spec.type = o_.connection == "UC" ? transport::QpType::kUc : transport::QpType::kRc;
      spec.caps.max_send_wr = o_.tx_depth + 1;
      spec.caps.max_recv_wr = o_.rx_depth;
      spec.cc = o_.cc;
      LocalQp q;
      q.h = eng_.create_qp(port_, spec);
      engine::MrSpec mr;
      mr.length = 2 * max_size_;
      q.mr = eng_.reg_mr(port_, mr);
      q.psn = static_cast<uint32_t>(rng()) & 0xFFFFFF;
      qp_index_[q.h.qpn] = {p, peers_[p].qps.size()};
      peers_[p].qps.push_back(q);
    }
  }
  seed_ = rng();
  peers_[0].seed = seed_;  // a client's own; a server adopts each client's
  wc_.resize(256);
  wc_port_.resize(256);
  wc_peer_.resize(256);
  wc_qp_.resize(256);
}

// Client speaks first: its HELLO carries the test parameters, which the
// server adopts (perftest wants both sides given the same flags; here the
// server only has to agree on the test and the connection type).
void PerfTest::exchange() {
  if (o_.no_peer) {
    Peer& p = peers_[0];
    p.mac = {0x02, 0, 0, 0, 0, 0x02};
    p.ip = options::parse_ip("ip", ip_.v6 ? "fd00::2" : "192.168.77.254");
    for (size_t i = 0; i < p.qps.size(); ++i)
      p.remote.push_back(RemoteQp{static_cast<uint32_t>(0x100 + i), 0, 0x100, 0,
                                  2 * max_size_});
    return;
  }
  const std::string hello = fmt::format(
      "HELLO v=1 test={} conn={} size={} all={} qps={} mtu={} check={} seed={} mac={} ip={}",
      o_.t->name, o_.connection, size(), o_.all ? 1 : 0, o_.qps, o_.mtu, o_.check ? 1 : 0,
      seed_, options::format_mac(mac_), options::format_ip(ip_));
  if (client()) {
    Peer& p = peers_[0];
    p.oob.connect_to(o_.connect, o_.oob_port, o_.timeout);
    p.oob.send_line(hello);
    hello_from(p, p.oob.recv_line(o_.timeout, "HELLO"));
    exchange_qps(p);
    return;
  }
  // The server accepts its clients one after the other; the listening
  // socket stays open meanwhile, so later clients wait in its backlog.
  Listener listener(o_.bind, o_.oob_port, static_cast<int>(peers_.size()));
  for (size_t i = 0; i < peers_.size(); ++i) {
    Peer& p = peers_[i];
    p.oob = listener.accept(o_.timeout);
    try {
      hello_from(p, p.oob.recv_line(o_.timeout, "HELLO"));
      p.oob.send_line(hello);
      exchange_qps(p);
    } catch (const Failure& e) {
      if (!multi()) throw;
      throw Failure(fmt::format("client {}: {}", i, e.what()));
    }
    // The clients share the server's port; the fabric in between (e.g.
    // droce-switch) tells them apart by address.
    for (size_t j = 0; j < i; ++j)
      if (peers_[j].ip == p.ip)
        throw Failure(fmt::format("clients {} and {} both use IP {}: give each client its own "
                                  "--ip",
                                  j, i, options::format_ip(p.ip)));
  }
}

void PerfTest::hello_from(Peer& p, const std::string& peer) {
  if (peer.rfind("HELLO ", 0) != 0) throw Failure(fmt::format("peer said '{}'", peer));
  auto kv = parse_kv(peer);
  if (kv["test"] != o_.t->name)
    throw Failure(fmt::format("the peer runs --test {}, this side --test {}", kv["test"],
                              o_.t->name));
  if (kv["conn"] != o_.connection)
    throw Failure(fmt::format("the peer uses -c {}, this side -c {}", kv["conn"],
                              o_.connection));
  if (kv_u64(kv, "qps") != o_.qps)
    throw Failure(fmt::format("the peer uses -q {}, this side -q {}", kv["qps"], o_.qps));
  if (kv_u64(kv, "all") != (o_.all ? 1u : 0u) || kv_u64(kv, "size") != size())
    throw Failure(fmt::format("the peer uses {} bytes, this side {} bytes (give the same "
                              "-s / -a to both)",
                              kv_u64(kv, "all") ? "-a" : kv["size"],
                              o_.all ? "-a" : std::to_string(size())));
  if (kv_u64(kv, "mtu") != o_.mtu)
    throw Failure(fmt::format("the peer uses -m {}, this side -m {}", kv["mtu"], o_.mtu));
  if (kv_u64(kv, "check") != (o_.check ? 1u : 0u))
    throw Failure("give --check to both sides or to neither");
  // The data seed is the client's.
  if (o_.server) p.seed = kv_u64(kv, "seed");
  if (!options::try_parse_mac(kv["mac"], p.mac))
    throw Failure(fmt::format("peer sent a bad MAC '{}'", kv["mac"]));
  p.ip = options::parse_ip("ip", kv["ip"]);
  if (p.ip.v6 != ip_.v6)
    throw Failure("one side uses IPv4 and the other IPv6 (--ip): give both the same family");
}

void PerfTest::exchange_qps(Peer& p) {
  for (size_t i = 0; i < p.qps.size(); ++i) {
    const LocalQp& q = p.qps[i];
    p.oob.send_line(fmt::format("QP i={} qpn={} psn={} rkey={} va={} len={}", i, q.h.qpn,
                                q.psn, q.mr.rkey, q.mr.iova, q.mr.length));
  }
  for (size_t i = 0; i < p.qps.size(); ++i) {
    auto line = p.oob.recv_line(o_.timeout, "QP");
    auto q = parse_kv(line);
    RemoteQp r;
    r.qpn = static_cast<uint32_t>(kv_u64(q, "qpn"));
    r.psn = static_cast<uint32_t>(kv_u64(q, "psn"));
    r.rkey = static_cast<uint32_t>(kv_u64(q, "rkey"));
    r.va = kv_u64(q, "va");
    r.len = kv_u64(q, "len");
    if (r.len < 2 * max_size_)
      throw Failure(fmt::format("peer buffer of {} bytes is too small", r.len));
    p.remote.push_back(r);
  }
}

void PerfTest::connect_qps() {
  for (const Peer& p : peers_) {
    for (size_t i = 0; i < p.qps.size(); ++i) {
      transport::QpAttr a;
      a.path.src_mac = mac_;
      // Zero: the engine resolves it from the IP address before the first frame.
      if (!o_.resolve) a.path.dst_mac = p.mac;
      a.path.src_ip = ip_;
      a.path.dst_ip = p.ip;
      // Flow entropy in the UDP source port, as RoCEv2 NICs do.
      a.path.udp_src_port =
          static_cast<uint16_t>(0xC000 | ((p.qps[i].h.qpn ^ (p.remote[i].qpn << 3)) & 0x3FFF));
      a.dest_qpn = p.remote[i].qpn;
      a.rq_psn = p.remote[i].psn;
      a.sq_psn = p.qps[i].psn;
      a.path_mtu = options::parse_mtu("--mtu", o_.mtu);
      a.timeout = static_cast<uint8_t>(o_.qp_timeout);
      options::apply_marks(o_.marks, a.path);
      if (int rc = eng_.connect_qp(p.qps[i].h, a); rc != 0)
        throw Failure(fmt::format("QP {:#x}: connect failed: {}", p.qps[i].h.qpn,
                                  std::strerror(rc)));
    }
  }
}

// A client sends its tag and waits for the server's. The server first
// hears every client and only then answers them all, so no client passes
// before all have arrived (clients always send first: no deadlock).
void PerfTest::barrier_all(const std::string& tag) {
  if (client()) {
    peers_[0].oob.barrier(tag, o_.timeout);
    return;
  }
  for (Peer& p : peers_) p.oob.barrier_recv(tag, o_.timeout);
  for (Peer& p : peers_) p.oob.barrier_send(tag);
}

void PerfTest::print_header() const {
  const char* line =
      "---------------------------------------------------------------------------------------";
  fmt::print("{}\n{:>40}\n", line, o_.t->title);
  fmt::print(" Connection type : {}\t\tUsing SRQ      : OFF\n", o_.connection);
  fmt::print(" Device          : {}\t\tNumber of qps  : {}\n", o_.dev, o_.qps);
  if (multi()) fmt::print(" Clients         : {}\t\t(QPs per client)\n", peers_.size());
  if (!is_lat(o_)) fmt::print(" TX depth        : {}\t\tCQ Moderation  : {}\n", o_.tx_depth,
                              std::min(o_.cq_mod, o_.tx_depth));
  fmt::print(" Mtu             : {}[B]\t\tCongestion ctl : {}\n", o_.mtu, o_.cc);
  fmt::print(" Data check      : {}\t\t{}\n", o_.check ? "ON" : "OFF",
             o_.duration > 0 ? fmt::format("Duration       : {} s", o_.duration)
                             : fmt::format("Iterations     : {}", iters()));
  fmt::print("{}\n", line);
}

void PerfTest::print_addresses() const {
  for (size_t p = 0; p < peers_.size(); ++p) {
    const Peer& peer = peers_[p];
    if (multi()) fmt::print(" client {}:\n", p);
    for (const LocalQp& q : peer.qps)
      fmt::print(" local address: QPN {:#08x} PSN {:#08x} RKey {:#010x} VAddr {:#018x} "
                 "MAC {} IP {}\n",
                 q.h.qpn, q.psn, q.mr.rkey, q.mr.iova, options::format_mac(mac_), options::format_ip(ip_));
    for (const RemoteQp& r : peer.remote)
      fmt::print(" remote address: QPN {:#08x} PSN {:#08x} RKey {:#010x} VAddr {:#018x} "
                 "MAC {} IP {}\n",
                 r.qpn, r.psn, r.rkey, r.va, options::format_mac(peer.mac), options::format_ip(peer.ip));
  }
  fmt::print("---------------------------------------------------------------------------------------\n");
}

void PerfTest::post_send_or_fail(const LocalQp& q, const transport::SendWr& wr) {
  int rc;
  while ((rc = eng_.post_send(q.h, std::span(&wr, 1))) == ENOMEM) {
    check_deadline("posting a send WR (the send queue stays full)");
    std::this_thread::yield();
  }
  if (rc != 0)
    throw std::runtime_error(fmt::format("post_send refused: {}", std::strerror(rc)));
}

void PerfTest::post_recv_or_fail(const LocalQp& lq, uint64_t wr_id) {
  Sge s{lq.mr.iova + max_size_, static_cast<uint32_t>(max_size_), lq.mr.lkey};
  transport::RecvWr wr;
  wr.wr_id = wr_id;
  wr.sg_list = std::span(&s, 1);
  int rc;
  while ((rc = eng_.post_recv(lq.h, std::span(&wr, 1))) == ENOMEM) {
    check_deadline("posting a receive WR");
    std::this_thread::yield();
  }
  if (rc != 0)
    throw std::runtime_error(fmt::format("post_recv refused: {}", std::strerror(rc)));
}

size_t PerfTest::poll() {
  const size_t n = eng_.poll_completions(wc_, wc_port_);
  for (size_t i = 0; i < n; ++i) {
    auto it = qp_index_.find(wc_[i].qp_num);
    if (it == qp_index_.end())
      throw Failure(fmt::format("completion for unknown QP {:#x}", wc_[i].qp_num));
    wc_peer_[i] = it->second.first;
    wc_qp_[i] = it->second.second;
    require_ok(wc_[i]);
  }
  // A worker thread sharing this thread's CPU (one lcore, not run to
  // completion) gets it while this thread sleeps briefly instead of
  // spinning. Run to completion, this thread is the data path: it spins
  // (poll_completions() just made a pass), unless told to sleep.
  const bool sleeps = o_.poll_sleep_us || !o_.run_to_completion;
  if (n == 0 && sleeps)
    std::this_thread::sleep_for(
        std::chrono::microseconds(o_.poll_sleep_us.value_or(is_lat(o_) ? 2 : 100)));
  return n;
}

void PerfTest::require_ok(const WorkCompletion& wc) const {
  if (wc.status != IBV_WC_SUCCESS)
    throw Failure(fmt::format("QP {:#x}: work completion wr_id {} failed: {} (status {}, "
                              "vendor_err {})",
                              wc.qp_num, wc.wr_id, wc_status_name(wc.status),
                              static_cast<int>(wc.status), wc.vendor_err));
}

transport::SendWr PerfTest::make_wr(const Peer& p, size_t q, uint64_t wr_id,
                                    bool signaled) const {
  transport::SendWr wr;
  wr.wr_id = wr_id;
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  const RemoteQp& rq = p.remote[q];
  switch (o_.t->verb) {
    case Verb::kWrite:
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.remote_addr = rq.va + max_size_;  // the peer's destination area
      wr.rkey = rq.rkey;
      break;
    case Verb::kRead:
      wr.opcode = IBV_WR_RDMA_READ;
      wr.remote_addr = rq.va;  // the peer's source area
      wr.rkey = rq.rkey;
      break;
    case Verb::kSend: wr.opcode = IBV_WR_SEND; break;
  }
  return wr;
}

// Local SGE: WRITE and SEND gather from the source area, READ scatters into
// the destination area.
Sge local_sge(const LocalQp& q, Verb v, uint64_t max_size, uint64_t size) {
  return Sge{q.mr.iova + (v == Verb::kRead ? max_size : 0), static_cast<uint32_t>(size),
             q.mr.lkey};
}

// ---- bandwidth ---------------------------------------------------------------

PerfTest::BwPart PerfTest::bw_client_part(uint64_t size, size_t first, size_t stride,
                                          engine::CqHandle cq, uint64_t t0) {
  Peer& p = peers_[0];
  const size_t nq = p.qps.size();
  const uint32_t cq_mod = std::max<uint32_t>(1, std::min(o_.cq_mod, o_.tx_depth));
  const bool timed = o_.duration > 0;
  const uint64_t n_per_qp = timed ? UINT64_MAX : iters();
  const uint64_t t_stop = timed ? t0 + static_cast<uint64_t>(o_.duration * 1e9) : UINT64_MAX;
  // Indexed by the QP's index in the peer; this part touches its own only.
  std::vector<uint64_t> posted(nq, 0), completed(nq, 0);
  std::vector<bool> last_signaled(nq, true);
  std::vector<Sge> sges(nq);
  // WRs go to the send queue in batches (Engine::post_send with a span):
  // one lock and one doorbell per batch.
  constexpr size_t kPostBatch = 32;
  std::vector<transport::SendWr> batch;
  batch.reserve(kPostBatch);
  for (size_t q = first; q < nq; q += stride)
    sges[q] = local_sge(p.qps[q], o_.t->verb, max_size_, size);
  // A thread of its own polls its own CQ into its own buffer; the
  // deadline (--timeout, time without progress) is its own too.
  std::vector<WorkCompletion> wc((cq.id != 0) ? 256 : 0);
  uint64_t deadline = engine::now_ns() + static_cast<uint64_t>(o_.timeout * 1e9);
  BwPart r;
  r.events.reserve(timed ? 4096 : iters() * nq / stride / cq_mod + 16);
  r.events.emplace_back(t0, 0);
  bool stopping = false;
  auto post = [&](size_t q, std::span<const transport::SendWr> wrs, size_t* put) {
    const int rc = eng_.post_send(p.qps[q].h, wrs, put);
    if (rc != 0 && rc != ENOMEM)
      throw std::runtime_error(fmt::format("post_send refused: {}", std::strerror(rc)));
    return rc;
  };
  for (;;) {
    const uint64_t now = engine::now_ns();
    if (timed && !stopping && now >= t_stop) {
      stopping = true;
      // Close each QP's stream with a signaled WR so that every posted WR
      // is accounted for by a completion.
      for (size_t q = first; q < nq; q += stride) {
        if (last_signaled[q]) continue;
        auto wr = make_wr(p, q, posted[q], true);
        wr.sg_list = std::span(&sges[q], 1);
        while (post(q, std::span(&wr, 1), nullptr) == ENOMEM) {
          if (engine::now_ns() > deadline)
            fail_timeout("posting a send WR (the send queue stays full)");
          if ((cq.id != 0) && o_.run_to_completion) eng_.poll();
          std::this_thread::yield();
        }
        ++posted[q];
        last_signaled[q] = true;
      }
    }
    bool all_done = true;
    for (size_t q = first; q < nq; q += stride) {
      const uint64_t limit = stopping ? posted[q] : n_per_qp;
      for (bool full = false; !full && posted[q] < limit && posted[q] - completed[q] < o_.tx_depth;) {
        batch.clear();
        for (uint64_t id = posted[q];
             batch.size() < kPostBatch && id < limit && id - completed[q] < o_.tx_depth; ++id) {
          const bool sig = (id + 1) % cq_mod == 0 || id + 1 == n_per_qp;
          batch.push_back(make_wr(p, q, id, sig));
          batch.back().sg_list = std::span(&sges[q], 1);
        }
        size_t put = 0;
        post(q, std::span<const transport::SendWr>(batch), &put);
        if (put > 0) {
          posted[q] += put;
          last_signaled[q] = (batch[put - 1].send_flags & IBV_SEND_SIGNALED) != 0;
        }
        full = put < batch.size();  // send queue full: poll first
      }
      if (completed[q] < (stopping ? posted[q] : n_per_qp)) all_done = false;
    }
    if (all_done) break;
    // The completions: (QP index, wr_id) pairs.
    size_t n = 0;
    auto completion = [&](size_t i) -> std::pair<size_t, uint64_t> {
      if (!(cq.id != 0)) return {wc_qp_[i], wc_[i].wr_id};
      auto it = qp_index_.find(wc[i].qp_num);
      if (it == qp_index_.end())
        throw Failure(fmt::format("completion for unknown QP {:#x}", wc[i].qp_num));
      return {it->second.second, wc[i].wr_id};
    };
    if ((cq.id != 0)) {
      // Run to completion the threads take turns at the data path.
      if (o_.run_to_completion) eng_.poll();
      const int got = eng_.poll_cq(cq, wc);
      if (got < 0) throw Failure(fmt::format("poll_cq failed: {}", std::strerror(-got)));
      n = static_cast<size_t>(got);
      for (size_t i = 0; i < n; ++i) require_ok(wc[i]);
      if (n == 0 && o_.poll_sleep_us)
        std::this_thread::sleep_for(std::chrono::microseconds(*o_.poll_sleep_us));
    } else {
      n = poll();
    }
    if (n) {
      deadline = engine::now_ns() + static_cast<uint64_t>(o_.timeout * 1e9);
      const uint64_t tc = engine::now_ns();
      for (size_t i = 0; i < n; ++i) {
        const auto [q, wr_id] = completion(i);
        const uint64_t upto = wr_id + 1;  // in-order: everything before is done
        if (upto > completed[q]) {
          r.done += upto - completed[q];
          completed[q] = upto;
        }
      }
      r.events.emplace_back(tc, r.done);
    } else if (engine::now_ns() > deadline) {
      fail_timeout(fmt::format("waiting for completions ({} of {} messages done)", r.done,
                               timed ? r.done + 1 : n_per_qp * ((nq - first + stride - 1) / stride)));
    }
  }
  return r;
}

void PerfTest::bw_client(uint64_t size) {
  Peer& p = peers_[0];
  if (!o_.no_peer) barrier_all(fmt::format("start {}", size));
  const uint64_t t0 = engine::now_ns();
  std::vector<BwPart> parts(thread_cqs_.empty() ? 1 : thread_cqs_.size());
  if (thread_cqs_.empty()) {
    parts[0] = bw_client_part(size, 0, 1, {}, t0);
  } else {
    // Thread 0 is this one; a failure in any thread fails the test.
    std::vector<std::exception_ptr> errors(parts.size());
    std::vector<std::thread> threads;
    auto run = [&](size_t t) {
      try {
        parts[t] = bw_client_part(size, t, parts.size(), thread_cqs_[t], t0);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    };
    for (size_t t = 1; t < parts.size(); ++t) threads.emplace_back(run, t);
    run(0);
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
  }
  // One timeline: every part's progress, merged in time order.
  std::vector<std::pair<uint64_t, uint64_t>> steps;  // (time, messages done then)
  for (const BwPart& part : parts)
    for (size_t i = 1; i < part.events.size(); ++i)
      steps.emplace_back(part.events[i].first,
                         part.events[i].second - part.events[i - 1].second);
  std::sort(steps.begin(), steps.end());
  std::vector<std::pair<uint64_t, uint64_t>> events{{t0, 0}};
  uint64_t done_total = 0;
  for (const auto& [t, d] : steps) events.emplace_back(t, done_total += d);
  const uint64_t t1 = events.back().first;
  const BwResult r = bw_result(size, done_total, t0, t1, events);
  if (!o_.no_peer) {
    // The measurement rides along: a server with several clients prints it.
    p.oob.send_line(fmt::format("SYNC end {} msgs={} ns={} peak={}", size, done_total, t1 - t0,
                                static_cast<uint64_t>(r.peak_bps)));
    const std::string reply = p.oob.recv_line(o_.timeout, "end of test");
    if (reply.rfind("SYNC end", 0) != 0)
      throw Failure(fmt::format("peer out of step: '{}'", reply));
  }
  fmt::print("{}", bw_row(size, r, o_.report_gbits));
  std::fflush(stdout);
}

// One look at client p: its end line, and the answer once all its
// messages are in (SEND: every receive completion). True when done.
bool PerfTest::bw_server_step(Peer& p, uint64_t size, bool send) {
  if (!p.ended) {
    if (auto end = p.oob.try_recv_line(0)) {
      if (end->rfind("SYNC end", 0) != 0)
        throw Failure(fmt::format("peer out of step: '{}'", *end));
      p.t_end = engine::now_ns();
      const auto kv = parse_kv(end->substr(5));
      p.expected = kv_u64(kv, "msgs");
      if (multi()) {
        std::vector<std::pair<uint64_t, uint64_t>> none;
        p.report = bw_result(size, p.expected, 0, kv_u64(kv, "ns"), none);
        p.report.peak_bps = static_cast<double>(kv_u64(kv, "peak"));
      }
      p.ended = true;
      arm_deadline();
    }
  }
  const bool done = p.ended && (!send || p.received >= p.expected);
  if (done && !p.replied) {
    p.oob.send_line(fmt::format("SYNC end {} msgs={}", size, send ? p.received : p.expected));
    p.replied = true;
  }
  return done;
}

void PerfTest::bw_server(uint64_t size) {
  const bool send = o_.t->verb == Verb::kSend;
  for (Peer& p : peers_) {
    p.ended = p.replied = false;
    p.expected = UINT64_MAX;
    p.received = 0;
  }
  barrier_all(fmt::format("start {}", size));
  arm_deadline();
  // A WRITE or READ server sees no completion to count as progress while a
  // timed (-D) client runs: the run's length is not a stall.
  if (!send && o_.duration > 0) deadline_ns_ += static_cast<uint64_t>(o_.duration * 1e9);
  const uint64_t t_start = engine::now_ns();
  // SEND: repost every receive as it completes until each client reports
  // its end and every message it sent has been seen. WRITE and READ: the
  // server's application has nothing to do but wait for the end lines.
  for (;;) {
    bool all_done = true;
    for (Peer& p : peers_) all_done &= bw_server_step(p, size, send);
    if (all_done) break;
    if (!send) {
      check_deadline("waiting for the client to finish");
      // Run to completion this thread is the data path: the client's
      // WRITEs and READs are answered here.
      if (o_.run_to_completion)
        eng_.poll();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    const size_t n = poll();
    for (size_t i = 0; i < n; ++i) {
      const WorkCompletion& wc = wc_[i];
      if (wc.opcode != IBV_WC_RECV) continue;
      Peer& p = peers_[wc_peer_[i]];
      if (wc.byte_len != size)
        throw Failure(fmt::format("{}QP {:#x}: received {} bytes, expected {}",
                                  who(wc_peer_[i]), wc.qp_num, wc.byte_len, size));
      ++p.received;
      post_recv_or_fail(p.qps[wc_qp_[i]], wc.wr_id);
    }
    if (n == 0) {
      uint64_t received = 0, expected = 0;
      bool ended = true;
      for (const Peer& p : peers_) {
        received += p.received;
        expected += p.ended ? p.expected : 0;
        ended &= p.ended;
      }
      check_deadline([&] {
        return ended ? fmt::format("for receive completions ({} of {})", received, expected)
                     : std::string("waiting for the client to finish");
      });
    }
  }
  if (multi()) print_server_rows(size, t_start);
}

// A server with several clients: each client's own measurement (from its
// end line), then the aggregate as the server saw it: all messages over
// the time from the start barrier to the last client's end. The server
// sees no completion events of WRITE/READ, so the aggregate has no peak of
// its own: its peak column repeats the average.
void PerfTest::print_server_rows(uint64_t size, uint64_t t_start) const {
  uint64_t total = 0, t_last = t_start;
  for (size_t i = 0; i < peers_.size(); ++i) {
    const Peer& p = peers_[i];
    fmt::print("{}", bw_row(size, p.report, o_.report_gbits,
                            fmt::format("     client {} {}", i, options::format_ip(p.ip))));
    total += p.report.msgs;
    t_last = std::max(t_last, p.t_end);
  }
  std::vector<std::pair<uint64_t, uint64_t>> none;
  fmt::print("{}", bw_row(size, bw_result(size, total, t_start, t_last, none), o_.report_gbits,
                          fmt::format("     all {} clients", peers_.size())));
  std::fflush(stdout);
}

// ---- latency -----------------------------------------------------------------

// One client only (validate() refuses --clients for latency tests).
void PerfTest::lat_run(uint64_t size) {
  Peer& peer = peers_[0];
  const Verb v = o_.t->verb;
  const LocalQp& lq = peer.qps[0];
  uint8_t* src = lq.mr.addr;
  uint8_t* dst = lq.mr.addr + max_size_;
  Sge sge = local_sge(lq, v, max_size_, size);
  const bool timed = o_.duration > 0;
  const uint64_t n = timed ? UINT64_MAX : iters();
  telemetry::LatencyHistogram hist;
  // WRITE ping-pong: the last byte of each message carries a tag the other
  // side polls for (perftest's write_lat polls memory the same way).
  if (v == Verb::kWrite) dst[size - 1] = 0;

  barrier_all(fmt::format("start {}", size));
  arm_deadline();
  const uint64_t t0 = engine::now_ns();
  const uint64_t t_stop = timed ? t0 + static_cast<uint64_t>(o_.duration * 1e9) : UINT64_MAX;
  uint64_t sends_outstanding = 0;
  uint64_t done = 0;
  // A side that answers (the server) cannot know when a timed client
  // stops: it keeps answering until the client's end line arrives.
  auto post = [&](uint64_t i) {
    auto wr = make_wr(peer, 0, i, true);
    wr.sg_list = std::span(&sge, 1);
    if (v == Verb::kWrite) src[size - 1] = lat_tag(i);
    post_send_or_fail(lq, wr);
    ++sends_outstanding;
  };
  // Waits for the i-th incoming message (WRITE: its tag in memory; SEND: a
  // receive completion); returns false if the client ended the run.
  auto wait_incoming = [&](uint64_t i, bool may_end) -> bool {
    for (;;) {
      if (v == Verb::kWrite && load_byte(dst + size - 1) == lat_tag(i)) return true;
      const size_t k = poll();
      bool got = false;
      for (size_t j = 0; j < k; ++j) {
        const WorkCompletion& wc = wc_[j];
        if (wc.opcode == IBV_WC_RECV) {
          if (wc.byte_len != size)
            throw Failure(fmt::format("received {} bytes, expected {}", wc.byte_len, size));
          post_recv_or_fail(lq, wc.wr_id);
          got = true;
        } else {
          --sends_outstanding;
        }
      }
      if (got) return true;
      if (k == 0) {
        if (may_end) {
          if (auto line = peer.oob.try_recv_line(0)) {
            if (line->rfind("SYNC end", 0) != 0)
              throw Failure(fmt::format("peer out of step: '{}'", *line));
            return false;
          }
        }
        check_deadline([&] { return fmt::format("waiting for message {} from the peer", i); });
      }
    }
  };

  if (client()) {
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t ts = engine::now_ns();
      if (timed && ts >= t_stop) break;
      post(i);
      if (v == Verb::kRead) {
        // The READ's own completion ends the iteration.
        for (;;) {
          const size_t k = poll();
          if (k) {
            sends_outstanding -= k;
            break;
          }
          check_deadline([&] { return fmt::format("waiting for READ {} to complete", i); });
        }
        hist.record(engine::now_ns() - ts);
      } else {
        wait_incoming(i, false);
        hist.record((engine::now_ns() - ts) / 2);  // perftest: half the round trip
      }
      ++done;
    }
  } else if (v != Verb::kRead) {
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t ts = engine::now_ns();
      if (!wait_incoming(i, true)) break;  // timed run ended by the client
      post(i);
      // The server's view: from its reply i-1 to its reply i is one round
      // trip; half of it, as on the client.
      if (i > 0) hist.record((engine::now_ns() - ts) / 2);
      ++done;
    }
  }
  // Drain our own send completions so the next size starts clean.
  while (sends_outstanding > 0) {
    const size_t k = poll();
    for (size_t j = 0; j < k; ++j)
      if (wc_[j].opcode != IBV_WC_RECV) --sends_outstanding;
    if (k == 0) check_deadline("draining send completions");
  }
  if (client()) {
    peer.oob.send_line(fmt::format("SYNC end {} msgs={}", size, done));
    const std::string reply = peer.oob.recv_line(o_.timeout, "end of test");
    if (reply.rfind("SYNC end", 0) != 0)
      throw Failure(fmt::format("peer out of step: '{}'", reply));
    print_lat_row(size, done, hist);
  } else {
    if (v == Verb::kRead || done == n) {
      const std::string line = peer.oob.recv_line(o_.timeout, "end of test");
      if (line.rfind("SYNC end", 0) != 0)
        throw Failure(fmt::format("peer out of step: '{}'", line));
    }
    peer.oob.send_line(fmt::format("SYNC end {} msgs={}", size, done));
    if (v != Verb::kRead) print_lat_row(size, done, hist);
  }
}

// #iterations is the iterations done, as perftest prints: a ping-pong
// server times one fewer (from its first reply to its last) than it did.
void PerfTest::print_lat_row(uint64_t size, uint64_t iters,
                             const telemetry::LatencyHistogram& h) const {
  const auto us = [](double ns) { return ns / 1000.0; };
  fmt::print(" {:<7} {:<10}    {:>8.2f}     {:>8.2f}      {:>8.2f}         {:>8.2f}     "
             "   {:>8.2f}          {:>8.2f}                {:>8.2f}\n",
             size, iters, us(static_cast<double>(h.min())),
             us(static_cast<double>(h.max())), us(static_cast<double>(h.percentile(0.5))),
             us(h.mean()), us(h.stddev()), us(static_cast<double>(h.percentile(0.99))),
             us(static_cast<double>(h.percentile(0.999))));
  std::fflush(stdout);
}

// ---- data check ----------------------------------------------------------------

// Which side holds data to verify after a size:
//  WRITE / SEND: the target (server) checks its destination area; in the
//                WRITE/SEND latency tests the client checks too (the server
//                answers with the same pattern).
//  READ:         the reader (client) checks its destination area.
// The result line for the data of one peer's QPs ("CHECK ok" or "CHECK bad ...").
std::string PerfTest::check_peer(const Peer& p, uint64_t size) const {
  const Verb v = o_.t->verb;
  for (size_t q = 0; q < p.qps.size(); ++q) {
    const uint8_t* dst = p.qps[q].mr.addr + max_size_;
    // WRITE latency: the last byte is the ping-pong tag, not pattern.
    const uint64_t len = (v == Verb::kWrite && is_lat(o_)) ? size - 1 : size;
    if (auto bad = verify_pattern(dst, p.seed, static_cast<uint32_t>(q), size, len))
      return fmt::format("CHECK bad qp={:#x} size={} offset={} got={:#04x} want={:#04x}",
                         p.qps[q].h.qpn, size, *bad, dst[*bad],
                         pattern_byte(p.seed, static_cast<uint32_t>(q), size, *bad));
  }
  return "CHECK ok";
}

bool PerfTest::verify_after(uint64_t size) {
  const Verb v = o_.t->verb;
  const bool i_check = v == Verb::kRead ? client()
                                        : (!client() || (is_lat(o_) && v != Verb::kRead));
  // Every peer hears this side's verdict on its data before this side
  // waits for any peer's.
  std::vector<std::string> results;
  for (Peer& p : peers_) {
    results.push_back(i_check ? check_peer(p, size) : "CHECK ok");
    p.oob.send_line(results.back());
  }
  bool ok = true;
  for (size_t i = 0; i < peers_.size(); ++i) {
    const std::string peer = peers_[i].oob.recv_line(o_.timeout, "data check result");
    if (results[i] != "CHECK ok") {
      fmt::print(stderr, "error: data check failed on this side: {}{}\n", who(i),
                 results[i].substr(6));
      ok = false;
    }
    if (peer != "CHECK ok") {
      fmt::print(stderr, "error: data check failed on the peer: {}{}\n", who(i),
                 peer.substr(6));
      ok = false;
    }
  }
  return ok;
}

bool PerfTest::run_size(uint64_t size) {
  if (o_.check) {
    // The side that sends data lays the pattern out in its source area;
    // every side clears its destination area so stale bytes cannot pass.
    for (const Peer& p : peers_)
      for (size_t q = 0; q < p.qps.size(); ++q) {
        fill_pattern(p.qps[q].mr.addr, p.seed, static_cast<uint32_t>(q), size, size);
        std::memset(p.qps[q].mr.addr + max_size_, 0, size);
      }
  }
  if (o_.no_peer) {
    bw_client(size);
    return true;
  }
  if (is_lat(o_))
    lat_run(size);
  else if (client())
    bw_client(size);
  else
    bw_server(size);
  return o_.check ? verify_after(size) : true;
}

int PerfTest::run() {
  setup();
  exchange();
  connect_qps();
  // The server starts its port first, the client only once the server says
  // so. A memif server that has not started its port yet answers a client
  // connect with "ID not found" and the DPDK memif client never tries
  // again: both links would stay down for good. With this order the client
  // always connects to a started server (the client's SYNC is sent before
  // its start; the server's only after its own).
  if (!o_.no_peer && client()) barrier_all("server port started");
  eng_.start();
  // Run to completion: whatever this thread waits for, the peer's frames
  // are answered meanwhile.
  if (o_.run_to_completion)
    for (Peer& p : peers_) p.oob.set_while_waiting([this] { eng_.poll(); });
  if (!o_.no_peer && o_.server) barrier_all("server port started");
  // Wait for the link (memif needs its peer to connect).
  {
    const uint16_t pid = eng_.port_id(port_);
    const uint64_t end = engine::now_ns() + static_cast<uint64_t>(o_.timeout * 1e9);
    for (;;) {
      rte_eth_link link{};
      if (rte_eth_link_get_nowait(pid, &link) == 0 && link.link_status == RTE_ETH_LINK_UP)
        break;
      if (engine::now_ns() > end)
        throw Failure(fmt::format("link of port '{}' did not come up within {} s", o_.dev,
                                  o_.timeout));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (!o_.no_peer) barrier_all("ready");
  print_header();
  print_addresses();
  // SEND: the receive queue is filled before the first barrier.
  if (o_.t->verb == Verb::kSend && (o_.server || is_lat(o_)) && !o_.no_peer)
    for (const Peer& p : peers_)
      for (const LocalQp& q : p.qps)
        for (uint32_t i = 0; i < o_.rx_depth; ++i) post_recv_or_fail(q, i);

  // A server with several clients prints their bandwidth rows too.
  const bool print_rows =
      client() || (is_lat(o_) && o_.t->verb != Verb::kRead) || (!is_lat(o_) && multi());
  if (print_rows) {
    if (is_lat(o_))
      fmt::print(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
                 "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% "
                 "percentile[usec]\n");
    else
      fmt::print("{}", bw_header(o_.report_gbits, client() ? "" : "     client"));
  }
  bool ok = true;
  if (o_.all) {
    for (uint64_t s = 2; s <= kMaxSize; s <<= 1) ok &= run_size(s);
  } else {
    ok = run_size(size());
  }
  // Quiesce the data path before the peer may close its port. Closing a
  // memif port disconnects the peer, and the peer's PMD then unmaps the
  // shared rings from its interrupt thread while its worker may be inside
  // rx/tx burst on them (the PMD does not synchronise the two): a SIGSEGV
  // in the slower process. Every WR of this run has completed and been
  // checked by now, so nothing is lost by stopping the worker here.
  eng_.stop();
  if (!o_.no_peer) barrier_all("done");
  fmt::print("---------------------------------------------------------------------------------------\n");
  if (o_.check) fmt::print(" Data check: {}\n", ok ? "PASS" : "FAIL");
  const engine::Snapshot stats = eng_.stats_now();
  if (o_.counters) fmt::print("{}", engine::format_counters(stats));
  // A CC that steers by INT (HPCC) with no INT-stamping switch on the path
  // runs on its initial window: say so once (the counter is in --counters
  // and telemetry as cc_acks_without_int).
  uint64_t acks_without_int = 0;
  for (const engine::PortSnapshot& p : stats.ports)
    acks_without_int += p.endpoint.cc_acks_without_int;
  if (acks_without_int > 0)
    fmt::print(stderr,
               "droce-perf: warning: --cc {} steers by INT, but {} ACK(s) carried no INT records "
               "(no INT-stamping switch on the path, e.g. droce-switch with INT on); it ran on "
               "its initial window\n",
               o_.cc, acks_without_int);
  std::fflush(stdout);
  return ok ? kExitOk : kExitFailure;
}

// ---- command line -------------------------------------------------------------

// Option errors before EAL starts: the message names the option.
void validate(Options& o) {
  if (o.shards < 1 || o.shards > 128)
    throw ConfigError("--shards", fmt::format("{} is out of range 1..128", o.shards));
  apps::shard_rx_option(o.shard_rx);  // throws naming --shard-rx
  for (const TestName& t : kTests)
    if (o.test == t.name) o.t = &t;
  if (!o.t)
    throw ConfigError("--test", fmt::format("unknown test '{}'; accepted: write_bw, read_bw, "
                                            "send_bw, write_lat, read_lat, send_lat",
                                            o.test));
  if (o.no_peer) {
    if (o.server || !o.connect.empty())
      throw ConfigError("--no-peer", "is a client without a peer: drop --server/--connect");
    if (o.connection != "UC" || o.t->kind != Kind::kBw || o.t->verb == Verb::kRead)
      throw ConfigError("--no-peer", "needs -c UC and write_bw or send_bw (nothing "
                                     "acknowledges or answers)");
  } else if (o.server == !o.connect.empty()) {
    throw ConfigError("--server/--connect",
                      o.server ? "give one of --server or --connect HOST, not both"
                               : "missing peer: give --server on one side and --connect "
                                 "HOST on the other");
  }
  if (o.clients) {
    if (!o.server)
      throw ConfigError("--clients", "is a server option (how many clients the server "
                                     "serves at once): drop it on the client");
    if (*o.clients < 1 || *o.clients > kMaxClients)
      throw ConfigError("--clients",
                        fmt::format("{} is out of range 1..{}", *o.clients, kMaxClients));
    if (*o.clients > 1 && o.t->kind == Kind::kLat)
      throw ConfigError("--clients", "latency tests serve one client (the server plays "
                                     "ping-pong); use a bandwidth test for several");
  }
  if (o.size && (*o.size < 1 || *o.size > kMaxSize))
    throw ConfigError("-s/--size", fmt::format("{} is out of range 1..{}", *o.size, kMaxSize));
  if (o.size && o.all) throw ConfigError("-a/--all", "cannot be combined with -s");
  if (o.size && o.t->verb == Verb::kWrite && o.t->kind == Kind::kLat && *o.size < 1)
    throw ConfigError("-s/--size", "write_lat needs at least 1 byte");
  if (o.iters && *o.iters < 1) throw ConfigError("-n/--iters", "must be at least 1");
  if (o.duration < 0 || o.duration > 86400)
    throw ConfigError("-D/--duration", fmt::format("{} is out of range 0..86400 s", o.duration));
  if (o.duration > 0 && o.iters) throw ConfigError("-D/--duration", "cannot be combined with -n");
  // perftest refuses this too ("Duration mode ... doesn't support running
  // on all sizes"): each of the 23 sizes would run for the whole duration.
  if (o.duration > 0 && o.all) throw ConfigError("-D/--duration", "cannot be combined with -a");
  if (o.qps < 1 || o.qps > 256)
    throw ConfigError("-q/--qp", fmt::format("{} is out of range 1..256", o.qps));
  if (o.threads < 1 || o.threads > o.qps)
    throw ConfigError("--threads", fmt::format("{} is out of range 1..{} (-q)", o.threads, o.qps));
  if (o.t->kind == Kind::kLat && o.qps != 1)
    throw ConfigError("-q/--qp", "latency tests use one QP");
  if (o.mtu != 256 && o.mtu != 512 && o.mtu != 1024 && o.mtu != 2048 && o.mtu != 4096)
    throw ConfigError("-m/--mtu",
                      fmt::format("{} is not one of 256, 512, 1024, 2048, 4096", o.mtu));
  if (o.connection != "RC" && o.connection != "UC")
    throw ConfigError("-c/--connection",
                      fmt::format("'{}' is not one of RC, UC", o.connection));
  if (o.connection == "UC" && o.t->verb == Verb::kRead)
    throw ConfigError("-c/--connection", "READ needs RC");
  if (o.tx_depth < 1 || o.tx_depth > 16384)
    throw ConfigError("-t/--tx-depth", fmt::format("{} is out of range 1..16384", o.tx_depth));
  if (o.rx_depth < 1 || o.rx_depth > 16384)
    throw ConfigError("-r/--rx-depth", fmt::format("{} is out of range 1..16384", o.rx_depth));
  if (o.cq_mod < 1) throw ConfigError("-Q/--cq-mod", "must be at least 1");
  options::parse_ecn("--ecn", o.marks.ecn);  // refused here, before EAL starts
  if (o.timeout <= 0) throw ConfigError("--timeout", "must be positive");
  if (o.t->verb == Verb::kSend && o.connection == "UC" && !o.no_peer)
    throw ConfigError("-c/--connection",
                      "send over UC can lose messages without notice; use RC");
}

int perf_main(int argc, char** argv) {
  // Split "[EAL] -- [app]" ourselves so that app options are checked (exit
  // code 2, message naming the option) before EAL starts.
  engine::SplitArgs args = engine::split_eal_args(argc, argv);
  std::vector<char*>& app_argv = args.app;

  Options o;
  CLI::App cli{"droce-perf: perftest-style RDMA bandwidth and latency tests between two "
               "droce processes.\nusage: droce-perf [EAL options] -- --test NAME "
               "(--server | --connect HOST) [options]"};
  cli.add_option("--test", o.test,
                 "write_bw | read_bw | send_bw | write_lat | read_lat | send_lat")
      ->required();
  cli.add_flag("--server", o.server, "wait for the peer (the target of the test)");
  cli.add_option("--clients", o.clients,
                 "server: serve this many clients at once on the one port (bandwidth "
                 "tests; default 1)");
  cli.add_option("--connect", o.connect, "connect to the server's OOB socket at HOST (IPv4)");
  cli.add_option("--bind", o.bind, "server: address of the OOB socket (default 127.0.0.1)");
  cli.add_option("-p,--port", o.oob_port, "TCP port of the OOB socket (default 18515)");
  cli.add_option("-s,--size", o.size, "message size in bytes (default 65536; lat: 2)");
  cli.add_option("-n,--iters", o.iters, "iterations per QP (default 5000; lat: 1000)");
  cli.add_option("-D,--duration", o.duration, "run for this many seconds instead of -n");
  cli.add_option("-q,--qp", o.qps, "number of QPs (bandwidth tests)");
  cli.add_option("--threads", o.threads,
                 "bandwidth client: threads posting and polling, the QPs dealt out among "
                 "them, each with its own CQ (default 1; at most -q)");
  cli.add_flag("-a,--all", o.all, "run sizes 2..2^23");
  cli.add_flag("--report_gbits", o.report_gbits, "report bandwidth in Gb/s");
  cli.add_option("-m,--mtu", o.mtu, "path MTU: 256, 512, 1024, 2048, 4096 (default 1024)");
  cli.add_option("--cc", o.cc, "congestion control algorithm (default none)");
  cli.add_flag("--check", o.check, "verify the data byte for byte after each size");
  cli.add_option("-t,--tx-depth", o.tx_depth, "send WRs in flight per QP (default 128)");
  cli.add_option("-r,--rx-depth", o.rx_depth, "receive WRs posted per QP (default 512)");
  cli.add_option("-Q,--cq-mod", o.cq_mod, "signal a completion every N sends (default 64)");
  cli.add_option("-c,--connection", o.connection, "RC or UC (default RC)");
  cli.add_option("-d,--dev", o.dev, "DPDK port name or id (default 0)");
  cli.add_option("--ip", o.ip, "source IP in the RoCEv2 headers (IPv4 or IPv6); the port "
                             "answers ARP / neighbour solicitations and ping for it");
  cli.add_flag("--resolve", o.resolve,
               "find the peer's MAC by ARP / neighbour discovery instead of the out-of-band "
               "exchange");
  cli.add_option("--rate-gbps", o.rate_gbps, "port rate cap in Gb/s (default 0: none)");
  cli.add_option("-u,--qp-timeout", o.qp_timeout,
                 "local ACK timeout: 4.096 us * 2^N before a retransmission (default 14, "
                 "67 ms; 0 = none; at most 31)")
      ->check(CLI::Range(0, 31));
  cli.add_option("--timeout", o.timeout, "give up after this many seconds of no progress "
                                         "(default 120)");
  cli.add_option("--idle-sleep-us", o.idle_sleep_us,
                 "worker sleeps when idle (shares a CPU; default 0: busy poll)");
  cli.add_option("--poll-sleep-us", o.poll_sleep_us,
                 "control thread sleeps this long when no completion is ready (default 100 "
                 "for bandwidth, 2 for latency tests)");
  cli.add_flag("--no-peer", o.no_peer, "TX benchmark: send into the port with no peer "
                                       "(-c UC, write_bw/send_bw)");
  cli.add_option("--run-to-completion", o.run_to_completion,
                 "with one lcore, the test's own thread runs the data path (default true); "
                 "false: a worker thread beside it, on the same CPU");
  cli.add_flag("--counters", o.counters, "print engine counters at the end");
  apps::add_mark_options(cli, o.marks);
  cli.add_option("--capture", o.capture, "pcap of every frame the port sends and receives");
  cli.add_option("--shards", o.shards, "shard the QPs over N worker lcores (default 1; "
                                       "docs/ENGINE.md)");
  cli.add_option("--shard-rx", o.shard_rx,
                 "how shards receive: auto (an RX queue each where the NIC has RSS on UDP), "
                 "queues (an RX queue each) or one (one queue, handed over)");
  if (const int rc = apps::parse_options_named(cli, app_argv, "droce-perf", [&] { validate(o); });
      rc >= 0)
    return rc;

  // Short sleeps really are short (the default slack is 50 us).
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  return apps::run_app_named("droce-perf", [&] {
    int status = kExitOk;
    engine::init_eal(static_cast<int>(args.eal.size()), args.eal.data());
    engine::EngineConfig ec;
    ec.idle_sleep_us = o.idle_sleep_us;
    ec.telemetry = false;
    ec.run_to_completion = o.run_to_completion;
    engine::Engine eng(ec);
    engine::PortConfig pc;
    pc.name = o.dev;
    pc.endpoint.port_rate_bytes_per_sec = o.rate_gbps * 1'000'000'000ull / 8;
    pc.shards = o.shards;
    pc.shard_rx = apps::shard_rx_option(o.shard_rx);
    pc.capture = o.capture;
    pc.endpoint.interface.addresses = {options::parse_ip("ip", local_ip(o))};
    const engine::PortIndex port = [&]() -> engine::PortIndex {
      try {
        return eng.add_port(pc);
      } catch (const ConfigError& e) {
        apps::rethrow_as_shard_flag(e);
      }
    }();
    PerfTest test(o, eng, port);
    try {
      status = test.run();
    } catch (const Failure&) {
      // Stop the worker first: the peer may be closing its port too (see
      // run()). What the engine saw helps to tell a lost frame from a stuck
      // peer.
      const bool was_running = eng.running();
      eng.stop();
      if (was_running)
        fmt::print(stderr, "engine counters at the failure:\n{}",
                   engine::format_counters(eng.stats_now()));
      throw;
    }
    eng.close_ports();
    return status;
  });
}

}  // namespace

}  // namespace droce::perf

int main(int argc, char** argv) { return droce::perf::perf_main(argc, argv); }
