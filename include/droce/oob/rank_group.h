// Out-of-band set-up among N ranks (droce-pktgen's DPDK collectives): a
// star of Channels around rank 0 on any IPv4 host. Every exchange is an
// all-gather of one text line per rank: rank r > 0 sends its line to rank
// 0, rank 0 answers everyone with all N lines. A barrier is an all-gather
// of a tag.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "droce/oob/channel.h"

namespace droce::oob {

class RankGroup {
 public:
  // Rank 0 listens on host:port and waits for ranks-1 peers; the others
  // connect (retrying until timeout_s: rank 0 may start later). `option`
  // names the host option in a ConfigError.
  RankGroup(uint32_t rank, uint32_t ranks, const std::string& host, uint16_t port,
            double timeout_s, const std::string& option = "--oob-host");

  uint32_t rank() const { return rank_; }
  uint32_t ranks() const { return ranks_; }

  // Lines of every rank, index = rank. `line` must not contain '\n'.
  std::vector<std::string> all_gather(const std::string& line);
  // Every rank calls it with the same tag; throws Error if one is out of step.
  void barrier(const std::string& tag);

 private:
  uint32_t rank_, ranks_;
  double timeout_s_;
  // Rank 0: index = peer rank (peers_[0] unused). Others: peers_[0] = rank 0.
  std::vector<Channel> peers_;
};

}  // namespace droce::oob
