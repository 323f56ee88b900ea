// Goodput of go-back-N vs selective repeat over the in-memory lossy link
// (tests/unit/transport_link.h), in virtual time: deterministic, no DPDK.
//
// One RC QP pair, host A RDMA-WRITEs fixed-size messages to host B, keeping
// a fixed number of messages outstanding. Both directions of the link have
// the same random loss (so ACKs/NAKs are lost too), a 100 Gb/s serialization
// rate and 2 us propagation delay each way. Goodput = message payload bytes
// completed / virtual time of the last send completion. SR runs with the
// transport's default IRN knobs (sr_rto_low_ns, sr_rto_low_threshold_pkts).
//
//   droce-bench-goodput [--timeout N] [--window PSNS] [--outstanding N]
//                       [--total-mib N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "droce/transport/device.h"
#include "transport_link.h"

namespace {

using namespace droce::transport;
using testing::Impairment;
using testing::Loopback;

struct Config {
  uint8_t timeout = 6;              // IBA encoding: 4.096 us * 2^6 = 262 us
  uint32_t window = 256;            // max_inflight_psns (1 MiB at MTU 4096)
  uint32_t outstanding = 16;        // messages posted and not yet completed
  uint64_t total = 64ull << 20;     // payload bytes per run
};

struct Run {
  bool ok = false;
  uint64_t bytes = 0;
  uint64_t ns = 0;
  uint64_t retransmits = 0;
  uint64_t timeouts = 0;      // RTO_high (the IBA local ACK timeout)
  uint64_t timeouts_low = 0;  // SR only: IRN RTO_low
  uint64_t retry_exceeded = 0;
  double gbps() const { return ns ? 8.0 * static_cast<double>(bytes) / static_cast<double>(ns) : 0; }
};

Run run(const Config& cfg, uint32_t msg, double loss, Recovery rec, uint64_t seed) {
  testing::TwoEnds ends(1024, 16);
  auto& [da, db, pa, pb, a_cq, b_cq, qa, qb] = ends;

  QpAttr attr;
  attr.path_mtu = IBV_MTU_4096;
  attr.timeout = cfg.timeout;
  attr.retry_cnt = 7;
  attr.recovery = rec;
  attr.ack_every_n = 16;
  attr.ack_req_every_n = 16;
  attr.max_inflight_psns = cfg.window;
  attr.sack_window = 1u << 14;  // > window: every in-flight PSN is trackable
  Run r;
  if (!testing::connect(*qa, *qb, attr, 0x100, 0x200)) return r;

  // Each outstanding slot has its own source and destination region.
  const size_t span = static_cast<size_t>(msg) * cfg.outstanding;
  std::vector<uint8_t> src(span, 0x5A), dst(span, 0);
  MemoryRegion* smr = da.reg_mr(pa, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  MemoryRegion* dmr = db.reg_mr(pb, dst.data(), dst.size(),
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!smr || !dmr) return r;

  const uint64_t messages = cfg.total / msg;
  uint64_t posted = 0, completed = 0;
  bool error = false;
  auto post = [&](uint64_t i) {
    const uint64_t slot = i % cfg.outstanding;
    Sge sg{smr->iova() + slot * msg, msg, smr->lkey()};
    SendWr w;
    w.wr_id = i;
    w.opcode = IBV_WR_RDMA_WRITE;
    w.send_flags = IBV_SEND_SIGNALED;
    w.sg_list = {&sg, 1};
    w.remote_addr = dmr->iova() + slot * msg;
    w.rkey = dmr->rkey();
    error |= qa->post_send(w) != 0;
  };
  while (posted < messages && posted < cfg.outstanding) post(posted++);

  Impairment imp;
  imp.loss = loss;
  imp.delay_ns = 2000;      // 4 us RTT plus serialization
  imp.ns_per_byte = 0.08;   // 100 Gb/s
  Loopback net(da, db, seed, imp);
  WorkCompletion wcs[64];
  uint64_t last_ns = 0;
  auto done = [&] {
    for (int n; (n = a_cq->poll(wcs)) > 0;) {
      for (int i = 0; i < n; ++i) {
        if (wcs[i].status != IBV_WC_SUCCESS) {
          if (!error)
            std::fprintf(stderr, "wr %llu: status %d (vendor_err %u) at %llu ns\n",
                         static_cast<unsigned long long>(wcs[i].wr_id),
                         static_cast<int>(wcs[i].status), wcs[i].vendor_err,
                         static_cast<unsigned long long>(net.now()));
          error = true;
          continue;
        }
        ++completed;
        last_ns = net.now();
        if (posted < messages) post(posted++);
      }
    }
    return error || completed == messages;
  };
  const bool ran = net.run(done, 100'000'000'000ull);
  r.ok = ran && !error && net.parse_errors() == 0;
  r.bytes = completed * msg;
  r.ns = last_ns;
  r.retransmits = qa->counters().tx_retransmit_packets;
  r.timeouts = qa->counters().retransmit_timeouts;
  r.timeouts_low = qa->counters().retransmit_timeouts_low;
  r.retry_exceeded = qa->counters().retry_exceeded;
  if (!r.ok)
    std::fprintf(stderr, "%s %u B loss %.3f: %llu/%llu messages, retry_exceeded %llu\n",
                 rec == Recovery::kGoBackN ? "GBN" : "SR", msg, loss,
                 static_cast<unsigned long long>(completed),
                 static_cast<unsigned long long>(messages),
                 static_cast<unsigned long long>(r.retry_exceeded));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i + 1 < argc; i += 2) {
    const unsigned long v = std::strtoul(argv[i + 1], nullptr, 0);
    if (!std::strcmp(argv[i], "--timeout")) cfg.timeout = static_cast<uint8_t>(v);
    else if (!std::strcmp(argv[i], "--window")) cfg.window = static_cast<uint32_t>(v);
    else if (!std::strcmp(argv[i], "--outstanding")) cfg.outstanding = static_cast<uint32_t>(v);
    else if (!std::strcmp(argv[i], "--total-mib")) cfg.total = static_cast<uint64_t>(v) << 20;
    else {
      std::fprintf(stderr, "usage: %s [--timeout N] [--window PSNS] [--outstanding N] "
                           "[--total-mib N]\n", argv[0]);
      return 2;
    }
  }
  if (cfg.outstanding == 0 || cfg.window == 0 || cfg.total == 0) return 2;

  std::printf("RC RDMA WRITE, MTU 4096, 100 Gb/s, 2 us one-way delay, loss on both directions\n");
  std::printf("timeout %u (%.1f us), max_inflight_psns %u, %u messages outstanding, "
              "%llu MiB per run\n\n",
              cfg.timeout, (4096.0 * static_cast<double>(1ull << cfg.timeout)) / 1000.0,
              cfg.window, cfg.outstanding,
              static_cast<unsigned long long>(cfg.total >> 20));
  std::printf("| message | loss %% | GBN Gb/s | GBN %% | GBN rexmit | GBN RTO "
              "| SR Gb/s |  SR %% | SR rexmit | SR RTO | SR RTO_low |\n");
  std::printf("|--------:|-------:|---------:|------:|-----------:|--------:"
              "|--------:|------:|----------:|-------:|-----------:|\n");

  const uint32_t sizes[] = {64u << 10, 1u << 20};
  const double losses[] = {0, 0.001, 0.01, 0.05};
  bool all_ok = true;
  std::vector<const char*> verdicts;
  char lines[2][128];
  for (size_t s = 0; s < 2; ++s) {
    const uint32_t msg = sizes[s];
    Run base[2];
    double sr_at_1 = 0;
    for (double loss : losses) {
      Run r[2];
      const Recovery recs[2] = {Recovery::kGoBackN, Recovery::kSelectiveRepeat};
      for (int k = 0; k < 2; ++k) {
        // Same seed for both: identical loss process per frame index.
        r[k] = run(cfg, msg, loss, recs[k], 0xD0CE0000ull + s * 100 + static_cast<uint64_t>(loss * 1000));
        all_ok &= r[k].ok;
        if (loss == 0) base[k] = r[k];
      }
      auto pct = [&](int k) { return base[k].gbps() > 0 ? 100.0 * r[k].gbps() / base[k].gbps() : 0; };
      if (loss == 0.01) sr_at_1 = pct(1);
      std::printf("| %4u KiB | %6.1f | %8.2f | %5.1f | %10llu | %7llu | %7.2f | %5.1f | %9llu | %6llu "
                  "| %10llu |%s\n",
                  msg >> 10, loss * 100, r[0].gbps(), pct(0),
                  static_cast<unsigned long long>(r[0].retransmits),
                  static_cast<unsigned long long>(r[0].timeouts), r[1].gbps(), pct(1),
                  static_cast<unsigned long long>(r[1].retransmits),
                  static_cast<unsigned long long>(r[1].timeouts),
                  static_cast<unsigned long long>(r[1].timeouts_low),
                  r[0].ok && r[1].ok ? "" : !r[0].ok && !r[1].ok ? " both failed"
                                          : !r[0].ok ? " GBN failed" : " SR failed");
    }
    std::snprintf(lines[s], sizeof lines[s],
                  "%s: %u KiB, selective repeat at 1%% loss keeps %.1f%% of loss-free (target >= 90%%)",
                  sr_at_1 >= 90.0 ? "PASS" : "MISS", msg >> 10, sr_at_1);
  }
  std::printf("\n%s\n%s\n", lines[0], lines[1]);
  return all_ok ? 0 : 1;
}
