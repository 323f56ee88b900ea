// Swift-like delay-based window (worked example in docs/CC.md).
#include "droce/cc/swift.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "droce/cc/registry.h"

namespace droce::cc {
namespace {

constexpr SwiftConfig kDefaults{};

// clang-format off
constexpr ParamSpec kSpecs[] = {
  {"target_delay", kDefaults.target_delay_us, 0.001, 1e7, false, "us",
   "delay target (Swift §3.1 base target; droce default 25us)", ""},
  {"ai", kDefaults.ai, 0, 1e9, false, "bytes",
   "additive increase per window of ACKs (Swift: one packet; 4 KB MTU)", ""},
  {"beta", kDefaults.beta, 0, 1, false, "",
   "multiplicative decrease gain (Swift Algorithm 1: beta; droce 0.8)", ""},
  {"max_mdf", kDefaults.max_mdf, 0, 1, false, "",
   "max fraction removed per decrease (Swift Algorithm 1: max_mdf; 0.5)", ""},
  {"min_cwnd", kDefaults.min_cwnd, 1, 1e9, false, "bytes",
   "window floor (Swift allows below one packet, then paces)", ""},
  {"max_cwnd", kDefaults.max_cwnd, 1, 1e12, false, "bytes",
   "window ceiling (droce choice: 256 KB)", ""},
  {"init_cwnd", kDefaults.init_cwnd, 0, 1e12, false, "bytes",
   "initial window, 0 = max_cwnd (droce choice)", ""},
  {"mtu", kDefaults.mtu, 64, 65536, true, "bytes",
   "below one MTU of window the flow is paced at cwnd/RTT (Swift §3.4)", ""},
};
// clang-format on

std::unique_ptr<Algorithm> create(const Params& params,
                                  uint64_t line_rate_bytes_per_sec) {
  return std::make_unique<Swift>(SwiftConfig::from_params(params),
                                 line_rate_bytes_per_sec);
}

}  // namespace

SwiftConfig SwiftConfig::from_params(const Params& p) {
  SwiftConfig c;
  c.target_delay_us = p.get("target_delay");
  c.ai = p.get("ai");
  c.beta = p.get("beta");
  c.max_mdf = p.get("max_mdf");
  c.min_cwnd = p.get("min_cwnd");
  c.max_cwnd = p.get("max_cwnd");
  c.init_cwnd = p.get("init_cwnd");
  c.mtu = p.get("mtu");
  return c;
}

Swift::Swift(const SwiftConfig& c, uint64_t line_rate_bytes_per_sec)
    : Algorithm(line_rate_bytes_per_sec),
      target_ns_(us_to_ns(c.target_delay_us)),
      ai_(c.ai),
      beta_(c.beta),
      max_mdf_(c.max_mdf),
      min_cwnd_(c.min_cwnd),
      max_cwnd_(c.max_cwnd),
      mtu_(c.mtu),
      cwnd_(c.init_cwnd > 0 ? c.init_cwnd : c.max_cwnd) {
  if (min_cwnd_ > max_cwnd_) {
    throw ConfigError(fmt::format(
        "swift parameter 'min_cwnd': {} exceeds max_cwnd {}; accepted range "
        "[1, max_cwnd]",
        c.min_cwnd, c.max_cwnd));
  }
  cwnd_ = std::clamp(cwnd_, min_cwnd_, max_cwnd_);
}

void Swift::on_ack(uint64_t now_ns, const AckEvent& ack) {
  if (!ack.rtt_ns) return;
  const double delay = static_cast<double>(*ack.rtt_ns);
  last_rtt_ns_ = delay;
  if (delay < target_ns_) {
    // Additive increase spread over a window's worth of ACKs, so the window
    // grows by `ai` per RTT; below one MTU the increase is per ACK so a
    // paced flow is not starved (Algorithm 1, "if cwnd >= 1").
    const double acked = static_cast<double>(ack.acked_bytes);
    cwnd_ += cwnd_ >= mtu_ ? ai_ * acked / cwnd_ : ai_ * acked / mtu_;
  } else if (!decreased_ || now_ns - last_decrease_ns_ >= *ack.rtt_ns) {
    // Multiplicative decrease proportional to how far over target the delay
    // is, bounded by max_mdf, at most once per RTT so one congestion episode
    // is not counted many times.
    const double factor =
        std::max(1 - beta_ * (delay - target_ns_) / delay, 1 - max_mdf_);
    cwnd_ *= factor;
    decreased_ = true;
    last_decrease_ns_ = now_ns;
  }
  cwnd_ = std::clamp(cwnd_, min_cwnd_, max_cwnd_);
}

uint64_t Swift::rate_bytes_per_sec() const {
  const double line = static_cast<double>(line_rate_bytes_per_sec());
  // A window of at least one MTU is ACK-clocked: send at line rate within it.
  // Smaller windows cannot be clocked by packets, so pace at cwnd/RTT.
  if (cwnd_ >= mtu_ || last_rtt_ns_ <= 0) {
    return line_rate_bytes_per_sec();
  }
  return static_cast<uint64_t>(
      std::llround(std::min(line, cwnd_ * 1e9 / last_rtt_ns_)));
}

std::optional<uint64_t> Swift::window_bytes() const {
  return static_cast<uint64_t>(std::llround(cwnd_));
}

const AlgorithmInfo& swift_algorithm() {
  static const AlgorithmInfo kInfo{
      "swift",
      "Swift-like delay-target window, the docs/CC.md worked example "
      "(after Kumar et al. SIGCOMM 2020)",
      kSpecs, &create, /*needs_int=*/false, /*samples_rtt=*/true};
  return kInfo;
}

}  // namespace droce::cc
