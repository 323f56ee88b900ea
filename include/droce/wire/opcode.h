// The opcode table: for each of the 256 BTH opcodes, what it is, which
// extension headers follow the BTH (and at what offsets), whether it may carry
// payload, and where it sits in a message. IBA vol. 1 9.2.1 table 38 (opcode
// field) and 9.3 (headers present per opcode); CNP is RoCEv2 annex A17.9.2.
//
// The numeric values are rdma-core's (infiniband/opcode.h) so they match what
// RDMA programmers read in logs; the two SEND ... WITH_INVALIDATE opcodes and
// CNP are missing from that header and are defined here.
#pragma once

#include <infiniband/opcode.h>

#include <array>
#include <bit>
#include <cstdint>
#include <string_view>

#include "droce/wire/headers.h"

namespace droce::wire {

constexpr uint8_t kOpRcSendLastWithInvalidate = 0x16;
constexpr uint8_t kOpRcSendOnlyWithInvalidate = 0x17;
constexpr uint8_t kOpCnp = 0x81;

enum class Transport : uint8_t { kNone, kRc, kUc, kUd, kCnp };
enum class OpClass : uint8_t { kInvalid, kRequest, kResponse, kAck, kCnp };
enum class Position : uint8_t { kNone, kFirst, kMiddle, kLast, kOnly };
enum class Operation : uint8_t {
  kNone,
  kSend,
  kWrite,
  kReadRequest,
  kReadResponse,
  kAck,
  kAtomicAck,
  kCompareSwap,
  kFetchAdd,
  kCnp,
};

// Extension headers, in the order they follow the BTH (IBA 9.3: DETH, then
// RETH or AtomicETH, then AETH, then AtomicAckETH, then ImmDt or IETH).
enum ExtHeader : uint8_t {
  kExtDeth = 1 << 0,
  kExtReth = 1 << 1,
  kExtAtomicEth = 1 << 2,
  kExtAeth = 1 << 3,
  kExtAtomicAckEth = 1 << 4,
  kExtImmDt = 1 << 5,
  kExtIeth = 1 << 6,
  kExtCnpReserved = 1 << 7,
};

struct OpcodeInfo {
  bool supported = false;
  Transport transport = Transport::kNone;
  OpClass op_class = OpClass::kInvalid;
  Operation operation = Operation::kNone;
  Position position = Position::kNone;
  uint8_t ext = 0;          // ExtHeader bits
  bool payload = false;     // may carry payload bytes
  std::string_view name = "UNKNOWN";

  // Filled from `ext` by detail::op(): every received packet asks where its
  // extension headers are, and walking the bits per header per packet was
  // a sizeable part of parse().
  std::array<int8_t, 8> ext_offsets = {-1, -1, -1, -1, -1, -1, -1, -1};
  uint8_t ext_bytes = 0;

