// droce-endpoint's configuration: the regions and QPs it serves, from a TOML
// file ([[mr]], [[qp]]; docs/ENGINE.md "droce-endpoint") or from flags (one
// MR and one QP), and the rules they obey before a port exists: keys,
// ranges, the IBA's constraints on P_Key and max_dest_rd_atomic, a port's
// IP interface from its QPs. DPDK-free: the engine's QpSpec is a plain
// struct here, nothing of the engine runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "droce/config_error.h"
#include "droce/endpoint/ip_interface.h"
#include "droce/engine/engine.h"
#include "droce/options/multipath.h"
#include "droce/options/values.h"
#include "droce/transport/qp.h"

namespace droce::endpoint_config {

// What a region holds when it is registered.
enum class Fill : uint8_t { kZero, kCounter, kByte, kFile };

struct MrDef {
  std::string where;  // "mr[0]" or "--mr-size", for messages
  uint32_t port = 0;
  uint64_t length = 0;
  std::optional<uint32_t> key;
  uint64_t iova = 0;
  Fill fill = Fill::kZero;
  uint8_t fill_byte = 0;
  std::string fill_option;  // "mr[0].fill" or "--mr-fill", for messages
  std::string fill_file;    // kFile: the bytes from the region's first VA on
  std::string dump;         // written with the region's bytes at exit
  std::string dump_option;
  uint32_t access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
};

struct QpDef {
  std::string where;
  uint32_t port = 0;
  engine::QpSpec spec;
  transport::QpAttr attr;
  std::optional<wire::MacAddress> local_mac;
  bool have_local_ip = false, have_peer_ip = false;
  // Receive WQEs kept posted: `count` buffers of `length` bytes at
  // `offset`, `offset + length`, ... in the MR with key `mr`.
  uint32_t recv_count = 0;
  uint32_t recv_length = 0;
  uint64_t recv_offset = 0;
  std::optional<uint32_t> recv_mr;
};

// The flags that define one MR and one QP, as the user spelled them.
struct FlagDefs {
  std::string qpn, peer_qpn, rq_psn = "0", sq_psn = "0", local_mac, peer_mac, local_ip,
      peer_ip, qp_type = "rc", cc = "none";
  uint64_t mtu = 1024;
  options::PacketMarks marks{26};  // --dscp ... --pcp
  options::MultipathText multipath;  // --recovery ... --reorder-tolerance
  std::vector<std::string> cc_params;
  std::string mr_key, mr_size, mr_fill = "zero", mr_iova = "0", mr_dump;
  uint32_t recv_wqes = 0, recv_size = 4096;
};

struct Definitions {
  std::vector<MrDef> mrs;
  std::vector<QpDef> qps;
};

// A TOML file's [[mr]] and [[qp]] tables appended to `d`. ConfigError names
// the key ("qp[1].pkey") or the file position of a syntax error.
void load_config(const std::string& file, Definitions& d);
void load_config_text(std::string_view text, const std::string& source, Definitions& d);
// The flags' MR and QP, if any, appended to `d`.
void flags_to_defs(const FlagDefs& f, Definitions& d);

// The region's first bytes as `d` says (`addr` holds `length` bytes at VA
// `iova`; it is zero already). kCounter fills by VA, not by offset: a peer
// that READs VA v gets v mod 256 whatever the region's iova.
void fill_region(uint8_t* addr, uint64_t length, uint64_t iova, const MrDef& d);

// Port `index`'s IP interface: `addresses` (--address) and its QPs' local
// IPs, in the VLAN of its first tagged QP, with the MAC its QPs send from
// (their local_mac; all zero: the port's own).
endpoint::InterfaceConfig port_interface(uint32_t index, const std::vector<wire::IpAddress>& addresses,
                                         const std::vector<QpDef>& qps);

// Completes a QP's path once its port is known: the source MAC (its
// local_mac or the port's), the UDP source port (RoCEv2 entropy), and the
// address rules (a local IP always, a peer IP unless UD, one family).
void finish_path(QpDef& q, const wire::MacAddress& port_mac);

}  // namespace droce::endpoint_config
