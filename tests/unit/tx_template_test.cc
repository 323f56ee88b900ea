// The send template (wire/tx_template.h) against build_packet, the one
// writer of RoCEv2 frames every other path uses: for every request opcode
// the template writes, over IPv4 and IPv6, with and without a VLAN tag,
// and for payload lengths that need each pad count, the frames must be
// byte for byte the same once the ICRCs are in; and icrc_compute_many must
// agree with icrc_compute whatever mix of lengths a burst holds.
#include <gtest/gtest.h>
#include <infiniband/opcode.h>

#include <vector>

#include "droce/wire/build.h"
#include "droce/wire/bytes.h"
#include "droce/wire/icrc.h"
#include "droce/wire/opcode.h"
#include "droce/wire/packet.h"
#include "droce/wire/tx_template.h"
#include "wire_samples.h"

namespace droce::wire {
namespace {

using testing::sample_path;

// The first byte at which two frames differ, for failure messages.
size_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

std::vector<uint8_t> payload_of(uint32_t len) {
  std::vector<uint8_t> p(len);
  for (uint32_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(i * 7 + 1);
  return p;
}

// Every RC and UC request opcode of the SEND and WRITE families.
std::vector<uint8_t> templated_opcodes() {
  std::vector<uint8_t> ops;
  for (int op = 0; op < 256; ++op)
    if (tx_template_writes(static_cast<uint8_t>(op))) ops.push_back(static_cast<uint8_t>(op));
  return ops;
}

TEST(TxTemplate, WritesTheSendAndWriteRequestsOfRcAndUcOnly) {
  const std::vector<uint8_t> ops = templated_opcodes();
  // IBA 9.2.1 table 38: RC SEND FIRST, MIDDLE, LAST, LAST with immediate,
  // ONLY, ONLY with immediate, and LAST and ONLY with invalidate; RC RDMA
  // WRITE's six of the same (without invalidate); UC's SEND and WRITE six
  // each.
  EXPECT_EQ(ops.size(), 8u + 6u + 6u + 6u);
  for (uint8_t op : ops) {
    const OpcodeInfo& info = opcode_info(op);
    EXPECT_EQ(info.op_class, OpClass::kRequest) << int(op);
    EXPECT_TRUE(info.operation == Operation::kSend || info.operation == Operation::kWrite);
  }
  EXPECT_FALSE(tx_template_writes(IBV_OPCODE_RC_RDMA_READ_REQUEST));
  EXPECT_FALSE(tx_template_writes(IBV_OPCODE_RC_COMPARE_SWAP));
  EXPECT_FALSE(tx_template_writes(IBV_OPCODE_UD_SEND_ONLY));
  EXPECT_FALSE(tx_template_writes(IBV_OPCODE_RC_ACKNOWLEDGE));
  EXPECT_FALSE(tx_template_writes(kOpCnp));
}

TEST(TxTemplate, FramesAreByteForByteWhatBuildPacketWrites) {
  size_t compared = 0;
  for (bool v6 : {false, true})
    for (bool vlan : {false, true}) {
      const PathSpec path = sample_path(v6, vlan);
      const TxTemplate tmpl = make_tx_template(path, 0x123456, 0x8001);
      ASSERT_TRUE(tmpl.valid());
      for (uint8_t op : templated_opcodes()) {
        const OpcodeInfo& info = opcode_info(op);
        // Last/only packets may carry any length (pad 0..3); first and
        // middle ones whole words (IBA 9.2.5).
        std::vector<uint32_t> lens = {0, 4, 64, 1024};
        if (info.is_last_or_only()) lens.insert(lens.end(), {1, 2, 3, 63, 1023});
        for (uint32_t len : lens)
          for (bool flags : {false, true}) {
            TransportSpec t;
            t.opcode = op;
            t.dest_qp = 0x123456;
            t.pkey = 0x8001;
            t.psn = flags ? 0xFFFFFE : 17;
            t.ack_req = flags;
            t.solicited = flags && info.is_last_or_only();
            t.reth_va = 0x1122334455667788ull;
            t.reth_rkey = 0xA1B2C3D4;
            t.reth_dma_length = 0x10000;
            t.imm_data = 0xDEADBEEF;
            t.ieth_rkey = 0x01020304;
            const std::vector<uint8_t> payload = payload_of(len);
            std::vector<uint8_t> want(2048), got(2048, 0xEE);
            const size_t want_len = build_packet(path, t, payload, want);
            ASSERT_NE(want_len, 0u);
            const TxRequest r{t.opcode, t.solicited, t.ack_req, t.psn, t.reth_va,
                              t.reth_rkey, t.reth_dma_length, t.imm_data, t.ieth_rkey};
            IcrcCheck icrc;
            const size_t got_len = write_request(tmpl, r, len, got, &icrc);
            ASSERT_EQ(got_len, want_len) << info.name << " len " << len;
            EXPECT_EQ(got_len, tx_frame_size(tmpl, op, len));
            std::copy(payload.begin(), payload.end(), got.begin() + tx_payload_offset(tmpl, op));
            uint32_t value;
            icrc_compute_many(&icrc, &value, 1);
            store_le32(got.data() + (icrc.l3 - got.data()) + icrc.len_before_icrc, value);
            got.resize(got_len);
            want.resize(want_len);
            ASSERT_EQ(got, want) << info.name << " v6 " << v6 << " vlan " << vlan << " len "
                                 << len << ": first difference at byte "
                                 << first_difference(got, want);
            ++compared;
          }
      }
    }
  EXPECT_GT(compared, 300u);
}

TEST(TxTemplate, RefusesWhatItDoesNotWriteOrCannotFit) {
  const TxTemplate tmpl = make_tx_template(sample_path(false, false), 5, 0xFFFF);
  TxRequest r;
  IcrcCheck icrc;
  std::vector<uint8_t> out(2048);
  r.opcode = IBV_OPCODE_RC_RDMA_READ_REQUEST;
  EXPECT_EQ(write_request(tmpl, r, 0, out, &icrc), 0u);
  // A first or middle packet must hold whole words (IBA 9.2.5).
  r.opcode = IBV_OPCODE_RC_SEND_FIRST;
  EXPECT_EQ(write_request(tmpl, r, 6, out, &icrc), 0u);
  // The frame does not fit the buffer.
  r.opcode = IBV_OPCODE_RC_SEND_ONLY;
  EXPECT_EQ(write_request(tmpl, r, 1024, std::span(out).first(100), &icrc), 0u);
  EXPECT_EQ(write_request(TxTemplate{}, r, 4, out, &icrc), 0u);
  // Mixed address families make no path, so no template.
  PathSpec bad = sample_path(false, false);
  bad.dst_ip = sample_path(true, false).dst_ip;
  EXPECT_FALSE(make_tx_template(bad, 5, 0xFFFF).valid());
}

TEST(IcrcComputeMany, AgreesWithIcrcComputeOnAnyMixOfLengths) {
  // Lengths inside and outside the four-to-a-register range (64..127
  // bytes), in runs that start fours and break them.
  const std::vector<uint32_t> payloads = {64, 64, 64, 64, 0, 64, 64, 64, 1024, 64, 64,
                                          64, 64, 64, 3, 12, 4096, 64, 64, 64, 64, 40};
  for (bool v6 : {false, true}) {
    const PathSpec path = sample_path(v6, false);
    std::vector<std::vector<uint8_t>> frames;
    std::vector<IcrcCheck> checks;
    for (uint32_t len : payloads) {
      TransportSpec t;
      t.opcode = IBV_OPCODE_UC_RDMA_WRITE_ONLY;
      t.dest_qp = 9;
      t.psn = len;
      t.reth_dma_length = len;
      frames.emplace_back(5000);
      const size_t n = build_packet(path, t, payload_of(len), frames.back());
      ASSERT_NE(n, 0u);
      frames.back().resize(n);
    }
    for (auto& f : frames) {
      IcrcCheck c;
      c.l3 = f.data() + kEthSize;
      c.len_before_icrc = static_cast<uint32_t>(f.size() - kEthSize - kIcrcSize);
      c.ipv6 = v6;
      checks.push_back(c);
    }
    std::vector<uint32_t> got(checks.size());
    icrc_compute_many(checks.data(), got.data(), checks.size());
    for (size_t i = 0; i < checks.size(); ++i)
      EXPECT_EQ(got[i], load_le32(frames[i].data() + frames[i].size() - kIcrcSize))
          << "frame " << i << " v6 " << v6;
  }
}

TEST(IcrcBatch, FlushWritesEveryPendingIcrcAndAddFlushesWhenFull) {
  const PathSpec path = sample_path(false, true);
  const TxTemplate tmpl = make_tx_template(path, 0x42, 0xFFFF);
  const size_t n = IcrcBatch::kCapacity + 5;
  std::vector<std::vector<uint8_t>> got(n, std::vector<uint8_t>(256)), want(n, std::vector<uint8_t>(256));
  IcrcBatch batch;
  for (size_t i = 0; i < n; ++i) {
    TransportSpec t;
    t.opcode = IBV_OPCODE_RC_SEND_ONLY;
    t.dest_qp = 0x42;
    t.psn = static_cast<uint32_t>(i);
    const std::vector<uint8_t> payload = payload_of(static_cast<uint32_t>(i % 80));
    want[i].resize(build_packet(path, t, payload, want[i]));
    TxRequest r;
    r.opcode = t.opcode;
    r.psn = t.psn;
    IcrcCheck c;
    got[i].resize(write_request(tmpl, r, static_cast<uint32_t>(payload.size()), got[i], &c));
    std::copy(payload.begin(), payload.end(),
              got[i].begin() + tx_payload_offset(tmpl, t.opcode));
    batch.add(c);
  }
  EXPECT_EQ(batch.pending(), 5u);  // the first kCapacity went when it filled
  batch.flush();
  EXPECT_EQ(batch.pending(), 0u);
  for (size_t i = 0; i < n; ++i)
    EXPECT_EQ(got[i], want[i]) << "frame " << i << ": first difference at byte "
                               << first_difference(got[i], want[i]);
}

}  // namespace
}  // namespace droce::wire