  // Byte offset, from the end of the BTH, of extension header `h`, or -1.
  constexpr int ext_offset(ExtHeader h) const { return ext_offsets[std::countr_zero(uint8_t{h})]; }
  // Total size of the extension headers.
  constexpr uint32_t ext_length() const { return ext_bytes; }
  static constexpr uint32_t ext_size(ExtHeader h) {
    switch (h) {
      case kExtDeth: return kDethSize;
      case kExtReth: return kRethSize;
      case kExtAtomicEth: return kAtomicEthSize;
      case kExtAeth: return kAethSize;
      case kExtAtomicAckEth: return kAtomicAckEthSize;
      case kExtImmDt: return kImmDtSize;
      case kExtIeth: return kIethSize;
      case kExtCnpReserved: return kCnpReservedSize;
    }
    return 0;
  }
  constexpr bool is_first_or_only() const {
    return position == Position::kFirst || position == Position::kOnly;
  }
  constexpr bool is_last_or_only() const {
    return position == Position::kLast || position == Position::kOnly;
  }
};

namespace detail {

constexpr OpcodeInfo op(Transport t, OpClass c, Operation o, Position p,
                        uint8_t ext, bool payload, std::string_view name) {
  OpcodeInfo info{true, t, c, o, p, ext, payload, name};
  // The headers follow the BTH in bit order (the ExtHeader comment).
  int off = 0;
  for (int bit = 0; bit < 8; ++bit) {
    const auto h = static_cast<ExtHeader>(1u << bit);
    if (!(ext & h)) continue;
    info.ext_offsets[static_cast<size_t>(bit)] = static_cast<int8_t>(off);
    off += static_cast<int>(OpcodeInfo::ext_size(h));
  }
  info.ext_bytes = static_cast<uint8_t>(off);
  return info;
}

// The per-transport operation codes (low 5 bits), shared by RC and UC.
constexpr void add_send_write(std::array<OpcodeInfo, 256>& t, uint8_t base,
                              Transport tr, const std::string_view (&names)[12]) {
  using enum Position;
  const auto req = OpClass::kRequest;
  const Operation s = Operation::kSend, w = Operation::kWrite;
  t[base + 0x00] = op(tr, req, s, kFirst, 0, true, names[0]);
  t[base + 0x01] = op(tr, req, s, kMiddle, 0, true, names[1]);
  t[base + 0x02] = op(tr, req, s, kLast, 0, true, names[2]);
  t[base + 0x03] = op(tr, req, s, kLast, kExtImmDt, true, names[3]);
  t[base + 0x04] = op(tr, req, s, kOnly, 0, true, names[4]);
  t[base + 0x05] = op(tr, req, s, kOnly, kExtImmDt, true, names[5]);
  t[base + 0x06] = op(tr, req, w, kFirst, kExtReth, true, names[6]);
  t[base + 0x07] = op(tr, req, w, kMiddle, 0, true, names[7]);
  t[base + 0x08] = op(tr, req, w, kLast, 0, true, names[8]);
  t[base + 0x09] = op(tr, req, w, kLast, kExtImmDt, true, names[9]);
  t[base + 0x0a] = op(tr, req, w, kOnly, kExtReth, true, names[10]);
  t[base + 0x0b] = op(tr, req, w, kOnly, kExtReth | kExtImmDt, true, names[11]);
}

inline constexpr std::string_view kRcNames[12] = {
    "RC_SEND_FIRST", "RC_SEND_MIDDLE", "RC_SEND_LAST", "RC_SEND_LAST_WITH_IMMEDIATE",
    "RC_SEND_ONLY", "RC_SEND_ONLY_WITH_IMMEDIATE", "RC_RDMA_WRITE_FIRST",
    "RC_RDMA_WRITE_MIDDLE", "RC_RDMA_WRITE_LAST", "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
    "RC_RDMA_WRITE_ONLY", "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"};
inline constexpr std::string_view kUcNames[12] = {
    "UC_SEND_FIRST", "UC_SEND_MIDDLE", "UC_SEND_LAST", "UC_SEND_LAST_WITH_IMMEDIATE",
    "UC_SEND_ONLY", "UC_SEND_ONLY_WITH_IMMEDIATE", "UC_RDMA_WRITE_FIRST",
    "UC_RDMA_WRITE_MIDDLE", "UC_RDMA_WRITE_LAST", "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
    "UC_RDMA_WRITE_ONLY", "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"};

constexpr std::array<OpcodeInfo, 256> make_opcode_table() {
  std::array<OpcodeInfo, 256> t{};
  using enum Position;
  const Transport rc = Transport::kRc;
  add_send_write(t, IBV_OPCODE_RC, rc, kRcNames);
  add_send_write(t, IBV_OPCODE_UC, Transport::kUc, kUcNames);

  t[IBV_OPCODE_RC_RDMA_READ_REQUEST] =
      op(rc, OpClass::kRequest, Operation::kReadRequest, kOnly, kExtReth, false,
         "RC_RDMA_READ_REQUEST");
  t[IBV_OPCODE_RC_RDMA_READ_RESPONSE_FIRST] =
      op(rc, OpClass::kResponse, Operation::kReadResponse, kFirst, kExtAeth, true,
         "RC_RDMA_READ_RESPONSE_FIRST");
  t[IBV_OPCODE_RC_RDMA_READ_RESPONSE_MIDDLE] =
      op(rc, OpClass::kResponse, Operation::kReadResponse, kMiddle, 0, true,
         "RC_RDMA_READ_RESPONSE_MIDDLE");
  t[IBV_OPCODE_RC_RDMA_READ_RESPONSE_LAST] =
      op(rc, OpClass::kResponse, Operation::kReadResponse, kLast, kExtAeth, true,
         "RC_RDMA_READ_RESPONSE_LAST");
  t[IBV_OPCODE_RC_RDMA_READ_RESPONSE_ONLY] =
      op(rc, OpClass::kResponse, Operation::kReadResponse, kOnly, kExtAeth, true,
         "RC_RDMA_READ_RESPONSE_ONLY");
  t[IBV_OPCODE_RC_ACKNOWLEDGE] = op(rc, OpClass::kAck, Operation::kAck, kOnly,
                                    kExtAeth, false, "RC_ACKNOWLEDGE");
  t[IBV_OPCODE_RC_ATOMIC_ACKNOWLEDGE] =
      op(rc, OpClass::kAck, Operation::kAtomicAck, kOnly,
         kExtAeth | kExtAtomicAckEth, false, "RC_ATOMIC_ACKNOWLEDGE");
  t[IBV_OPCODE_RC_COMPARE_SWAP] =
      op(rc, OpClass::kRequest, Operation::kCompareSwap, kOnly, kExtAtomicEth,
         false, "RC_COMPARE_SWAP");
  t[IBV_OPCODE_RC_FETCH_ADD] = op(rc, OpClass::kRequest, Operation::kFetchAdd,
                                  kOnly, kExtAtomicEth, false, "RC_FETCH_ADD");
  t[kOpRcSendLastWithInvalidate] =
      op(rc, OpClass::kRequest, Operation::kSend, kLast, kExtIeth, true,
         "RC_SEND_LAST_WITH_INVALIDATE");
  t[kOpRcSendOnlyWithInvalidate] =
      op(rc, OpClass::kRequest, Operation::kSend, kOnly, kExtIeth, true,
         "RC_SEND_ONLY_WITH_INVALIDATE");

  t[IBV_OPCODE_UD_SEND_ONLY] =
      op(Transport::kUd, OpClass::kRequest, Operation::kSend, kOnly, kExtDeth,
         true, "UD_SEND_ONLY");
  t[IBV_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE] =
      op(Transport::kUd, OpClass::kRequest, Operation::kSend, kOnly,
         kExtDeth | kExtImmDt, true, "UD_SEND_ONLY_WITH_IMMEDIATE");

  t[kOpCnp] = op(Transport::kCnp, OpClass::kCnp, Operation::kCnp, kOnly,
                 kExtCnpReserved, false, "CNP");
  return t;
}

}  // namespace detail

inline constexpr std::array<OpcodeInfo, 256> kOpcodeTable =
    detail::make_opcode_table();

constexpr const OpcodeInfo& opcode_info(uint8_t opcode) {
  return kOpcodeTable[opcode];
}
constexpr std::string_view opcode_name(uint8_t opcode) {
  return kOpcodeTable[opcode].name;
}

// Compile-time spot checks of the table against IBA 9.3.
static_assert(opcode_info(IBV_OPCODE_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE)
                  .ext_offset(kExtImmDt) == static_cast<int>(kRethSize));
static_assert(opcode_info(IBV_OPCODE_RC_ATOMIC_ACKNOWLEDGE)
                  .ext_offset(kExtAtomicAckEth) == static_cast<int>(kAethSize));
static_assert(opcode_info(IBV_OPCODE_UD_SEND_ONLY_WITH_IMMEDIATE).ext_length() ==
              kDethSize + kImmDtSize);
static_assert(!opcode_info(0x40).supported);  // RD is not supported
static_assert(opcode_info(kOpCnp).ext_length() == kCnpReservedSize);

}  // namespace droce::wire
