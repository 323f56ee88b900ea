// droce-bench-wire: CRC-32 / ICRC throughput against DPDK's rte_net_crc and
// memcpy, and wire::parse rate on a mixed packet set, in one run.
//
//   build/tests/bench/droce-bench-wire [--reps N]
//
// Needs no EAL: rte_net_crc only reads CPUID and its own tables (built by a
// library constructor). It does consult EAL's "max SIMD bitwidth", which is
// 0 until rte_eal_init (and 256 after it, unless --force-max-simd-bitwidth);
// we set it to 512 ourselves, as an EAL option would, so that
// RTE_NET_CRC_AVX512 really selects DPDK's VPCLMULQDQ code.
//
// Timing: each figure is the best of N (default 31) repetitions of a batch
// sized to take about a millisecond (short batches, many of them: on a busy
// machine the best one is the one nobody preempted); results feed a checksum printed at the end so no call
// can be optimised away. Buffers are small enough to stay in L1/L2: this
// measures the CRC, not the memory system.
#include <infiniband/opcode.h>
#include <rte_net_crc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "droce/wire/build.h"
#include "droce/wire/crc32.h"
#include "droce/wire/icrc.h"
#include "droce/wire/packet.h"

// DPDK 22.11's rte_vect.h declares this without extern "C", so a C++
// caller would look for a mangled name; declare it with C linkage here.
extern "C" int rte_vect_set_max_simd_bitwidth(uint16_t bitwidth);

namespace {

constexpr uint16_t kSimd512 = 512;  // RTE_VECT_SIMD_512
using droce::wire::Crc32Impl;
using Clock = std::chrono::steady_clock;

int g_reps = 31;
uint64_t g_sink = 0;  // every result is folded in here and printed

// Keeps the compiler from assuming it knows memory contents or that a store
// is dead.
inline void clobber(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

// Best nanoseconds per call of fn(), over g_reps batches of a calibrated size.
template <typename Fn>
double best_ns_per_call(Fn&& fn) {
  size_t batch = 16;
  for (;;) {  // calibrate: a batch of at least ~1 ms
    const auto t0 = Clock::now();
    for (size_t i = 0; i < batch; ++i) fn();
    const auto ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    if (ns >= 1e6 || batch >= (size_t{1} << 30)) break;
    batch *= 2;
  }
  double best = 1e300;
  for (int r = 0; r < g_reps; ++r) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < batch; ++i) fn();
    const auto ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    best = std::min(best, ns / static_cast<double>(batch));
  }
  return best;
}

constexpr size_t kSizes[] = {64, 1024, 4096};

struct Row {
  std::string name;
  double gbps[std::size(kSizes)];
};

// 64-byte-aligned buffer of pseudo-random bytes.
struct Buffer {
  explicit Buffer(size_t n) : data(static_cast<uint8_t*>(std::aligned_alloc(64, n))), size(n) {
    uint32_t x = 0x12345678;
    for (size_t i = 0; i < n; ++i) {
      x = x * 1664525u + 1013904223u;
      data[i] = static_cast<uint8_t>(x >> 24);
    }
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* data;
  size_t size;
};

template <typename Crc>
Row crc_row(std::string name, const Buffer& buf, Crc&& crc) {
  Row row{std::move(name), {}};
  for (size_t i = 0; i < std::size(kSizes); ++i) {
    const size_t len = kSizes[i];
    uint32_t acc = 0;
    const double ns = best_ns_per_call([&] {
      clobber(buf.data);
      acc ^= crc(buf.data, len);
    });
    g_sink += acc;
    row.gbps[i] = static_cast<double>(len) / ns;
  }
  return row;
}

void print_row(const Row& r) {
  std::printf("  %-44s", r.name.c_str());
  for (double g : r.gbps) std::printf(" %9.2f", g);
  std::printf("\n");
}

// ---------------------------------------------------------------------------
// Parse benchmark: a mix of what a RoCE NIC receives.

struct MixEntry {
  uint8_t opcode;
  size_t payload;
};

std::vector<std::vector<uint8_t>> build_mix(size_t* skipped) {
  using droce::wire::IpAddress;
  using droce::wire::PathSpec;
  using droce::wire::TransportSpec;
  const MixEntry entries[] = {
      {IBV_OPCODE_RC_SEND_ONLY, 64},
      {IBV_OPCODE_RC_SEND_ONLY, 1024},
      {IBV_OPCODE_RC_RDMA_WRITE_ONLY, 4096},
      {IBV_OPCODE_RC_RDMA_WRITE_MIDDLE, 4096},
      {IBV_OPCODE_RC_RDMA_READ_REQUEST, 0},
      {IBV_OPCODE_RC_RDMA_READ_RESPONSE_ONLY, 1024},
      {IBV_OPCODE_RC_ACKNOWLEDGE, 0},
      {IBV_OPCODE_UD_SEND_ONLY, 256},
  };
  std::vector<uint8_t> payload(4096);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 31 + 7);
  std::vector<std::vector<uint8_t>> frames;
  *skipped = 0;
  for (bool ipv6 : {false, true}) {
    for (bool vlan : {false, true}) {
      PathSpec path;
      path.dst_mac = {0x02, 0, 0, 0, 0, 0x02};
      path.src_mac = {0x02, 0, 0, 0, 0, 0x01};
      path.vlan = vlan;
      path.vlan_id = 7;
      if (ipv6) {
        path.src_ip.v6 = path.dst_ip.v6 = true;
        path.src_ip.bytes[0] = path.dst_ip.bytes[0] = 0xfd;
        path.src_ip.bytes[15] = 1;
        path.dst_ip.bytes[15] = 2;
      } else {
        path.src_ip = IpAddress::v4(0x0A000001);
        path.dst_ip = IpAddress::v4(0x0A000002);
      }
      path.udp_src_port = droce::wire::udp_src_port_entropy(0x11, 0x22);
      for (const MixEntry& e : entries) {
        TransportSpec t;
        t.opcode = e.opcode;
        t.dest_qp = 0x22;
        t.psn = 100;
        t.reth_va = 0x10000;
        t.reth_rkey = 0x1234;
        t.reth_dma_length = static_cast<uint32_t>(e.payload ? e.payload : 4096);
        t.deth_qkey = 0x11111111;
        t.deth_src_qp = 0x11;
        std::vector<uint8_t> frame(droce::wire::packet_size(path, e.opcode, e.payload) + 64);
        const size_t n = droce::wire::build_packet(
            path, t, std::span<const uint8_t>(payload.data(), e.payload), frame);
        if (n == 0) {
          ++*skipped;
          continue;
        }
        frame.resize(n);
        frames.push_back(std::move(frame));
      }
    }
  }
  return frames;
}

