// The switch runtime (src/switch_runtime/runtime.cc) between test ports:
// forwarding by route, pacing at the modelled rate, MAC learning behind a
// shared port, links going down and up, and the final counters.
#include "droce/switch_runtime/runtime.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <deque>
#include <vector>

#include "fabric_test_util.h"

namespace droce::switch_runtime {
namespace {

using fabric::testing::roce_bytes;
using fabric::testing::RoceSpec;

// A port the test feeds and reads: `inbox` is what it will receive, `sent`
// what the runtime transmitted through it.
class TestPort final : public FramePort {
 public:
  TestPort(std::string name, uint8_t mac_last) : name_(std::move(name)) { mac_[5] = mac_last; }
  const std::string& name() const override { return name_; }
  wire::MacAddress mac() const override { return mac_; }
  size_t receive(size_t max, const std::function<void(std::span<const uint8_t>)>& frame) override {
    size_t n = 0;
    while (n < max && !inbox.empty()) {
      ++c_.rx_frames;
      c_.rx_bytes += inbox.front().size();
      frame(inbox.front());
      inbox.pop_front();
      ++n;
    }
    return n;
  }
  void send(std::span<const uint8_t> f) override { queued_.emplace_back(f.begin(), f.end()); }
  void flush() override {
    for (auto& f : queued_) {
      ++c_.tx_frames;
      c_.tx_bytes += f.size();
      sent.push_back(std::move(f));
    }
    queued_.clear();
  }
  std::optional<bool> link_up() override { return link; }
  const FramePortCounters& counters() const override { return c_; }

  std::deque<std::vector<uint8_t>> inbox;
  std::vector<std::vector<uint8_t>> sent;
  std::optional<bool> link = true;

 private:
  std::string name_;
  wire::MacAddress mac_{0x02, 0, 0, 0, 0, 0};
  std::vector<std::vector<uint8_t>> queued_;
  FramePortCounters c_;
};

struct Rig {
  // Switch ports: 0 -> "a", 1 -> "b" (+ "c" when `shared`), 10.0.0.2 via 1, default via 0.
  explicit Rig(bool shared = false, uint64_t rate_bps = 10'000'000'000ull) {
    Settings s;
    s.ports.push_back(parse_port_spec("--port", "a"));
    s.ports.push_back(parse_port_spec("--port", shared ? "b+c" : "b"));
    for (auto& p : s.ports) p.rate_bps = rate_bps;
    s.routes.push_back(parse_route_spec("--route", "10.0.0.2/32=1"));
    s.routes.push_back(parse_route_spec("--route", "default=0"));
    s.stats_interval = 0;
    validate(s);
    std::vector<std::vector<std::unique_ptr<FramePort>>> ports(2);
    auto add = [&](size_t p, const std::string& n, uint8_t m) {
      auto port = std::make_unique<TestPort>(n, m);
      by_name[n] = port.get();
      ports[p].push_back(std::move(port));
    };
    add(0, "a", 1);
    add(1, "b", 2);
    if (shared) add(1, "c", 3);
    out = std::tmpfile();
    rt = std::make_unique<Runtime>(s, std::move(ports), out);
    rt->start(0, 1'700'000'000'000'000'000ull);
  }
  ~Rig() { std::fclose(out); }
  std::string output() const {
    std::fflush(out);
    std::rewind(out);
    std::string text;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, out)) > 0;) text.append(buf, n);
    return text;
  }
  TestPort& port(const std::string& n) { return *by_name.at(n); }

  std::map<std::string, TestPort*> by_name;
  std::FILE* out = nullptr;
  std::unique_ptr<Runtime> rt;
};

TEST(SwitchRuntime, FramesLeaveByRouteOnlyOnceTheirLastBitWouldHave) {
  Rig rig;
  RoceSpec spec;
  spec.payload = 1000;
  const std::vector<uint8_t> frame = roce_bytes(spec);
  rig.port("a").inbox.push_back(frame);
  EXPECT_EQ(rig.rt->step(1000), 1u);
  EXPECT_TRUE(rig.port("b").sent.empty()) << "sent before its serialisation time";
  const uint64_t due = rig.rt->next_due();
  EXPECT_GT(due, 1000u);
  // (frame + preamble/IFG) at 10 Gb/s is about a microsecond.
  EXPECT_LT(due, 1000u + 2000u);
  rig.rt->step(due);
  ASSERT_EQ(rig.port("b").sent.size(), 1u);
  EXPECT_EQ(rig.port("b").sent[0], frame);
  EXPECT_TRUE(rig.port("a").sent.empty());
  EXPECT_EQ(rig.rt->model().counters(1).tx_packets, 1u);
}

