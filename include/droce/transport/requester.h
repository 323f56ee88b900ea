// Requester rules shared by the requester and completer: timer encodings and
// AckReq policy. The requester code itself is QueuePair's send half
// (src/transport/requester.cc).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>

namespace droce::transport {

// Local ACK timeout, IBA 9.7.6.1.3 / 11.2.4.2: 4.096 us * 2^timeout;
// 0 means "infinite" (never time out). Values above 31 are clamped.
constexpr uint64_t ack_timeout_ns(uint8_t timeout) {
  if (timeout == 0) return 0;
  if (timeout > 31) timeout = 31;
  return uint64_t{4096} << timeout;
}

// RNR NAK timer field, IBA 9.7.5.2.8 table 45 (in microseconds * 100, so
// 0.01 ms steps stay integers): code 0 is 655.36 ms, codes 1..31 go from
// 0.01 ms to 491.52 ms.
constexpr uint32_t kRnrTimerTable10us[32] = {
    65536, 1,    2,    3,    4,    6,    8,     12,    16,    24,   32,
    48,    64,   96,   128,  192,  256,  384,   512,   768,   1024, 1536,
    2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
constexpr uint64_t rnr_timer_ns(uint8_t code) {
  return uint64_t{kRnrTimerTable10us[code & 31]} * 10'000;
}
static_assert(rnr_timer_ns(1) == 10'000);         // 0.01 ms
static_assert(rnr_timer_ns(0) == 655'360'000);    // 655.36 ms
static_assert(rnr_timer_ns(14) == 1'280'000);     // 1.28 ms

// rnr_retry == 7 means retry forever (IBA 9.7.5.2.8, verbs rnr_retry).
constexpr uint8_t kRnrRetryInfinite = 7;

// Path MTU in bytes for an ibv_mtu code (IBA 9.6: 256..4096).
constexpr uint32_t mtu_bytes(int ibv_mtu_code) {
  return (ibv_mtu_code >= 1 && ibv_mtu_code <= 5) ? (128u << ibv_mtu_code) : 0;
}
// The ibv_mtu code of a path MTU in bytes; nullopt unless 256..4096, a power of two.
constexpr std::optional<ibv_mtu> mtu_code(uint32_t bytes) {
  for (int code = IBV_MTU_256; code <= IBV_MTU_4096; ++code)
    if (mtu_bytes(code) == bytes) return static_cast<ibv_mtu>(code);
  return std::nullopt;
}
static_assert(mtu_code(1024) == IBV_MTU_1024 && !mtu_code(1500));

// The largest IB MTU (bytes), at most `configured`, whose fullest RoCE v2
// packet fits an IP MTU of `link_mtu`, as rxe derives a port's active MTU
// from its netdev: 1024 on a 1500-byte Ethernet link, 4096 on jumbo
// frames; 256 when even that does not fit. The fullest packet: IPv6 40
// (RFC 8200), UDP 8 (RFC 768), BTH 12, RETH 16, ImmDt 4 (IBA 9.2, 9.3.1,
// 9.3.3) and ICRC 4 (annex A17.3.3) around the payload, an RDMA WRITE Only
// with Immediate over IPv6.
constexpr uint32_t active_mtu(uint32_t configured, uint32_t link_mtu) {
  constexpr uint32_t kMostOverhead = 40 + 8 + 12 + 16 + 4 + 4;
  uint32_t m = 4096;
  while (m > 256 && (m > configured || m + kMostOverhead > link_mtu)) m /= 2;
  return m;
}

}  // namespace droce::transport