void bench_parse() {
  size_t skipped = 0;
  const auto frames = build_mix(&skipped);
  if (frames.empty()) {
    std::printf("\nparse: build_packet produced no frames (wire layer not ready?)\n");
    return;
  }
  size_t total = 0;
  for (const auto& f : frames) total += f.size();
  // Every frame must parse cleanly, or the rate means nothing.
  for (const auto& f : frames) {
    droce::wire::ParsedPacket p;
    const auto err = droce::wire::parse(f, p);
    if (err != droce::wire::ParseError::kOk) {
      std::printf("\nparse: a %zu-byte frame of the mix fails to parse: %s\n", f.size(),
                  std::string(droce::wire::to_string(err)).c_str());
      return;
    }
  }
  std::printf("\nwire::parse, mixed set: %zu frames (RC SEND/WRITE/READ req+resp/ACK, UD SEND;"
              " IPv4/IPv6, with/without VLAN), mean %.0f B%s\n",
              frames.size(), static_cast<double>(total) / frames.size(),
              skipped ? " (some opcodes skipped: build_packet refused them)" : "");
  for (bool icrc : {false, true}) {
    droce::wire::ParseOptions opts;
    opts.verify_icrc = icrc;
    uint64_t acc = 0;
    const double ns = best_ns_per_call([&] {
      for (const auto& f : frames) {
        clobber(f.data());
        droce::wire::ParsedPacket p;
        acc += static_cast<uint64_t>(droce::wire::parse(f, p, opts)) + p.psn + p.payload_length;
      }
    });
    g_sink += acc;
    const double per_pkt = ns / static_cast<double>(frames.size());
    std::printf("  %-44s %9.2f Mpps  %8.1f ns/pkt  %7.1f Gbit/s of frames\n",
                icrc ? "parse + ICRC verify" : "parse, no ICRC", 1e3 / per_pkt, per_pkt,
                8.0 * static_cast<double>(total) / ns);
  }
}

// icrc_compute over one frame built from `t` and `payload`, as the TX and
// RX paths call it.
void bench_icrc_of(const droce::wire::TransportSpec& t, const std::vector<uint8_t>& payload,
                   const char* what) {
  droce::wire::PathSpec path;
  path.src_ip = droce::wire::IpAddress::v4(0x0A000001);
  path.dst_ip = droce::wire::IpAddress::v4(0x0A000002);
  std::vector<uint8_t> frame(droce::wire::packet_size(path, t.opcode, payload.size()) + 64);
  const size_t n = droce::wire::build_packet(path, t, payload, frame);
  if (n == 0) return;
  const uint8_t* l3 = frame.data() + 14;
  const size_t len = n - 14 - 4;
  uint32_t acc = 0;
  const double ns = best_ns_per_call([&] {
    clobber(l3);
    acc ^= droce::wire::icrc_compute(l3, len, false);
  });
  g_sink += acc;
  std::printf("icrc_compute, %zu-byte %s: %.2f GB/s, %.1f ns, %.2f Mpps\n", n, what,
              static_cast<double>(len) / ns, ns, 1e3 / ns);
}