TEST(SwitchRuntime, BackToBackFramesArePacedAtThePortRate) {
  Rig rig(false, 1'000'000'000ull);  // 1 Gb/s: 1 KB takes ~8 us
  RoceSpec spec;
  spec.payload = 1000;
  for (int i = 0; i < 10; ++i) rig.port("a").inbox.push_back(roce_bytes(spec));
  uint64_t now = 0;
  rig.rt->step(now);
  std::vector<uint64_t> times;
  while (rig.port("b").sent.size() < 10 && now < 1'000'000) {
    now = std::max(now + 1, rig.rt->next_due());
    const size_t before = rig.port("b").sent.size();
    rig.rt->step(now);
    for (size_t i = before; i < rig.port("b").sent.size(); ++i) times.push_back(now);
  }
  ASSERT_EQ(times.size(), 10u);
  const double per_frame_ns = static_cast<double>(times.back() - times.front()) / 9;
  const double wire_ns = (roce_bytes(spec).size() + 24) * 8.0;  // + preamble, IFG, FCS
  EXPECT_NEAR(per_frame_ns, wire_ns, wire_ns * 0.05);
}

TEST(SwitchRuntime, ASharedPortLearnsSourcesAndFloodsTheUnknown) {
  Rig rig(true);
  RoceSpec to_b;  // dst MAC 02:00:00:00:00:02
  const std::vector<uint8_t> frame = roce_bytes(to_b);
  rig.port("a").inbox.push_back(frame);
  rig.rt->step(0);
  rig.rt->step(rig.rt->next_due());
  // Nobody behind port 1 has spoken yet: both members get it.
  EXPECT_EQ(rig.port("b").sent.size(), 1u);
  EXPECT_EQ(rig.port("c").sent.size(), 1u);
  EXPECT_EQ(rig.rt->flooded(1), 1u);
  // "c" sends from 02:00:00:00:00:02 (to the default route): learned there.
  RoceSpec from_c;
  from_c.dst_ip = 0x0A000009;
  std::vector<uint8_t> reply = roce_bytes(from_c);
  std::copy(frame.begin(), frame.begin() + 6, reply.begin() + 6);  // src MAC = the first's dst
  rig.port("c").inbox.push_back(reply);
  uint64_t now = rig.rt->next_due() + 1;
  rig.rt->step(now);
  rig.rt->step(rig.rt->next_due());
  EXPECT_EQ(rig.port("a").sent.size(), 1u);
  rig.port("a").inbox.push_back(frame);
  now = rig.rt->next_due() + 1;
  rig.rt->step(now);
  rig.rt->step(rig.rt->next_due());
  EXPECT_EQ(rig.port("b").sent.size(), 1u) << "a learned MAC is not flooded";
  EXPECT_EQ(rig.port("c").sent.size(), 2u);
  EXPECT_EQ(rig.rt->flooded(1), 1u);
}

TEST(SwitchRuntime, ALinkDownTakesThePortDownInTheModelAndBack) {
  Rig rig;
  rig.rt->step(0);  // links seen up
  rig.port("b").link = false;
  rig.rt->step(kLinkPollNs);
  EXPECT_FALSE(rig.rt->link_up(1));
  RoceSpec spec;
  rig.port("a").inbox.push_back(roce_bytes(spec));
  rig.rt->step(kLinkPollNs + 1);
  rig.rt->step(kLinkPollNs + 100'000);
  EXPECT_TRUE(rig.port("b").sent.empty());
  rig.port("b").link = true;
  rig.rt->step(3 * kLinkPollNs);
  EXPECT_TRUE(rig.rt->link_up(1));
  rig.port("a").inbox.push_back(roce_bytes(spec));
  rig.rt->step(3 * kLinkPollNs + 1);
  rig.rt->step(rig.rt->next_due());
  EXPECT_EQ(rig.port("b").sent.size(), 1u);
  const std::string text = rig.output();
  EXPECT_NE(text.find("port 1: link down"), std::string::npos) << text;
  EXPECT_NE(text.find("port 1: link up"), std::string::npos) << text;
}

TEST(SwitchRuntime, FinalCountersAddUp) {
  Rig rig;
  RoceSpec spec;
  for (int i = 0; i < 3; ++i) rig.port("a").inbox.push_back(roce_bytes(spec));
  uint64_t now = 0;
  rig.rt->step(now);
  while (rig.port("b").sent.size() < 3 && now < 1'000'000) rig.rt->step(now = rig.rt->next_due());
  const nlohmann::json j = rig.rt->finish(now);
  ASSERT_EQ(j["ports"].size(), 2u);
  EXPECT_EQ(j["ports"][0]["rx_packets"], 3);
  EXPECT_EQ(j["ports"][1]["tx_packets"], 3);
  EXPECT_EQ(j["ports"][1]["members"][0]["name"], "b");
  EXPECT_EQ(j["ports"][1]["members"][0]["tx_frames"], 3);
  EXPECT_EQ(j["tx_lag_ns"]["count"], 3);
  EXPECT_NE(rig.output().find("droce-switch counters after"), std::string::npos);
}

TEST(SwitchRuntime, PortsMustMatchTheSettings) {
  Settings s;
  s.ports.push_back(parse_port_spec("--port", "a"));
  s.routes.push_back(parse_route_spec("--route", "default=0"));
  EXPECT_THROW(Runtime(s, {}), ConfigError);
}

}  // namespace
}  // namespace droce::switch_runtime
