// A tiny in-memory network for transport tests: two Devices joined by two
// one-way links with seeded random loss, duplication, reordering and a
// serialization rate, stepped in virtual time. Deliberately small and
// self-contained so the simulator's harness can grow out of it.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <array>
#include <cstdint>
#include <limits>
#include <queue>
#include <random>
#include <span>
#include <vector>

#include "droce/transport/device.h"
#include "droce/wire/packet.h"

namespace droce::transport::testing {

struct Impairment {
  double loss = 0;        // probability a frame is dropped
  double duplicate = 0;   // probability a frame is delivered twice
  double reorder = 0;     // probability a frame is held back
  double corrupt = 0;     // probability one bit of the frame is flipped
  uint64_t delay_ns = 2000;          // propagation delay
  uint64_t reorder_extra_ns = 5000;  // extra delay of a held-back frame
  double ns_per_byte = 0.08;         // 100 Gb/s
};

class Link {
 public:
  static constexpr size_t kEthHeader = 14;
  Link(uint64_t seed, Impairment imp) : rng_(seed), imp_(imp) {}

  void send(std::span<const uint8_t> frame, uint64_t now) {
    ++sent_;
    const uint64_t depart = std::max(now, busy_until_) +
                            static_cast<uint64_t>(frame.size() * imp_.ns_per_byte);
    busy_until_ = depart;
    if (chance(imp_.loss)) {
      ++lost_;
      return;
    }
    uint64_t at = depart + imp_.delay_ns;
    if (chance(imp_.reorder)) at += imp_.reorder_extra_ns;
    if (chance(imp_.corrupt) && frame.size() > kEthHeader) {
      // One bit from the IP header on: the ICRC (or, for the fields the
      // ICRC masks, the IPv4 header checksum) must catch it, or it lands
      // in a field no receiver relies on (FECN/BECN/reserved, UDP checksum).
      ++corrupted_;
      std::vector<uint8_t> bad(frame.begin(), frame.end());
      const size_t bit = kEthHeader * 8 + rng_() % ((bad.size() - kEthHeader) * 8);
      bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
      push(at, bad);
    } else {
      push(at, frame);
    }
    if (chance(imp_.duplicate)) push(at + imp_.delay_ns / 2 + 1, frame);
  }
  uint64_t next_time() const {
    return q_.empty() ? std::numeric_limits<uint64_t>::max() : q_.top().at;
  }
  bool pop_due(uint64_t now, std::vector<uint8_t>& out) {
    if (q_.empty() || q_.top().at > now) return false;
    out = std::move(const_cast<Item&>(q_.top()).bytes);
    q_.pop();
    return true;
  }
  uint64_t sent() const { return sent_; }
  uint64_t lost() const { return lost_; }
  uint64_t corrupted() const { return corrupted_; }