void bench_icrc() {
  // A whole 4 KiB RC WRITE_ONLY frame, and an ACK (its 44-byte datagram is
  // the short path: one per receive burst).
  std::printf("\n");
  droce::wire::TransportSpec write;
  write.opcode = IBV_OPCODE_RC_RDMA_WRITE_ONLY;
  write.reth_dma_length = 4096;
  bench_icrc_of(write, std::vector<uint8_t>(4096, 0x5A),
                "RC_RDMA_WRITE_ONLY frame (4 KiB payload)");
  droce::wire::TransportSpec ack;
  ack.opcode = IBV_OPCODE_RC_ACKNOWLEDGE;
  bench_icrc_of(ack, {}, "RC_ACKNOWLEDGE frame");
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      g_reps = std::atoi(argv[++i]);
      if (g_reps < 1) {
        std::fprintf(stderr, "--reps: expected a positive integer, got '%s'\n", argv[i]);
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--reps N]   (default %d)\n", argv[0], g_reps);
      return 2;
    }
  }

  const Buffer src(1 << 16);
  Buffer dst(1 << 16);

  std::printf("droce-bench-wire: CRC-32 throughput, GB/s (1e9 B/s), best of %d;"
              " buffers 64-byte aligned, in cache\n",
              g_reps);
  std::printf("  %-44s %9s %9s %9s\n", "implementation", "64 B", "1 KiB", "4 KiB");

  std::vector<Row> rows;
  const Crc32Impl best = droce::wire::crc32_best_impl();
  for (Crc32Impl impl : {Crc32Impl::kBitwise, Crc32Impl::kSliceBy8, Crc32Impl::kPclmul,
                         Crc32Impl::kVpclmulAvx512}) {
    if (!droce::wire::crc32_impl_supported(impl)) {
      std::printf("  %-44s (not supported on this CPU)\n",
                  std::string(droce::wire::to_string(impl)).c_str());
      continue;
    }
    std::string name = "droce " + std::string(droce::wire::to_string(impl));
    rows.push_back(crc_row(name, src, [impl](const uint8_t* p, size_t n) {
      return droce::wire::crc32_update_with(impl, droce::wire::kCrc32Init, p, n);
    }));
    print_row(rows.back());
  }
  rows.push_back(crc_row("droce crc32() (dispatched: " +
                             std::string(droce::wire::to_string(best)) + ")",
                         src, [](const uint8_t* p, size_t n) { return droce::wire::crc32(p, n); }));
  print_row(rows.back());
  const Row ours = rows.back();

  // DPDK. Check it agrees with us before timing it.
  rte_vect_set_max_simd_bitwidth(kSimd512);
  const uint32_t expected = droce::wire::crc32(src.data, 4096);
  Row dpdk_rows[2];
  const struct {
    rte_net_crc_alg alg;
    const char* name;
  } algs[] = {{RTE_NET_CRC_SSE42, "rte_net_crc SSE42"}, {RTE_NET_CRC_AVX512, "rte_net_crc AVX512"}};
  for (size_t a = 0; a < 2; ++a) {
    rte_net_crc_set_alg(algs[a].alg);
    const uint32_t got = rte_net_crc_calc(src.data, 4096, RTE_NET_CRC32_ETH);
    if (got != expected) {
      std::printf("  %s disagrees: 0x%08x, ours 0x%08x\n", algs[a].name, got, expected);
    }
    dpdk_rows[a] = crc_row(algs[a].name, src, [](const uint8_t* p, size_t n) {
      return rte_net_crc_calc(p, static_cast<uint32_t>(n), RTE_NET_CRC32_ETH);
    });
    print_row(dpdk_rows[a]);
  }

  Row copy{"memcpy (same bytes)", {}};
  for (size_t i = 0; i < std::size(kSizes); ++i) {
    const size_t len = kSizes[i];
    const double ns = best_ns_per_call([&] {
      std::memcpy(dst.data, src.data, len);
      clobber(dst.data);
    });
    copy.gbps[i] = static_cast<double>(len) / ns;
  }
  g_sink += dst.data[100];
  print_row(copy);

  const size_t k4 = std::size(kSizes) - 1;
  std::printf("\nratio at 4 KiB, droce crc32() / rte_net_crc: %.2fx vs AVX512, %.2fx vs SSE42"
              " (target >= 2x)\n",
              ours.gbps[k4] / dpdk_rows[1].gbps[k4], ours.gbps[k4] / dpdk_rows[0].gbps[k4]);
  std::printf("100 GbE at 4 KiB frames needs ~12.5 GB/s of CRC: droce %.1f GB/s on one core\n",
              ours.gbps[k4]);

  bench_icrc();
  bench_parse();
  std::printf("\n(checksum %llx)\n", static_cast<unsigned long long>(g_sink));
  return 0;
}
