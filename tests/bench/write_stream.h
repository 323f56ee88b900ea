// What the receive benches (engine_rx_bench.cc, receive_bench.cc) feed a
// responder: a stream of RC RDMA WRITE ONLY frames to one QP, PSN i writing
// at offset i * payload of one memory region, AckReq set on each, and the
// QP that takes them (RTS, expecting PSN 0, 4096 MTU unless told). Or the
// same bytes as multi-packet WRITE messages (write_message_frame).
#pragma once

#include <fmt/format.h>

#include <cstdlib>
#include <span>

#include "droce/endpoint/endpoint.h"
#include "droce/transport/qp.h"
#include "droce/wire/build.h"

namespace droce::bench {

constexpr uint32_t kQpn = 0x11;
constexpr uint32_t kPeerQpn = 0x22;
constexpr uint32_t kKey = 0x100;
constexpr uint64_t kIova = 0x10000;

// The peer -> us.
inline wire::PathSpec peer_to_us() {
  wire::PathSpec p;
  p.src_mac = {0x02, 0, 0, 0, 0, 0x02};
  p.dst_mac = {0x02, 0, 0, 0, 0, 0x01};
  p.src_ip = wire::IpAddress::v4(0xC0A84D02);
  p.dst_ip = wire::IpAddress::v4(0xC0A84D01);
  p.udp_src_port = 0xC123;
  return p;
}

// The QP's own path: peer_to_us with the ends swapped (its UDP source
// port is the QP's own entropy, which the stream's frames need not match).
inline wire::PathSpec us_to_peer() {
  const wire::PathSpec in = peer_to_us();
  wire::PathSpec p;
  p.src_mac = in.dst_mac;
  p.dst_mac = in.src_mac;
  p.src_ip = in.dst_ip;
  p.dst_ip = in.src_ip;
  return p;
}

// Frame `psn` of the stream into `out`; returns its length. `service`: the
// opcode's transport bits, IBV_OPCODE_RC, or IBV_OPCODE_UC for the same
// stream to a UC QP.
inline size_t write_only_frame(uint32_t psn, std::span<const uint8_t> payload,
                               std::span<uint8_t> out, uint8_t service = IBV_OPCODE_RC) {
  wire::TransportSpec t;
  t.opcode = static_cast<uint8_t>(service | IBV_OPCODE_RDMA_WRITE_ONLY);
  t.dest_qp = kQpn;
  t.psn = psn;
  t.ack_req = true;
  t.reth_va = kIova + uint64_t{psn} * payload.size();
  t.reth_rkey = kKey;
  t.reth_dma_length = static_cast<uint32_t>(payload.size());
  return wire::build_packet(peer_to_us(), t, payload, out);
}

// Frame `psn` of a stream of RDMA WRITE messages of `packets` packets each
// (FIRST, MIDDLE..., LAST; ONLY when 1), every packet carrying
// payload.size() bytes (the path MTU, IBA 9.7.5.1.4), packet i again writing
// at offset i * payload. AckReq on each message's last packet, as a
// requester that does not ask for ACKs mid-message sets it.
inline size_t write_message_frame(uint32_t psn, uint32_t packets,
                                  std::span<const uint8_t> payload, std::span<uint8_t> out) {
  const uint32_t k = psn % packets;
  const bool first = k == 0, last = k == packets - 1;
  wire::TransportSpec t;
  t.opcode = IBV_OPCODE_RC | (first && last ? IBV_OPCODE_RDMA_WRITE_ONLY
                              : first       ? IBV_OPCODE_RDMA_WRITE_FIRST
                              : last        ? IBV_OPCODE_RDMA_WRITE_LAST
                                            : IBV_OPCODE_RDMA_WRITE_MIDDLE);
  t.dest_qp = kQpn;
  t.psn = psn;
  t.ack_req = last;
  t.reth_va = kIova + uint64_t{psn} * payload.size();  // FIRST and ONLY carry a RETH
  t.reth_rkey = kKey;
  t.reth_dma_length = static_cast<uint32_t>(packets * payload.size());
  return wire::build_packet(peer_to_us(), t, payload, out);
}

// A sender's endpoint as an engine port runs it, unpaced (as fast as the
// core goes): what the engine books ahead of its one clock reading per
// pass, and the packets a QP sends per turn (engine::PortConfig's
// endpoint defaults).
inline endpoint::EndpointConfig engine_port_sender() {
  endpoint::EndpointConfig c;
  c.port_rate_bytes_per_sec = 0;
  c.tx_run_ahead_ns = 2000;
  c.tx_catch_up_ns = 100'000;
  c.tx_frames_per_turn = 16;
  return c;
}

// (RESET ->) INIT -> RTR -> RTS, expecting PSN 0 from the stream's sender;
// exits on a refused transition.
inline void connect(transport::QueuePair& qp, ibv_mtu mtu = IBV_MTU_4096) {
  transport::QpAttr a;
  a.path = us_to_peer();
  a.dest_qpn = kPeerQpn;
  a.rq_psn = 0;
  a.path_mtu = mtu;
  for (auto s : {transport::QpState::kReset, transport::QpState::kInit,
                 transport::QpState::kRtr, transport::QpState::kRts})
    if (s != transport::QpState::kReset || qp.state() != transport::QpState::kReset)
      if (qp.modify(s, a) != 0) {
        fmt::print(stderr, "modify to {} failed\n", transport::to_string(s));
        std::exit(1);
      }
}

}  // namespace droce::bench
