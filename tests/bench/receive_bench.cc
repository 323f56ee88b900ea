// The endpoint's receive path without DPDK: Endpoint::receive_burst over
// RC RDMA WRITE ONLY frames already in memory (hot in cache, 32 per burst,
// as the engine's poll loop hands them over), then Endpoint::transmit for
// the coalesced ACKs. Once with header prediction (wire/rx_template.h) and
// once with every frame parsed, side by side in one run, so the ratio holds
// on a noisy machine; memcpy of the same frames is printed as a yardstick.
//
//   droce-bench-receive [PAYLOAD, default 64] [SECONDS per way, default 2] [predicted]
//
// `predicted` runs only the header-prediction way, with no parsed run and
// no memcpy yardstick beside it (for profiling it).
//
// The QP is reset after every pass over the frames (PSNs must not repeat);
// the bench checks every pass placed every frame.
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "droce/cc/registry.h"
#include "droce/endpoint/endpoint.h"
#include "droce/transport/device.h"
#include "droce/wire/build.h"
#include "write_stream.h"

namespace {

using namespace droce;
using Clock = std::chrono::steady_clock;

using bench::kIova;
using bench::kKey;
using bench::kQpn;
using bench::connect;
constexpr uint32_t kFrames = 256;

struct Result {
  double ns_per_frame;
  uint64_t frames;
  bool all_placed;
};

Result run(const std::vector<std::vector<uint8_t>>& frames, size_t payload, bool predict,
           double seconds) {
  transport::Device dev;
  endpoint::EndpointConfig ec;
  ec.port_rate_bytes_per_sec = 0;
  ec.header_prediction = predict;
  endpoint::Endpoint ep(dev, ec);
  auto* pd = dev.alloc_pd();
  auto* cq = dev.create_cq(1024);
  std::vector<uint8_t> mem(payload * kFrames + 64);
  dev.reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
             kIova, kKey);
  transport::QpInitAttr init;
  init.pd = pd;
  init.send_cq = init.recv_cq = cq;
  transport::QueuePair* qp = dev.create_qp(init, kQpn);
  ep.attach(*qp, cc::make_algorithm("none", {}, 100'000'000'000ull / 8));
  connect(*qp);
  ep.notify(kQpn);

  std::vector<std::span<const uint8_t>> views(frames.begin(), frames.end());
  std::vector<std::vector<uint8_t>> tx_store(32, std::vector<uint8_t>(256));
  std::vector<std::span<uint8_t>> tx(tx_store.begin(), tx_store.end());
  uint32_t lens[32];
  uint64_t done = 0, now = 0;
  bool all_placed = true;
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    for (size_t i = 0; i < kFrames; i += 32) {
      ep.receive_burst(std::span(views).subspan(i, 32), ++now);
      ep.transmit(now, tx, lens);
    }
    done += kFrames;
    all_placed = all_placed && qp->expected_psn() == kFrames;
    connect(*qp);
    ep.notify(kQpn);
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  return {ns / static_cast<double>(done), done, all_placed};
}

}  // namespace

int main(int argc, char** argv) {
  const size_t payload = argc > 1 ? std::strtoul(argv[1], nullptr, 0) : 64;
  const double seconds = argc > 2 ? std::strtod(argv[2], nullptr) : 2.0;
  const bool only_predicted = argc > 3 && std::strcmp(argv[3], "predicted") == 0;
  if (payload == 0 || payload > 4096 || payload % 4 != 0 || seconds <= 0 ||
      (argc > 3 && !only_predicted) || argc > 4) {
    fmt::print(stderr, "usage: {} [PAYLOAD 4..4096, a multiple of 4] [SECONDS > 0] [predicted]\n",
               argv[0]);
    return 2;
  }
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint8_t> data(payload, 0x5A);
  for (uint32_t psn = 0; psn < kFrames; ++psn) {
    std::vector<uint8_t> f(payload + 256);
    f.resize(bench::write_only_frame(psn, data, f));
    frames.push_back(std::move(f));
  }
  // The yardstick and the parsed run first, as the figures in
  // docs/PERFORMANCE.md were taken; `predicted` runs neither, so a profile
  // of the process is the predicted path alone.
  double memcpy_ns = 0;
  std::optional<Result> parsed;
  if (!only_predicted) {
    // memcpy of the same frames into one buffer: the cost of touching them.
    std::vector<uint8_t> sink(8192);
    const auto m0 = Clock::now();
    uint64_t copies = 0;
    while (Clock::now() - m0 < std::chrono::duration<double>(seconds / 4)) {
      for (const auto& f : frames) std::memcpy(sink.data(), f.data(), f.size());
      asm volatile("" ::"r"(sink.data()) : "memory");
      copies += kFrames;
    }
    memcpy_ns = std::chrono::duration<double, std::nano>(Clock::now() - m0).count() / copies;
    parsed = run(frames, payload, false, seconds);
  }
  const Result predicted = run(frames, payload, true, seconds);
  fmt::print("receive_burst + transmit, RC WRITE ONLY {} B payload ({} B frames), "
             "{} frames in memory:\n", payload, frames[0].size(), kFrames);
  if (parsed)
    fmt::print("  every frame parsed : {:6.1f} ns/frame  {:6.2f} Mpps\n", parsed->ns_per_frame,
               1e3 / parsed->ns_per_frame);
  fmt::print("  header prediction  : {:6.1f} ns/frame  {:6.2f} Mpps", predicted.ns_per_frame,
             1e3 / predicted.ns_per_frame);
  if (parsed) fmt::print("  ({:.2f}x)", parsed->ns_per_frame / predicted.ns_per_frame);
  fmt::print("\n");
  if (parsed) fmt::print("  memcpy of the frame: {:6.1f} ns/frame\n", memcpy_ns);
  if ((parsed && !parsed->all_placed) || !predicted.all_placed) {
    fmt::print(stderr, "a pass did not place every frame\n");
    return 1;
  }
  return 0;
}
