// A simulation scenario: topology (hosts, switches, links), switch and link
// parameters, the workload (flows) and run options, fully resolved from a
// TOML file (docs/SIM.md lists every key). Generated topologies (incast,
// leaf-spine) are expanded here, so the runner only ever sees explicit
// nodes, links and flows.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "droce/cc/params.h"
#include "droce/fabric/link.h"
#include "droce/fabric/switch.h"
#include "droce/transport/qp.h"

namespace droce::sim {

// A mistake in a scenario file. what() is "file:line:col: key: problem",
// ready to print; apps exit with code 2 (docs/DESIGN.md "Error handling").
class ScenarioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Opcode : uint8_t { kWrite, kSend, kRead };
std::string_view to_string(Opcode op);

struct HostSpec {
  std::string name;
  uint64_t rate_bps = 0;  // NIC port rate: the rate of the host's link
  int line = 0;           // source line, for messages
};

struct SwitchSpec {
  std::string name;
  // Ports are added by links in file order; these apply to each of them.
  fabric::EcnConfig ecn{};
  bool ecn_auto = true;  // ECN thresholds scaled with each port's rate
  fabric::SchedulerConfig scheduler = fabric::SchedulerConfig::strict_priority();
  uint64_t port_buffer_bytes = 1 << 20;  // BufferMode::kPerPort
  fabric::SwitchConfig cfg;              // buffer, pfc, int_cfg, seed, ...
};

// A time the cable is down: from `from_ns` until `until_ns` (kNever: to
// the end of the run). Both directions at once, as when a cable is pulled.
struct DownInterval {
  uint64_t from_ns = 0;
  uint64_t until_ns = fabric::kNever;
};

// One full-duplex cable; both directions get the same delay and
// impairments (each direction its own seeded random stream).
struct LinkSpec {
  std::string a, b;  // node names
  uint64_t rate_bps = 100 * fabric::kGbps;
  fabric::LinkConfig link{};
  // Link down/up ([[links]] down): in time order, each ending before the
  // next begins.
  std::vector<DownInterval> down;
  int line = 0;      // source line, for messages
};

struct FlowSpec {
  std::string name;
  std::string src, dst;  // data moves src -> dst (READ: dst is the requester)
  uint64_t bytes = 1 << 20;
  uint64_t message_bytes = 0;     // 0: one message of `bytes`
  uint32_t max_outstanding = 16;  // messages posted but not completed
  uint64_t start_ns = 0;
  Opcode opcode = Opcode::kWrite;
  std::string cc = "none";
  cc::ParamMap cc_params;
  transport::Recovery recovery = transport::Recovery::kGoBackN;
  uint32_t mtu = 4096;
  uint8_t dscp = 26;  // class 3
  uint8_t timeout = 14;  // IBA local ACK timeout code
  uint8_t retry_cnt = 7;
  // Responder ACK coalescing (QpAttr::ack_every_n): 0 keeps the transport's
  // AckReq-only ACKs, 1 ACKs every packet (what HPCC's INT feedback needs).
  uint32_t ack_every_n = 0;
  // UDP source ports of the flow's request packets (transport/entropy.h)
  // and, for selective repeat, the reordering it tolerates before it
  // resends a hole (QpAttr::sr_reorder_tolerance_pkts).
  transport::EntropyConfig entropy;
  uint32_t reorder_tolerance = 0;
  // Selective repeat's time-based loss detection, 0 = off
  // (QpAttr::sr_reorder_window_ns, RACK).
  uint64_t reorder_window_ns = 0;
  // With a reorder window: its adaptive floor, 0 = a fixed window
  // (QpAttr::sr_reorder_window_min_ns).
  uint64_t reorder_window_min_ns = 0;
  // With a reorder window: the tail loss probe (QpAttr::sr_tail_probe).
  bool tail_probe = false;
  // Every RDMA WRITE packet a WRITE ONLY with its own RETH
  // (QpAttr::write_reth_every_packet).
  bool reth_every_packet = false;
  uint64_t rto_low_ns = 100'000;  // selective repeat's RTO_low (IRN 3.1)
  uint32_t sack_window = 1024;    // PSNs selective repeat tracks (QpAttr)
  uint32_t rto_low_threshold = 3; // RTO_low only with at most this many in flight
  bool verify = true;    // check destination memory at the end
  // Whether payload bytes move (docs/SIM.md, "Virtual payload"). Virtual:
  // the flow's memory regions are not read or written for payload
  // (MemoryRegion::virtual_payload); frames keep their length and a valid
  // ICRC over unspecified payload bytes, and every output is the same.
  // Auto, the default, is real for a verified flow and virtual otherwise:
  // without the check nothing ever reads the bytes that arrive. Virtual
  // with verify is refused.
  enum class Payload : uint8_t { kAuto, kReal, kVirtual };
  Payload payload = Payload::kAuto;
  bool virtual_payload() const {
    return payload == Payload::kVirtual || (payload == Payload::kAuto && !verify);
  }
  int line = 0;          // source line, for messages
};

struct RunSpec {
  uint64_t duration_ns = 10'000'000;  // virtual-time limit
  uint64_t seed = 1;
  uint64_t csv_interval_ns = 10'000;  // 0: no time series
  bool stop_when_done = true;         // end as soon as every flow completed
  // Routes are recomputed over the links that are up this long after a
  // link goes down or comes back (a routing protocol converging); none:
  // static routes, only the switch at a down link avoids it.
  std::optional<uint64_t> reconverge_ns;
  // Hosts learn their peers' MACs by ARP (their endpoints own their IPs and
  // announce them at time 0) instead of being given them; switches flood
  // over host links and a spanning tree of the switches (docs/SIM.md).
  bool resolve_macs = false;
};

// [collective]: a collective operation over some of the hosts, run by
// droce-sim after the scenario is built (collective.h). Its QPs take the
// per-QP keys of [flow].
struct CollectiveSpec {
  enum class Pattern : uint8_t { kRing, kAllToAll };
  Pattern pattern = Pattern::kRing;
  uint64_t bytes = 1 << 20;   // per rank: the buffer reduced / exchanged
  uint32_t iterations = 1;    // back to back
  std::vector<uint32_t> ranks;  // host index of each rank (default: all, in order)
  // all_to_all: transfers each rank keeps in flight, each over a connection
  // of its own made when it is posted and closed when it completes; 0: all
  // at once, over one connection per rank pair kept across iterations.
  uint32_t window = 0;
  // ring: what lets rank r+1 start its next step once rank r's WRITE of
  // the step before is in: its completion at r, the sender (the WRITE's
  // ACK came back), or the data's arrival at r+1, the receiver (a WRITE
  // with immediate, whose receive completion r+1 sees, as NCCL's ring
  // proceeds on the data's flag). Split over processes, only the receiver
  // can: it is the one host that learns it.
  enum class Trigger : uint8_t { kSender, kReceiver };
  Trigger trigger = Trigger::kSender;
  // ring: each step's chunk moves as this many WRITEs, each forwarded as
  // soon as its own input is in (NCCL moves a chunk through its ring in
  // slices the same way), so one slice's late tail holds back only the
  // slices that need it. 1: one WRITE a step.
  uint32_t slices = 1;
  FlowSpec qp;                // [flow]'s per-QP keys
};
std::string_view to_string(CollectiveSpec::Pattern p);

struct Scenario {
  std::string file;  // for messages and reports
  RunSpec run;
  std::vector<HostSpec> hosts;
  std::vector<SwitchSpec> switches;
  std::vector<LinkSpec> links;
  std::vector<FlowSpec> flows;
  std::optional<CollectiveSpec> collective;
  bool ecmp = true;

