// The send side's twin of header prediction (rx_template.h): every request
// packet a connected QP sends carries the same Ethernet, VLAN, IP and UDP
// headers (its path) and the same BTH P_Key and destination QP. A TxTemplate
// holds those bytes, written once by build_packet, so that a request packet
// is one copy of them, its two length fields and the IPv4 checksum patched,
// the rest of the BTH and its extension headers stored, the payload placed
// by the caller where tx_payload_offset says, and the ICRC computed with
// the rest of its burst (icrc_compute_many). The frames are byte for byte
// what build_packet writes for the same fields (tested).
//
// It writes the request opcodes of RC and UC SEND and RDMA WRITE (with
// immediate data and, for RC SEND, with invalidate): the packets a QP sends
// in bulk. READ requests, atomics, UD (whose path is per WR), responses and
// CNPs go through build_packet.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "droce/wire/build.h"
#include "droce/wire/icrc.h"

namespace droce::wire {

struct TxTemplate {
  // Ethernet [+ 802.1Q] + IPv4/IPv6 + UDP + BTH, BTH as for a SEND ONLY.
  alignas(16) std::array<uint8_t, 80> bytes{};
  uint8_t bth_offset = 0;  // 0: no template (the path could not be built)
  uint8_t l3_offset = 0;
  bool ipv6 = false;
  // The IPv4 header's ones' complement sum without its total length and
  // checksum: per packet, add the length, fold, complement (RFC 1071).
  uint32_t ipv4_partial_sum = 0;
  bool valid() const { return bth_offset != 0; }
};

// The template for the requests of a QP with path `path` to `dest_qp`
// under `pkey`; not valid() when build_packet refuses the path.
TxTemplate make_tx_template(const PathSpec& path, uint32_t dest_qp, uint16_t pkey);

// Whether the template writes `opcode` (see the top of the file).
bool tx_template_writes(uint8_t opcode);

// What differs between a QP's request packets (TransportSpec's request
// fields; which are written follows the opcode as in build_packet).
struct TxRequest {
  uint8_t opcode = 0;
  bool solicited = false;
  bool ack_req = false;
  uint32_t psn = 0;
  uint64_t reth_va = 0;
  uint32_t reth_rkey = 0;
  uint32_t reth_dma_length = 0;
  uint32_t imm_data = 0;
  uint32_t ieth_rkey = 0;
};

// Where the payload of a request with this opcode starts in its frame.
inline size_t tx_payload_offset(const TxTemplate& t, uint8_t opcode) {
  return t.bth_offset + kBthSize + opcode_info(opcode).ext_length();
}
// The frame's length with `payload_len` bytes of payload.
inline size_t tx_frame_size(const TxTemplate& t, uint8_t opcode, uint32_t payload_len) {
  return tx_payload_offset(t, opcode) + ((payload_len + 3u) & ~3u) + kIcrcSize;
}

// Writes every header of the request and its pad bytes into `out` and
// returns the frame's length, 0 if it does not fit or the template does not
// write the opcode. The payload, payload_len bytes at tx_payload_offset, is
// the caller's to place afterwards (the headers are written with one copy
// of the whole template, which may reach into the payload area). The ICRC is left to the caller:
// `icrc` gets the datagram to compute it over (icrc_compute_many), and the
// ICRC goes at icrc->l3 + icrc->len_before_icrc (store_le32).
size_t write_request(const TxTemplate& t, const TxRequest& r, uint32_t payload_len,
                     std::span<uint8_t> out, IcrcCheck* icrc);

// The frames of a send burst whose ICRCs are still to be written: computed
// together by flush() (icrc_compute_many), which must run before the frames
// leave. add() flushes first when it is full.
//
// A check with zeros (unheld payload, icrc.h) keeps them only while
// keep_unheld is on, for a caller that carries them with its frames (the
// simulator); the frame and its payload are then listed in unheld_log().
// Otherwise the zeros are dropped and the bytes read as they are.
class IcrcBatch {
 public:
  static constexpr size_t kCapacity = 64;
  void add(const IcrcCheck& c) {
    if (n_ == kCapacity) flush();
    IcrcCheck& p = pending_[n_++];
    p = c;
    if (p.zeros != 0) {
      if (keep_unheld_)
        unheld_log_.push_back({p.l3, unheld_of(p)});
      else
        p.zeros = 0;
    }
  }
  void flush();
  size_t pending() const { return n_; }

  struct Unheld {
    const uint8_t* l3;  // the frame's datagram
    UnheldPayload payload;
  };
  void keep_unheld(bool on) { keep_unheld_ = on; }
  // In the order added, until clear_unheld_log().
  const std::vector<Unheld>& unheld_log() const { return unheld_log_; }
  void clear_unheld_log() { unheld_log_.clear(); }

 private:
  std::array<IcrcCheck, kCapacity> pending_{};
  size_t n_ = 0;
  bool keep_unheld_ = false;
  std::vector<Unheld> unheld_log_;
};

}  // namespace droce::wire
