// wire_gen: test-only driver for droce's packet builder. Reads packet specs
// as JSON lines and writes the frames wire::build_packet makes of them to a
// pcap (and optionally one raw file per frame), so Python oracles (scapy,
// tshark) can check droce's output.
//
//   wire_gen [--raw-dir DIR] SPECS.jsonl OUT.pcap     ('-' reads stdin)
//
// A spec holds PathSpec and TransportSpec fields under their C++ names, e.g.
//   {"src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "opcode": 4, "dest_qp": 17,
//    "psn": 5, "payload_hex": "00112233"}
// MACs are "aa:bb:cc:dd:ee:ff", IPs are text (the family follows), "ecn" is
// 0..3, the payload is "payload_hex" or "payload_len" (bytes i % 251), and
// "name" names the raw file. Unknown keys are an error so that a typo in a
// test can not silently build a different packet. Exit 1 on any bad spec.
#include <pcap/pcap.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "droce/options/values.h"
#include "droce/wire/build.h"
#include "droce/wire/packet.h"

namespace droce {
namespace {

using nlohmann::json;

wire::MacAddress parse_mac(const std::string& s) {
  wire::MacAddress m{};
  if (!options::try_parse_mac(s, m)) throw std::runtime_error("bad MAC '" + s + "'");
  return m;
}

wire::IpAddress parse_ip(const std::string& s) {
  wire::IpAddress a;
  if (!options::try_parse_ip(s, a)) throw std::runtime_error("bad IP address '" + s + "'");
  return a;
}

std::vector<uint8_t> parse_hex(const std::string& s) {
  if (s.size() % 2) throw std::runtime_error("odd-length payload_hex");
  std::vector<uint8_t> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<uint8_t>(std::stoul(s.substr(2 * i, 2), nullptr, 16));
  return out;
}

template <typename T>
void take(const json& j, const char* key, T& field, std::set<std::string>& used) {
  if (!j.contains(key)) return;
  used.insert(key);
  field = j.at(key).get<T>();
}

struct Built {
  std::string name;
  std::vector<uint8_t> frame;
};

Built build_one(const json& j) {
  std::set<std::string> used;
  wire::PathSpec path;
  wire::TransportSpec t;
  path.src_ip = wire::IpAddress::v4(0x0A000001);
  path.dst_ip = wire::IpAddress::v4(0x0A000002);
  path.src_mac = {0x02, 0, 0, 0, 0, 1};
  path.dst_mac = {0x02, 0, 0, 0, 0, 2};
  if (j.contains("src_mac")) path.src_mac = parse_mac(j["src_mac"]), used.insert("src_mac");
  if (j.contains("dst_mac")) path.dst_mac = parse_mac(j["dst_mac"]), used.insert("dst_mac");
  if (j.contains("src_ip")) path.src_ip = parse_ip(j["src_ip"]), used.insert("src_ip");
  if (j.contains("dst_ip")) path.dst_ip = parse_ip(j["dst_ip"]), used.insert("dst_ip");
  take(j, "vlan", path.vlan, used);
  take(j, "vlan_id", path.vlan_id, used);
  take(j, "pcp", path.pcp, used);
  take(j, "dscp", path.dscp, used);
  if (j.contains("ecn")) {
    path.ecn = static_cast<wire::Ecn>(j["ecn"].get<int>() & 3);
    used.insert("ecn");
  }
  take(j, "ttl", path.ttl, used);
  take(j, "flow_label", path.flow_label, used);
  take(j, "udp_src_port", path.udp_src_port, used);

  take(j, "opcode", t.opcode, used);
  take(j, "solicited", t.solicited, used);
  take(j, "mig_req", t.mig_req, used);
  take(j, "pkey", t.pkey, used);
  take(j, "fecn", t.fecn, used);
  take(j, "becn", t.becn, used);
  take(j, "dest_qp", t.dest_qp, used);
  take(j, "ack_req", t.ack_req, used);
  take(j, "psn", t.psn, used);
  take(j, "reth_va", t.reth_va, used);
  take(j, "reth_rkey", t.reth_rkey, used);
  take(j, "reth_dma_length", t.reth_dma_length, used);
  take(j, "aeth_syndrome", t.aeth_syndrome, used);
  take(j, "aeth_msn", t.aeth_msn, used);
  take(j, "atomic_va", t.atomic_va, used);
  take(j, "atomic_rkey", t.atomic_rkey, used);
  take(j, "atomic_swap_add", t.atomic_swap_add, used);
  take(j, "atomic_compare", t.atomic_compare, used);
  take(j, "atomic_ack_original", t.atomic_ack_original, used);
  take(j, "imm_data", t.imm_data, used);
  take(j, "ieth_rkey", t.ieth_rkey, used);
  take(j, "deth_qkey", t.deth_qkey, used);
  take(j, "deth_src_qp", t.deth_src_qp, used);

  Built b;
  take(j, "name", b.name, used);
  std::vector<uint8_t> payload;
  if (j.contains("payload_hex")) {
    payload = parse_hex(j["payload_hex"]);
    used.insert("payload_hex");
  } else if (j.contains("payload_len")) {
    payload.resize(j["payload_len"].get<size_t>());
    for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i % 251);
    used.insert("payload_len");
  }
  for (const auto& [key, value] : j.items()) {
    if (!used.count(key)) throw std::runtime_error("unknown key '" + key + "'");
  }

