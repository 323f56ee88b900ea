#include "droce/pktgen/probe.h"

#include <algorithm>

#include "droce/wire/bytes.h"

namespace droce::pktgen {

void write_probe(std::span<uint8_t> payload, const Probe& p) {
  uint8_t* d = payload.data();
  wire::store_be32(d, kProbeMagic);
  wire::store_be32(d + 4, p.stream_id);
  wire::store_be64(d + 8, p.seq);
  wire::store_be64(d + 16, p.tx_ns);
}

std::optional<Probe> read_probe(std::span<const uint8_t> payload) {
  if (payload.size() < kProbeSize) return std::nullopt;
  const uint8_t* d = payload.data();
  if (wire::load_be32(d) != kProbeMagic) return std::nullopt;
  return Probe{wire::load_be32(d + 4), wire::load_be64(d + 8), wire::load_be64(d + 16)};
}

ProbeTracker::ProbeTracker(uint64_t window)
    : seen_(std::max<uint64_t>(1, (window + 63) / 64), 0), window_(seen_.size() * 64) {}

bool ProbeTracker::test_and_set(uint64_t seq) {
  const uint64_t bit = seq % window_;
  uint64_t& word = seen_[bit / 64];
  const uint64_t mask = uint64_t{1} << (bit % 64);
  const bool was = word & mask;
  word |= mask;
  return was;
}

// Moves the highest seen to `seq`, forgetting the bits that now fall out
// of the window (they are reused for the new sequence numbers).
void ProbeTracker::advance_to(uint64_t seq) {
  const uint64_t from = c_.unique == 0 ? seq : c_.highest_seq + 1;
  if (seq - from + 1 >= window_ || c_.unique == 0) {
    std::fill(seen_.begin(), seen_.end(), 0);
  } else {
    for (uint64_t s = from; s <= seq; ++s) {
      const uint64_t bit = s % window_;
      seen_[bit / 64] &= ~(uint64_t{1} << (bit % 64));
    }
  }
  c_.highest_seq = seq;
}

void ProbeTracker::on_probe(uint64_t seq, uint64_t tx_ns, uint64_t rx_ns) {
  ++c_.received;
  if (c_.unique > 0 && seq <= c_.highest_seq) {
    if (c_.highest_seq - seq >= window_) {
      ++c_.too_old;
      return;
    }
    if (test_and_set(seq)) {
      ++c_.duplicate;
      return;
    }
    ++c_.out_of_order;
  } else {
    advance_to(seq);
    test_and_set(seq);
  }
  ++c_.unique;
  if (rx_ns < tx_ns) {
    ++c_.negative_latency;
  } else {
    latency_.record(rx_ns - tx_ns);
  }
}

uint64_t ProbeTracker::lost() const {
  return c_.unique == 0 ? 0 : c_.highest_seq + 1 - c_.unique;
}

uint64_t ProbeTracker::lost(uint64_t sent) const {
  return sent > c_.unique ? sent - c_.unique : 0;
}

bool ProbeReceiver::on_payload(std::span<const uint8_t> payload, uint64_t rx_ns) {
  const auto p = read_probe(payload);
  if (!p) {
    ++not_probe_;
    return false;
  }
  streams_.try_emplace(p->stream_id).first->second.on_probe(p->seq, p->tx_ns, rx_ns);
  return true;
}

const ProbeTracker* ProbeReceiver::stream(uint32_t id) const {
  const auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : &it->second;
}

}  // namespace droce::pktgen
