// The endpoint's receive path without DPDK: Endpoint::receive_burst over
// RC RDMA WRITE frames already in memory (hot in cache, 32 per burst, as
// the engine's poll loop hands them over), then Endpoint::transmit for the
// coalesced ACKs. Once with header prediction (wire/rx_template.h) and once
// with every frame parsed, side by side in one run, so the ratio holds on a
// noisy machine; memcpy of the same frames is printed as a yardstick.
//
//   droce-bench-receive [PAYLOAD, default 64] [SECONDS per way, default 2] [predicted]
//                       [--message BYTES]
//
// Each frame carries PAYLOAD bytes. By default every frame is a WRITE ONLY
// (the QP's path MTU is 4096). `--message BYTES` sends WRITE messages of
// BYTES instead, a multiple of PAYLOAD, each as FIRST, MIDDLE..., LAST
// frames of PAYLOAD bytes: the QP's path MTU is then PAYLOAD, which must be
// one (256, 512, 1024, 2048 or 4096). `predicted` runs only the
// header-prediction way, with no parsed run and no memcpy yardstick beside
// it (for profiling it).
//
// The QP is reset after every pass over the frames (PSNs must not repeat);
// a pass is at least 256 frames and whole messages. The bench checks every
// pass placed every frame.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "droce/endpoint/endpoint.h"
#include "droce/transport/requester.h"
#include "droce/wire/build.h"
#include "responder_under_test.h"
#include "write_stream.h"

namespace {

using namespace droce;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kMinFrames = 256;  // per pass

struct Result {
  double ns_per_frame;
  uint64_t frames;
  bool all_placed;
};

Result run(const std::vector<std::vector<uint8_t>>& frames, size_t payload, ibv_mtu mtu,
           bool predict, double seconds) {
  const size_t n_frames = frames.size();
  bench::ResponderUnderTest responder(payload * n_frames + 64, mtu, predict);
  std::vector<std::span<const uint8_t>> views(frames.begin(), frames.end());
  std::vector<std::vector<uint8_t>> tx_store(32, std::vector<uint8_t>(256));
  std::vector<std::span<uint8_t>> tx(tx_store.begin(), tx_store.end());
  uint32_t lens[32];
  uint64_t done = 0, now = 0;
  bool all_placed = true;
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    for (size_t i = 0; i < n_frames; i += 32) {
      responder.ep.receive_burst(std::span(views).subspan(i, std::min<size_t>(32, n_frames - i)),
                                 ++now);
      responder.ep.transmit(now, tx, lens);
    }
    done += n_frames;
    all_placed = all_placed && responder.qp->expected_psn() == n_frames;
    responder.restart();
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  return {ns / static_cast<double>(done), done, all_placed};
}

}  // namespace

// The path MTU enum for `bytes`, if it is one (IBA 9.7.5.1.4).
std::optional<ibv_mtu> mtu_of(size_t bytes) {
  for (ibv_mtu m : {IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024, IBV_MTU_2048, IBV_MTU_4096})
    if (bytes == transport::mtu_bytes(m)) return m;
  return std::nullopt;
}

int usage(const char* argv0) {
  fmt::print(stderr,
             "usage: {} [PAYLOAD 4..4096, a multiple of 4] [SECONDS > 0] [predicted] "
             "[--message BYTES]\n"
             "  --message BYTES: WRITE messages of BYTES (a multiple of PAYLOAD, at most 1 MiB) "
             "in frames of PAYLOAD bytes, which must then be a path MTU "
             "(256, 512, 1024, 2048, 4096)\n",
             argv0);
  return 2;
}

int main(int argc, char** argv) {
  std::vector<std::string> args;
  size_t message = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--message") == 0) {
      if (i + 1 == argc) return usage(argv[0]);
      message = std::strtoul(argv[++i], nullptr, 0);
      if (message == 0) return usage(argv[0]);
    } else {
      args.emplace_back(argv[i]);
    }
  }
  const size_t payload = args.size() > 0 ? std::strtoul(args[0].c_str(), nullptr, 0) : 64;
  const double seconds = args.size() > 1 ? std::strtod(args[1].c_str(), nullptr) : 2.0;
  const bool only_predicted = args.size() > 2 && args[2] == "predicted";
  if (payload == 0 || payload > 4096 || payload % 4 != 0 || seconds <= 0 ||
      (args.size() > 2 && !only_predicted) || args.size() > 3)
    return usage(argv[0]);
  if (message == 0) message = payload;
  const auto path_mtu = message == payload ? std::optional(IBV_MTU_4096) : mtu_of(payload);
  if (!path_mtu || message % payload != 0 || message > (1u << 20)) return usage(argv[0]);
  const auto packets = static_cast<uint32_t>(message / payload);
  const uint32_t n_frames = (kMinFrames + packets - 1) / packets * packets;
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint8_t> data(payload, 0x5A);
  for (uint32_t psn = 0; psn < n_frames; ++psn) {
    std::vector<uint8_t> f(payload + 256);
    f.resize(bench::write_message_frame(psn, packets, data, f));
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
      copies += n_frames;
    }
    memcpy_ns = std::chrono::duration<double, std::nano>(Clock::now() - m0).count() / copies;
    parsed = run(frames, payload, *path_mtu, false, seconds);
  }
  const Result predicted = run(frames, payload, *path_mtu, true, seconds);
  if (packets == 1)
    fmt::print("receive_burst + transmit, RC WRITE ONLY {} B payload ({} B frames), "
               "{} frames in memory:\n", payload, frames[0].size(), n_frames);
  else
    fmt::print("receive_burst + transmit, RC WRITE {} B messages, {} packets of {} B payload "
               "({} B frames, MTU {}), {} frames in memory:\n",
               message, packets, payload, frames[0].size(), payload, n_frames);
  // Placed bytes per ns are GB/s; printed for messages, where that is the
  // figure that matters.
  const auto placed = [&](const Result& r) {
    return packets == 1 ? std::string()
                        : fmt::format("  {:6.2f} GB/s", static_cast<double>(payload) / r.ns_per_frame);
  };
  if (parsed)
    fmt::print("  every frame parsed : {:6.1f} ns/frame  {:6.2f} Mpps{}\n", parsed->ns_per_frame,
               1e3 / parsed->ns_per_frame, placed(*parsed));
  fmt::print("  header prediction  : {:6.1f} ns/frame  {:6.2f} Mpps{}", predicted.ns_per_frame,
             1e3 / predicted.ns_per_frame, placed(predicted));
  if (parsed) fmt::print("  ({:.2f}x)", parsed->ns_per_frame / predicted.ns_per_frame);
  fmt::print("\n");
  if (parsed) fmt::print("  memcpy of the frame: {:6.1f} ns/frame\n", memcpy_ns);
  if ((parsed && !parsed->all_placed) || !predicted.all_placed) {
    fmt::print(stderr, "a pass did not place every frame\n");
    return 1;
  }
  return 0;
}