  b.frame.resize(wire::packet_size(path, t.opcode, payload.size()));
  const size_t n = wire::build_packet(path, t, payload, b.frame);
  if (n == 0) throw std::runtime_error("build_packet refused the spec");
  b.frame.resize(n);
  return b;
}

int run(const std::string& specs_path, const std::string& out_path,
        const std::string& raw_dir) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (specs_path != "-") {
    file.open(specs_path);
    if (!file) {
      std::cerr << "wire_gen: cannot read '" << specs_path << "'\n";
      return 2;
    }
    in = &file;
  }
  // The capture's directory is made if missing (README's out/demo.pcap on a
  // fresh checkout).
  if (const auto dir = std::filesystem::path(out_path).parent_path(); !dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
  }
  pcap_t* dead = pcap_open_dead(DLT_EN10MB, 262144);
  pcap_dumper_t* dumper = pcap_dump_open(dead, out_path.c_str());
  if (dumper == nullptr) {
    std::cerr << "wire_gen: cannot write '" << out_path << "': " << pcap_geterr(dead)
              << "\n";
    pcap_close(dead);
    return 2;
  }
  int status = 0;
  std::string line;
  size_t lineno = 0;
  size_t count = 0;
  while (std::getline(*in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#') continue;
    try {
      const Built b = build_one(json::parse(line));
      pcap_pkthdr hdr{};
      hdr.ts.tv_sec = static_cast<time_t>(count / 1000);
      hdr.ts.tv_usec = static_cast<suseconds_t>(count % 1000 * 1000);
      hdr.caplen = hdr.len = static_cast<bpf_u_int32>(b.frame.size());
      pcap_dump(reinterpret_cast<u_char*>(dumper), &hdr, b.frame.data());
      if (!raw_dir.empty()) {
        const std::string name = b.name.empty() ? std::to_string(count) : b.name;
        std::ofstream raw(std::filesystem::path(raw_dir) / name, std::ios::binary);
        raw.write(reinterpret_cast<const char*>(b.frame.data()),
                  static_cast<std::streamsize>(b.frame.size()));
        if (!raw) throw std::runtime_error("cannot write raw file " + name);
      }
      ++count;
    } catch (const std::exception& e) {
      std::cerr << "wire_gen: line " << lineno << ": " << e.what() << "\n";
      status = 1;
      break;
    }
  }
  pcap_dump_close(dumper);
  pcap_close(dead);
  return status;
}

}  // namespace
}  // namespace droce

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string raw_dir;
  if (args.size() >= 2 && args[0] == "--raw-dir") {
    raw_dir = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  if (args.size() != 2) {
    std::cerr << "usage: wire_gen [--raw-dir DIR] SPECS.jsonl OUT.pcap\n";
    return 2;
  }
  return droce::run(args[0], args[1], raw_dir);
}
