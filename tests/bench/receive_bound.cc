// A lower bound for the receive work of the 64 B target (docs/PERFORMANCE.md,
// "Engine: receive"): the least a software RoCE responder must do per RDMA WRITE ONLY
// frame, written as one flat loop with nothing general in it, next to
// droce's real path (Endpoint::receive_burst + transmit) on the same frames
// in the same run.
//
// The bound does, per frame: the masked compare of the headers with the
// QP's template (64 bytes, SSE2 as droce's), the
// IPv4 header checksum, the IP and UDP lengths, the ICRC (droce's own
// batched CRC, wire::icrc_check_many, the fastest this code base has), the
// PSN, R_Key and range check, the 64-byte copy into the memory region; and
// per burst one ACK frame built. It leaves out everything a real responder
// also needs (QP lookup by QPN, QP state, opcode sequence, DMA length
// rules, counters, ACK timers, scheduling): a bound, not an alternative.
//
//   droce-bench-receive-bound [SECONDS, default 2]
#include <fmt/format.h>
#include <infiniband/opcode.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "droce/endpoint/endpoint.h"
#include "droce/wire/build.h"
#include "droce/wire/icrc.h"
#include "droce/wire/rx_template.h"
#include "responder_under_test.h"
#include "write_stream.h"

namespace {

using namespace droce;
using Clock = std::chrono::steady_clock;
constexpr size_t kPayload = 64;
constexpr uint32_t kFrames = 256;
constexpr size_t kBurst = 32;

// droce's path, as droce-bench-receive runs it.
double droce_ns(const std::vector<std::span<const uint8_t>>& views, double seconds, bool& ok) {
  bench::ResponderUnderTest responder(kPayload * kFrames + 64);
  std::vector<std::vector<uint8_t>> tx_store(kBurst, std::vector<uint8_t>(256));
  std::vector<std::span<uint8_t>> tx(tx_store.begin(), tx_store.end());
  uint32_t lens[kBurst];
  uint64_t done = 0, now = 0;
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < std::chrono::duration<double>(seconds)) {
    for (size_t i = 0; i < kFrames; i += kBurst) {
      responder.ep.receive_burst(std::span(views).subspan(i, kBurst), ++now);
      responder.ep.transmit(now, tx, lens);
    }
    done += kFrames;
    ok = ok && responder.qp->expected_psn() == kFrames;
    responder.restart();
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / done;
}

// The template's 64 bytes, masked (SSE2, 16 bytes at a time, as droce's),
// under the mask of the bench's layout (IPv4, no VLAN).
bool headers_match(const wire::RxTemplate& t, const uint8_t* f) {
  const uint8_t* m = wire::detail::Layout<false, false>::kMask.bytes.data();
#if defined(__SSE2__)
  __m128i diff = _mm_setzero_si128();
  for (size_t at = 0; at < 64; at += 16) {
    const __m128i have = _mm_loadu_si128(reinterpret_cast<const __m128i*>(f + at));
    const __m128i want = _mm_load_si128(reinterpret_cast<const __m128i*>(t.expect + at));
    const __m128i mask = _mm_load_si128(reinterpret_cast<const __m128i*>(m + at));
    diff = _mm_or_si128(diff, _mm_and_si128(_mm_xor_si128(have, want), mask));
  }
  return _mm_movemask_epi8(_mm_cmpeq_epi8(diff, _mm_setzero_si128())) == 0xFFFF;
#else
  uint64_t diff = 0;
  for (size_t i = 0; i < 64; i += 8) {
    uint64_t a, b, mk;
    std::memcpy(&a, f + i, 8);
    std::memcpy(&b, t.expect + i, 8);
    std::memcpy(&mk, m + i, 8);
    diff |= (a ^ b) & mk;
  }
  return diff == 0;
#endif
}

// The bound: one flat loop per burst. `icrc` false skips the ICRC check,
// to show what of the bound it is.
double bound_ns(const std::vector<std::span<const uint8_t>>& views, double seconds, bool icrc,
                bool& ok) {
  const wire::PathSpec us = bench::us_to_peer();
  const wire::RxTemplate t = wire::make_write_template(us, bench::kQpn, IBV_OPCODE_RC, 0xFFFF);
  std::vector<uint8_t> mem(kPayload * kFrames + 64);
  const uint64_t base = bench::kIova, limit = bench::kIova + mem.size();
  const size_t l3 = t.l3_offset, bth = t.bth_offset;
  std::array<uint8_t, 256> ack_frame{};
  wire::TransportSpec ack;
  ack.opcode = IBV_OPCODE_RC | IBV_OPCODE_ACKNOWLEDGE;
  ack.dest_qp = bench::kPeerQpn;
  uint64_t done = 0, acks = 0;
  const auto t0 = Clock::now();
  while (Clock::now() - t0 < std::chrono::duration<double>(seconds)) {
    uint32_t epsn = 0;
    for (size_t b = 0; b < kFrames; b += kBurst) {
      // Frames that pass the header checks, then their ICRCs in one pass
      // (as droce: a frame failing a check is never CRCed or read past).
      std::array<wire::IcrcCheck, kBurst> checks;
      std::array<uint8_t, kBurst> checked;
      std::array<bool, kBurst> good{};
      size_t k = 0;
      for (size_t i = 0; i < kBurst; ++i) {
        const uint8_t* f = views[b + i].data();
        const size_t size = views[b + i].size();
        if (size < 64 || f[bth] != t.write_only || !headers_match(t, f) ||
            (f[l3 + 1] & 3) == 3 || wire::ipv4_checksum(f + l3, wire::kIpv4Size) != 0)
          continue;
        const size_t l3_end = l3 + wire::load_be16(f + l3 + 2);
        if (l3_end > size ||
            wire::load_be16(f + bth - wire::kUdpSize + 4) != l3_end - (bth - wire::kUdpSize) ||
            l3_end != bth + wire::kBthSize + wire::kRethSize + kPayload + wire::kIcrcSize)
          continue;
        checks[k] = {f + l3, static_cast<uint32_t>(l3_end - wire::kIcrcSize - l3), false,
                     wire::load_le32(f + l3_end - wire::kIcrcSize)};
        checked[k++] = static_cast<uint8_t>(i);
      }
      std::array<bool, kBurst> icrc_ok;
      if (icrc)
        wire::icrc_check_many(checks.data(), icrc_ok.data(), k);
      else
        icrc_ok.fill(true);
      for (size_t j = 0; j < k; ++j) good[checked[j]] = icrc_ok[j];
      for (size_t i = 0; i < kBurst; ++i) {
        if (!good[i]) continue;
        const uint8_t* f = views[b + i].data();
        const uint8_t* reth = f + bth + wire::kBthSize;
        const uint64_t va = wire::load_be64(reth);
        if (wire::load_be24(f + bth + 9) != epsn ||
            wire::load_be32(reth + 8) != bench::kKey || wire::load_be32(reth + 12) != kPayload ||
            va < base || va + kPayload > limit)
          continue;
        std::memcpy(mem.data() + (va - base), reth + wire::kRethSize, kPayload);
        epsn = (epsn + 1) & wire::kPsnMask;
      }
      ack.psn = (epsn - 1) & wire::kPsnMask;
      ack.aeth_syndrome = 0x1F;
      ack.aeth_msn = epsn;
      acks += wire::build_packet(us, ack, {}, ack_frame) != 0;
    }
    done += kFrames;
    ok = ok && epsn == kFrames;
    asm volatile("" ::"r"(mem.data()) : "memory");
  }
  ok = ok && acks == done / kBurst;
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / done;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::strtod(argv[1], nullptr) : 2.0;
  if (argc > 2 || !(seconds > 0)) {
    fmt::print(stderr, "usage: {} [SECONDS > 0]\n", argv[0]);
    return 2;
  }
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint8_t> data(kPayload, 0x5A);
  for (uint32_t psn = 0; psn < kFrames; ++psn) {
    std::vector<uint8_t> f(kPayload + 256);
    f.resize(bench::write_only_frame(psn, data, f));
    frames.push_back(std::move(f));
  }
  std::vector<std::span<const uint8_t>> views(frames.begin(), frames.end());
  bool droce_ok = true, bound_ok = true;
  const double d = droce_ns(views, seconds, droce_ok);
  const double b = bound_ns(views, seconds, true, bound_ok);
  const double b_no_icrc = bound_ns(views, seconds / 2, false, bound_ok);
  fmt::print("RC WRITE ONLY, {} B payload, {} frames in memory, bursts of {}:\n", kPayload,
             kFrames, kBurst);
  fmt::print("  droce (receive_burst + transmit) : {:6.1f} ns/frame\n", d);
  fmt::print("  lower bound (flat loop)          : {:6.1f} ns/frame ({:.2f}x droce's rate)\n", b,
             d / b);
  fmt::print("  lower bound without the ICRC     : {:6.1f} ns/frame\n", b_no_icrc);
  fmt::print("{{\"droce_ns\": {:.2f}, \"bound_ns\": {:.2f}, \"bound_no_icrc_ns\": {:.2f}}}\n", d, b,
             b_no_icrc);
  if (!droce_ok || !bound_ok) {
    fmt::print(stderr, "a pass did not place every frame\n");
    return 1;
  }
  return 0;
}
