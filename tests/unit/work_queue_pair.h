// Two devices with an RC QP each, connected over a loopback, and the
// regions they write: the work queue tests' bench.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "droce/transport/device.h"
#include "transport_link.h"

namespace droce::transport {

struct Pair : testing::TwoEnds {
  std::vector<uint8_t> a_mem = std::vector<uint8_t>(1 << 20);
  std::vector<uint8_t> b_mem = std::vector<uint8_t>(1 << 20);
  MemoryRegion* a_mr = nullptr;
  MemoryRegion* b_mr = nullptr;
  testing::Loopback net{da, db, 7, {}};

  explicit Pair(uint32_t depth = 16) : TwoEnds(depth, depth) {
    const uint32_t all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                         IBV_ACCESS_REMOTE_ATOMIC;
    a_mr = da.reg_mr(pa, a_mem.data(), a_mem.size(), all, 0);
    b_mr = db.reg_mr(pb, b_mem.data(), b_mem.size(), all, 0);
    QpAttr attr;
    attr.timeout = 8;
    attr.min_rnr_timer = 1;
    EXPECT_TRUE(testing::connect(*qa, *qb, attr, 10, 20));
  }
  SendWr write(uint64_t id, uint64_t local, uint64_t remote, uint32_t len, Sge& sge) {
    sge = Sge{local, len, a_mr->lkey()};
    SendWr wr;
    wr.wr_id = id;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = std::span(&sge, 1);
    wr.remote_addr = remote;
    wr.rkey = b_mr->rkey();
    return wr;
  }
  std::vector<WorkCompletion> drain(CompletionQueue* cq) {
    std::vector<WorkCompletion> out(4096);
    out.resize(static_cast<size_t>(cq->poll(out)));
    return out;
  }
  bool settle() {
    return net.run([] { return false; }, net.now() + 50'000'000) || true;
  }
};

}  // namespace droce::transport
