// The out-of-band channel over real loopback TCP: lines arrive whole and in
// order, barriers meet, and every way a peer can fail (silence, exit, out
// of step) is an oob::Error naming what was awaited.
#include "droce/oob/channel.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "config_error_util.h"

namespace droce::oob {
namespace {

struct Pair {
  Listener listener{"127.0.0.1", 0, 4};
  Channel client, server;
  Pair() {
    client.connect_to("127.0.0.1", listener.port(), 5.0);
    server = listener.accept(5.0);
  }
};

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(OobChannel, LinesArriveWholeAndInOrder) {
  Pair p;
  EXPECT_TRUE(p.client.connected());
  p.client.send_line("HELLO v=1");
  p.client.send_line(std::string(10000, 'x'));  // longer than one recv()
  p.client.send_line("");
  EXPECT_EQ(p.server.recv_line(5.0, "hello"), "HELLO v=1");
  EXPECT_EQ(p.server.recv_line(5.0, "long"), std::string(10000, 'x'));
  EXPECT_EQ(p.server.recv_line(5.0, "empty"), "");
  EXPECT_FALSE(p.server.try_recv_line(0).has_value());
}

// A look (try_recv_line(0)) reaches the socket at most every kLookEvery,
// so a caller spins: it still gets every line, in order, and lines read
// with an earlier one come at once.
TEST(OobChannel, ASpinningLookGetsEveryLine) {
  Pair p;
  const auto spin = [&] {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::optional<std::string> line;
    while (!(line = p.server.try_recv_line(0)) && std::chrono::steady_clock::now() < give_up) {
    }
    return line;
  };
  EXPECT_FALSE(p.server.try_recv_line(0).has_value());  // looked: nothing yet
  p.client.send_line("a");
  p.client.send_line("b");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // both have arrived
  EXPECT_EQ(spin(), "a");
  EXPECT_EQ(p.server.try_recv_line(0), "b");  // read with "a": no look needed
  EXPECT_FALSE(p.server.try_recv_line(0).has_value());
  p.client.send_line("c");
  EXPECT_EQ(spin(), "c");
}

TEST(OobChannel, SilenceTimesOutNamingWhatWasAwaited) {
  Pair p;
  EXPECT_EQ(error_of([&] { p.server.recv_line(0.05, "QP"); }),
            "timed out after 0.05 s waiting for the peer (QP)");
}

TEST(OobChannel, APeerThatExitsIsAnError) {
  Pair p;
  p.client = Channel();  // closes the connection
  EXPECT_NE(error_of([&] { p.server.recv_line(5.0, "QP"); }).find("connection to the peer lost"),
            std::string::npos);
}

TEST(OobChannel, BarrierMeetsAndCatchesAPeerOutOfStep) {
  Pair p;
  std::thread t([&] { p.client.barrier("ready", 5.0); });
  p.server.barrier("ready", 5.0);
  t.join();
  p.client.barrier_send("go");
  EXPECT_EQ(error_of([&] { p.server.barrier_recv("done", 5.0); }),
            "peer out of step: expected 'SYNC done', got 'SYNC go'");
}

TEST(OobChannel, WaitingRunsTheCallerWorkUntilTheLineComes) {
  Pair p;
  int calls = 0;
  p.server.set_while_waiting([&] {
    if (++calls == 100) p.client.send_line("late");
  });
  EXPECT_EQ(p.server.recv_line(5.0, "late"), "late");
  EXPECT_GE(calls, 100);
}

TEST(OobChannel, ConnectGivesUpAfterItsTimeout) {
  uint16_t port;
  { port = Listener("127.0.0.1", 0, 1).port(); }  // free, then closed
  Channel c;
  EXPECT_NE(error_of([&] { c.connect_to("127.0.0.1", port, 0.1); }).find("cannot connect to"),
            std::string::npos);
  EXPECT_FALSE(c.connected());
}

TEST(OobChannel, NobodyConnectingIsAnError) {
  Listener l("127.0.0.1", 0, 1);
  EXPECT_NE(error_of([&] { l.accept(0.05); }).find("no peer connected"), std::string::npos);
}

TEST(OobChannel, BadAddressesAndBusyPortsNameTheOption) {
  Channel c;
  EXPECT_EQ(testing::config_error_of([&] { c.connect_to("server", 1, 0.1, "--connect"); }),
            "--connect: 'server' is not an IPv4 address");
  Listener taken("127.0.0.1", 0, 1);
  EXPECT_NE(testing::config_error_of([&] { Listener("127.0.0.1", taken.port(), 1, "--port"); })
                .find("--port: cannot listen on 127.0.0.1:"),
            std::string::npos);
}

}  // namespace
}  // namespace droce::oob
