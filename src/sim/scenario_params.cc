// The keys a section shares with its defaults: a switch's ([switch],
// [[switches]], droce-switch's config), a link's, a flow's, and a link's
// down intervals. Every key is checked against the list its table accepts
// and every value against its range.
#include <sstream>

#include "droce/cc/registry.h"
#include "scenario_reader.h"

namespace droce::sim {

namespace {

// [switch] ecn: RED or step marking; thresholds given fix them for every
// port, else they scale with each port's rate.
void read_ecn(const Reader& r, const toml::table& t, const std::string& path, SwitchSpec& s) {
  const toml::table* e = r.table(t, "ecn", path);
  if (!e) return;
  const std::string p = Reader::join(path, "ecn");
  r.check_keys(*e, p, {"mode", "point", "kmin", "kmax", "pmax", "k"});
  r.choice(*e, "mode", p, s.ecn.mode,
           {{"red", fabric::MarkMode::kRed}, {"step", fabric::MarkMode::kStep},
            {"off", fabric::MarkMode::kOff}});
  r.choice(*e, "point", p, s.ecn.point,
           {{"dequeue", fabric::MarkPoint::kDequeue}, {"enqueue", fabric::MarkPoint::kEnqueue}});
  const bool kmin = r.bytes(*e, "kmin", p, s.ecn.kmin_bytes);
  const bool kmax = r.bytes(*e, "kmax", p, s.ecn.kmax_bytes);
  const bool k = r.bytes(*e, "k", p, s.ecn.step_bytes);
  r.number(*e, "pmax", p, s.ecn.pmax, 0, 1);
  if (kmin || kmax || k) s.ecn_auto = false;
  if (s.ecn.mode == fabric::MarkMode::kRed && !s.ecn_auto &&
      s.ecn.kmin_bytes >= s.ecn.kmax_bytes)
    r.fail(e->source(), p, "kmin must be below kmax");
}

// [switch] pfc: lossless priorities, XOFF/XON per ingress port and
// priority, pause quanta, the storm watchdog.
void read_pfc(const Reader& r, const toml::table& t, const std::string& path,
              fabric::SwitchConfig& c) {
  const toml::table* f = r.table(t, "pfc", path);
  if (!f) return;
  const std::string p = Reader::join(path, "pfc");
  r.check_keys(*f, p, {"enabled", "priorities", "xoff", "xon", "quanta", "refresh_fraction",
                       "watchdog", "watchdog_restore", "watchdog_action"});
  bool enabled = false;
  r.boolean(*f, "enabled", p, enabled);
  uint8_t prios = 1u << 3;
  if (const toml::node* n = f->get("priorities")) {
    if (!n->is_array()) r.fail(n->source(), p + ".priorities", "expected an array like [3]");
    prios = 0;
    for (const toml::node& e : *n->as_array()) {
      if (!e.is_integer() || e.as_integer()->get() < 0 || e.as_integer()->get() > 7)
        r.fail(e.source(), p + ".priorities", "priorities are 0..7");
      prios |= static_cast<uint8_t>(1u << e.as_integer()->get());
    }
  }
  c.pfc.enabled_priorities = enabled ? prios : 0;
  r.bytes(*f, "xoff", p, c.pfc.xoff_bytes, 1);
  r.bytes(*f, "xon", p, c.pfc.xon_bytes);
  if (c.pfc.xon_bytes > c.pfc.xoff_bytes)
    r.fail(f->source(), p + ".xon", "must not exceed xoff");
  uint64_t q = 0;
  if (r.integer(*f, "quanta", p, q, 1, 0xFFFF)) c.pfc.pause_quanta = static_cast<uint16_t>(q);
  r.number(*f, "refresh_fraction", p, c.pfc.refresh_fraction, 0.01, 1);
  r.time(*f, "watchdog", p, c.pfc.watchdog_ns);
  r.time(*f, "watchdog_restore", p, c.pfc.watchdog_restore_ns);
  r.choice(*f, "watchdog_action", p, c.pfc.watchdog_action,
           {{"drop", fabric::WatchdogAction::kDrop},
            {"ignore_pause", fabric::WatchdogAction::kIgnorePause}});
}

// [switch] int: INT hop records on the switch's egress.
void read_int(const Reader& r, const toml::table& t, const std::string& path,
              fabric::SwitchConfig& c) {
  const toml::table* i = r.table(t, "int", path);
  if (!i) return;
  const std::string p = Reader::join(path, "int");
  r.check_keys(*i, p, {"enabled", "max_hops", "data_only"});
  r.boolean(*i, "enabled", p, c.int_cfg.enabled);
  r.boolean(*i, "data_only", p, c.int_cfg.data_only);
  uint64_t h = 0;
  if (r.integer(*i, "max_hops", p, h, 1, wire::kIntMaxHops))
    c.int_cfg.max_hops = static_cast<uint8_t>(h);
}

// [switch] scheduler: strict priority or DWRR weights per class.
void read_scheduler(const Reader& r, const toml::table& t, const std::string& path,
                    SwitchSpec& s) {
  const toml::table* sc = r.table(t, "scheduler", path);
  if (!sc) return;
  const std::string p = Reader::join(path, "scheduler");
  r.check_keys(*sc, p, {"strict", "weights", "quantum"});
  bool strict_all = true;
  r.boolean(*sc, "strict", p, strict_all);
  s.scheduler.strict.fill(strict_all);
  if (const toml::node* n = sc->get("weights")) {
    const toml::array* a = n->as_array();
    if (!a || a->size() != fabric::kNumClasses)
      r.fail(n->source(), p + ".weights", "expected 8 weights, one per class");
    for (size_t k = 0; k < fabric::kNumClasses; ++k) {
      const toml::node& e = *a->get(k);
      if (!e.is_integer() || e.as_integer()->get() < 1 || e.as_integer()->get() > 1000)
        r.fail(e.source(), p + ".weights", "weights are 1..1000");
      s.scheduler.weights[k] = static_cast<uint32_t>(e.as_integer()->get());
    }
  }
  uint64_t q = 0;
  if (r.bytes(*sc, "quantum", p, q, 64, 1 << 20)) s.scheduler.quantum_bytes = static_cast<uint32_t>(q);
}

}  // namespace

void read_switch_table(const Reader& r, const toml::table& t, const std::string& path,
                       SwitchSpec& s, std::initializer_list<std::string_view> extra_keys) {
  std::vector<std::string_view> keys = {"buffer", "buffer_mode", "port_buffer", "ecn", "pfc",
                                        "int", "scheduler", "classifier", "load_balance",
                                        "flowlet_gap"};
  keys.insert(keys.end(), extra_keys.begin(), extra_keys.end());
  r.check_keys(t, path, keys);
  fabric::SwitchConfig& c = s.cfg;
  r.bytes(t, "buffer", path, c.shared_buffer_bytes, 4096);
  r.choice(t, "buffer_mode", path, c.buffer_mode,
           {{"shared", fabric::BufferMode::kShared}, {"per_port", fabric::BufferMode::kPerPort}});
  r.bytes(t, "port_buffer", path, s.port_buffer_bytes, 4096);
  r.choice(t, "classifier", path, c.classifier,
           {{"dscp", fabric::Classifier::kDscp}, {"pcp", fabric::Classifier::kPcp}});
  r.choice(t, "load_balance", path, c.load_balance,
           {{"ecmp", fabric::LoadBalance::kEcmp},
            {"adaptive", fabric::LoadBalance::kAdaptivePacket},
            {"adaptive_flowlet", fabric::LoadBalance::kAdaptiveFlowlet}});
  r.time(t, "flowlet_gap", path, c.flowlet_gap_ns, 1'000'000'000);
  read_ecn(r, t, path, s);
  read_pfc(r, t, path, c);
  read_int(r, t, path, c);
  read_scheduler(r, t, path, s);
}

void read_link_params(const Reader& r, const toml::table& t, const std::string& path,
                      LinkSpec& l) {
  r.rate(t, "rate", path, l.rate_bps);
  r.time(t, "delay", path, l.link.propagation_ns, 1'000'000'000);
  fabric::Impairments& im = l.link.impairments;
  r.number(t, "loss", path, im.loss, 0, 1);
  r.number(t, "corrupt", path, im.corrupt, 0, 1);
  r.number(t, "duplicate", path, im.duplicate, 0, 1);
  r.number(t, "reorder", path, im.reorder, 0, 1);
  r.time(t, "reorder_delay", path, im.reorder_delay_ns, 1'000'000'000);
  r.time(t, "extra_delay", path, im.extra_delay_ns, 1'000'000'000);
  r.time(t, "jitter", path, im.jitter_ns, 1'000'000'000);
  if (const toml::table* b = r.table(t, "burst_loss", path)) {
    const std::string p = Reader::join(path, "burst_loss");
    r.check_keys(*b, p, {"p_good_to_bad", "p_bad_to_good", "loss_good", "loss_bad"});
    r.number(*b, "p_good_to_bad", p, im.burst.p_good_to_bad, 0, 1);
    r.number(*b, "p_bad_to_good", p, im.burst.p_bad_to_good, 1e-9, 1);
    r.number(*b, "loss_good", p, im.burst.loss_good, 0, 1);
    r.number(*b, "loss_bad", p, im.burst.loss_bad, 0, 1);
  }
}

// [[links]] down = [{ from = "100us", until = "150us" }, ...]: intervals in
// time order, each ending before the next begins; no `until` keeps the link
// down to the end of the run (so only the last interval may omit it).
void read_down_intervals(const Reader& r, const toml::table& t, const std::string& path,
                         LinkSpec& l) {
  const toml::node* n = t.get("down");
  if (!n) return;
  const std::string p = Reader::join(path, "down");
  const char* kShape = "expected an array of { from = \"...\", until = \"...\" } tables";
  const toml::array* a = n->as_array();
  if (!a) r.fail(n->source(), p, kShape);
  for (size_t i = 0; i < a->size(); ++i) {
    const toml::node& e = *a->get(i);
    const std::string ep = p + "[" + std::to_string(i) + "]";
    if (!e.is_table()) r.fail(e.source(), ep, kShape);
    const toml::table& it = *e.as_table();
    r.check_keys(it, ep, {"from", "until"});
    DownInterval d;
    if (!r.time(it, "from", ep, d.from_ns)) r.fail(it.source(), ep + ".from", "missing");
    if (r.time(it, "until", ep, d.until_ns) && d.until_ns <= d.from_ns)
      r.fail(it.get("until")->source(), ep + ".until",
             "must be after from (" + std::to_string(d.from_ns) + " ns)");
    if (!l.down.empty()) {
      const DownInterval& prev = l.down.back();
      if (prev.until_ns == fabric::kNever)
        r.fail(it.source(), ep,
               "the interval before it has no until (down to the end of the run)");
      if (d.from_ns <= prev.until_ns)
        r.fail(it.get("from")->source(), ep + ".from",
               "must be after the previous interval's until (" +
                   std::to_string(prev.until_ns) + " ns): intervals in time order, "
                   "not overlapping");
    }
    l.down.push_back(d);
  }
}

const std::vector<std::string_view> kLinkParamKeys = {
    "rate", "delay", "loss", "corrupt", "duplicate", "reorder", "reorder_delay",
    "extra_delay", "jitter", "burst_loss"};

std::vector<std::string_view> with(const std::vector<std::string_view>& a,
                                   std::initializer_list<std::string_view> b) {
  std::vector<std::string_view> v(a);
  v.insert(v.end(), b);
  return v;
}

const std::vector<std::string_view> kFlowParamKeys = {
    "opcode", "cc", "cc_params", "recovery", "mtu", "message", "max_outstanding",
    "dscp", "timeout", "retry_cnt", "verify", "ack_every_n", "payload", "entropy",
    "entropy_paths", "flowlet_gap", "reorder_tolerance", "reorder_window", "rto_low",
    "rto_low_threshold", "sack_window", "reth_every_packet", "path_rtt_threshold", "tail_probe",
    "reorder_window_min"};

void read_flow_params(const Reader& r, const toml::table& t, const std::string& path,
                      FlowSpec& f) {
  r.choice(t, "opcode", path, f.opcode,
           {{"write", Opcode::kWrite}, {"send", Opcode::kSend}, {"read", Opcode::kRead}});
  if (r.str(t, "cc", path, f.cc) && !cc::find_algorithm(f.cc))
    r.fail(t.get("cc")->source(), Reader::join(path, "cc"),
           "unknown algorithm \"" + f.cc + "\" (known: " + cc::algorithm_names() + ")");
  if (const toml::table* p = r.table(t, "cc_params", path)) {
    for (auto&& [k, v] : *p) {
      std::string val;
      if (v.is_integer()) {
        val = std::to_string(v.as_integer()->get());
      } else if (v.is_floating_point()) {
        std::ostringstream o;
        o.precision(17);
        o << v.as_floating_point()->get();
        val = o.str();
      } else if (v.is_string()) {
        val = v.as_string()->get();
      } else {
        r.fail(v.source(), Reader::join(path, "cc_params." + std::string(k.str())),
               "expected a number");
      }
      f.cc_params[std::string(k.str())] = val;
    }
  }
  r.choice(t, "recovery", path, f.recovery,
           {{"go_back_n", transport::Recovery::kGoBackN},
            {"gbn", transport::Recovery::kGoBackN},
            {"selective_repeat", transport::Recovery::kSelectiveRepeat},
            {"sr", transport::Recovery::kSelectiveRepeat}});
  uint64_t v = 0;
  if (const toml::node* n = t.get("mtu")) {
    if (!r.integer(t, "mtu", path, v, 256, 4096) || (v & (v - 1)) != 0)
      r.fail(n->source(), Reader::join(path, "mtu"), "one of 256, 512, 1024, 2048, 4096");
    f.mtu = static_cast<uint32_t>(v);
  }
  r.bytes(t, "message", path, f.message_bytes, 0, transport::kMaxMessageBytes);
  if (r.integer(t, "max_outstanding", path, v, 1, 1024)) f.max_outstanding = static_cast<uint32_t>(v);
  if (r.integer(t, "dscp", path, v, 0, 63)) f.dscp = static_cast<uint8_t>(v);
  if (r.integer(t, "timeout", path, v, 1, 31)) f.timeout = static_cast<uint8_t>(v);
  if (r.integer(t, "retry_cnt", path, v, 0, 7)) f.retry_cnt = static_cast<uint8_t>(v);
  if (r.integer(t, "ack_every_n", path, v, 0, 1 << 20)) f.ack_every_n = static_cast<uint32_t>(v);
  r.choice(t, "entropy", path, f.entropy.mode,
           {{"fixed", transport::EntropyMode::kFixed},
            {"spray", transport::EntropyMode::kSpray},
            {"flowlet", transport::EntropyMode::kFlowlet},
            {"path_aware", transport::EntropyMode::kPathAware}});
  if (r.integer(t, "entropy_paths", path, v, 1, transport::kMaxEntropyPaths))
    f.entropy.paths = static_cast<uint32_t>(v);
  r.time(t, "flowlet_gap", path, f.entropy.flowlet_gap_ns, 1'000'000'000);
  r.time(t, "path_rtt_threshold", path, f.entropy.path_rtt_threshold_ns, 1'000'000'000);
  if (r.integer(t, "reorder_tolerance", path, v, 0, 1 << 16))
    f.reorder_tolerance = static_cast<uint32_t>(v);
  r.time(t, "reorder_window", path, f.reorder_window_ns, 1'000'000'000);
  r.time(t, "reorder_window_min", path, f.reorder_window_min_ns, 1'000'000'000);
  r.time(t, "rto_low", path, f.rto_low_ns, 1'000'000'000);
  if (r.integer(t, "rto_low_threshold", path, v, 0, 1 << 16))
    f.rto_low_threshold = static_cast<uint32_t>(v);
  if (const toml::node* n = t.get("sack_window")) {
    if (!r.integer(t, "sack_window", path, v, 64, 1 << 20) || (v & (v - 1)) != 0)
      r.fail(n->source(), Reader::join(path, "sack_window"), "a power of two, 64..1048576");
    f.sack_window = static_cast<uint32_t>(v);
  }
  // Go-back-N takes every overtaken packet for a loss (transport/qp.h).
  if (f.entropy.mode != transport::EntropyMode::kFixed &&
      f.recovery != transport::Recovery::kSelectiveRepeat) {
    const char* key = t.get("entropy") ? "entropy" : "recovery";
    const toml::node* n = t.get(key);
    r.fail(n ? n->source() : t.source(), Reader::join(path, key),
           "entropy = \"" + std::string(transport::to_string(f.entropy.mode)) +
               "\" reorders packets: it needs recovery = \"selective_repeat\"");
  }
  if (f.reorder_window_ns && f.recovery != transport::Recovery::kSelectiveRepeat) {
    const toml::node* n = t.get("reorder_window");
    r.fail(n ? n->source() : t.source(), Reader::join(path, "reorder_window"),
           "time-based loss detection is selective repeat's: it needs recovery = "
           "\"selective_repeat\"");
  }
  if (f.reorder_window_min_ns &&
      (!f.reorder_window_ns || f.reorder_window_min_ns > f.reorder_window_ns)) {
    r.fail(t.get("reorder_window_min")->source(), Reader::join(path, "reorder_window_min"),
           "the adaptive floor of a reorder_window (RFC 8985 6.2.4): it needs one at least as "
           "large");
  }
  r.boolean(t, "tail_probe", path, f.tail_probe);
  if (f.tail_probe && !f.reorder_window_ns) {
    const toml::node* n = t.get("tail_probe");
    r.fail(n ? n->source() : t.source(), Reader::join(path, "tail_probe"),
           "the tail loss probe is RACK's (RFC 8985 7): it needs a reorder_window");
  }
  r.boolean(t, "reth_every_packet", path, f.reth_every_packet);
  r.boolean(t, "verify", path, f.verify);
  using Payload = FlowSpec::Payload;
  r.choice(t, "payload", path, f.payload,
           {{"auto", Payload::kAuto}, {"real", Payload::kReal}, {"virtual", Payload::kVirtual}});
  // Virtual payload never reaches the destination memory, so there is
  // nothing to verify: refuse the combination rather than report every
  // flow corrupt. Blame the key of this table that makes it so (verify
  // defaults to true; defaults in [flow] were checked when read).
  if (f.payload == Payload::kVirtual && f.verify) {
    const char* key = t.get("payload") ? "payload" : "verify";
    const toml::node* n = t.get(key);
    r.fail(n ? n->source() : t.source(), Reader::join(path, key),
           "payload = \"virtual\" moves no bytes into the destination memory: "
           "it needs verify = false");
  }
}

}  // namespace droce::sim
