// droce's receive path on a DPDK port, for tests/bench/engine_bench.py.
//
//   droce-bench-engine-rx gen OUT.pcap PAYLOAD COUNT [uc]
//       writes COUNT RC RDMA WRITE ONLY frames (PSN 0..COUNT-1, AckReq set)
//       to one QP/MR, the traffic a RoCEv2 responder receives; PSN i writes
//       at offset i * PAYLOAD, so the MR is COUNT * PAYLOAD bytes; with `uc`
//       the same stream for a UC QP;
//   droce-bench-engine-rx run [EAL options] -- PAYLOAD COUNT SECONDS [ring PCAP] [uc] [floor]
//       one lcore: rte_eth_rx_burst -> Endpoint::receive (parse, ICRC check,
//       dispatch, responder places the payload in the MR and queues an ACK)
//       -> Endpoint::transmit into mbufs -> rte_eth_tx_burst (the ACKs).
//       The loop is the engine's poll_rx/poll_tx on one port. By default the
//       port is expected to be net_pcap with infinite_rx=1 replaying the gen
//       file; net_pcap copies every frame into a fresh mbuf, a cost a NIC's
//       DMA does not put on the core. With `ring PCAP` the port is a ring
//       ethdev (rte_eth_from_rings) fed by this loop with the PCAP's frames,
//       loaded once into mbufs and handed over by reference count, the way
//       frames a NIC has written arrive: the core's own receive cost.
//       `uc`: the QP is UC (a `gen ... uc` file: nothing is ACKed). A last
//       argument `floor` receives and frees the frames and does nothing
//       else (no endpoint, no ACKs): the port's own per-frame cost, which
//       droce pays on top of its work, as testpmd pays it on top of
//       forwarding.
//
// This loop restates the engine's per-port loop (src/engine/engine.cc
// worker_loop, poll_rx, poll_tx) so it can reset the QP between passes.
// engine_bench.py checks that it stands for the engine: on the UC stream,
// which needs no reset (a UC responder resynchronises on a PSN gap, IBA
// 9.8.3), it runs this loop and droce-endpoint itself side by side.
//
// The pcap repeats, PSNs do not: after every pass of COUNT frames the QP is
// moved RESET -> INIT -> RTR -> RTS with expected PSN 0 again (checked: the
// responder must have advanced exactly COUNT PSNs, i.e. placed every frame).
// The real engine would not do that modify, and it does per-iteration
// bookkeeping this loop leaves out (command queue, capture hook,
// completion draining, shard counters): the UC check above measures both
// ways on the same frames.
#include <algorithm>
#include <fmt/format.h>
#include <pcap/pcap.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_eth_ring.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "droce/endpoint/endpoint.h"
#include "droce/wire/build.h"
#include "responder_under_test.h"
#include "write_stream.h"

namespace {

using namespace droce;

int gen(const char* out, size_t payload, uint32_t count, uint8_t service) {
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 65535);
  pcap_dumper_t* d = pcap_dump_open(dead, out);
  if (!d) {
    fmt::print(stderr, "cannot write {}\n", out);
    return 1;
  }
  std::vector<uint8_t> data(payload), frame(payload + 256);
  for (size_t i = 0; i < payload; ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  for (uint32_t psn = 0; psn < count; ++psn) {
    const size_t n = bench::write_only_frame(psn, data, frame, service);
    pcap_pkthdr h{};
    h.caplen = h.len = static_cast<uint32_t>(n);
    pcap_dump(reinterpret_cast<u_char*>(d), &h, frame.data());
  }
  pcap_dump_close(d);
  pcap_close(dead);
  return 0;
}

// The frames of a gen file, each in an mbuf of `pool`.
std::vector<rte_mbuf*> load_frames(const char* path, rte_mempool* pool) {
  char err[PCAP_ERRBUF_SIZE];
  pcap_t* pc = pcap_open_offline(path, err);
  std::vector<rte_mbuf*> out;
  if (!pc) {
    fmt::print(stderr, "{}: {}\n", path, err);
    return out;
  }
  pcap_pkthdr* h = nullptr;
  const u_char* data = nullptr;
  while (pcap_next_ex(pc, &h, &data) == 1) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (!m || rte_pktmbuf_append(m, static_cast<uint16_t>(h->caplen)) == nullptr) {
      fmt::print(stderr, "{}: no mbuf for frame {}\n", path, out.size());
      out.clear();
      break;
    }
    std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), data, h->caplen);
    out.push_back(m);
  }
  pcap_close(pc);
  return out;
}

