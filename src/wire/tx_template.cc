#include "droce/wire/tx_template.h"

#include <infiniband/opcode.h>

#include <cstring>

#include "droce/wire/bytes.h"
#include "droce/wire/checksum.h"
#include "droce/wire/headers.h"

namespace droce::wire {

namespace {

constexpr bool writes(uint8_t opcode) {
  const OpcodeInfo& info = opcode_info(opcode);
  if (!info.supported || info.op_class != OpClass::kRequest) return false;
  if (info.transport != Transport::kRc && info.transport != Transport::kUc) return false;
  return info.operation == Operation::kSend || info.operation == Operation::kWrite;
}

// writes() for every opcode, one bit each: every packet asks.
struct WrittenOpcodes {
  uint64_t bits[4] = {};
  constexpr WrittenOpcodes() {
    for (unsigned op = 0; op < 256; ++op)
      if (writes(static_cast<uint8_t>(op))) bits[op / 64] |= uint64_t{1} << (op % 64);
  }
  constexpr bool has(uint8_t op) const { return (bits[op / 64] >> (op % 64)) & 1; }
};
constexpr WrittenOpcodes kWritten;

}  // namespace

bool tx_template_writes(uint8_t opcode) { return kWritten.has(opcode); }

TxTemplate make_tx_template(const PathSpec& path, uint32_t dest_qp, uint16_t pkey) {
  TxTemplate t;
  TransportSpec spec;
  spec.opcode = IBV_OPCODE_RC_SEND_ONLY;
  spec.dest_qp = dest_qp;
  spec.pkey = pkey;
  std::array<uint8_t, 128> frame{};
  if (build_packet(path, spec, {}, frame) == 0) return t;
  const size_t l3 = kEthSize + (path.vlan ? kVlanTagSize : 0);
  const size_t bth = l3 + (path.src_ip.v6 ? kIpv6Size : kIpv4Size) + kUdpSize;
  static_assert(kEthSize + kVlanTagSize + kIpv6Size + kUdpSize + kBthSize <= 80);
  std::memcpy(t.bytes.data(), frame.data(), bth + kBthSize);
  t.l3_offset = static_cast<uint8_t>(l3);
  t.bth_offset = static_cast<uint8_t>(bth);
  t.ipv6 = path.src_ip.v6;
  if (!t.ipv6) {
    // Every word but the total length (bytes 2-3) and the checksum (10-11).
    uint8_t h[kIpv4Size];
    std::memcpy(h, frame.data() + l3, kIpv4Size);
    store_be16(h + 2, 0);
    store_be16(h + 10, 0);
    t.ipv4_partial_sum = static_cast<uint32_t>(checksum_add(0, h, kIpv4Size));
  }
  return t;
}

size_t write_request(const TxTemplate& t, const TxRequest& r, uint32_t payload_len,
                     std::span<uint8_t> out, IcrcCheck* icrc) {
  if (!t.valid() || !tx_template_writes(r.opcode)) return 0;
  const OpcodeInfo& info = opcode_info(r.opcode);
  // IBA 9.2.5: pad bytes only on the last (or only) packet of a message.
  if (!info.is_last_or_only() && payload_len % 4 != 0) return 0;
  const size_t ext_at = t.bth_offset + kBthSize;
  const size_t pay_at = ext_at + info.ext_length();
  const uint32_t padded = (payload_len + 3u) & ~3u;
  const size_t total = pay_at + padded + kIcrcSize;
  if (total > out.size() || total - t.l3_offset > 0xFFFF) return 0;

  uint8_t* p = out.data();
  // The whole template in one fixed-size copy where the buffer allows
  // (what follows the BTH is written over next); a copy of ext_at bytes
  // is a call to memcpy.
  if (out.size() >= t.bytes.size())
    std::memcpy(p, t.bytes.data(), t.bytes.size());
  else
    std::memcpy(p, t.bytes.data(), ext_at);
  uint8_t* l3 = p + t.l3_offset;
  const size_t l4_at = t.bth_offset - kUdpSize;
  const auto l4_len = static_cast<uint16_t>(total - l4_at);
  if (t.ipv6) {
    store_be16(l3 + 4, l4_len);  // payload length: UDP onwards
  } else {
    const auto ip_len = static_cast<uint16_t>(total - t.l3_offset);
    store_be16(l3 + 2, ip_len);
    store_be16(l3 + 10, checksum_fold(uint64_t{t.ipv4_partial_sum} + ip_len));
  }
  store_be16(p + l4_at + 4, l4_len);

  // BTH (IBA 9.2): opcode; SE, M, pad count, TVer; P_Key and the
  // destination QP from the template; AckReq and PSN.
  uint8_t* bth = p + t.bth_offset;
  const auto pad = static_cast<uint8_t>(padded - payload_len);
  bth[0] = r.opcode;
  bth[1] = static_cast<uint8_t>((r.solicited ? 0x80 : 0) | (t.bytes[t.bth_offset + 1] & 0x4F) |
                                pad << 4);  // MigReq and TVer as the template has them
  bth[8] = r.ack_req ? 0x80 : 0;
  store_be24(bth + 9, r.psn);

  uint8_t* ext = p + ext_at;
  if (const int o = info.ext_offset(kExtReth); o >= 0) {
    store_be64(ext + o, r.reth_va);
    store_be32(ext + o + 8, r.reth_rkey);
    store_be32(ext + o + 12, r.reth_dma_length);
  }
  if (const int o = info.ext_offset(kExtImmDt); o >= 0) store_be32(ext + o, r.imm_data);
  if (const int o = info.ext_offset(kExtIeth); o >= 0) store_be32(ext + o, r.ieth_rkey);
  if (pad) std::memset(p + pay_at + payload_len, 0, pad);

  icrc->l3 = l3;
  icrc->len_before_icrc = static_cast<uint32_t>(total - kIcrcSize - t.l3_offset);
  icrc->ipv6 = t.ipv6;
  return total;
}

void IcrcBatch::flush() {
  if (n_ == 0) return;
  std::array<uint32_t, kCapacity> icrc;
  icrc_compute_many(pending_.data(), icrc.data(), n_);
  for (size_t i = 0; i < n_; ++i)
    store_le32(const_cast<uint8_t*>(pending_[i].l3) + pending_[i].len_before_icrc, icrc[i]);
  n_ = 0;
}

}  // namespace droce::wire
