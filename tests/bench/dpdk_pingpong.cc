// The reference for droce's latency: the least a round trip over a DPDK
// port can take, with no droce in it. One frame goes back and forth
// between two processes: the client sends, the server returns each frame
// it receives as it is, the client times the round trip. Both busy-poll
// one queue from the main lcore, as droce-perf run to completion does.
//
//   droce-bench-dpdk-pingpong [EAL] -- server|client [ITERATIONS] [FRAME_BYTES] [INTERVAL_US]
//
// With INTERVAL_US the client sends a frame every that many microseconds
// whether or not the last one is back (open loop), and takes the echoes as
// they come: the reference for a paced stream of latency probes. Back to
// back, a stall of the host (a timer tick, another task) on either side
// delays the one round trip in flight; paced, it delays every frame sent
// during it, as it delays every probe, and the percentiles count it alike.
// The client stamps each frame with its send time, and the server writes
// into it, before it echoes it, how long it took to arrive: the one-way
// latency from client to server, on the host's one monotonic clock. That is
// what a probe's latency is; half a round trip averages two trips, so a
// stall in one of them counts half.
//
// The client prints one line: `pingpong iterations N half_rtt_us p50 P p99
// P p999 P max P lost L` (half the round trip, as perftest reports
// latency), paced followed by `one_way_us p50 P p99 P p999 P max P`. Back
// to back, a frame not answered within 10 ms is sent again and that round
// trip is not timed (af_packet may drop under load); paced, what is not
// back 10 ms after the last echo is lost. More than 1 % lost fails. The
// server echoes until 1 s passes without a frame.
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <time.h>
#include <vector>

namespace {

// Round trips before the timed ones (the server echoes these too).
constexpr long kWarmup = 100;

// What a frame carries after the Ethernet header: a flag asking the
// server for the one-way time, the client's send time, the server's
// arrival time minus that, and a paced frame's number (ns, host byte
// order: one host).
constexpr size_t kStampFlag = 14, kSentAt = 16, kOneWay = 24, kSeq = 32;

uint64_t load_u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store_u64(char* p, uint64_t v) { std::memcpy(p, &v, sizeof v); }

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
}