int run(int argc, char** argv) {
  const int eal = rte_eal_init(argc, argv);
  if (eal < 0) return 2;
  argc -= eal;
  argv += eal;
  if (argc < 4) {
    fmt::print(stderr, "run [EAL] -- PAYLOAD COUNT SECONDS [ring PCAP] [uc] [floor]\n");
    return 2;
  }
  const size_t payload = std::strtoul(argv[1], nullptr, 0);
  const uint32_t count = static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 0));
  const double seconds = std::strtod(argv[3], nullptr);
  const bool ring_mode = argc >= 6 && std::strcmp(argv[4], "ring") == 0;
  bool floor_mode = false, uc = false;
  for (int i = ring_mode ? 6 : 4; i < argc; ++i) {
    if (std::strcmp(argv[i], "floor") == 0) {
      floor_mode = true;
    } else if (std::strcmp(argv[i], "uc") == 0) {
      uc = true;
    } else {
      fmt::print(stderr, "run: unknown argument '{}' (ring PCAP, uc, floor)\n", argv[i]);
      return 2;
    }
  }
  uint16_t port = 0;
  rte_mempool* pool = rte_pktmbuf_pool_create("bench", 8191 + count, 256, 0,
                                              4096 + 512 + RTE_PKTMBUF_HEADROOM,
                                              rte_socket_id());
  // Ring mode: the frames, and the rings of the port that carries them.
  std::vector<rte_mbuf*> frames_in;
  rte_ring* rx_ring = nullptr;
  rte_ring* tx_ring = nullptr;
  if (ring_mode) {
    frames_in = load_frames(argv[5], pool);
    rx_ring = rte_ring_create("bench_rx", 1024, rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
    tx_ring = rte_ring_create("bench_tx", 1024, rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
    const int id = rx_ring && tx_ring && frames_in.size() == count
                       ? rte_eth_from_rings("bench_ring", &rx_ring, 1, &tx_ring, 1, rte_socket_id())
                       : -1;
    if (id < 0) {
      fmt::print(stderr, "ring port setup failed (frames loaded: {})\n", frames_in.size());
      return 1;
    }
    port = static_cast<uint16_t>(id);
  }
  rte_eth_conf conf{};
  if (!pool || rte_eth_dev_configure(port, 1, 1, &conf) != 0 ||
      rte_eth_rx_queue_setup(port, 0, 1024, rte_socket_id(), nullptr, pool) != 0 ||
      rte_eth_tx_queue_setup(port, 0, 1024, rte_socket_id(), nullptr) != 0 ||
      rte_eth_dev_start(port) != 0) {
    fmt::print(stderr, "port setup failed\n");
    return 1;
  }
  bench::ResponderUnderTest responder(payload * count + 64, IBV_MTU_4096, true,
                                      uc ? transport::QpType::kUc : transport::QpType::kRc);

  constexpr uint16_t kBurst = 32;
  rte_mbuf* rx[kBurst];
  rte_mbuf* tx[kBurst];
  std::span<uint8_t> bufs[kBurst];
  uint32_t lens[kBurst];
  unsigned stash_n = 0;
  uint32_t next_frame = 0;
  uint64_t frames = 0, in_pass = 0, passes = 0, bad_passes = 0, acks = 0;
  const uint64_t hz = rte_get_tsc_hz();
  const double ns_per_tick = 1'000'000'000.0 / hz;  // a multiply per read, as the engine
  const auto ns = [&] { return rte_get_tsc_cycles() * ns_per_tick; };
  const auto cpu_ns = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
  };
  const double cpu0 = cpu_ns();
  // Outside the loop, as the engine's Shard::rx_frames: an array of spans
  // declared inside it is zeroed on every iteration.
  std::span<const uint8_t> views[kBurst];
  const double t0 = ns();
  const double t_end = t0 + seconds * 1e9;
  double now = t0;
  for (uint64_t iter = 0;; ++iter) {
    // One clock read per iteration, as the engine's worker loop.
    now = ns();
    if ((iter & 255) == 0 && now >= t_end) break;
    if (ring_mode) {
      // The "NIC" delivers the next burst of frames: a reference each.
      rte_mbuf* feed[kBurst];
      for (uint16_t i = 0; i < kBurst; ++i) {
        feed[i] = frames_in[next_frame];
        rte_mbuf_refcnt_update(feed[i], 1);
        next_frame = next_frame + 1 == count ? 0 : next_frame + 1;
      }
      const unsigned q = rte_ring_sp_enqueue_burst(rx_ring, reinterpret_cast<void**>(feed), kBurst,
                                                   nullptr);
      for (unsigned i = q; i < kBurst; ++i) rte_mbuf_refcnt_update(feed[i], -1);
      next_frame = (next_frame + count - (kBurst - q)) % count;
    }
    const uint16_t n = rte_eth_rx_burst(port, 0, rx, kBurst);
    if (floor_mode) {
      frames += n;
      if (n) rte_pktmbuf_free_bulk(rx, n);
      continue;
    }
    const uint64_t tnow = static_cast<uint64_t>(now);
    for (uint16_t i = 0; i < n; ++i)
      views[i] = std::span(rte_pktmbuf_mtod(rx[i], const uint8_t*), rx[i]->data_len);
    // As the engine's poll_rx: one receive_burst per burst, split where a
    // pass of the pcap ends.
    for (uint16_t i = 0; i < n;) {
      if (in_pass == count) {
        // Pass done: every PSN of it must have been executed.
        if (responder.qp->expected_psn() != (count & 0xFFFFFF)) ++bad_passes;
        ++passes;
        in_pass = 0;
        responder.restart();
      }
      const uint16_t take = static_cast<uint16_t>(std::min<uint64_t>(n - i, count - in_pass));
      responder.ep.receive_burst(std::span(views + i, take), tnow);
      in_pass += take;
      i += take;
    }
    frames += n;
    if (n) rte_pktmbuf_free_bulk(rx, n);
    // ACKs out, as the engine's poll_tx does it: a stash of mbufs stays
    // allocated between iterations, so an iteration with nothing to send
    // costs no allocation.
    if (stash_n < kBurst) {
      if (rte_pktmbuf_alloc_bulk(pool, tx + stash_n, kBurst - stash_n) != 0) continue;
      stash_n = kBurst;
    }
    for (int i = 0; i < kBurst; ++i)
      bufs[i] = std::span(rte_pktmbuf_mtod(tx[i], uint8_t*), rte_pktmbuf_tailroom(tx[i]));
    const size_t k =
        responder.ep.transmit(tnow, std::span(bufs, kBurst), std::span(lens, kBurst));
    if (k == 0) continue;
    for (size_t i = 0; i < k; ++i) tx[i]->data_len = tx[i]->pkt_len = static_cast<uint16_t>(lens[i]);
    const uint16_t sent = rte_eth_tx_burst(port, 0, tx, static_cast<uint16_t>(k));
    if (ring_mode) {
      // Nobody reads the ACKs: drop them as net_pcap without tx_pcap does.
      rte_mbuf* done[kBurst];
      const unsigned d =
          rte_ring_sc_dequeue_burst(tx_ring, reinterpret_cast<void**>(done), kBurst, nullptr);
      if (d) rte_pktmbuf_free_bulk(done, d);
    }
    acks += k;
    if (sent < k) rte_pktmbuf_free_bulk(tx + sent, static_cast<unsigned>(k - sent));
    for (size_t i = k; i < kBurst; ++i) tx[i - k] = tx[i];
    stash_n = kBurst - k;
  }
  if (stash_n) rte_pktmbuf_free_bulk(tx, stash_n);
  for (rte_mbuf* m : frames_in) rte_pktmbuf_free(m);
  const double secs = (ns() - t0) / 1e9;
  const double cpu_secs = (cpu_ns() - cpu0) / 1e9;
  const uint64_t placed = passes * count - bad_passes * count;
  fmt::print("{{\"payload\": {}, \"frames\": {}, \"seconds\": {:.3f}, \"mpps\": {:.4f}, "
             "\"passes\": {}, \"bad_passes\": {}, \"acks\": {}, \"rx_malformed\": {}, "
             "\"placed_gbytes_per_sec\": {:.3f}, \"cpu_seconds\": {:.3f}, "
             "\"mpps_per_cpu_second\": {:.4f}}}\n",
             payload, frames, secs, frames / secs / 1e6, passes, bad_passes, acks,
             responder.ep.counters().rx_malformed,
             static_cast<double>(placed) * static_cast<double>(payload) / secs / 1e9,
             cpu_secs, frames / cpu_secs / 1e6);
  rte_eth_dev_stop(port);
  rte_eth_dev_close(port);
  rte_eal_cleanup();
  return bad_passes ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool uc_gen = argc == 6 && std::strcmp(argv[5], "uc") == 0;
  if (argc >= 2 && std::strcmp(argv[1], "gen") == 0 && (argc == 5 || uc_gen))
    return gen(argv[2], std::strtoul(argv[3], nullptr, 0),
               static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 0)),
               uc_gen ? IBV_OPCODE_UC : IBV_OPCODE_RC);
  if (argc >= 2 && std::strcmp(argv[1], "run") == 0) return run(argc - 1, argv + 1);
  fmt::print(stderr, "usage: {} gen OUT.pcap PAYLOAD COUNT [uc] | run [EAL] -- PAYLOAD COUNT "
                     "SECONDS [ring PCAP] [uc] [floor]\n", argv[0]);
  return 2;
}