  // -1 when there is no such node.
  int host_index(std::string_view name) const;
  int switch_index(std::string_view name) const;
  // Indexes the hosts and switches by name, so that the two lookups above
  // take constant time: every link, flow and check looks its nodes up, and
  // searching the names was a third of a 1024-host run's set-up.
  // parse_scenario does it once the nodes are read; nodes added after that
  // are found by a search until this is called again.
  void index_names();

  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using NameIndex = std::unordered_map<std::string, int, NameHash, std::equal_to<>>;
  NameIndex host_names, switch_names;  // made by index_names
};

// Throws ScenarioError (file, line, key) on any mistake: unknown key,
// wrong type, value out of range, link to a missing node, a loop without
// ECMP, a flow between missing hosts, an unknown CC algorithm or parameter.
Scenario load_scenario(const std::string& path);
// Same from text; `name` stands for the file name in messages.
Scenario parse_scenario(std::string_view text, const std::string& name = "<scenario>");

// Value parsers shared with the command line ("100G", "1us", "4KiB").
// Return false on a malformed value.
bool parse_rate_bps(std::string_view s, uint64_t& out);
bool parse_time_ns(std::string_view s, uint64_t& out);
bool parse_bytes(std::string_view s, uint64_t& out);

}  // namespace droce::sim
