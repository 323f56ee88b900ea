#include "droce/oob/rank_group.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "droce/config_error.h"

namespace droce::oob {
namespace {

double seconds_left(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
}

}  // namespace

RankGroup::RankGroup(uint32_t rank, uint32_t ranks, const std::string& host, uint16_t port,
                     double timeout_s, const std::string& option)
    : rank_(rank), ranks_(ranks), timeout_s_(timeout_s) {
  if (ranks == 0 || rank >= ranks)
    throw ConfigError("--rank", fmt::format("rank {} is not below the {} ranks", rank, ranks));
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  if (rank != 0) {
    peers_.resize(1);
    peers_[0].connect_to(host, port, timeout_s, option);
    peers_[0].send_line(fmt::format("HELLO rank={}", rank));
    return;
  }
  peers_.resize(ranks);
  Listener listener(host, port, 64, option);
  for (uint32_t got = 1; got < ranks; ++got) {
    Channel c;
    std::string hello;
    try {
      c = listener.accept(std::max(0.0, seconds_left(deadline)));
      hello = c.recv_line(std::max(0.0, seconds_left(deadline)), "a rank's HELLO");
    } catch (const Error&) {
      throw Error(fmt::format("only {} of {} ranks connected to {}:{} within {} s", got, ranks,
                              host, port, timeout_s));
    }
    unsigned r = 0;
    char extra = 0;
    if (std::sscanf(hello.c_str(), "HELLO rank=%u%c", &r, &extra) != 1 || r == 0 ||
        r >= ranks || peers_[r].connected())
      throw Error(fmt::format("unexpected greeting '{}' (ranks {})", hello, ranks));
    peers_[r] = std::move(c);
  }
}

std::vector<std::string> RankGroup::all_gather(const std::string& line) {
  std::vector<std::string> all(ranks_);
  if (rank_ == 0) {
    all[0] = line;
    for (uint32_t r = 1; r < ranks_; ++r)
      all[r] = peers_[r].recv_line(timeout_s_, fmt::format("rank {}", r));
    for (uint32_t r = 1; r < ranks_; ++r)
      for (const std::string& l : all) peers_[r].send_line(l);
  } else {
    peers_[0].send_line(line);
    for (uint32_t r = 0; r < ranks_; ++r) all[r] = peers_[0].recv_line(timeout_s_, "rank 0");
  }
  return all;
}

void RankGroup::barrier(const std::string& tag) {
  for (const std::string& l : all_gather("SYNC " + tag))
    if (l != "SYNC " + tag)
      throw Error(fmt::format("a rank is out of step: expected 'SYNC {}', got '{}'", tag, l));
}

}  // namespace droce::oob
