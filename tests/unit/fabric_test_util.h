// Helpers shared by the fabric and PFC/INT unit tests: RoCEv2 packets built
// with the wire layer, a minimal pcap writer, and binomial tolerances.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "droce/fabric/packet.h"
#include "droce/wire/build.h"
#include "droce/wire/packet.h"

namespace droce::fabric::testing {

struct RoceSpec {
  uint32_t src_ip = 0x0A000001;
  uint32_t dst_ip = 0x0A000002;
  uint16_t src_port = 0xC001;
  uint8_t dscp = 26;  // class 3
  wire::Ecn ecn = wire::Ecn::kEct0;
  size_t payload = 1000;
  uint8_t opcode = IBV_OPCODE_RC_SEND_ONLY;
  uint32_t psn = 0;
  bool ipv6 = false;
  bool vlan = false;
  uint8_t pcp = 0;
};

inline std::vector<uint8_t> roce_bytes(const RoceSpec& s) {
  wire::PathSpec path;
  path.dst_mac = {0x02, 0, 0, 0, 0, 2};
  path.src_mac = {0x02, 0, 0, 0, 0, 1};
  if (s.ipv6) {
    path.src_ip.v6 = path.dst_ip.v6 = true;
    path.src_ip.bytes[0] = 0xFD;
    path.dst_ip.bytes[0] = 0xFD;
    wire::store_be32(path.src_ip.bytes + 12, s.src_ip);
    wire::store_be32(path.dst_ip.bytes + 12, s.dst_ip);
  } else {
    path.src_ip = wire::IpAddress::v4(s.src_ip);
    path.dst_ip = wire::IpAddress::v4(s.dst_ip);
  }
  path.dscp = s.dscp;
  path.ecn = s.ecn;
  path.udp_src_port = s.src_port;
  path.vlan = s.vlan;
  path.pcp = s.pcp;
  wire::TransportSpec t;
  t.opcode = s.opcode;
  t.dest_qp = 0x12;
  t.psn = s.psn;
  t.aeth_syndrome = wire::make_syndrome(wire::AethType::kAck, 0x1F);
  std::vector<uint8_t> payload(wire::opcode_info(s.opcode).payload ? s.payload : 0);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
  std::vector<uint8_t> out(wire::packet_size(path, s.opcode, payload.size()));
  const size_t n = wire::build_packet(path, t, payload, out);
  EXPECT_EQ(n, out.size());
  return out;
}

inline Packet roce_packet(const RoceSpec& s, uint64_t tag = 0) {
  Packet p;
  const std::vector<uint8_t> bytes = roce_bytes(s);
  p.bytes.assign(bytes.begin(), bytes.end());
  p.tag = tag;
  return p;
}

// |observed - expected| allowed for `n` Bernoulli(p) trials: `sigmas` binomial
// standard deviations plus one count of slack for p near 0 or 1.
inline double binomial_tolerance(double p, size_t n, double sigmas = 5) {
  return sigmas * std::sqrt(static_cast<double>(n) * p * (1 - p)) + 1;
}

// Classic libpcap file: global header, then per-record header + bytes.
class PcapWriter {
 public:
  explicit PcapWriter(const std::string& path) : f_(std::fopen(path.c_str(), "wb")) {
    const uint32_t magic = 0xA1B2C3D4, snaplen = 65535, linktype = 1;  // Ethernet
    const uint16_t major = 2, minor = 4;
    const int32_t zone = 0;
    const uint32_t sigfigs = 0;
    put(magic);
    put(major);
    put(minor);
    put(zone);
    put(sigfigs);
    put(snaplen);
    put(linktype);
  }
  ~PcapWriter() {
    if (f_) std::fclose(f_);
  }
  bool ok() const { return f_ != nullptr; }
  void write(const std::vector<uint8_t>& frame, uint64_t time_ns) {
    const uint32_t sec = static_cast<uint32_t>(time_ns / 1'000'000'000ull);
    const uint32_t usec = static_cast<uint32_t>(time_ns % 1'000'000'000ull / 1000);
    const uint32_t len = static_cast<uint32_t>(frame.size());
    put(sec);
    put(usec);
    put(len);
    put(len);
    std::fwrite(frame.data(), 1, frame.size(), f_);
  }

 private:
  template <class T>
  void put(T v) {  // host order, as the magic number tells readers
    std::fwrite(&v, sizeof v, 1, f_);
  }
  std::FILE* f_;
};

inline std::string run_command(const std::string& cmd) {
  std::string out;
  if (std::FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

}  // namespace droce::fabric::testing

#include "droce/fabric/switch.h"

namespace droce::fabric::testing {

// Hosts 10.0.0.<i+1> sit behind port i.
inline SwitchConfig simple_config(size_t nports, uint64_t rate_bps) {
  SwitchConfig cfg;
  cfg.ports.resize(nports);
  for (size_t i = 0; i < nports; ++i) {
    cfg.ports[i].rate_bps = rate_bps;
    cfg.ports[i].mac = {0x02, 0xAA, 0, 0, 0, static_cast<uint8_t>(i)};
    cfg.ports[i].ecn.mode = MarkMode::kOff;
    cfg.routes.add_host(wire::IpAddress::v4(0x0A000001 + static_cast<uint32_t>(i)),
                        static_cast<uint16_t>(i));
  }
  return cfg;
}

// Runs the switch until idle (or `until`), collecting departures.
inline std::vector<Departure> drain(Switch& sw, uint64_t until = kNever) {
  std::vector<Departure> out;
  for (uint64_t t; (t = sw.next_event_time()) != kNever && t <= until;)
    sw.advance(t, [&](Departure&& d) { out.push_back(std::move(d)); });
  return out;
}

}  // namespace droce::fabric::testing
