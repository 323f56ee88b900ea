// Out-of-band set-up between droce-pktgen ranks: TCP on 127.0.0.1 (or any
// IPv4 host), a star around rank 0. Every exchange is an all-gather of one
// text line per rank: rank r > 0 sends its line to rank 0, rank 0 answers
// everyone with all N lines. Barriers are all-gathers of a tag.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace droce::pktgen {

class OobError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class RankOob {
 public:
  // Rank 0 listens on host:port and waits for ranks-1 connections; the
  // others connect (retrying until timeout_s: rank 0 may start later).
  RankOob(uint32_t rank, uint32_t ranks, const std::string& host, uint16_t port,
          double timeout_s);
  ~RankOob();
  RankOob(const RankOob&) = delete;
  RankOob& operator=(const RankOob&) = delete;

  // Lines of every rank, index = rank. `line` must not contain '\n'.
  std::vector<std::string> all_gather(const std::string& line);
  // Every rank calls it with the same tag; throws if a peer is out of step.
  void barrier(const std::string& tag);

 private:
  void send_line(int fd, const std::string& line);
  std::string recv_line(int fd, std::string& buf, const std::string& what);

  uint32_t rank_, ranks_;
  double timeout_s_;
  std::vector<int> fds_;  // rank 0: index = peer rank (fds_[0] unused); else fds_[0] = rank 0
  std::vector<std::string> bufs_;
};

// "k=v k=v" tokens of a line (a leading word without '=' is skipped).
std::vector<std::pair<std::string, std::string>> split_kv(const std::string& line);
// The value of key, throws OobError naming the key when missing.
std::string kv_get(const std::string& line, const std::string& key);

}  // namespace droce::pktgen
