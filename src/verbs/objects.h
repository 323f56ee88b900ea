// The verbs objects of libdroce-verbs: each embeds the libibverbs struct
// the application sees (first, so a pointer to one is a pointer to the
// other) and the engine handle behind it.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <mutex>

#include "droce/engine/engine.h"
#include "droce/transport/qp.h"
#include "droce/wire/build.h"

namespace droce::verbs {

// libibverbs' verbs_device begins with the ibv_device; libraries that
// probe a device (libmlx5's mlx5dv_is_supported) read the fields after
// it, so the block is as large as a verbs_device and zeroed.
struct Device {
  ibv_device dev;
  uint8_t verbs_device_rest[512];
};

struct Context {
  verbs_context vctx;  // ends with the ibv_context (verbs.h)
  ibv_context* ctx() { return &vctx.context; }
};
inline Context* context_of(ibv_context* c) {
  return reinterpret_cast<Context*>(reinterpret_cast<uint8_t*>(c) -
                                    offsetof(verbs_context, context));
}

struct Pd {
  ibv_pd pd;
  engine::PdHandle h;
};

struct Mr {
  ibv_mr mr;
  engine::MrInfo info;
};

struct CompChannel {
  ibv_comp_channel ch;  // fd: an epoll set of its CQs' event fds
};

struct Cq {
  ibv_cq cq;
  engine::CqHandle h;
  int event_fd = -1;
  CompChannel* channel = nullptr;
};

struct Srq {
  ibv_srq srq;
  engine::SrqHandle h;
  ibv_srq_attr attr{};
};

struct Qp {
  ibv_qp qp;
  engine::QpHandle h;
  transport::QpType type = transport::QpType::kRc;
  ibv_qp_cap cap{};
  bool sq_sig_all = false;
  ibv_qp_attr stored{};  // every attribute set so far (ibv_query_qp)
  wire::PathSpec path{};
};

struct Ah {
  ibv_ah ah;
  wire::PathSpec path{};
};

}  // namespace droce::verbs
