// Work requests, stored work queue elements and work completions.
//
// The shapes follow verbs (struct ibv_send_wr / ibv_recv_wr / ibv_wc) with
// rdma-core's enums, minus what a software NIC does not need. Two deliberate
// differences: imm_data is in host order (the wire carries it big-endian;
// the wire layer converts), and a UD work request carries its destination as
// a wire::PathSpec instead of an ibv_ah.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <span>

#include "droce/wire/build.h"
#include "droce/wire/psn.h"

namespace droce::transport {

constexpr uint32_t kMaxSge = 8;
// IBA 9.7.4.1.1 / 10.7.2.2: an RC/UC message is at most 2^31 bytes.
constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 31;

// Scatter/gather element; addr is a local VA inside the MR named by lkey
// (see mr.h for what a VA is).
struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

struct SendWr {
  uint64_t wr_id = 0;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  unsigned send_flags = 0;  // IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_FENCE
  std::span<const Sge> sg_list;  // copied at post time, at most kMaxSge
  uint32_t imm_data = 0;         // host order
  uint32_t invalidate_rkey = 0;  // IBV_WR_SEND_WITH_INV
  // RDMA READ/WRITE.
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  // Atomics (remote_addr/rkey above address the 8-byte target).
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  // UD: destination (copied at post time).
  const wire::PathSpec* ud_path = nullptr;
  uint32_t ud_remote_qpn = 0;
  uint32_t ud_remote_qkey = 0;
};

struct RecvWr {
  uint64_t wr_id = 0;
  std::span<const Sge> sg_list;  // copied at post time, at most kMaxSge
};

struct WorkCompletion {
  uint64_t wr_id = 0;
  ibv_wc_status status = IBV_WC_SUCCESS;
  ibv_wc_opcode opcode = IBV_WC_SEND;
  uint32_t vendor_err = 0;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;          // host order; valid with IBV_WC_WITH_IMM
  uint32_t invalidated_rkey = 0;  // valid with IBV_WC_WITH_INV
  uint32_t qp_num = 0;
  uint32_t src_qp = 0;            // UD
  unsigned wc_flags = 0;          // ibv_wc_flags
  // The message asked for a solicited event (BTH SE, IBA 9.2.3); what a CQ
  // armed for solicited completions only waits for (cq.h).
  bool solicited = false;
  // ibv_wc.sl. RoCE carries no service level; for a UD receive, RoCE NICs
  // report there what network header the datagram came in (RoCEv2 Annex
  // A17.4.5.1 asks for that flag beside the source address; bit 3 "has a
  // UDP header", bits 2:0 1 = IPv6, 2 = IPv4, as mlx5 devices put it), and
  // UCX's UD transport reads it to find the destination IP in the GRH area.
  uint8_t sl = 0;
};

// WorkCompletion::sl of a RoCEv2 datagram.
inline constexpr uint8_t kWcSlRoceV2Ipv6 = 0x8 | 0x1;
inline constexpr uint8_t kWcSlRoceV2Ipv4 = 0x8 | 0x2;

// READ and atomic WRs write local memory with what the responder returns.
constexpr bool opcode_is_atomic(ibv_wr_opcode op) {
  return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}
constexpr bool opcode_is_read_or_atomic(ibv_wr_opcode op) {
  return op == IBV_WR_RDMA_READ || opcode_is_atomic(op);
}

// A posted send WQE plus the requester/completer progress on it. The first
// cache line is what post_send writes (a WR's fields, its first SGE); the
// second is the data path's own (PSNs, progress), so posting slot i and
// the data path working on slot i - 1 never write the same line. A WR's
// further SGEs and a UD WR's destination live beside the ring
// (QueuePair::sges, ud_dest), and so does inline data.
struct alignas(64) SendWqe {
  // ---- written by post_send
  uint64_t wr_id = 0;
  uint64_t remote_addr = 0;  // RDMA READ/WRITE, atomics: the target
  uint64_t compare_add = 0;  // atomics
  uint64_t swap = 0;
  Sge sge0{};                // the first SGE (QueuePair::sges for all)
  uint32_t length = 0;       // bytes of the message (8 for atomics), at most 2^31
  uint32_t rkey = 0;
  union {
    uint32_t imm_data = 0;     // *_WITH_IMM, host order
    uint32_t invalidate_rkey;  // IBV_WR_SEND_WITH_INV (which carries no ImmDt)
  };
  ibv_wr_opcode opcode : 8 = IBV_WR_SEND;
  unsigned send_flags : 16 = 0;  // IBV_SEND_*
  unsigned num_sge : 8 = 0;

  // ---- the data path's: reset when it takes the WQE (take_posted).
  // Requester state. PSNs are assigned when the first packet goes out.
  alignas(64) bool started = false;
  bool retransmitted = false;  // Karn: no RTT sample from it
  bool done = false;           // READ/atomic: all responses in
  uint32_t first_psn = 0;
  uint32_t npkts = 0;     // PSNs the message spans (READ: response packets)
  // Completer state for READ / atomic: responses received so far.
  uint32_t resp_received = 0;  // READ: in-order response packets placed
  uint64_t last_sent_ns = 0;
  uint64_t acked_bytes_reported = 0;

  bool is_read_or_atomic() const { return opcode_is_read_or_atomic(opcode); }
  bool is_atomic() const { return opcode_is_atomic(opcode); }
  uint32_t last_psn() const { return wire::psn_add(first_psn, npkts - 1); }
  // The data path takes a WQE: no progress yet.
  void reset_progress() {
    started = retransmitted = done = false;
    first_psn = npkts = resp_received = 0;
    last_sent_ns = acked_bytes_reported = 0;
  }
};
static_assert(sizeof(SendWqe) == 128, "a poster's line and the data path's");

// A UD send WR's destination, beside the WQE (QueuePair::ud_dest).
struct UdDest {
  wire::PathSpec path{};
  uint32_t remote_qpn = 0;
  uint32_t remote_qkey = 0;
};

struct RecvWqe {
  uint64_t wr_id = 0;
  std::array<Sge, kMaxSge> sge{};
  uint32_t num_sge = 0;
  uint64_t length = 0;  // capacity of the scatter list
};

// Verbs opcode -> completion opcode (IBA 11.4.2.1).
constexpr ibv_wc_opcode wc_opcode_for(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    default: return IBV_WC_SEND;
  }
}

}  // namespace droce::transport
