// src/transport/prefetch.h: how far ahead the requester's gather and the
// responder's WRITE placement prefetch (never past the message or the
// scatter/gather element), and that messages ending exactly at the end of
// their memory regions still arrive byte-exact with the prefetch in the path.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "droce/transport/device.h"
#include "prefetch.h"
#include "transport_link.h"

namespace droce::transport {
namespace {

TEST(NextPacketBytes, AFullPacketWhenOneFollows) {
  EXPECT_EQ(next_packet_bytes(4096, 4096, 1 << 20), 4096u);
  EXPECT_EQ(next_packet_bytes(0, 1024, 4096), 1024u);
}

TEST(NextPacketBytes, ShorterLastPacket) {
  EXPECT_EQ(next_packet_bytes(4096, 4096, 4096 + 100), 100u);
  EXPECT_EQ(next_packet_bytes(3 * 1024, 1024, 3 * 1024 + 1), 1u);
}

TEST(NextPacketBytes, NothingAfterTheEnd) {
  EXPECT_EQ(next_packet_bytes(4096, 4096, 4096), 0u);
  EXPECT_EQ(next_packet_bytes(5000, 4096, 4096), 0u);  // a caller past the end
  EXPECT_EQ(next_packet_bytes(0, 4096, 0), 0u);
}

TEST(Prefetch, AcceptsAnyAlignmentAndLength) {
  // Hints only: nothing observable but that the bytes are unchanged.
  std::vector<uint8_t> buf(3 * 64 + 7, 0x5A);
  for (size_t off = 0; off < 64; off += 7)
    for (uint64_t len : {0ull, 1ull, 63ull, 64ull, 65ull, 128ull}) {
      prefetch_for_read(buf.data() + off, len);
      prefetch_for_write(buf.data() + off, len);
    }
  for (uint8_t b : buf) EXPECT_EQ(b, 0x5A);
}

// RDMA WRITEs of several packets whose source and destination end exactly
// at the end of their memory regions (so the last packets' look-ahead is
// cut off), from one SGE or two, with MTU-sized and shorter last packets.
TEST(Prefetch, WritesEndingAtRegionEndsArriveByteExact) {
  for (uint32_t len : {1024u * 5, 1024u * 5 + 1, 1024u * 3 + 1023, 1024u + 1}) {
    for (bool split : {false, true}) {
      testing::TwoEnds ends(16, 16);
      auto& [da, db, pa, pb, a_cq, b_cq, qa, qb] = ends;
      QpAttr attr;
      attr.path_mtu = IBV_MTU_1024;
      ASSERT_TRUE(testing::connect(*qa, *qb, attr, 10, 20));
      std::vector<uint8_t> src(len), dst(len, 0);
      std::mt19937 rng(len + split);
      for (auto& b : src) b = static_cast<uint8_t>(rng());
      MemoryRegion* smr = da.reg_mr(pa, src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
      MemoryRegion* dmr = db.reg_mr(pb, dst.data(), dst.size(),
                                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
      const uint32_t cut = split ? len / 2 + 3 : len;
      Sge sg[2] = {{smr->iova(), cut, smr->lkey()},
                   {smr->iova() + cut, len - cut, smr->lkey()}};
      SendWr w;
      w.wr_id = 1;
      w.opcode = IBV_WR_RDMA_WRITE;
      w.send_flags = IBV_SEND_SIGNALED;
      w.remote_addr = dmr->iova();
      w.rkey = dmr->rkey();
      w.sg_list = {sg, split ? 2u : 1u};
      ASSERT_EQ(qa->post_send(w), 0);
      testing::Loopback net(da, db, 1, testing::Impairment{});
      WorkCompletion wc[4];
      int got = 0;
      ASSERT_TRUE(net.run([&] { return (got += a_cq->poll(wc)) > 0; }, 1'000'000'000ull))
          << len << " split " << split;
      EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
      EXPECT_EQ(dst, src) << len << " split " << split;
    }
  }
}

}  // namespace
}  // namespace droce::transport
