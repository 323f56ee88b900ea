// The responder the receive benches (receive_bench.cc, receive_bound.cc,
// engine_rx_bench.cc) feed write_stream.h's frames to: an endpoint with no
// link emulation (as fast as the core goes), one QP expecting the stream
// from PSN 0 under CC "none", and the memory region the stream writes into.
#pragma once

#include <fmt/format.h>

#include <cstdlib>
#include <vector>

#include "droce/cc/registry.h"
#include "droce/endpoint/endpoint.h"
#include "droce/transport/device.h"
#include "write_stream.h"

namespace droce::bench {

inline endpoint::EndpointConfig unpaced(bool header_prediction) {
  endpoint::EndpointConfig ec;
  ec.port_rate_bytes_per_sec = 0;
  ec.header_prediction = header_prediction;
  return ec;
}

struct ResponderUnderTest {
  // `region_bytes`: the memory region at kIova, key kKey.
  explicit ResponderUnderTest(size_t region_bytes, ibv_mtu path_mtu = IBV_MTU_4096,
                              bool header_prediction = true,
                              transport::QpType type = transport::QpType::kRc)
      : ep(dev, unpaced(header_prediction)), mem(region_bytes), mtu(path_mtu) {
    auto* pd = dev.alloc_pd();
    auto* cq = dev.create_cq(1024);
    if (!dev.reg_mr(pd, mem.data(), mem.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                    kIova, kKey)) {
      fmt::print(stderr, "reg_mr of {} bytes failed\n", mem.size());
      std::exit(1);
    }
    transport::QpInitAttr init;
    init.pd = pd;
    init.send_cq = init.recv_cq = cq;
    init.type = type;
    qp = dev.create_qp(init, kQpn);
    ep.attach(*qp, cc::make_algorithm("none", {}, 400'000'000'000ull / 8));
    restart();
  }
  // (RESET ->) RTS expecting PSN 0 again: the stream's PSNs repeat each pass.
  void restart() {
    connect(*qp, mtu);
    ep.notify(kQpn);
  }

  transport::Device dev;
  endpoint::Endpoint ep;
  std::vector<uint8_t> mem;
  transport::QueuePair* qp = nullptr;
  ibv_mtu mtu;
};

}  // namespace droce::bench