int usage(const char* why) {
  std::fprintf(stderr,
               "droce-bench-dpdk-pingpong: %s\nusage: droce-bench-dpdk-pingpong [EAL] -- "
               "server|client [ITERATIONS] [FRAME_BYTES 60..1514] [INTERVAL_US]\n",
               why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const int eal = rte_eal_init(argc, argv);
  if (eal < 0) return usage("EAL initialisation failed");
  argc -= eal;
  argv += eal;
  if (argc < 2) return usage("server or client?");
  const std::string role = argv[1];
  if (role != "server" && role != "client") return usage("the role is server or client");
  const long iters = argc > 2 ? std::atol(argv[2]) : 10000;
  const long bytes = argc > 3 ? std::atol(argv[3]) : 64;
  const long interval_us = argc > 4 ? std::atol(argv[4]) : 0;
  if (iters < 1) return usage("ITERATIONS must be at least 1");
  if (bytes < 60 || bytes > 1514) return usage("FRAME_BYTES must be 60..1514");
  if (interval_us < 0 || interval_us > 1'000'000) return usage("INTERVAL_US must be 0..1000000");
  if (rte_eth_dev_count_avail() < 1) return usage("no port (give one --vdev)");

  rte_mempool* pool = rte_pktmbuf_pool_create("pingpong", 4095, 256, 0,
                                              RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());
  if (!pool) return usage("cannot create the mbuf pool");
  const uint16_t port = 0;
  rte_eth_conf conf{};
  if (rte_eth_dev_configure(port, 1, 1, &conf) != 0 ||
      rte_eth_rx_queue_setup(port, 0, 1024, rte_eth_dev_socket_id(port), nullptr, pool) != 0 ||
      rte_eth_tx_queue_setup(port, 0, 1024, rte_eth_dev_socket_id(port), nullptr) != 0 ||
      rte_eth_dev_start(port) != 0)
    return usage("cannot start port 0");
  // memif: the link is up once the peer has connected.
  for (const uint64_t end = now_ns() + 10'000'000'000ull;;) {
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(port, &link) == 0 && link.link_status) break;
    if (now_ns() > end) return usage("the link did not come up within 10 s");
  }

  rte_mbuf* burst[32];
  if (role == "server") {
    long echoed = 0;
    uint64_t last = now_ns();
    // The first frame may take a while (the client starts later); after
    // that, a second of silence means the client is done.
    while (now_ns() - last < (echoed ? 1'000'000'000ull : 10'000'000'000ull)) {
      const uint16_t n = rte_eth_rx_burst(port, 0, burst, 32);
      if (n == 0) continue;
      last = now_ns();
      for (uint16_t i = 0; i < n; ++i) {
        char* d = rte_pktmbuf_mtod(burst[i], char*);
        if (burst[i]->data_len >= kOneWay + 8 && d[kStampFlag])
          store_u64(d + kOneWay, last - load_u64(d + kSentAt));
      }
      uint16_t sent = 0;
      while (sent < n) sent += rte_eth_tx_burst(port, 0, burst + sent, n - sent);
      echoed += n;
    }
    rte_eth_dev_stop(port);
    rte_eal_cleanup();
    return echoed >= iters ? 0 : 1;
  }

  std::vector<uint64_t> half_rtt, one_way;
  half_rtt.reserve(static_cast<size_t>(iters));
  const bool paced = interval_us > 0;
  if (paced) one_way.reserve(static_cast<size_t>(iters));
  long lost = 0;
  auto send_frame = [&](long seq) -> bool {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (!m) return false;
    char* d = rte_pktmbuf_append(m, static_cast<uint16_t>(bytes));
    std::memset(d, 0, static_cast<size_t>(bytes));
    std::memset(d, 0xff, 6);                 // broadcast destination
    d[12] = char(0x88), d[13] = char(0xb5);  // IEEE 802 local experimental EtherType
    d[kStampFlag] = paced;
    store_u64(d + kSeq, static_cast<uint64_t>(seq));
    store_u64(d + kSentAt, now_ns());
    while (rte_eth_tx_burst(port, 0, &m, 1) == 0) {
    }
    return true;
  };
  const long total = iters + kWarmup;
  if (paced) {
    const uint64_t interval = static_cast<uint64_t>(interval_us) * 1000;
    long sent = 0, back = 0;
    uint64_t next = now_ns(), last_heard = next;
    while (back < total) {
      const uint64_t now = now_ns();
      if (sent < total && now >= next) {
        if (!send_frame(sent)) return usage("out of mbufs");
        ++sent;
        // Slots missed while this side was stalled are skipped, not sent
        // in a burst.
        next = std::max(next + interval, now);
      }
      const uint16_t n = rte_eth_rx_burst(port, 0, burst, 32);
      if (n > 0) {
        last_heard = now_ns();
        for (uint16_t i = 0; i < n; ++i) {
          const char* d = rte_pktmbuf_mtod(burst[i], const char*);
          if (static_cast<long>(load_u64(d + kSeq)) < kWarmup) continue;
          half_rtt.push_back((last_heard - load_u64(d + kSentAt)) / 2);
          one_way.push_back(load_u64(d + kOneWay));
        }
        rte_pktmbuf_free_bulk(burst, n);
        back += n;
      } else if (sent == total && now - last_heard > 10'000'000ull) {
        break;  // what is not back after 10 ms is lost
      }
    }
    lost = total - back;
    if (lost > iters / 100 + 10) {
      std::fprintf(stderr, "droce-bench-dpdk-pingpong: %ld frames lost\n", lost);
      return 1;
    }
  }
  // Back to back: one frame in flight; true once one comes back within 10 ms.
  auto round_trip = [&]() -> bool {
    if (!send_frame(0)) return false;
    for (const uint64_t end = now_ns() + 10'000'000ull; now_ns() < end;) {
      const uint16_t n = rte_eth_rx_burst(port, 0, burst, 32);
      if (n > 0) {
        rte_pktmbuf_free_bulk(burst, n);
        return true;
      }
    }
    return false;
  };
  for (long i = 0; i < total && !paced; ++i) {
    const uint64_t t0 = now_ns();
    if (round_trip()) {
      if (i >= kWarmup) half_rtt.push_back((now_ns() - t0) / 2);
      continue;
    }
    // Lost: sent again until answered; that round trip is not timed.
    do {
      if (++lost > iters / 100 + 10) {
        std::fprintf(stderr, "droce-bench-dpdk-pingpong: %ld frames lost\n", lost);
        return 1;
      }
    } while (!round_trip());
  }
  if (half_rtt.empty()) return usage("no round trip was timed");
  // "p50 P p99 P p999 P max P" of the samples, in us.
  auto percentiles = [](std::vector<uint64_t>& v) {
    std::sort(v.begin(), v.end());
    auto pct = [&](double q) {
      return static_cast<double>(v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))]) /
             1e3;
    };
    char out[128];
    std::snprintf(out, sizeof out, "p50 %.2f p99 %.2f p999 %.2f max %.2f", pct(0.5), pct(0.99),
                  pct(0.999), static_cast<double>(v.back()) / 1e3);
    return std::string(out);
  };
  std::printf("pingpong iterations %ld half_rtt_us %s lost %ld", iters,
              percentiles(half_rtt).c_str(), lost);
  if (paced) std::printf(" one_way_us %s", percentiles(one_way).c_str());
  std::printf("\n");
  rte_eth_dev_stop(port);
  rte_eal_cleanup();
  return 0;
}
