// Unheld payload (wire/icrc.h): payload a simulated frame carries as a
// length. Its ICRC is the ICRC of the same frame with zeros there, whatever
// the buffer holds; a region outside the payload is ignored; parse() and
// the send batch (IcrcBatch) take it only where told to.
#include <gtest/gtest.h>
#include <infiniband/opcode.h>

#include <vector>

#include "droce/wire/build.h"
#include "droce/wire/bytes.h"
#include "droce/wire/icrc.h"
#include "droce/wire/packet.h"
#include "droce/wire/tx_template.h"
#include "wire_samples.h"

namespace droce::wire {
namespace {

using testing::sample_path;

// An RDMA WRITE ONLY of `len` zero bytes, its ICRC computed over them.
struct Frame {
  std::vector<uint8_t> bytes;
  size_t payload_at = 0;
  uint32_t len = 0;
  uint8_t pad = 0;

  // The payload bytes overwritten with something else than zeros.
  void scribble() {
    for (uint32_t i = 0; i < len; ++i)
      bytes[payload_at + i] = static_cast<uint8_t>(i * 13 + 7);
  }
  UnheldPayload unheld() const { return {static_cast<uint16_t>(len), pad}; }
  IcrcCheck check() const {
    ParsedPacket p;
    EXPECT_EQ(parse(bytes, p, {.verify_icrc = false}), ParseError::kOk);
    return icrc_check(bytes, p);
  }
};

Frame zero_write(bool v6, uint32_t len, uint32_t psn = 7) {
  const PathSpec path = sample_path(v6, false);
  TransportSpec t;
  t.opcode = IBV_OPCODE_RC_RDMA_WRITE_ONLY;
  t.dest_qp = 0x42;
  t.psn = psn;
  t.reth_va = 0x1000;
  t.reth_rkey = 0x77;
  t.reth_dma_length = len;
  Frame f;
  f.len = len;
  f.pad = static_cast<uint8_t>((4 - len % 4) % 4);
  f.bytes.resize(packet_size(path, t.opcode, len));
  f.payload_at = payload_offset(path, t.opcode);
  const std::vector<uint8_t> zeros(len, 0);
  f.bytes.resize(build_packet(path, t, zeros, f.bytes));
  return f;
}

TEST(UnheldPayload, IcrcIsThatOfZerosWhateverTheBufferHolds) {
  for (bool v6 : {false, true}) {
    for (uint32_t len : {1u, 3u, 63u, 64u, 65u, 1000u, 1024u, 4096u, 9000u}) {
      Frame f = zero_write(v6, len);
      const IcrcCheck plain = f.check();
      ASSERT_EQ(icrc_of(plain), plain.carried) << len;  // built over zeros
      f.scribble();
      // Read as they are, the scribbled bytes no longer match...
      EXPECT_NE(icrc_of(f.check()), plain.carried) << len;
      // ...taken as unheld, they are zeros again, and never read.
      const IcrcCheck c = with_unheld(f.check(), f.unheld());
      EXPECT_EQ(c.zeros, len);
      EXPECT_EQ(c.l3 + c.zeros_at, f.bytes.data() + f.payload_at) << len;
      EXPECT_EQ(unheld_of(c), f.unheld());
      EXPECT_EQ(icrc_of(c), plain.carried) << (v6 ? "IPv6 " : "IPv4 ") << len;
      // The headers still count: a changed PSN is caught.
      f.bytes[f.payload_at - 16 - 1] ^= 1;  // the PSN's low byte (BTH, before the RETH)
      EXPECT_NE(icrc_of(with_unheld(f.check(), f.unheld())), plain.carried) << len;
    }
  }
}

TEST(UnheldPayload, ARegionOutsideThePayloadIsReadAsItIs) {
  Frame f = zero_write(false, 256);
  const IcrcCheck plain = f.check();
  IcrcCheck c = plain;
  // Starting inside the BTH: ignored, so the bytes are read (and match).
  c.zeros_at = 30;
  c.zeros = 100;
  EXPECT_EQ(icrc_of(c), icrc_compute(c.l3, c.len_before_icrc, c.ipv6));
  // Reaching past the ICRC: ignored too.
  c.zeros_at = static_cast<uint16_t>(f.payload_at - kEthSize);
  c.zeros = static_cast<uint16_t>(c.len_before_icrc - c.zeros_at + 1);
  f.scribble();
  EXPECT_EQ(icrc_of(c), icrc_compute(c.l3, c.len_before_icrc, c.ipv6));
  EXPECT_NE(icrc_of(c), plain.carried);
  // with_unheld refuses a region longer than the datagram.
  EXPECT_EQ(with_unheld(plain, {60000, 0}).zeros, 0);
}

TEST(UnheldPayload, BurstsMixingUnheldAndPlainFramesAgreeWithOneByOne) {
  std::vector<Frame> frames;
  std::vector<IcrcCheck> checks;
  for (uint32_t i = 0; i < 40; ++i) {
    frames.push_back(zero_write(i % 2 == 1, i * 97 % 4097 + 1, i));
  }
  for (uint32_t i = 0; i < frames.size(); ++i) {
    Frame& f = frames[i];
    if (i % 3 == 0) {
      checks.push_back(f.check());  // plain
    } else {
      f.scribble();
      checks.push_back(with_unheld(f.check(), f.unheld()));
    }
    if (i % 7 == 5) checks.back().carried ^= 0x10;  // some wrong
  }
  bool ok[64];
  uint32_t icrc[64];
  icrc_check_many(checks.data(), ok, checks.size());
  icrc_compute_many(checks.data(), icrc, checks.size());
  for (size_t i = 0; i < checks.size(); ++i) {
    EXPECT_EQ(ok[i], i % 7 != 5) << i;
    EXPECT_EQ(icrc[i], icrc_of(checks[i])) << i;
  }
}

TEST(UnheldPayload, ParseTakesItOnlyWhenGiven) {
  Frame f = zero_write(true, 2048);
  f.scribble();
  ParsedPacket p;
  EXPECT_EQ(parse(f.bytes, p), ParseError::kBadIcrc);
  EXPECT_EQ(parse(f.bytes, p, {.unheld = f.unheld()}), ParseError::kOk);
  EXPECT_EQ(p.payload_length, 2048u);
  EXPECT_EQ(verify_icrc(f.bytes, p), ParseError::kBadIcrc);
  EXPECT_EQ(verify_icrc(f.bytes, p, f.unheld()), ParseError::kOk);
  // Another length than the frame's: the zeros are elsewhere, no match.
  EXPECT_EQ(parse(f.bytes, p, {.unheld = {1024, 0}}), ParseError::kBadIcrc);
}

// The send side: a frame whose payload was not written (virtual payload)
// gets the ICRC of zeros there while the batch keeps unheld payload, and
// the ICRC of what the buffer holds otherwise.
TEST(UnheldPayload, IcrcBatchKeepsItOnlyWhenAskedAndLogsTheFrames) {
  const PathSpec path = sample_path(false, true);
  const TxTemplate tmpl = make_tx_template(path, 0x42, 0xFFFF);
  const uint32_t len = 1500;
  auto write = [&](std::vector<uint8_t>& buf) {
    TxRequest r;
    r.opcode = IBV_OPCODE_RC_SEND_ONLY;
    r.psn = 9;
    IcrcCheck c;
    buf.assign(2048, 0xA5);  // the payload area holds leftovers
    buf.resize(write_request(tmpl, r, len, buf, &c));
    c.zeros_at = static_cast<uint16_t>(tx_payload_offset(tmpl, r.opcode) - tmpl.l3_offset);
    c.zeros = len;
    return c;
  };
  std::vector<uint8_t> kept, read;
  IcrcBatch batch;
  batch.keep_unheld(true);
  const IcrcCheck kept_check = write(kept);
  batch.add(kept_check);
  batch.keep_unheld(false);
  batch.add(write(read));
  batch.flush();
  ASSERT_EQ(batch.unheld_log().size(), 1u);
  EXPECT_EQ(batch.unheld_log()[0].l3, kept_check.l3);
  EXPECT_EQ(batch.unheld_log()[0].payload, (UnheldPayload{len, 0}));
  ParsedPacket p;
  EXPECT_EQ(parse(kept, p), ParseError::kBadIcrc);
  EXPECT_EQ(parse(kept, p, {.unheld = {len, 0}}), ParseError::kOk);
  EXPECT_EQ(parse(read, p), ParseError::kOk);
  batch.clear_unheld_log();
  EXPECT_TRUE(batch.unheld_log().empty());
}

}  // namespace
}  // namespace droce::wire
