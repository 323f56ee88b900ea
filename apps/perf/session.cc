// droce-perf: set-up, the out-of-band exchange with the peers, the QPs
// connected, barriers, posting and polling (perf_test.h).
#include "perf/perf_test.h"

#include <random>
#include <thread>

namespace droce::perf {

using transport::Sge;
using transport::WorkCompletion;

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
  // The recovery field: a client's asks for it, a server's answers with
  // the one it adopted for that client.
  const std::string hello = fmt::format(
      "HELLO v=1 test={} conn={} size={} all={} qps={} mtu={} check={} seed={} mac={} ip={}",
      o_.t->name, o_.connection, size(), o_.all ? 1 : 0, o_.qps, o_.mtu, o_.check ? 1 : 0,
      seed_, options::format_mac(mac_), options::format_ip(ip_));
  auto hello_with = [&](transport::Recovery r) {
    return fmt::format("{} recovery={}", hello, options::recovery_name(r));
  };
  if (client()) {
    Peer& p = peers_[0];
    p.recovery = o_.multipath.recovery.value_or(transport::Recovery::kGoBackN);
    p.oob.connect_to(o_.connect, o_.oob_port, o_.timeout, "--connect");
    p.oob.send_line(hello_with(p.recovery));
    hello_from(p, p.oob.recv_line(o_.timeout, "HELLO"));
    exchange_qps(p);
    return;
  }
  // The server accepts its clients one after the other; the listening
  // socket stays open meanwhile, so later clients wait in its backlog.
  oob::Listener listener(o_.bind, o_.oob_port, static_cast<int>(peers_.size()), "--port");
  for (size_t i = 0; i < peers_.size(); ++i) {
    Peer& p = peers_[i];
    p.oob = listener.accept(o_.timeout);
    try {
      hello_from(p, p.oob.recv_line(o_.timeout, "HELLO"));
      p.oob.send_line(hello_with(p.recovery));
      exchange_qps(p);
    } catch (const std::runtime_error& e) {
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
  if (client() && peer.rfind("REFUSED ", 0) == 0)
    throw Failure(fmt::format("the server refused the test: {}", peer.substr(8)));
  if (peer.rfind("HELLO ", 0) != 0) throw Failure(fmt::format("peer said '{}'", peer));
  const oob::Fields kv = parse_fields(peer);
  recovery_from(p, kv);
  if (field(kv, "test") != o_.t->name)
    throw Failure(fmt::format("the peer runs --test {}, this side --test {}", field(kv, "test"),
                              o_.t->name));
  if (field(kv, "conn") != o_.connection)
    throw Failure(fmt::format("the peer uses -c {}, this side -c {}", field(kv, "conn"),
                              o_.connection));
  if (field_u64(kv, "qps") != o_.qps)
    throw Failure(fmt::format("the peer uses -q {}, this side -q {}", field(kv, "qps"), o_.qps));
  if (field_u64(kv, "all") != (o_.all ? 1u : 0u) || field_u64(kv, "size") != size())
    throw Failure(fmt::format("the peer uses {} bytes, this side {} bytes (give the same "
                              "-s / -a to both)",
                              field_u64(kv, "all") ? "-a" : field(kv, "size"),
                              o_.all ? "-a" : std::to_string(size())));
  if (field_u64(kv, "mtu") != o_.mtu)
    throw Failure(fmt::format("the peer uses -m {}, this side -m {}", field(kv, "mtu"), o_.mtu));
  if (field_u64(kv, "check") != (o_.check ? 1u : 0u))
    throw Failure("give --check to both sides or to neither");
  // The data seed is the client's.
  if (o_.server) p.seed = field_u64(kv, "seed");
  if (!options::try_parse_mac(field(kv, "mac"), p.mac))
    throw Failure(fmt::format("peer sent a bad MAC '{}'", field(kv, "mac")));
  if (!options::try_parse_ip(field(kv, "ip"), p.ip))
    throw Failure(fmt::format("peer sent a bad IP address '{}'", field(kv, "ip")));
  if (p.ip.v6 != ip_.v6)
    throw Failure("one side uses IPv4 and the other IPv6 (--ip): give both the same family");
}

// A selective repeat requester needs a responder that SACKs (transport/qp.h),
// so both ends of a QP recover alike: the server takes the client's
// recovery, or refuses it (its own --recovery differs) with a reason the
// client prints. A peer without the field recovers by go-back-N.
void PerfTest::recovery_from(Peer& p, const oob::Fields& kv) {
  using transport::Recovery;
  Recovery peer = Recovery::kGoBackN;
  if (const auto it = kv.find("recovery"); it != kv.end()) {
    if (it->second == "sr") peer = Recovery::kSelectiveRepeat;
    else if (it->second != "gbn")
      throw Failure(fmt::format("peer sent an unknown recovery '{}'", it->second));
  }
  if (client()) {
    if (peer != p.recovery)
      throw Failure(fmt::format("the server recovers by {}, this client by {} (a server "
                                "without --recovery takes the client's)",
                                options::recovery_name(peer), options::recovery_name(p.recovery)));
    return;
  }
  if (o_.multipath.recovery && *o_.multipath.recovery != peer) {
    const std::string why = fmt::format(
        "the client asks for --recovery {}, the server was given --recovery {} (drop it on "
        "the server: it takes the client's)",
        options::recovery_name(peer), options::recovery_name(*o_.multipath.recovery));
    p.oob.send_line("REFUSED " + why);
    throw Failure(why);
  }
  p.recovery = peer;
}

void PerfTest::exchange_qps(Peer& p) {
  for (size_t i = 0; i < p.qps.size(); ++i) {
    const LocalQp& q = p.qps[i];
    p.oob.send_line(fmt::format("QP i={} qpn={} psn={} rkey={} va={} len={}", i, q.h.qpn,
                                q.psn, q.mr.rkey, q.mr.iova, q.mr.length));
  }
  for (size_t i = 0; i < p.qps.size(); ++i) {
    auto line = p.oob.recv_line(o_.timeout, "QP");
    auto q = parse_fields(line);
    RemoteQp r;
    r.qpn = static_cast<uint32_t>(field_u64(q, "qpn"));
    r.psn = static_cast<uint32_t>(field_u64(q, "psn"));
    r.rkey = static_cast<uint32_t>(field_u64(q, "rkey"));
    r.va = field_u64(q, "va");
    r.len = field_u64(q, "len");
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
      a.honour_credits = o_.honour_credits;
      // Entropy and reorder tolerance are this side's, as a requester's;
      // the recovery is the one both ends agreed on.
      options::apply_multipath(o_.multipath, a);
      a.recovery = p.recovery;
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
  if (peers_[0].recovery != transport::Recovery::kGoBackN ||
      o_.multipath.entropy.mode != transport::EntropyMode::kFixed) {
    options::Multipath m = o_.multipath;
    m.recovery = peers_[0].recovery;
    fmt::print(" Multipath       : {}\n", options::describe(m));
  }
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

}  // namespace droce::perf