 private:
  struct Item {
    uint64_t at;
    uint64_t seq;
    std::vector<uint8_t> bytes;
    bool operator>(const Item& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  bool chance(double p) { return p > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  void push(uint64_t at, std::span<const uint8_t> f) {
    q_.push(Item{at, seq_++, std::vector<uint8_t>(f.begin(), f.end())});
  }
  std::mt19937_64 rng_;
  Impairment imp_;
  uint64_t busy_until_ = 0;
  uint64_t seq_ = 0;
  uint64_t sent_ = 0;
  uint64_t lost_ = 0;
  uint64_t corrupted_ = 0;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> q_;
};

// Steps two devices in virtual time: every QP of `a` sends over `ab`, every
// QP of `b` over `ba`; received frames are parsed and dispatched by QPN.
class Loopback {
 public:
  Loopback(Device& a, Device& b, uint64_t seed, Impairment imp)
      : a_(a), b_(b), ab_(seed, imp), ba_(seed ^ 0x9E3779B97F4A7C15ull, imp) {}

  uint64_t now() const { return now_; }
  Link& ab() { return ab_; }
  Link& ba() { return ba_; }
  uint64_t parse_errors() const { return parse_errors_; }
  void set_trace(bool on) { trace_ = on; }  // print every delivered frame

  // Runs until `done()` or virtual time passes `limit_ns`; returns done().
  template <class Done>
  bool run(Done&& done, uint64_t limit_ns) {
    std::vector<uint8_t> frame;
    while (!done()) {
      pump(a_, ab_);
      pump(b_, ba_);
      while (ab_.pop_due(now_, frame)) deliver(b_, frame);
      while (ba_.pop_due(now_, frame)) deliver(a_, frame);
      fire_timers(a_);
      fire_timers(b_);
      if (done()) break;
      uint64_t next = std::min({ab_.next_time(), ba_.next_time(), deadline(a_), deadline(b_)});
      if (work(a_) || work(b_)) next = std::min(next, now_ + 1000);
      if (next == std::numeric_limits<uint64_t>::max()) return done();
      now_ = std::max(now_ + 1, next);
      if (now_ > limit_ns) return done();
    }
    return true;
  }

 private:
  void pump(Device& d, Link& l) {
    d.for_each_qp([&](QueuePair& qp) {
      for (int i = 0; i < 256 && qp.has_work(now_); ++i) {
        const size_t n = qp.produce(now_, buf_);
        if (!n) break;
        l.send({buf_.data(), n}, now_);
      }
    });
  }
  void deliver(Device& d, const std::vector<uint8_t>& f) {
    wire::ParsedPacket p;
    if (wire::parse(f, p) != wire::ParseError::kOk) {
      ++parse_errors_;
      return;
    }
    if (trace_)
      std::printf("%10llu %s %-36s psn %u syn 0x%02x msn %u len %u\n",
                  static_cast<unsigned long long>(now_), &d == &a_ ? "->A" : "->B",
                  std::string(wire::opcode_name(p.opcode)).c_str(), p.psn, p.aeth_syndrome,
                  p.aeth_msn, p.payload_length);
    if (QueuePair* qp = d.find_qp(p.dest_qp)) qp->on_packet(p, now_);
  }
  void fire_timers(Device& d) {
    d.for_each_qp([&](QueuePair& qp) {
      if (qp.next_deadline() <= now_) qp.on_timer(now_);
    });
  }
  uint64_t deadline(Device& d) {
    uint64_t t = std::numeric_limits<uint64_t>::max();
    d.for_each_qp([&](QueuePair& qp) { t = std::min(t, qp.next_deadline()); });
    return t;
  }
  bool work(Device& d) {
    bool w = false;
    d.for_each_qp([&](QueuePair& qp) { w = w || qp.has_work(now_); });
    return w;
  }

  Device& a_;
  Device& b_;
  Link ab_;
  Link ba_;
  uint64_t now_ = 0;
  uint64_t parse_errors_ = 0;
  bool trace_ = false;
  std::array<uint8_t, 9200> buf_{};
};

// Path for a QP on host `self` talking to host `peer` (10.0.0.x, MACs
// 02:00:00:00:00:x).
inline wire::PathSpec test_path(uint8_t self, uint8_t peer, uint32_t src_qpn,
                                uint32_t dst_qpn) {
  wire::PathSpec p;
  p.src_mac = {2, 0, 0, 0, 0, self};
  p.dst_mac = {2, 0, 0, 0, 0, peer};
  p.src_ip = wire::IpAddress::v4(0x0A000000u | self);
  p.dst_ip = wire::IpAddress::v4(0x0A000000u | peer);
  p.udp_src_port = wire::udp_src_port_entropy(src_qpn, dst_qpn);
  return p;
}

// Brings two QPs (a on host 1, b on host 2) to RTS facing each other.
// `attr` supplies the tunables; path, QPNs and PSNs are filled in here:
// a sends from a_psn (b expects it), b from b_psn.
inline bool connect(QueuePair& a, QueuePair& b, QpAttr attr, uint32_t a_psn,
                    uint32_t b_psn) {
  QpAttr aa = attr, ba = attr;
  aa.path = test_path(1, 2, a.qpn(), b.qpn());
  aa.dest_qpn = b.qpn();
  aa.sq_psn = a_psn;
  aa.rq_psn = b_psn;
  ba.path = test_path(2, 1, b.qpn(), a.qpn());
  ba.dest_qpn = a.qpn();
  ba.sq_psn = b_psn;
  ba.rq_psn = a_psn;
  for (auto [qp, at] : {std::pair{&a, &aa}, std::pair{&b, &ba}}) {
    if (qp->modify(QpState::kInit, *at) || qp->modify(QpState::kRtr, *at) ||
        qp->modify(QpState::kRts, *at))
      return false;
  }
  return true;
}

// The two ends of a loopback: a device each with one PD, one CQ (send and
// receive) and one QP.
struct TwoEnds {
  Device da, db;
  ProtectionDomain* pa = da.alloc_pd();
  ProtectionDomain* pb = db.alloc_pd();
  CompletionQueue* a_cq = da.create_cq(4096);
  CompletionQueue* b_cq = db.create_cq(4096);
  QueuePair* qa = nullptr;
  QueuePair* qb = nullptr;

  TwoEnds(uint32_t max_send_wr, uint32_t max_recv_wr) {
    QpInitAttr init;
    init.caps.max_send_wr = max_send_wr;
    init.caps.max_recv_wr = max_recv_wr;
    init.pd = pa;
    init.send_cq = init.recv_cq = a_cq;
    qa = da.create_qp(init);
    init.pd = pb;
    init.send_cq = init.recv_cq = b_cq;
    qb = db.create_qp(init);
  }

  // Registers `src` on a and `dst` on b (remote write) and posts one
  // signaled RDMA WRITE of all of `src` into `dst`; 0 or post_send's error.
  // The buffers must outlive the WRITE.
  int post_write(std::span<uint8_t> src, std::span<uint8_t> dst) {
    MemoryRegion* smr = da.reg_mr(pa, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
    MemoryRegion* dmr =
        db.reg_mr(pb, dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    Sge s{smr->iova(), static_cast<uint32_t>(src.size()), smr->lkey()};
    SendWr w;
    w.opcode = IBV_WR_RDMA_WRITE;
    w.send_flags = IBV_SEND_SIGNALED;
    w.sg_list = {&s, 1};
    w.remote_addr = dmr->iova();
    w.rkey = dmr->rkey();
    return qa->post_send(w);
  }
};

}  // namespace droce::transport::testing
