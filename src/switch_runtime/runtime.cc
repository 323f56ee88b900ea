#include "droce/switch_runtime/runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

namespace droce::switch_runtime {

namespace {

uint64_t mac_key(const uint8_t* p) {
  uint64_t k = 0;
  for (int i = 0; i < 6; ++i) k = (k << 8) | p[i];
  return k;
}

std::string human_bytes(uint64_t b) {
  if (b >= (1u << 20)) return fmt::format("{:.1f}MiB", b / 1048576.0);
  if (b >= 1024) return fmt::format("{:.1f}KiB", b / 1024.0);
  return fmt::format("{}B", b);
}

std::string human_rate(uint64_t bps) {
  if (bps >= fabric::kGbps && bps % 100'000'000 == 0) return fmt::format("{}G", bps / 1e9);
  if (bps >= 1'000'000) return fmt::format("{}M", bps / 1e6);
  return fmt::format("{}K", bps / 1e3);
}

const char* ecn_mode_name(fabric::MarkMode m) {
  return m == fabric::MarkMode::kOff ? "off" : m == fabric::MarkMode::kRed ? "red" : "step";
}

}  // namespace

Runtime::Runtime(Settings s, std::vector<std::vector<std::unique_ptr<FramePort>>> ports,
                 std::FILE* out)
    : s_(std::move(s)), out_(out) {
  if (ports.size() != s_.ports.size())
    throw ConfigError("--port", fmt::format("{} switch ports configured, {} given", s_.ports.size(),
                                            ports.size()));
  fabric::SwitchConfig cfg = build_switch_config(s_);
  for (size_t pi = 0; pi < ports.size(); ++pi) {
    if (ports[pi].empty()) throw ConfigError(s_.ports[pi].origin, "no real port behind it");
    SwitchPort sp;
    sp.rate_bps = s_.ports[pi].rate_bps.value_or(s_.default_rate_bps);
    cfg.ports[pi].mac = ports[pi].front()->mac();
    for (auto& m : ports[pi]) {
      sp.members.push_back(members_.size());
      member_port_.push_back(static_cast<uint16_t>(pi));
      members_.push_back(std::move(m));
    }
    ports_.push_back(std::move(sp));
  }
  try {
    sw_ = std::make_unique<fabric::Switch>(std::move(cfg));
  } catch (const std::invalid_argument& e) {
    throw ConfigError("switch", e.what());
  }
  if (!s_.capture.empty()) {
    try {
      capture_ = std::make_unique<telemetry::PcapWriter>(s_.capture);
    } catch (const std::runtime_error& e) {
      throw ConfigError("--capture", e.what());
    }
  }
}

Runtime::~Runtime() = default;

std::string Runtime::member_names(const SwitchPort& p) const {
  std::string names;
  for (size_t mi : p.members) names += (names.empty() ? "" : "+") + members_[mi]->name();
  return names;
}

void Runtime::start(uint64_t now, uint64_t wall_ns) {
  start_ns_ = now;
  next_link_poll_ = now;
  wall_offset_ns_ = static_cast<int64_t>(wall_ns) - static_cast<int64_t>(now);
  fmt::print(out_, "droce-switch: {} port(s), {} route(s); Ctrl-C stops\n", ports_.size(),
             s_.routes.size());
  for (size_t p = 0; p < ports_.size(); ++p) {
    const auto& e = sw_->config().ports[p].ecn;
    fmt::print(out_, "  port {}: {} at {}, ecn {} kmin {} kmax {} pmax {} k {}\n", p,
               member_names(ports_[p]), human_rate(ports_[p].rate_bps), ecn_mode_name(e.mode),
               human_bytes(e.kmin_bytes), human_bytes(e.kmax_bytes), e.pmax,
               human_bytes(e.step_bytes));
  }
  std::fflush(out_);
}

fabric::FrameBytes Runtime::take_buffer() {
  if (spare_.empty()) {
    fabric::FrameBytes b;
    b.reserve(2048);
    return b;
  }
  fabric::FrameBytes b = std::move(spare_.back());
  spare_.pop_back();
  return b;
}

void Runtime::recycle(fabric::FrameBytes&& b) {
  if (spare_.size() < 4096) {
    b.clear();
    spare_.push_back(std::move(b));
  }
}

size_t Runtime::step(uint64_t now) {
  if (now >= next_link_poll_) poll_links(now);
  const size_t received = receive_all(now);
  sw_->advance(now, [this](fabric::Departure&& d) { ports_[d.port].held.push_back(std::move(d)); });
  transmit_due(now);
  for (auto& m : members_) m->flush();
  for (size_t p = 0; p < ports_.size(); ++p)
    ports_[p].interval_qmax =
        std::max(ports_[p].interval_qmax, sw_->port_queue_bytes(static_cast<uint16_t>(p)));
  return received;
}

size_t Runtime::receive_all(uint64_t now) {
  size_t received = 0;
  for (size_t mi = 0; mi < members_.size(); ++mi) {
    const uint16_t sp = member_port_[mi];
    SwitchPort& port = ports_[sp];
    received += members_[mi]->receive(s_.burst, [&](std::span<const uint8_t> frame) {
      fabric::Packet pkt;
      pkt.bytes = take_buffer();
      pkt.bytes.assign(frame.begin(), frame.end());
      // A port fronting several real ports learns where each source lives.
      if (port.members.size() > 1 && frame.size() >= 12 && !(frame[6] & 1))
        port.mac_table[mac_key(frame.data() + 6)] = mi;
      sw_->receive(sp, std::move(pkt), now);
    });
  }
  return received;
}

void Runtime::transmit_due(uint64_t now) {
  for (SwitchPort& port : ports_) {
    while (!port.held.empty() && port.held.front().time <= now) {
      fabric::Departure& d = port.held.front();
      const uint64_t lag = now - d.time;
      lag_max_ns_ = std::max(lag_max_ns_, lag);
      lag_sum_ns_ += lag;
      ++lag_count_;
      const std::span<const uint8_t> frame(d.packet.bytes.data(), d.packet.size());
      if (capture_) capture_->write(frame, static_cast<uint64_t>(static_cast<int64_t>(now) + wall_offset_ns_));
      if (port.members.size() == 1) {
        members_[port.members.front()]->send(frame);
      } else {
        auto it = frame.size() >= 6 && !(frame[0] & 1) ? port.mac_table.find(mac_key(frame.data()))
                                                       : port.mac_table.end();
        if (it != port.mac_table.end()) {
          members_[it->second]->send(frame);
        } else {
          ++port.flooded;
          for (size_t mi : port.members) members_[mi]->send(frame);
        }
      }
      recycle(std::move(d.packet.bytes));
      port.held.pop_front();
    }
  }
}

// Each switch port's link (any member up; one whose device cannot tell
// counts as down). A port whose link goes down is down in the model too
// (Switch::set_port_up: its queues flushed, ECMP around it, PFC on the link
// ended), as a switch does when a cable is pulled or a peer process leaves;
// it comes back with its link.
void Runtime::poll_links(uint64_t now) {
  next_link_poll_ = now + kLinkPollNs;
  for (size_t p = 0; p < ports_.size(); ++p) {
    SwitchPort& port = ports_[p];
    bool up = false;
    for (size_t mi : port.members) up |= members_[mi]->link_up().value_or(false);
    if (up) port.link_seen_up = true;
    if (!port.link_seen_up || up == port.link_up) continue;
    port.link_up = up;
    if (!up) ++port.link_downs;
    sw_->set_port_up(static_cast<uint16_t>(p), up, now);
    fmt::print(out_, "port {}: link {}\n", p, up ? "up" : "down");
    std::fflush(out_);
  }
}

uint64_t Runtime::next_due() const {
  uint64_t next = std::min(sw_->next_event_time(), next_link_poll_);
  for (const SwitchPort& p : ports_)
    if (!p.held.empty()) next = std::min(next, p.held.front().time);
  return next;
}

void Runtime::live_stats(uint64_t now, double interval) {
  const double secs = (now - start_ns_) / 1e9;
  for (size_t p = 0; p < ports_.size(); ++p) {
    SwitchPort& port = ports_[p];
    const fabric::PortCounters& c = sw_->counters(static_cast<uint16_t>(p));
    uint64_t marks = 0, drops = 0, last_marks = 0, last_drops = 0, hwm = 0;
    for (size_t q = 0; q < fabric::kNumClasses; ++q) {
      marks += c.queues[q].ecn_marked;
      drops += c.queues[q].drops + c.queues[q].watchdog_drops;
      last_marks += port.last.queues[q].ecn_marked;
      last_drops += port.last.queues[q].drops + port.last.queues[q].watchdog_drops;
      hwm = std::max(hwm, c.queues[q].max_bytes);
    }
    const double rx_gbps = (c.rx_bytes - port.last.rx_bytes) * 8 / interval / 1e9;
    const double tx_gbps = (c.tx_bytes - port.last.tx_bytes) * 8 / interval / 1e9;
    fmt::print(out_,
               "{:8.3f} s port {} {:>5}: rx {:8} pkt {:7.3f} Gb/s | tx {:8} pkt {:7.3f} Gb/s | "
               "q {:>9} max {:>9} (all-time {:>9}) | marks {:7} drops {:6} | xoff {} xon {} "
               "pfc-rx {} | no-route {}\n",
               secs, p, human_rate(port.rate_bps), c.rx_packets - port.last.rx_packets, rx_gbps,
               c.tx_packets - port.last.tx_packets, tx_gbps,
               human_bytes(sw_->port_queue_bytes(static_cast<uint16_t>(p))),
               human_bytes(port.interval_qmax), human_bytes(hwm), marks - last_marks,
               drops - last_drops, c.tx_xoff - port.last.tx_xoff, c.tx_xon - port.last.tx_xon,
               c.rx_pfc - port.last.rx_pfc, c.no_route - port.last.no_route);
    port.last = c;
    port.interval_qmax = 0;
  }
  std::fflush(out_);
}

namespace {

nlohmann::json queue_json(const fabric::QueueCounters& k) {
  return {{"enq_packets", k.enq_packets}, {"enq_bytes", k.enq_bytes},
          {"tx_packets", k.tx_packets},   {"tx_bytes", k.tx_bytes},
          {"drops", k.drops},             {"drop_bytes", k.drop_bytes},
          {"watchdog_drops", k.watchdog_drops},
          {"ecn_marked", k.ecn_marked},   {"ecn_not_ect", k.ecn_not_ect},
          {"max_bytes", k.max_bytes}};
}

nlohmann::json member_json(const FramePort& m) {
  const FramePortCounters& c = m.counters();
  return {{"name", m.name()},           {"rx_frames", c.rx_frames},
          {"rx_bytes", c.rx_bytes},     {"tx_frames", c.tx_frames},
          {"tx_bytes", c.tx_bytes},     {"tx_dropped", c.tx_dropped},
          {"tx_alloc_failed", c.tx_alloc_failed},
          {"tx_too_big", c.tx_too_big}};
}

}  // namespace

nlohmann::json Runtime::finish(uint64_t now) {
  nlohmann::json j;
  j["duration_s"] = (now - start_ns_) / 1e9;
  j["tx_lag_ns"] = {{"max", lag_max_ns_},
                    {"mean", lag_count_ ? lag_sum_ns_ / lag_count_ : 0},
                    {"count", lag_count_}};
  const uint64_t captured = capture_ ? capture_->frames() : 0;
  j["captured"] = captured;
  j["ports"] = nlohmann::json::array();
  fmt::print(out_, "droce-switch counters after {:.3f} s\n", (now - start_ns_) / 1e9);
  for (size_t p = 0; p < ports_.size(); ++p) {
    const fabric::PortCounters& c = sw_->counters(static_cast<uint16_t>(p));
    fmt::print(out_, "port {} [{}] rate {}:\n", p, member_names(ports_[p]),
               human_rate(ports_[p].rate_bps));
    nlohmann::json jp;
    jp["members"] = nlohmann::json::array();
    jp["rate_bps"] = ports_[p].rate_bps;
    auto put = [&](std::string_view k, uint64_t v) {
      jp[std::string(k)] = v;
      if (v) fmt::print(out_, "  {:<22} {}\n", k, v);
    };
    put("rx_packets", c.rx_packets);
    put("rx_bytes", c.rx_bytes);
    put("tx_packets", c.tx_packets);
    put("tx_bytes", c.tx_bytes);
    put("rx_pfc", c.rx_pfc);
    put("rx_pause_8023x", c.rx_pause_8023x);
    put("rx_bad", c.rx_bad);
    put("no_route", c.no_route);
    put("down_drops", c.down_drops);
    put("tx_xoff", c.tx_xoff);
    put("tx_xon", c.tx_xon);
    put("int_stamped", c.int_stamped);
    put("int_full", c.int_full);
    put("flooded", ports_[p].flooded);
    put("link_downs", ports_[p].link_downs);
    jp["link_up"] = ports_[p].link_up;
    if (!ports_[p].link_up) fmt::print(out_, "  link down\n");
    uint64_t marks = 0, drops = 0, qmax = 0;
    nlohmann::json jq = nlohmann::json::object();
    for (size_t q = 0; q < fabric::kNumClasses; ++q) {
      const fabric::QueueCounters& k = c.queues[q];
      marks += k.ecn_marked;
      drops += k.drops + k.watchdog_drops;
      qmax = std::max(qmax, k.max_bytes);
      if (!k.enq_packets && !k.drops) continue;
      fmt::print(out_,
                 "  tc{}: enq {} pkt / {} B, tx {} pkt, drops {} ({} B), watchdog drops {}, "
                 "ecn marked {}, not-ect {}, max {}\n",
                 q, k.enq_packets, k.enq_bytes, k.tx_packets, k.drops, k.drop_bytes,
                 k.watchdog_drops, k.ecn_marked, k.ecn_not_ect, human_bytes(k.max_bytes));
      jq[std::to_string(q)] = queue_json(k);
    }
    for (size_t q = 0; q < fabric::kNumClasses; ++q)
      if (c.watchdog_triggers[q])
        fmt::print(out_, "  tc{} watchdog triggers {}\n", q, c.watchdog_triggers[q]);
    jp["ecn_marked"] = marks;
    jp["drops"] = drops;
    jp["queue_max_bytes"] = qmax;
    jp["queues"] = jq;
    for (size_t mi : ports_[p].members) {
      const FramePort& m = *members_[mi];
      const FramePortCounters& k = m.counters();
      fmt::print(out_,
                 "  dpdk {}: rx {} frames / {} B, tx {} frames / {} B, tx dropped {}, "
                 "alloc failed {}, too big {}\n",
                 m.name(), k.rx_frames, k.rx_bytes, k.tx_frames, k.tx_bytes, k.tx_dropped,
                 k.tx_alloc_failed, k.tx_too_big);
      jp["members"].push_back(member_json(m));
    }
    j["ports"].push_back(jp);
  }
  fmt::print(out_, "tx lag behind the model: mean {} ns, max {} ns over {} departures; captured {}\n",
             lag_count_ ? lag_sum_ns_ / lag_count_ : 0, lag_max_ns_, lag_count_, captured);
  std::fflush(out_);
  if (capture_) capture_->close();
  if (!s_.json.empty()) {
    std::ofstream f(s_.json);
    f << j.dump(2) << "\n";
    f.close();  // a write the disk refused shows here, not before
    if (!f) fmt::print(stderr, "droce-switch: warning: cannot write '{}'\n", s_.json);
  }
  return j;
}

void Runtime::run(const std::atomic<bool>& stop, uint64_t (*clock_ns)()) {
  const uint64_t wall = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  start(clock_ns(), wall);
  const uint64_t interval_ns = static_cast<uint64_t>(s_.stats_interval * 1e9);
  const uint64_t end_ns =
      s_.duration > 0 ? start_ns_ + static_cast<uint64_t>(s_.duration * 1e9) : fabric::kNever;
  uint64_t next_stats = interval_ns ? start_ns_ + interval_ns : fabric::kNever;
  uint64_t last_stats = start_ns_;
  while (!stop.load(std::memory_order_relaxed)) {
    const uint64_t now = clock_ns();  // the one clock read of this iteration
    const size_t received = step(now);
    if (now >= next_stats) {
      live_stats(now, (now - last_stats) / 1e9);
      last_stats = now;
      next_stats = now + interval_ns;
    }
    if (now >= end_ns) break;
    if (s_.idle_sleep_us && received == 0) {
      // Nothing arrived: sleep until the next modelled event, at most
      // idle_sleep_us (a frame arriving meanwhile waits that long).
      const uint64_t t = clock_ns();
      const uint64_t until = std::min<uint64_t>(next_due(), t + s_.idle_sleep_us * uint64_t{1000});
      if (until > t + 2000) std::this_thread::sleep_for(std::chrono::nanoseconds(until - t));
    }
  }
  const uint64_t now = clock_ns();
  if (interval_ns && now > last_stats + interval_ns / 10) live_stats(now, (now - last_stats) / 1e9);
  finish(now);
}

}  // namespace droce::switch_runtime
