// QpAttr::write_reth_every_packet: an RDMA WRITE longer than the MTU leaves
// as WRITE ONLY packets, each with the RETH of its own slice, which a
// selective-repeat responder places in any order, its FIRST included.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "droce/wire/packet.h"
#include "transport_link.h"

namespace droce::transport {
namespace {

using testing::TwoEnds;

struct WriteRun {
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint8_t> src, dst;
};

// Posts one WRITE of `npkts` packets of 1 KiB from qa to qb and returns
// the frames qa sends for it, with the buffers.
void write_frames(TwoEnds& ends, const QpAttr& attr, uint32_t npkts, WriteRun& run) {
  ASSERT_TRUE(testing::connect(*ends.qa, *ends.qb, attr, 100, 900));
  const size_t len = npkts * 1024;
  run.src.resize(len);
  run.dst.assign(len, 0);
  for (size_t i = 0; i < len; ++i) run.src[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_EQ(ends.post_write(run.src, run.dst), 0);
  std::vector<uint8_t> buf(8192);
  while (ends.qa->has_work(0)) {
    const size_t n = ends.qa->produce(0, buf);
    if (n == 0) break;
    run.frames.emplace_back(buf.begin(), buf.begin() + n);
  }
}

// Delivers `frames` to qb, then qb's answers to qa; true once qa's WRITE
// completed successfully.
bool deliver_and_complete(TwoEnds& ends, const std::vector<std::vector<uint8_t>>& frames) {
  auto& [da, db, pa, pb, a_cq, b_cq, qa, qb] = ends;
  for (const auto& f : frames) {
    wire::ParsedPacket p;
    if (wire::parse(f, p) != wire::ParseError::kOk) return false;
    qb->on_packet(p, 0);
  }
  std::vector<uint8_t> buf(8192);
  while (qb->has_work(0)) {
    const size_t n = qb->produce(0, buf);
    if (n == 0) break;
    wire::ParsedPacket p;
    if (wire::parse({buf.data(), n}, p) != wire::ParseError::kOk) return false;
    qa->on_packet(p, 0);
  }
  WorkCompletion wc[4];
  return a_cq->poll(wc) == 1 && wc[0].status == IBV_WC_SUCCESS;
}

QpAttr sr_attr(bool reth_every_packet) {
  QpAttr attr;
  attr.path_mtu = IBV_MTU_1024;
  attr.recovery = Recovery::kSelectiveRepeat;
  attr.sr_reorder_tolerance_pkts = 64;
  attr.write_reth_every_packet = reth_every_packet;
  return attr;
}

TEST(RequesterReth, EveryPacketIsAWriteOnlyOfItsOwnSlice) {
  TwoEnds ends(16, 16);
  WriteRun run;
  write_frames(ends, sr_attr(true), 8, run);
  ASSERT_EQ(run.frames.size(), 8u);
  for (uint32_t k = 0; k < 8; ++k) {
    wire::ParsedPacket p;
    ASSERT_EQ(wire::parse(run.frames[k], p), wire::ParseError::kOk);
    EXPECT_EQ(p.opcode, IBV_OPCODE_RC_RDMA_WRITE_ONLY);
    EXPECT_EQ(p.psn, 100 + k);
    // The destination region's iova is its address (Device::reg_mr's default).
    EXPECT_EQ(p.reth_va, reinterpret_cast<uint64_t>(run.dst.data()) + k * 1024);
    EXPECT_EQ(p.reth_dma_length, 1024u);
    EXPECT_EQ(p.payload_length, 1024u);
    // AckReq where the segmented WRITE asks: on its last packet.
    EXPECT_EQ(p.ack_req, k == 7);
  }
}

// All eight in reverse order, the first slice last: every one is placed
// on arrival (seven out of order), nothing is resent, the bytes are right.
TEST(RequesterReth, ReversedPacketsAreAllPlaced) {
  TwoEnds ends(16, 16);
  WriteRun run;
  write_frames(ends, sr_attr(true), 8, run);
  std::reverse(run.frames.begin(), run.frames.end());
  EXPECT_TRUE(deliver_and_complete(ends, run.frames));
  EXPECT_EQ(ends.qb->counters().rx_ooo_accepted, 7u);
  EXPECT_EQ(run.dst, run.src);
  EXPECT_EQ(ends.qa->counters().tx_retransmit_packets, 0u);
}

// The same order with FIRST/MIDDLE/LAST: the responder cannot place what
// overtakes the FIRST (it alone carries the RETH), so seven are dropped.
TEST(RequesterReth, WithoutItWhatOvertakesTheFirstIsDropped) {
  TwoEnds ends(16, 16);
  WriteRun run;
  write_frames(ends, sr_attr(false), 8, run);
  std::reverse(run.frames.begin(), run.frames.end());
  EXPECT_FALSE(deliver_and_complete(ends, run.frames));
  EXPECT_EQ(ends.qb->counters().rx_ooo_accepted, 0u);
}

// Go-back-N, in order: the responder takes eight messages of one packet.
TEST(RequesterReth, InOrderWithGoBackNDeliversTheSameBytes) {
  TwoEnds ends(16, 16);
  QpAttr attr = sr_attr(true);
  attr.recovery = Recovery::kGoBackN;
  WriteRun run;
  write_frames(ends, attr, 8, run);
  EXPECT_TRUE(deliver_and_complete(ends, run.frames));
  EXPECT_EQ(run.dst, run.src);
}

}  // namespace
}  // namespace droce::transport
