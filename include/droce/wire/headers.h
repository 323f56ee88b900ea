// Byte-exact views of the headers a RoCEv2 packet carries. Each view is a
// struct of bytes (alignment 1, size asserted) with accessors that go through
// bytes.h, so a view can be laid over any position in a packet buffer.
//
// Layouts: Ethernet II and IEEE 802.1Q; IPv4 (RFC 791), IPv6 (RFC 8200); UDP
// (RFC 768); the InfiniBand transport headers from IBA vol. 1 ch. 9.2-9.3
// (BTH 9.2, RETH 9.3.3, AtomicETH 9.3.4, AETH 9.3.5, AtomicAckETH 9.3.6,
// ImmDt 9.3.7, IETH 9.3.8, DETH 9.3.2); RoCEv2 is IBA annex A17.
#pragma once

#include <array>
#include <cstdint>

#include "droce/wire/bytes.h"

namespace droce::wire {

constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
constexpr uint16_t kEtherTypeVlan = 0x8100;
constexpr uint16_t kEtherTypeMacControl = 0x8808;  // PFC (IEEE 802.1Qbb)
constexpr uint8_t kIpProtoUdp = 17;
constexpr uint16_t kRoceV2Port = 4791;  // IANA, RoCEv2 annex A17.4.3

constexpr size_t kEthSize = 14;
constexpr size_t kVlanTagSize = 4;
constexpr size_t kIpv4Size = 20;  // without options
constexpr size_t kIpv6Size = 40;
constexpr size_t kUdpSize = 8;
constexpr size_t kBthSize = 12;
constexpr size_t kRethSize = 16;
constexpr size_t kAethSize = 4;
constexpr size_t kAtomicEthSize = 28;
constexpr size_t kAtomicAckEthSize = 8;
constexpr size_t kImmDtSize = 4;
constexpr size_t kIethSize = 4;
constexpr size_t kDethSize = 8;
constexpr size_t kCnpReservedSize = 16;  // RoCEv2 annex A17.9.2
constexpr size_t kIcrcSize = 4;

using MacAddress = std::array<uint8_t, 6>;

// ECN codepoints (RFC 3168).
enum class Ecn : uint8_t { kNotEct = 0, kEct1 = 1, kEct0 = 2, kCe = 3 };

struct EthHeader {
  uint8_t raw[kEthSize];
  MacAddress dst() const { return {raw[0], raw[1], raw[2], raw[3], raw[4], raw[5]}; }
  MacAddress src() const { return {raw[6], raw[7], raw[8], raw[9], raw[10], raw[11]}; }
  uint16_t ether_type() const { return load_be16(raw + 12); }
};
static_assert(sizeof(EthHeader) == kEthSize);

// The 4 bytes after the source MAC when the EtherType is 0x8100: the TCI
// (PCP 3 bits, DEI 1 bit, VID 12 bits) and the inner EtherType.
struct VlanTag {
  uint8_t raw[kVlanTagSize];
  uint8_t pcp() const { return raw[0] >> 5; }
  bool dei() const { return (raw[0] >> 4) & 1; }
  uint16_t vid() const { return load_be16(raw) & 0x0FFF; }
  uint16_t inner_ether_type() const { return load_be16(raw + 2); }
};
static_assert(sizeof(VlanTag) == kVlanTagSize);

struct Ipv4Header {
  uint8_t raw[kIpv4Size];
  uint8_t version() const { return raw[0] >> 4; }
  uint8_t ihl() const { return raw[0] & 0x0F; }
  uint8_t tos() const { return raw[1]; }
  uint8_t dscp() const { return raw[1] >> 2; }
  Ecn ecn() const { return static_cast<Ecn>(raw[1] & 3); }
  uint16_t total_length() const { return load_be16(raw + 2); }
  uint16_t identification() const { return load_be16(raw + 4); }
  uint16_t flags_fragment() const { return load_be16(raw + 6); }
  uint8_t ttl() const { return raw[8]; }
  uint8_t protocol() const { return raw[9]; }
  uint16_t checksum() const { return load_be16(raw + 10); }
  uint32_t src() const { return load_be32(raw + 12); }
  uint32_t dst() const { return load_be32(raw + 16); }
};
static_assert(sizeof(Ipv4Header) == kIpv4Size);

struct Ipv6Header {
  uint8_t raw[kIpv6Size];
  uint8_t version() const { return raw[0] >> 4; }
  uint8_t traffic_class() const {
    return static_cast<uint8_t>((load_be16(raw) >> 4) & 0xFF);
  }
  uint8_t dscp() const { return traffic_class() >> 2; }
  Ecn ecn() const { return static_cast<Ecn>(traffic_class() & 3); }
  uint32_t flow_label() const { return load_be32(raw) & 0xFFFFF; }
  uint16_t payload_length() const { return load_be16(raw + 4); }
  uint8_t next_header() const { return raw[6]; }
  uint8_t hop_limit() const { return raw[7]; }
  const uint8_t* src() const { return raw + 8; }
  const uint8_t* dst() const { return raw + 24; }
};
static_assert(sizeof(Ipv6Header) == kIpv6Size);

struct UdpHeader {
  uint8_t raw[kUdpSize];
  uint16_t src_port() const { return load_be16(raw); }
  uint16_t dst_port() const { return load_be16(raw + 2); }
  uint16_t length() const { return load_be16(raw + 4); }
  uint16_t checksum() const { return load_be16(raw + 6); }
};
static_assert(sizeof(UdpHeader) == kUdpSize);

// Partition keys (IBA 10.9): bit 15 is full membership, the low 15 bits the
// partition. Two keys match when their partitions are equal and not the
// invalid partition 0, and at least one of them is a full member (two
// limited members of a partition may not talk to each other).
constexpr bool pkeys_match(uint16_t a, uint16_t b) {
  return (a & 0x7FFF) == (b & 0x7FFF) && (a & 0x7FFF) != 0 && ((a | b) & 0x8000) != 0;
}

// Base Transport Header, IBA 9.2 (figure 85 in vol. 1 rel. 1.4).
struct Bth {
  uint8_t raw[kBthSize];
  uint8_t opcode() const { return raw[0]; }
  bool solicited() const { return raw[1] & 0x80; }
  bool mig_req() const { return raw[1] & 0x40; }
  uint8_t pad_count() const { return (raw[1] >> 4) & 3; }
  uint8_t tver() const { return raw[1] & 0x0F; }
  uint16_t pkey() const { return load_be16(raw + 2); }
  bool fecn() const { return raw[4] & 0x80; }
  bool becn() const { return raw[4] & 0x40; }
  uint32_t dest_qp() const { return load_be24(raw + 5); }
  bool ack_req() const { return raw[8] & 0x80; }
  uint32_t psn() const { return load_be24(raw + 9); }
};
static_assert(sizeof(Bth) == kBthSize);

// RDMA Extended Transport Header, IBA 9.3.3.
struct Reth {
  uint8_t raw[kRethSize];
  uint64_t va() const { return load_be64(raw); }
  uint32_t rkey() const { return load_be32(raw + 8); }
  uint32_t dma_length() const { return load_be32(raw + 12); }
};
static_assert(sizeof(Reth) == kRethSize);

// ACK Extended Transport Header, IBA 9.3.5.
struct Aeth {
  uint8_t raw[kAethSize];
  uint8_t syndrome() const { return raw[0]; }
  uint32_t msn() const { return load_be24(raw + 1); }
};
static_assert(sizeof(Aeth) == kAethSize);

// Atomic Extended Transport Header, IBA 9.3.4.
struct AtomicEth {
  uint8_t raw[kAtomicEthSize];
  uint64_t va() const { return load_be64(raw); }
  uint32_t rkey() const { return load_be32(raw + 8); }
  uint64_t swap_add() const { return load_be64(raw + 12); }
  uint64_t compare() const { return load_be64(raw + 20); }
};
static_assert(sizeof(AtomicEth) == kAtomicEthSize);

// Atomic Acknowledge Extended Transport Header, IBA 9.3.6.
struct AtomicAckEth {
  uint8_t raw[kAtomicAckEthSize];
  uint64_t original() const { return load_be64(raw); }
};
static_assert(sizeof(AtomicAckEth) == kAtomicAckEthSize);

// Datagram Extended Transport Header, IBA 9.3.2.
struct Deth {
  uint8_t raw[kDethSize];
  uint32_t qkey() const { return load_be32(raw); }
  uint32_t src_qp() const { return load_be24(raw + 5); }
};
static_assert(sizeof(Deth) == kDethSize);

// The extension-header fields of a packet, in host order: what the builder
// writes and the parser reads back. Only those the opcode's table entry
// lists (opcode.h) are meaningful for a given packet.
struct ExtHeaderFields {
  uint64_t reth_va = 0;           // RETH, IBA 9.3.3
  uint32_t reth_rkey = 0;
  uint32_t reth_dma_length = 0;
  uint8_t aeth_syndrome = 0;      // AETH, IBA 9.3.5
  uint32_t aeth_msn = 0;
  uint64_t atomic_va = 0;         // AtomicETH, IBA 9.3.4
  uint32_t atomic_rkey = 0;
  uint64_t atomic_swap_add = 0;
  uint64_t atomic_compare = 0;
  uint64_t atomic_ack_original = 0;  // AtomicAckETH, IBA 9.3.6
  uint32_t imm_data = 0;          // ImmDt, IBA 9.3.7 (its big-endian value)
  uint32_t ieth_rkey = 0;         // IETH, IBA 9.3.8
  uint32_t deth_qkey = 0;         // DETH, IBA 9.3.2
  uint32_t deth_src_qp = 0;
};

// AETH syndrome, IBA 9.7.5.1.1 table 41: bits 6..5 select ACK / RNR NAK / NAK,
// bits 4..0 carry the credit count, the RNR timer code or the NAK code.
enum class AethType : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };
enum class NakCode : uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};
constexpr AethType aeth_type(uint8_t syndrome) {
  return static_cast<AethType>((syndrome >> 5) & 3);
}
constexpr uint8_t aeth_value(uint8_t syndrome) { return syndrome & 0x1F; }
constexpr uint8_t make_syndrome(AethType type, uint8_t value) {
  return static_cast<uint8_t>((static_cast<uint8_t>(type) << 5) | (value & 0x1F));
}
// "Invalid" credit count: the responder does not count its receive WQEs
// for end-to-end credits (IBA 9.7.7.2.5), as on a shared receive queue;
// the other codes are in transport/credits.h.
constexpr uint8_t kAethCreditsInvalid = 0x1F;

}  // namespace droce::wire
