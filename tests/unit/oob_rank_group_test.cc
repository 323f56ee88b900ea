// N ranks meeting around rank 0 over loopback TCP, one thread per rank:
// all-gathers give every rank every line in rank order, barriers catch a
// rank out of step, and a stranger's greeting or a missing rank fails the
// set-up instead of hanging it.
#include "droce/oob/rank_group.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace droce::oob {
namespace {

uint16_t free_port() { return Listener("127.0.0.1", 0, 1).port(); }

TEST(OobRankGroup, AllGatherGivesEveryRankEveryLine) {
  constexpr uint32_t kRanks = 4;
  const uint16_t port = free_port();
  std::vector<std::vector<std::string>> seen(kRanks);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      RankGroup g(r, kRanks, "127.0.0.1", port, 10.0);
      EXPECT_EQ(g.rank(), r);
      g.barrier("start");
      seen[r] = g.all_gather(fmt::format("QPS rank={}", r));
      g.barrier("done");
    });
  for (auto& t : threads) t.join();
  const std::vector<std::string> want{"QPS rank=0", "QPS rank=1", "QPS rank=2", "QPS rank=3"};
  for (uint32_t r = 0; r < kRanks; ++r) EXPECT_EQ(seen[r], want) << "rank " << r;
}

TEST(OobRankGroup, ARankOutOfStepFailsTheBarrier) {
  const uint16_t port = free_port();
  std::string rank0_error;
  std::thread t0([&] {
    RankGroup g(0, 2, "127.0.0.1", port, 10.0);
    try {
      g.barrier("ready");
    } catch (const Error& e) {
      rank0_error = e.what();
    }
  });
  RankGroup g1(1, 2, "127.0.0.1", port, 10.0);
  EXPECT_THROW(g1.barrier("size 8"), Error);
  t0.join();
  EXPECT_EQ(rank0_error, "a rank is out of step: expected 'SYNC ready', got 'SYNC size 8'");
}

TEST(OobRankGroup, AStrangersGreetingFailsTheSetUp) {
  const uint16_t port = free_port();
  std::thread stranger([&] {
    Channel c;
    c.connect_to("127.0.0.1", port, 10.0);
    c.send_line("HELLO rank=7");
    try {
      c.try_recv_line(2000);  // stay until rank 0 has read the greeting and hung up
    } catch (const Error&) {
    }
  });
  try {
    RankGroup g(0, 2, "127.0.0.1", port, 10.0);
    ADD_FAILURE() << "rank 0 accepted rank 7 of 2";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "unexpected greeting 'HELLO rank=7' (ranks 2)");
  }
  stranger.join();
}

TEST(OobRankGroup, AMissingRankFailsWithinTheTimeout) {
  try {
    RankGroup g(0, 3, "127.0.0.1", free_port(), 0.2);
    ADD_FAILURE() << "rank 0 started without ranks 1 and 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only 1 of 3 ranks connected"), std::string::npos);
  }
}

}  // namespace
}  // namespace droce::oob
