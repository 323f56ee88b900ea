// The binding between a QP and its congestion control: pacing at the CC's
// rate, the window gate, and re-timing a booked departure when the rate
// changes.
#include "droce/endpoint/cc_binding.h"

#include <gtest/gtest.h>

namespace droce::endpoint {
namespace {

// An algorithm whose rate and window the test sets; rate changes happen on
// the events a real algorithm changes them on (CNP, ACK, timer).
class ScriptedCc : public cc::Algorithm {
 public:
  ScriptedCc() : cc::Algorithm(kLine) {}
  static constexpr uint64_t kLine = 12'500'000'000ull;  // 100 Gb/s
  std::string_view name() const override { return "scripted"; }
  void on_cnp(uint64_t) override { rate = next_rate; }
  void on_ack(uint64_t, const cc::AckEvent&) override { rate = next_rate; }
  void on_timer(uint64_t) override { rate = next_rate; }
  std::optional<uint64_t> next_timer() const override { return 0; }
  uint64_t rate_bytes_per_sec() const override { return rate; }
  std::optional<uint64_t> window_bytes() const override { return window; }
  uint64_t rate = kLine;
  uint64_t next_rate = kLine;
  std::optional<uint64_t> window;
};

struct Bound {
  ScriptedCc* cc;
  CcBinding binding;
  Bound() : Bound(std::make_unique<ScriptedCc>()) {}
  explicit Bound(std::unique_ptr<ScriptedCc> a) : cc(a.get()), binding(std::move(a)) {}
};

TEST(CcBinding, PacesAtTheRateInForce) {
  Bound b;
  b.binding.on_send(4096, false, 1000);
  // Expect: 4096 B at 12.5 GB/s take 328 ns (rounded up).
  EXPECT_EQ(b.binding.next_send_ns(), 1000u + 328u);
  EXPECT_FALSE(b.binding.may_send(4096, 1200));
  EXPECT_TRUE(b.binding.may_send(4096, 1328));
}

TEST(CcBinding, ARateCutThenRecoveryRetimesTheBookedDeparture) {
  // DCQCN cuts a flow to its floor; the packet sent at the floor books the
  // next departure far out. When the rate recovers, the departure must
  // follow (HPCC's ns-3 ChangeRate, a NIC's rate limiter), or the flow
  // stays silent while its rate says it may send.
  Bound b;
  b.cc->next_rate = 125'000;  // 1 Mb/s, the floor
  b.binding.on_cnp(0);
  b.binding.on_send(4096, false, 0);
  EXPECT_EQ(b.binding.next_send_ns(), 32'768'000u);  // 4096 B at 1 Mb/s
  // Expect: a recovery to 10 Gb/s re-times it to 4096 B at that rate.
  b.cc->next_rate = 1'250'000'000;
  b.binding.on_timer(20'000);
  EXPECT_EQ(b.binding.next_send_ns(), 3277u);
  EXPECT_TRUE(b.binding.may_send(4096, 20'000));
  // Expect: a later cut re-times it the other way (later, from the same start).
  b.binding.on_send(4096, false, 20'000);
  EXPECT_EQ(b.binding.next_send_ns(), 20'000u + 3277u);
  b.cc->next_rate = 125'000;
  b.binding.on_ack(4096, 0, 21'000);
  EXPECT_EQ(b.binding.next_send_ns(), 20'000u + 32'768'000u);
  EXPECT_FALSE(b.binding.may_send(4096, 1'000'000));
}

TEST(CcBinding, NoRetimingBeforeTheFirstPacket) {
  Bound b;
  b.cc->next_rate = 125'000;
  b.binding.on_cnp(5);
  EXPECT_EQ(b.binding.next_send_ns(), 0u);
  EXPECT_TRUE(b.binding.may_send(4096, 5));
}

TEST(CcBinding, WindowGateAndTheFillingPacket) {
  Bound b;
  b.cc->window = 3 * 4096;
  b.binding.on_send(4096, false, 0);
  // Expect: with 4 KiB in flight, the next 4 KiB leaves room for one more;
  // the one after fills the window.
  EXPECT_FALSE(b.binding.fills_window(4096, 4096));
  b.binding.on_send(4096, false, 0);
  EXPECT_TRUE(b.binding.fills_window(4096, 4096));
  b.binding.on_send(4096, false, 0);
  EXPECT_FALSE(b.binding.may_send(4096, 1'000'000));
  b.binding.on_delivered(4096);
  EXPECT_TRUE(b.binding.may_send(4096, 1'000'000));
  // Expect: a resend takes the place of the copy it replaces: the window
  // stays open.
  b.binding.on_send(4096, true, 1'000'000);
  EXPECT_TRUE(b.binding.may_send(4096, 2'000'000));
  EXPECT_EQ(b.binding.inflight_bytes(), 2u * 4096);
  // Expect: a timeout writes off what was out; its resends count afresh
  // until the first new packet, after which resends replace again.
  b.binding.on_loss(transport::LossEvent::kTimeout);
  EXPECT_EQ(b.binding.inflight_bytes(), 0u);
  b.binding.on_send(4096, true, 2'000'000);
  b.binding.on_send(4096, true, 3'000'000);
  EXPECT_EQ(b.binding.inflight_bytes(), 2u * 4096);
  b.binding.on_send(4096, false, 4'000'000);
  b.binding.on_send(4096, true, 5'000'000);
  EXPECT_EQ(b.binding.inflight_bytes(), 3u * 4096);
  EXPECT_FALSE(b.binding.may_send(4096, 6'000'000));
  EXPECT_TRUE(b.binding.may_send(0, 6'000'000));  // a resend needs no room
  // Expect: a rate-only algorithm never fills a window.
  b.cc->window.reset();
  EXPECT_FALSE(b.binding.fills_window(1 << 30, 1 << 30));
}

}  // namespace
}  // namespace droce::endpoint
