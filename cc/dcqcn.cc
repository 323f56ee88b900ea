// DCQCN reaction point. Equations are from Zhu et al., SIGCOMM 2015 §3.1
// (Fig. 7 state machine, Eq. 1-3; increase phases inherited from QCN,
// IEEE 802.1Qau); knobs and their units from mlx5 (see dcqcn.h, docs/CC.md).
#include "droce/cc/dcqcn.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "droce/cc/registry.h"

namespace droce::cc {
namespace {

constexpr DcqcnConfig kDefaults{};

// clang-format off
constexpr ParamSpec kSpecs[] = {
  {"rp_time_reset", kDefaults.rp_time_reset_us, 1, 1e7, true, "us",
   "rate-increase timer period (paper T=55us; mlx5 default 300)", ""},
  {"rp_byte_reset", kDefaults.rp_byte_reset, 0, 4294967295.0, true, "bytes",
   "bytes sent per byte-counter stage, 0 disables (paper B=10MB; mlx5 32767)",
   ""},
  {"rp_threshold", kDefaults.rp_threshold, 1, 31, true, "",
   "F: stages of fast recovery before additive increase (paper 5; mlx5 1)",
   ""},
  {"rp_ai_rate", kDefaults.rp_ai_rate_mbps, 0, 1e7, false, "Mbit/s",
   "additive-increase step R_AI (paper 40; mlx5 5)", ""},
  {"rp_hai_rate", kDefaults.rp_hai_rate_mbps, 0, 1e7, false, "Mbit/s",
   "hyper-increase step R_HAI (mlx5 50)", ""},
  {"rp_gd", kDefaults.rp_gd, 0, 15, true, "",
   "cut = alpha*2^(10-rp_gd) of the rate; 11 gives the paper's alpha/2 "
   "(mlx5 11)", ""},
  {"rp_min_dec_fac", kDefaults.rp_min_dec_fac, 1, 100, true, "%",
   "a cut keeps at least this % of the rate (mlx5 50)", ""},
  {"rp_min_rate", kDefaults.rp_min_rate_mbps, 0.001, 1e7, false, "Mbit/s",
   "rate floor (mlx5 1)", ""},
  {"rp_rate_to_set_on_first_cnp", kDefaults.rp_rate_to_set_on_first_cnp_mbps,
   0, 1e7, false, "Mbit/s",
   "rate set by the first CNP instead of a cut, 0 = cut (mlx5 0)",
   "rate_to_set_on_first_cnp"},
  {"rp_dce_tcp_g", kDefaults.rp_dce_tcp_g, 0, 1023, true, "1/1024",
   "alpha gain g = (1024 - rp_dce_tcp_g)/1024 (mlx5 1019; paper g=1/256 is "
   "1020)", ""},
  {"rp_dce_tcp_rtt", kDefaults.rp_dce_tcp_rtt_us, 1, 1e7, true, "us",
   "alpha timer K: alpha decays once per K without CNP (paper 55; mlx5 1)",
   ""},
  {"rp_rate_reduce_monitor_period", kDefaults.rp_rate_reduce_monitor_period_us,
   0, 1e7, true, "us",
   "at most one cut per period; later CNPs cut at its end (mlx5 4)", ""},
  {"rp_initial_alpha_value", kDefaults.rp_initial_alpha_value, 0, 1024, true,
   "1/1024", "alpha set by the first CNP (paper 1; mlx5 1023)", ""},
  {"np_min_time_between_cnps", kDefaults.np_min_time_between_cnps_us, 0, 1e7,
   true, "us",
   "NP: at most one CNP per flow per interval, used by the transport "
   "(paper N=50; mlx5 4)", ""},
  {"clamp_tgt_rate", kDefaults.clamp_tgt_rate, 0, 1, true, "",
   "1: every cut sets R_T = R_C (paper); 0: only a cut after a timer "
   "increase does (mlx5 firmware, HPCC authors' ns-3)", "rp_clamp_tgt_rate"},
};
// clang-format on

std::unique_ptr<Algorithm> create(const Params& params,
                                  uint64_t line_rate_bytes_per_sec) {
  return std::make_unique<Dcqcn>(DcqcnConfig::from_params(params),
                                 line_rate_bytes_per_sec);
}

}  // namespace

DcqcnConfig DcqcnConfig::from_params(const Params& p) {
  DcqcnConfig c;
  c.rp_time_reset_us = p.get("rp_time_reset");
  c.rp_byte_reset = p.get("rp_byte_reset");
  c.rp_threshold = p.get("rp_threshold");
  c.rp_ai_rate_mbps = p.get("rp_ai_rate");
  c.rp_hai_rate_mbps = p.get("rp_hai_rate");
  c.rp_gd = p.get("rp_gd");
  c.rp_min_dec_fac = p.get("rp_min_dec_fac");
  c.rp_min_rate_mbps = p.get("rp_min_rate");
  c.rp_rate_to_set_on_first_cnp_mbps = p.get("rp_rate_to_set_on_first_cnp");
  c.rp_dce_tcp_g = p.get("rp_dce_tcp_g");
  c.rp_dce_tcp_rtt_us = p.get("rp_dce_tcp_rtt");
  c.rp_rate_reduce_monitor_period_us = p.get("rp_rate_reduce_monitor_period");
  c.rp_initial_alpha_value = p.get("rp_initial_alpha_value");
  c.np_min_time_between_cnps_us = p.get("np_min_time_between_cnps");
  c.clamp_tgt_rate = p.get("clamp_tgt_rate");
  return c;
}

Dcqcn::Dcqcn(const DcqcnConfig& c, uint64_t line_rate_bytes_per_sec)
    : Algorithm(line_rate_bytes_per_sec),
      time_reset_ns_(static_cast<uint64_t>(us_to_ns(c.rp_time_reset_us))),
      byte_reset_(static_cast<uint64_t>(c.rp_byte_reset)),
      threshold_(static_cast<uint32_t>(c.rp_threshold)),
      ai_rate_(mbps_to_bytes_per_sec(c.rp_ai_rate_mbps)),
      hai_rate_(mbps_to_bytes_per_sec(c.rp_hai_rate_mbps)),
      decrease_scale_(std::ldexp(1.0, 10 - static_cast<int>(c.rp_gd))),
      min_factor_(c.rp_min_dec_fac / 100),
      min_rate_(mbps_to_bytes_per_sec(c.rp_min_rate_mbps)),
      first_cnp_rate_(
          mbps_to_bytes_per_sec(c.rp_rate_to_set_on_first_cnp_mbps)),
      g_((1024 - c.rp_dce_tcp_g) / 1024),
      alpha_period_ns_(static_cast<uint64_t>(us_to_ns(c.rp_dce_tcp_rtt_us))),
      reduce_period_ns_(
          static_cast<uint64_t>(us_to_ns(c.rp_rate_reduce_monitor_period_us))),
      initial_alpha_(c.rp_initial_alpha_value / 1024),
      np_min_time_between_cnps_ns_(
          static_cast<uint64_t>(us_to_ns(c.np_min_time_between_cnps_us))),
      clamp_tgt_rate_(c.clamp_tgt_rate != 0),
      rc_(static_cast<double>(line_rate_bytes_per_sec)),
      rt_(static_cast<double>(line_rate_bytes_per_sec)) {
  const double line = static_cast<double>(line_rate_bytes_per_sec);
  if (line <= 0) throw ConfigError("dcqcn: line rate must be > 0");
  if (min_rate_ > line) {
    throw ConfigError(fmt::format(
        "dcqcn parameter 'rp_min_rate': {} Mbit/s exceeds the line rate "
        "{} Mbit/s; accepted range [0.001, {}]",
        c.rp_min_rate_mbps, line * 8 / 1e6, line * 8 / 1e6));
  }
  // mlx5 clamps a first-CNP rate above port speed to port speed.
  first_cnp_rate_ = std::min(first_cnp_rate_, line);
  if (alpha_period_ns_ == 0 || time_reset_ns_ == 0) {
    throw ConfigError("dcqcn: rp_dce_tcp_rtt and rp_time_reset must be > 0");
  }
}

// The alpha timer (paper §3.1, Eq. 2: alpha <- (1-g)*alpha after K without a
// CNP) is evaluated lazily: mlx5's K is 1us, and waking every flow every
// microsecond would dominate the simulator. Alpha only matters at a cut, and
// n whole periods of decay are exactly a factor (1-g)^n.
void Dcqcn::decay_alpha(uint64_t now_ns) {
  if (!limited_ || now_ns <= alpha_epoch_ns_) return;
  const uint64_t periods = (now_ns - alpha_epoch_ns_) / alpha_period_ns_;
  if (periods == 0) return;
  alpha_ *= std::pow(1 - g_, static_cast<double>(periods));
  alpha_epoch_ns_ += periods * alpha_period_ns_;
}

void Dcqcn::clamp() {
  const double line = static_cast<double>(line_rate_bytes_per_sec());
  rc_ = std::clamp(rc_, min_rate_, line);
  rt_ = std::clamp(rt_, min_rate_, line);
}

// Rate decrease, paper Eq. 1 and Eq. 2's CNP branch:
//   R_T = R_C;  R_C = R_C * (1 - alpha/2);  alpha = (1-g)*alpha + g.
// mlx5 generalises alpha/2 to alpha/Gd with rp_gd = log2(Gd) in 1/1024 units
// (hence 2^(10-rp_gd)), and rp_min_dec_fac bounds how deep one cut can go.
// With clamp_tgt_rate = 0 (mlx5 firmware; the HPCC authors' ns-3 DCQCN,
// rdma-hw.cc CheckRateDecreaseMlx with ClampTargetRate false) R_T follows
// R_C only when the increase timer fired since the last cut: cuts in a row
// keep the target the flow had before the congestion, so fast recovery
// heads back there instead of to the already-cut rate.
void Dcqcn::cut(uint64_t now_ns) {
  decay_alpha(now_ns);
  if (clamp_tgt_rate_ || time_stage_ > 0) rt_ = rc_;
  rc_ *= std::max(1 - alpha_ * decrease_scale_, min_factor_);
  alpha_ = (1 - g_) * alpha_ + g_;
  last_cut_ns_ = now_ns;
  cut_pending_ = false;
  // A cut restarts the increase machinery (Fig. 7: "reset timer and byte
  // counter"), so recovery always begins with fast recovery.
  time_stage_ = 0;
  byte_stage_ = 0;
  bytes_since_stage_ = 0;
  increase_deadline_ns_ = now_ns + time_reset_ns_;
  clamp();
}

// One rate-increase event, from either the timer or the byte counter
// (paper §3.1 "Rate increase", QCN phases):
//  - fast recovery while neither counter exceeds F:  R_C = (R_T + R_C)/2
//  - additive increase once one exceeds F:  R_T += R_AI, then as above
//  - hyper increase once both exceed F:     R_T += i*R_HAI, i = min(T,BC)-F
void Dcqcn::increase() {
  const uint32_t hi = std::max(time_stage_, byte_stage_);
  const uint32_t lo = std::min(time_stage_, byte_stage_);
  if (lo > threshold_) {
    rt_ += static_cast<double>(lo - threshold_) * hai_rate_;
  } else if (hi > threshold_) {
    rt_ += ai_rate_;
  }
  // R_T never exceeds the line rate, and is capped before the average (as
  // the HPCC authors' ns-3 DCQCN and mlx5 do), so a step that would carry
  // R_T past the line moves R_C only halfway to the line, not beyond.
  rt_ = std::min(rt_, static_cast<double>(line_rate_bytes_per_sec()));
  rc_ = (rt_ + rc_) / 2;
  clamp();
  // Back at line rate: release the limiter, as a NIC frees its rate-limiter
  // entry; the next CNP starts over from rp_initial_alpha_value. Comparing the
  // rounded output avoids chasing the last ulp of the (R_T+R_C)/2 halving.
  const uint64_t line = line_rate_bytes_per_sec();
  if (rt_ >= static_cast<double>(line) &&
      std::llround(rc_) >= static_cast<long long>(line)) {
    limited_ = false;
    cut_pending_ = false;
    rc_ = rt_ = static_cast<double>(line);
  }
}

// Fires every timer due at or before now, oldest first (a pending cut wins a
// tie with the increase timer so an increase never lands on stale state).
void Dcqcn::advance(uint64_t now_ns) {
  while (limited_) {
    const uint64_t cut_at = last_cut_ns_ + reduce_period_ns_;
    if (cut_pending_ && cut_at <= now_ns && cut_at <= increase_deadline_ns_) {
      cut(cut_at);
      continue;
    }
    if (increase_deadline_ns_ > now_ns) break;
    const uint64_t at = increase_deadline_ns_;
    decay_alpha(at);
    ++time_stage_;
    increase_deadline_ns_ = at + time_reset_ns_;
    increase();
  }
  decay_alpha(now_ns);
}

void Dcqcn::on_cnp(uint64_t now_ns) {
  advance(now_ns);
  if (!limited_) {
    // First CNP of a flow allocates the rate limiter (mlx5) with alpha at
    // rp_initial_alpha_value, then cuts (or jumps to the configured rate).
    limited_ = true;
    alpha_ = initial_alpha_;
    alpha_epoch_ns_ = now_ns;
    rc_ = rt_ = static_cast<double>(line_rate_bytes_per_sec());
    if (first_cnp_rate_ > 0) {
      rc_ = rt_ = first_cnp_rate_;
      last_cut_ns_ = now_ns;
      time_stage_ = byte_stage_ = 0;
      bytes_since_stage_ = 0;
      increase_deadline_ns_ = now_ns + time_reset_ns_;
      clamp();
    } else {
      cut(now_ns);
    }
    return;
  }
  // Any CNP restarts the alpha timer: alpha decays only after a full K with
  // no CNP (paper §3.1).
  alpha_epoch_ns_ = now_ns;
  if (now_ns >= last_cut_ns_ + reduce_period_ns_) {
    cut(now_ns);
  } else {
    // mlx5 rate_reduce_monitor_period: CNPs inside the period are merged
    // into one cut at the period's end.
    cut_pending_ = true;
  }
}

void Dcqcn::on_send(uint64_t now_ns, uint64_t bytes) {
  advance(now_ns);
  if (!limited_ || byte_reset_ == 0) return;
  bytes_since_stage_ += bytes;
  while (limited_ && bytes_since_stage_ >= byte_reset_) {
    bytes_since_stage_ -= byte_reset_;
    ++byte_stage_;
    increase();
  }
  if (!limited_) bytes_since_stage_ = 0;
}

void Dcqcn::on_ack(uint64_t now_ns, const AckEvent& /*ack*/) {
  advance(now_ns);
}

void Dcqcn::on_timer(uint64_t now_ns) { advance(now_ns); }

std::optional<uint64_t> Dcqcn::next_timer() const {
  if (!limited_) return std::nullopt;
  uint64_t next = increase_deadline_ns_;
  if (cut_pending_) next = std::min(next, last_cut_ns_ + reduce_period_ns_);
  return next;
}

uint64_t Dcqcn::rate_bytes_per_sec() const {
  return static_cast<uint64_t>(std::llround(rc_));
}

const AlgorithmInfo& dcqcn_algorithm() {
  static const AlgorithmInfo kInfo{
      "dcqcn",
      "DCQCN reaction point (Zhu et al. SIGCOMM 2015), mlx5 parameter names",
      kSpecs, &create};
  return kInfo;
}

}  // namespace droce::cc
