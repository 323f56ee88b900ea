// droce-endpoint: a RoCEv2 target on DPDK ports. QPs and MRs come from a
// TOML config file and/or flags; it answers WRITE/SEND/READ/atomics from a
// peer droce or from replayed packets (net_pcap), keeps each QP's receive
// queue full, and reports counters on exit and on DPDK telemetry. Regions
// can be loaded from and dumped to files, completions written as JSON
// lines. See docs/ENGINE.md.
//
//   droce-endpoint [EAL options] -- [--config FILE] [options]
//
// Exit codes: 0 ok, 1 runtime failure (mbuf leak), 2 bad configuration.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
#include <unordered_map>
#include <toml++/toml.h>

#include "app_options.h"
#include "droce/engine/app_main.h"
#include "droce/engine/engine.h"
#include "droce/options/values.h"
#include "droce/wire/ethernet.h"
#include "droce/cc/registry.h"
#include "droce/transport/requester.h"

namespace {

using namespace droce;
using droce::ConfigError;

std::atomic<bool> g_quit{false};
void on_signal(int) { g_quit.store(true); }

enum class Fill : uint8_t { kZero, kCounter, kByte, kFile };

struct MrDef {
  std::string where;  // "mr[0]" or "--mr-*", for messages
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
  // Receive WQEs posted at start: `count` buffers of `length` bytes at
  // `offset`, `offset + length`, ... in the MR with key `mr`.
  uint32_t recv_count = 0;
  uint32_t recv_length = 0;
  uint64_t recv_offset = 0;
  std::optional<uint32_t> recv_mr;
};

struct Options {
  std::string config;
  std::vector<std::string> ports;
  std::vector<std::string> addresses;
  std::vector<std::string> pings;
  double duration_s = 0;
  uint64_t exit_when_idle_ms = 0;
  double stats_interval_s = 0;
  std::string capture;
  std::string json_out;
  std::string completions;
  uint32_t idle_sleep_us = 0;
  double port_rate_gbps = 0;
  uint32_t mbufs = 0;
  uint16_t burst = 32;
  uint16_t rx_desc = 1024;
  uint16_t tx_desc = 1024;
  uint32_t shards = 1;
  std::string shard_tx = "auto";
  std::string shard_rx = "auto";
  // One QP / MR from flags.
  std::string qpn, peer_qpn, rq_psn = "0", sq_psn = "0", local_mac, peer_mac, local_ip,
      peer_ip, qp_type = "rc", cc = "none";
  uint64_t mtu = 1024;
  options::PacketMarks marks{26};  // --dscp ... --pcp
  std::vector<std::string> cc_params;
  std::string mr_key, mr_size, mr_fill = "zero", mr_iova = "0", mr_dump;
  uint32_t recv_wqes = 0, recv_size = 4096;
};

// ---- config file ------------------------------------------------------------

std::string key_path(const std::string& where, std::string_view key) {
  return fmt::format("{}.{}", where, key);
}

void check_keys(const toml::table& t, const std::string& where,
                std::initializer_list<std::string_view> allowed) {
  for (auto&& [k, v] : t) {
    bool ok = false;
    for (auto a : allowed) ok |= (k.str() == a);
    if (!ok) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      throw ConfigError(key_path(where, k.str()),
                        fmt::format("unknown key; accepted: {}", list));
    }
  }
}

uint64_t get_uint(const toml::table& t, const std::string& where, std::string_view key,
                  uint64_t def, uint64_t max) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  if (auto i = n->value<int64_t>()) {
    if (*i < 0 || static_cast<uint64_t>(*i) > max)
      throw ConfigError(key_path(where, key),
                        fmt::format("{} is out of range 0..{:#x}", *i, max));
    return static_cast<uint64_t>(*i);
  }
  if (auto s = n->value<std::string>())
    return options::parse_uint(key_path(where, key), *s, max);
  throw ConfigError(key_path(where, key), "expected an unsigned integer");
}

std::optional<std::string> get_str(const toml::table& t, const std::string& where,
                                   std::string_view key) {
  const toml::node* n = t.get(key);
  if (!n) return std::nullopt;
  if (auto s = n->value<std::string>()) return *s;
  throw ConfigError(key_path(where, key), "expected a string");
}

void parse_fill(const std::string& option, const std::string& text, MrDef& m) {
  m.fill_option = option;
  if (text == "zero") {
    m.fill = Fill::kZero;
  } else if (text == "counter") {
    m.fill = Fill::kCounter;
  } else if (text.rfind("byte:", 0) == 0) {
    m.fill_byte = static_cast<uint8_t>(options::parse_uint(option, text.substr(5), 0xFF));
    m.fill = Fill::kByte;
  } else if (text.rfind("file:", 0) == 0 && text.size() > 5) {
    m.fill_file = text.substr(5);
    m.fill = Fill::kFile;
  } else {
    throw ConfigError(option, fmt::format("'{}' is not a fill pattern: zero, counter "
                                          "(byte at VA i = i mod 256), byte:<value> or "
                                          "file:<path>",
                                          text));
  }
}

uint32_t parse_access(const std::string& option, const toml::array& a) {
  uint32_t access = 0;
  for (auto&& n : a) {
    auto s = n.value<std::string>();
    if (!s) throw ConfigError(option, "expected an array of strings");
    if (*s == "local_write") access |= IBV_ACCESS_LOCAL_WRITE;
    else if (*s == "remote_write") access |= IBV_ACCESS_REMOTE_WRITE;
    else if (*s == "remote_read") access |= IBV_ACCESS_REMOTE_READ;
    else if (*s == "remote_atomic") access |= IBV_ACCESS_REMOTE_ATOMIC;
    else
      throw ConfigError(option, fmt::format("'{}' is not an access flag: local_write, "
                                            "remote_write, remote_read, remote_atomic",
                                            *s));
  }
  return access;
}

void fill_path(QpDef& q, const toml::table& t, const std::string& w) {
  auto& path = q.attr.path;
  if (auto s = get_str(t, w, "local_mac")) q.local_mac = options::parse_mac(key_path(w, "local_mac"), *s);
  if (auto s = get_str(t, w, "peer_mac")) {
    path.dst_mac = options::parse_mac(key_path(w, "peer_mac"), *s);
  }
  if (auto s = get_str(t, w, "local_ip")) {
    path.src_ip = options::parse_ip(key_path(w, "local_ip"), *s);
    q.have_local_ip = true;
  }
  if (auto s = get_str(t, w, "peer_ip")) {
    path.dst_ip = options::parse_ip(key_path(w, "peer_ip"), *s);
    q.have_peer_ip = true;
  }
  // The same marks, defaults and rules as the --dscp ... --pcp flags.
  options::PacketMarks marks{static_cast<uint32_t>(get_uint(t, w, "dscp", 26, 63))};
  if (auto s = get_str(t, w, "ecn")) marks.ecn = *s;
  if (t.contains("vlan")) marks.vlan = static_cast<uint32_t>(get_uint(t, w, "vlan", 0, 4095));
  marks.pcp = static_cast<uint32_t>(get_uint(t, w, "pcp", 0, 7));
  options::apply_marks(marks, path, key_path(w, "ecn"));
}

void load_config(const std::string& file, std::vector<MrDef>& mrs, std::vector<QpDef>& qps) {
  toml::table root;
  try {
    root = toml::parse_file(file);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw ConfigError("config", fmt::format("{}:{}:{}: {}", file, b.line, b.column,
                                            e.description()));
  }
  check_keys(root, "config", {"mr", "qp"});
  if (const toml::array* a = root["mr"].as_array()) {
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string w = fmt::format("mr[{}]", i);
      const toml::table* t = a->get(i)->as_table();
      if (!t) throw ConfigError(w, "expected a table ([[mr]])");
      check_keys(*t, w, {"port", "length", "key", "iova", "fill", "dump", "access"});
      MrDef m;
      m.where = w;
      m.port = static_cast<uint32_t>(get_uint(*t, w, "port", 0, 1023));
      if (!t->contains("length")) throw ConfigError(key_path(w, "length"), "missing");
      m.length = get_uint(*t, w, "length", 0, UINT64_MAX >> 1);
      if (t->contains("key")) m.key = static_cast<uint32_t>(get_uint(*t, w, "key", 0, UINT32_MAX));
      m.iova = get_uint(*t, w, "iova", 0, UINT64_MAX >> 1);
      if (auto s = get_str(*t, w, "fill")) parse_fill(key_path(w, "fill"), *s, m);
      if (auto s = get_str(*t, w, "dump")) {
        m.dump = *s;
        m.dump_option = key_path(w, "dump");
      }
      if (const toml::node* n = t->get("access")) {
        const toml::array* acc = n->as_array();
        if (!acc) throw ConfigError(key_path(w, "access"), "expected an array of strings");
        m.access = parse_access(key_path(w, "access"), *acc);
      }
      mrs.push_back(m);
    }
  } else if (root.contains("mr")) {
    throw ConfigError("mr", "expected an array of tables ([[mr]])");
  }
  if (const toml::array* a = root["qp"].as_array()) {
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string w = fmt::format("qp[{}]", i);
      const toml::table* t = a->get(i)->as_table();
      if (!t) throw ConfigError(w, "expected a table ([[qp]])");
      check_keys(*t, w,
                 {"port", "qpn", "peer_qpn", "type", "rq_psn", "sq_psn", "mtu", "local_mac",
                  "peer_mac", "local_ip", "peer_ip", "dscp", "ecn", "vlan", "pcp", "cc",
                  "cc_params", "qkey", "max_send_wr", "max_recv_wr", "recv",
                  "selective_repeat", "ack_every_n", "min_rnr_timer", "lcore", "access",
                  "max_dest_rd_atomic", "pkey", "honour_credits"});
      QpDef q;
      q.where = w;
      q.port = static_cast<uint32_t>(get_uint(*t, w, "port", 0, 1023));
      if (!t->contains("qpn")) throw ConfigError(key_path(w, "qpn"), "missing");
      if (t->contains("lcore"))
        q.spec.lcore = static_cast<int>(get_uint(*t, w, "lcore", 0, 1023));
      q.spec.qpn = static_cast<uint32_t>(get_uint(*t, w, "qpn", 0, UINT32_MAX));
      if (auto s = get_str(*t, w, "type")) q.spec.type = options::parse_qp_type(key_path(w, "type"), *s);
      q.spec.caps.max_send_wr = static_cast<uint32_t>(get_uint(*t, w, "max_send_wr", 256, 1u << 20));
      q.spec.caps.max_recv_wr = static_cast<uint32_t>(get_uint(*t, w, "max_recv_wr", 256, 1u << 20));
      if (auto s = get_str(*t, w, "cc")) q.spec.cc = *s;
      if (const toml::node* n = t->get("cc_params")) {
        const toml::table* p = n->as_table();
        if (!p) throw ConfigError(key_path(w, "cc_params"), "expected a table");
        for (auto&& [k, v] : *p) {
          std::string val;
          if (auto s = v.value<std::string>()) val = *s;
          else if (auto d = v.value<double>()) val = fmt::format("{}", *d);
          else throw ConfigError(key_path(w, "cc_params." + std::string(k.str())), "expected a number or string");
          if (auto i = v.value<int64_t>(); i && v.is_integer()) val = std::to_string(*i);
          q.spec.cc_params[std::string(k.str())] = val;
        }
      }
      auto& at = q.attr;
      at.dest_qpn = static_cast<uint32_t>(get_uint(*t, w, "peer_qpn", 0, 0xFFFFFF));
      at.rq_psn = static_cast<uint32_t>(get_uint(*t, w, "rq_psn", 0, 0xFFFFFF));
      at.sq_psn = static_cast<uint32_t>(get_uint(*t, w, "sq_psn", 0, 0xFFFFFF));
      at.path_mtu = options::parse_mtu(key_path(w, "mtu"), get_uint(*t, w, "mtu", 1024, 1u << 20));
      at.qkey = static_cast<uint32_t>(get_uint(*t, w, "qkey", 0, UINT32_MAX));
      at.ack_every_n = static_cast<uint32_t>(get_uint(*t, w, "ack_every_n", 0, 1u << 20));
      at.min_rnr_timer = static_cast<uint8_t>(get_uint(*t, w, "min_rnr_timer", 12, 31));
      // The remote operations the QP accepts, checked before the region's
      // own access (IBA 9.7.5.1.3 / 10.6.3; a refusal is a remote access
      // error NAK); local_write is a region flag and means nothing here.
      if (const toml::node* n = t->get("access")) {
        const toml::array* acc = n->as_array();
        if (!acc) throw ConfigError(key_path(w, "access"), "expected an array of strings");
        at.qp_access_flags = parse_access(key_path(w, "access"), *acc) & ~IBV_ACCESS_LOCAL_WRITE;
      }
      // READs and atomics the responder holds at once; one more is an
      // invalid request NAK (IBA 9.7.5.2). The transport takes at least 1.
      at.max_dest_rd_atomic = static_cast<uint8_t>(
          get_uint(*t, w, "max_dest_rd_atomic", at.max_dest_rd_atomic, 255));
      if (at.max_dest_rd_atomic == 0)
        throw ConfigError(key_path(w, "max_dest_rd_atomic"), "0 is out of range 1..255");
      // The BTH P_Key it sends and accepts (IBA 10.9): partition 0 (the low
      // 15 bits) is invalid, a QP there could talk to no one.
      at.pkey = static_cast<uint16_t>(get_uint(*t, w, "pkey", 0xFFFF, 0xFFFF));
      if ((at.pkey & 0x7FFF) == 0)
        throw ConfigError(key_path(w, "pkey"),
                          fmt::format("{:#x} is in the invalid partition 0 (IBA 10.9)",
                                      at.pkey));
      if (const toml::node* n = t->get("selective_repeat")) {
        auto b = n->value<bool>();
        if (!b) throw ConfigError(key_path(w, "selective_repeat"), "expected true or false");
        at.recovery = *b ? transport::Recovery::kSelectiveRepeat : transport::Recovery::kGoBackN;
      }
      // End-to-end credits (IBA 9.7.7.2): the QP's own SENDs and WRITEs
      // with immediate wait for the peer's credits.
      if (const toml::node* n = t->get("honour_credits")) {
        auto b = n->value<bool>();
        if (!b) throw ConfigError(key_path(w, "honour_credits"), "expected true or false");
        at.honour_credits = *b;
      }
      fill_path(q, *t, w);
      if (const toml::node* n = t->get("recv")) {
        const toml::table* r = n->as_table();
        const std::string rw = key_path(w, "recv");
        if (!r) throw ConfigError(rw, "expected a table {count, length, mr, offset}");
        check_keys(*r, rw, {"count", "length", "mr", "offset"});
        q.recv_count = static_cast<uint32_t>(get_uint(*r, rw, "count", 0, 1u << 20));
        q.recv_length = static_cast<uint32_t>(get_uint(*r, rw, "length", 4096, UINT32_MAX));
        q.recv_offset = get_uint(*r, rw, "offset", 0, UINT64_MAX >> 1);
        if (!r->contains("mr")) throw ConfigError(key_path(rw, "mr"), "missing: the key of the MR");
        q.recv_mr = static_cast<uint32_t>(get_uint(*r, rw, "mr", 0, UINT32_MAX));
      }
      qps.push_back(std::move(q));
    }
  } else if (root.contains("qp")) {
    throw ConfigError("qp", "expected an array of tables ([[qp]])");
  }
}

// ---- flags ------------------------------------------------------------------

void flags_to_defs(const Options& o, std::vector<MrDef>& mrs, std::vector<QpDef>& qps) {
  if (!o.mr_size.empty()) {
    MrDef m;
    m.where = "--mr-size";
    m.length = options::parse_uint("--mr-size", o.mr_size, UINT64_MAX >> 1);
    if (!o.mr_key.empty())
      m.key = static_cast<uint32_t>(options::parse_uint("--mr-key", o.mr_key, UINT32_MAX));
    m.iova = options::parse_uint("--mr-iova", o.mr_iova, UINT64_MAX >> 1);
    parse_fill("--mr-fill", o.mr_fill, m);
    m.dump = o.mr_dump;
    m.dump_option = "--mr-dump";
    mrs.push_back(m);
  } else if (!o.mr_key.empty()) {
    throw ConfigError("--mr-key", "needs --mr-size");
  } else if (!o.mr_dump.empty()) {
    throw ConfigError("--mr-dump", "needs --mr-size");
  }
  if (o.qpn.empty()) {
    if (!o.peer_qpn.empty()) throw ConfigError("--peer-qpn", "needs --qpn");
    return;
  }
  QpDef q;
  q.where = "--qpn";
  q.spec.qpn = static_cast<uint32_t>(options::parse_uint("--qpn", o.qpn, UINT32_MAX));
  q.spec.type = options::parse_qp_type("--qp-type", o.qp_type);
  q.spec.cc = o.cc;
  for (const std::string& kv : o.cc_params) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError("--cc-param", fmt::format("'{}' is not name=value", kv));
    q.spec.cc_params[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto& at = q.attr;
  if (!o.peer_qpn.empty())
    at.dest_qpn = static_cast<uint32_t>(options::parse_uint("--peer-qpn", o.peer_qpn, 0xFFFFFF));
  at.rq_psn = static_cast<uint32_t>(options::parse_uint("--rq-psn", o.rq_psn, 0xFFFFFF));
  at.sq_psn = static_cast<uint32_t>(options::parse_uint("--sq-psn", o.sq_psn, 0xFFFFFF));
  at.path_mtu = options::parse_mtu("--mtu", o.mtu);
  if (!o.local_mac.empty()) q.local_mac = options::parse_mac("--local-mac", o.local_mac);
  if (!o.peer_mac.empty()) {
    at.path.dst_mac = options::parse_mac("--peer-mac", o.peer_mac);
  }
  if (!o.local_ip.empty()) {
    at.path.src_ip = options::parse_ip("--local-ip", o.local_ip);
    q.have_local_ip = true;
  }
  if (!o.peer_ip.empty()) {
    at.path.dst_ip = options::parse_ip("--peer-ip", o.peer_ip);
    q.have_peer_ip = true;
  }
  options::apply_marks(o.marks, at.path);
  q.recv_count = o.recv_wqes;
  q.recv_length = o.recv_size;
  if (o.recv_wqes) {
    if (mrs.empty()) throw ConfigError("--recv-wqes", "needs an MR (--mr-size)");
    q.recv_mr = mrs.back().key;  // resolved after registration if unset
  }
  qps.push_back(std::move(q));
}

void fill_memory(const engine::MrInfo& mr, const MrDef& d) {
  switch (d.fill) {
    case Fill::kZero: break;  // rte_zmalloc
    case Fill::kCounter:
      // By VA, not by offset: a peer that READs VA v gets v mod 256 whatever
      // the region's iova, so it can check data without knowing the layout.
      for (size_t i = 0; i < mr.length; ++i) mr.addr[i] = static_cast<uint8_t>(mr.iova + i);
      break;
    case Fill::kByte: std::memset(mr.addr, d.fill_byte, mr.length); break;
    case Fill::kFile: {
      // The file's bytes from the region's first VA; a shorter file leaves
      // the rest zero, a longer one is refused rather than cut.
      std::ifstream f(d.fill_file, std::ios::binary);
      if (!f)
        throw ConfigError(d.fill_option, fmt::format("cannot read {}: {}", d.fill_file,
                                                     std::strerror(errno)));
      f.read(reinterpret_cast<char*>(mr.addr), static_cast<std::streamsize>(mr.length));
      if (f.bad())
        throw ConfigError(d.fill_option, fmt::format("cannot read {}", d.fill_file));
      if (f.gcount() == static_cast<std::streamsize>(mr.length) && f.peek() != EOF)
        throw ConfigError(d.fill_option, fmt::format("{} is longer than the region ({} bytes)",
                                                     d.fill_file, mr.length));
      break;
    }
  }
}

// A region's bytes written to a file at exit. The file is created when the
// region is, so a path that cannot be written is a configuration error
// (exit 2) before any traffic, not data lost at the end.
struct MrDump {
  engine::MrInfo mr;
  std::string path;
  std::FILE* f = nullptr;
};

// Each QP's receive queue as a ring of `count` buffers: WQE i (wr_id i)
// is the buffer at offset + i * length, and goes back on the queue as soon
// as its completion is taken, so the queue stays full and a peer is RNR
// NAKed (IBA 9.7.5.2.8) only while every buffer waits to be taken, not
// forever after `count` SENDs.
struct RecvRing {
  engine::QpHandle qp;
  uint64_t first_va = 0;  // a local VA is in the MR's iova space (mr.h)
  uint32_t length = 0, lkey = 0, count = 0;
  std::vector<uint32_t> pending;  // refused by a full receive queue

  void post(engine::Engine& eng, uint32_t i) {
    transport::Sge sge{first_va + uint64_t{i} * length, length, lkey};
    transport::RecvWr wr;
    wr.wr_id = i;
    wr.sg_list = std::span(&sge, 1);
    const int rc = eng.post_recv(qp, std::span(&wr, 1));
    if (rc == ENOMEM) pending.push_back(i);
    else if (rc != 0)
      throw std::runtime_error(fmt::format("post_recv on QP {:#x} refused: {}", qp.qpn,
                                           std::strerror(rc)));
  }
};

class RecvRings {
 public:
  RecvRing& add(engine::QpHandle qp, const engine::MrInfo& mr, uint64_t offset,
                uint32_t length, uint32_t count) {
    RecvRing& r = rings_[key(qp.port, qp.qpn)];
    r.qp = qp;
    r.first_va = mr.iova + offset;
    r.length = length;
    r.lkey = mr.lkey;
    r.count = count;
    return r;
  }

  // A receive completion gives its WQE back. Not a flushed one: its QP is
  // in the error state (IBA 10.3.1, 11.4.2.1), where a new WQE would only
  // be flushed in turn; an error completion that moved the QP to the error
  // state (IBA 9.9.3) is reposted once and comes back flushed.
  void consumed(engine::PortIndex port, const transport::WorkCompletion& wc) {
    if (!(wc.opcode & IBV_WC_RECV) || wc.status == IBV_WC_WR_FLUSH_ERR) return;
    auto it = rings_.find(key(port, wc.qp_num));
    if (it == rings_.end() || wc.wr_id >= it->second.count) return;
    to_post_.emplace_back(&it->second, static_cast<uint32_t>(wc.wr_id));
  }

  // Posts what completions gave back and what a full receive queue
  // refused before.
  void retry(engine::Engine& eng) {
    for (auto& [k, r] : rings_) {
      std::vector<uint32_t> again;
      again.swap(r.pending);
      for (uint32_t i : again) r.post(eng, i);
    }
    for (auto [r, i] : to_post_) r->post(eng, i);
    to_post_.clear();
  }

 private:
  static uint64_t key(engine::PortIndex port, uint32_t qpn) {
    return (uint64_t{port} << 32) | qpn;
  }
  std::unordered_map<uint64_t, RecvRing> rings_;
  std::vector<std::pair<RecvRing*, uint32_t>> to_post_;
};

// ---- completions written out ------------------------------------------------

// Names are the libibverbs enumerators without IBV_WC_, lower case, so a
// line reads like the ibv_wc a verbs application would have polled.
const char* wc_status_name(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "loc_len_err";
    case IBV_WC_LOC_QP_OP_ERR: return "loc_qp_op_err";
    case IBV_WC_LOC_EEC_OP_ERR: return "loc_eec_op_err";
    case IBV_WC_LOC_PROT_ERR: return "loc_prot_err";
    case IBV_WC_WR_FLUSH_ERR: return "wr_flush_err";
    case IBV_WC_MW_BIND_ERR: return "mw_bind_err";
    case IBV_WC_BAD_RESP_ERR: return "bad_resp_err";
    case IBV_WC_LOC_ACCESS_ERR: return "loc_access_err";
    case IBV_WC_REM_INV_REQ_ERR: return "rem_inv_req_err";
    case IBV_WC_REM_ACCESS_ERR: return "rem_access_err";
    case IBV_WC_REM_OP_ERR: return "rem_op_err";
    case IBV_WC_RETRY_EXC_ERR: return "retry_exc_err";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "rnr_retry_exc_err";
    case IBV_WC_LOC_RDD_VIOL_ERR: return "loc_rdd_viol_err";
    case IBV_WC_REM_INV_RD_REQ_ERR: return "rem_inv_rd_req_err";
    case IBV_WC_REM_ABORT_ERR: return "rem_abort_err";
    case IBV_WC_INV_EECN_ERR: return "inv_eecn_err";
    case IBV_WC_INV_EEC_STATE_ERR: return "inv_eec_state_err";
    case IBV_WC_FATAL_ERR: return "fatal_err";
    case IBV_WC_RESP_TIMEOUT_ERR: return "resp_timeout_err";
    case IBV_WC_GENERAL_ERR: return "general_err";
    default: return "unknown";
  }
}

const char* wc_opcode_name(ibv_wc_opcode op) {
  switch (op) {
    case IBV_WC_SEND: return "send";
    case IBV_WC_RDMA_WRITE: return "rdma_write";
    case IBV_WC_RDMA_READ: return "rdma_read";
    case IBV_WC_COMP_SWAP: return "comp_swap";
    case IBV_WC_FETCH_ADD: return "fetch_add";
    case IBV_WC_BIND_MW: return "bind_mw";
    case IBV_WC_LOCAL_INV: return "local_inv";
    case IBV_WC_RECV: return "recv";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "recv_rdma_with_imm";
    default: return "unknown";
  }
}

// One JSON object per line (JSON Lines), flushed after each batch so the
// file can be followed while the endpoint runs.
class CompletionLog {
 public:
  explicit CompletionLog(const std::string& path) {
    if (path.empty()) return;
    f_ = std::fopen(path.c_str(), "w");
    if (!f_)
      throw ConfigError("--completions",
                        fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
  ~CompletionLog() {
    if (f_) std::fclose(f_);
  }
  CompletionLog(const CompletionLog&) = delete;
  CompletionLog& operator=(const CompletionLog&) = delete;

  void write(engine::PortIndex port, const transport::WorkCompletion& wc) {
    if (!f_) return;
    // Wall-clock time (as in a pcap) of when the endpoint took it.
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    std::string flags;
    for (auto [bit, name] : {std::pair{IBV_WC_GRH, "grh"}, {IBV_WC_WITH_IMM, "with_imm"},
                             {IBV_WC_IP_CSUM_OK, "ip_csum_ok"}, {IBV_WC_WITH_INV, "with_inv"}})
      if (wc.wc_flags & bit) flags += fmt::format("{}\"{}\"", flags.empty() ? "" : ",", name);
    std::string line = fmt::format(
        "{{\"time_ns\":{},\"port\":{},\"qpn\":{},\"wr_id\":{},\"status\":{},"
        "\"status_name\":\"{}\",\"opcode\":{},\"opcode_name\":\"{}\",\"byte_len\":{},",
        ns, port, wc.qp_num, wc.wr_id, static_cast<int>(wc.status), wc_status_name(wc.status),
        static_cast<int>(wc.opcode), wc_opcode_name(wc.opcode), wc.byte_len);
    if (wc.wc_flags & IBV_WC_WITH_IMM) line += fmt::format("\"imm_data\":{},", wc.imm_data);
    if (wc.wc_flags & IBV_WC_WITH_INV)
      line += fmt::format("\"invalidated_rkey\":{},", wc.invalidated_rkey);
    line += fmt::format("\"src_qp\":{},\"wc_flags\":{},\"flags\":[{}],\"vendor_err\":{}}}\n",
                        wc.src_qp, wc.wc_flags, flags, wc.vendor_err);
    std::fputs(line.c_str(), f_);
  }
  void flush() {
    if (f_) std::fflush(f_);
  }

 private:
  std::FILE* f_ = nullptr;
};

int run(int argc, char** argv) {
  const int eal_args = engine::init_eal(argc, argv);
  argc -= eal_args;
  argv += eal_args;

  Options o;
  CLI::App app{"droce-endpoint: a RoCEv2 target on DPDK ports (options after --)"};
  app.add_option("--config", o.config, "TOML file with [[mr]] and [[qp]] tables")
      ->check(CLI::ExistingFile);
  app.add_option("--port", o.ports, "port name or id (repeatable; default: port 0)");
  app.add_option("--duration", o.duration_s, "stop after this many seconds (0 = never)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--exit-when-idle", o.exit_when_idle_ms,
                 "stop when no frame was received or sent for this many ms");
  app.add_option("--stats-interval", o.stats_interval_s, "live stats every N seconds")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--capture", o.capture, "pcap of what the port sends and receives");
  app.add_option("--json", o.json_out, "write the final counters as JSON to this file");
  app.add_option("--completions", o.completions,
                 "write every completion as a line of JSON to this file");
  app.add_option("--idle-sleep-us", o.idle_sleep_us,
                 "sleep this long when idle (0 = busy poll)");
  app.add_option("--port-rate", o.port_rate_gbps, "emulated link rate in Gb/s (0 = unlimited)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--mbufs", o.mbufs, "mbufs per port pool (0 = sized from the rings)");
  app.add_option("--burst", o.burst, "RX/TX burst size")->check(CLI::Range(1, 512));
  app.add_option("--rx-desc", o.rx_desc, "RX descriptors")->check(CLI::Range(1, 32768));
  app.add_option("--tx-desc", o.tx_desc, "TX descriptors")->check(CLI::Range(1, 32768));
  app.add_option("--shards", o.shards,
                 "shard each port's QPs over N worker lcores (the first shard's lcore and the "
                 "next ones; default 1)");
  app.add_option("--shard-tx", o.shard_tx,
                 "how shards transmit: auto, queues (a TX queue each) or ring (through "
                 "the first shard's lcore)");
  app.add_option("--shard-rx", o.shard_rx,
                 "how shards receive: auto (an RX queue each where the NIC has RSS on "
                 "UDP), queues (an RX queue each) or one (one queue, handed over)");
  app.add_option("--qpn", o.qpn, "QPN of a QP defined by flags");
  app.add_option("--peer-qpn", o.peer_qpn, "its peer's QPN");
  app.add_option("--qp-type", o.qp_type, "rc, uc or ud");
  app.add_option("--rq-psn", o.rq_psn, "first PSN expected from the peer");
  app.add_option("--sq-psn", o.sq_psn, "first PSN sent");
  app.add_option("--local-mac", o.local_mac, "source MAC (default: the port's)");
  app.add_option("--peer-mac", o.peer_mac,
                 "destination MAC (default: resolved from --peer-ip by ARP / neighbour "
                 "discovery)");
  app.add_option("--ping", o.pings,
                 "send an ICMP echo request to this address every second from port 0, and "
                 "print the replies (repeatable)");
  app.add_option("--address", o.addresses,
                 "an IPv4/IPv6 address the ports answer ARP, neighbour solicitations and ping "
                 "for, besides their QPs' local IPs (repeatable)");
  app.add_option("--local-ip", o.local_ip, "source IPv4/IPv6 address");
  app.add_option("--peer-ip", o.peer_ip, "destination IPv4/IPv6 address");
  app.add_option("--mtu", o.mtu, "path MTU: 256..4096");
  apps::add_mark_options(app, o.marks);
  app.add_option("--cc", o.cc, "congestion control algorithm (" + cc::algorithm_names() + ")");
  app.add_option("--cc-param", o.cc_params, "CC parameter name=value (repeatable)");
  app.add_option("--mr-size", o.mr_size, "bytes of an MR defined by flags");
  app.add_option("--mr-key", o.mr_key, "its lkey/rkey (default: allocated)");
  app.add_option("--mr-iova", o.mr_iova, "the VA of its first byte (default 0)");
  app.add_option("--mr-fill", o.mr_fill,
                 "zero, counter (byte at VA i = i mod 256), byte:<value> or file:<path>");
  app.add_option("--mr-dump", o.mr_dump, "write its bytes to this file at exit");
  app.add_option("--recv-wqes", o.recv_wqes, "receive WQEs posted on the flag QP");
  app.add_option("--recv-size", o.recv_size, "bytes per receive WQE");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    throw ConfigError("", e.what());
  }
  if (o.shards < 1 || o.shards > 128)
    throw ConfigError("--shards",
                      fmt::format("{} is out of range 1..128 (1 = no sharding)", o.shards));
  const engine::PortConfig::ShardTx shard_tx = apps::shard_tx_option(o.shard_tx);
  const engine::PortConfig::ShardRx shard_rx = apps::shard_rx_option(o.shard_rx);

  CompletionLog completion_log(o.completions);
  std::vector<MrDef> mr_defs;
  std::vector<QpDef> qp_defs;
  if (!o.config.empty()) load_config(o.config, mr_defs, qp_defs);
  flags_to_defs(o, mr_defs, qp_defs);

  engine::EngineConfig ec;
  ec.idle_sleep_us = o.idle_sleep_us;
  if (o.exit_when_idle_ms)
    ec.stats_period_ns = std::min<uint64_t>(ec.stats_period_ns, o.exit_when_idle_ms * 250'000);
  engine::Engine eng(ec);
  if (o.ports.empty()) o.ports.push_back("0");
  if (!o.capture.empty() && o.ports.size() > 1)
    throw ConfigError("--capture", "one file captures one port; give one --port");
  std::vector<wire::IpAddress> ping_to;
  for (const std::string& a : o.pings) ping_to.push_back(options::parse_ip("--ping", a));
  for (const std::string& name : o.ports) {
    engine::PortConfig pc;
    pc.name = name;
    pc.capture = o.capture;
    pc.mbufs = o.mbufs;
    pc.burst = o.burst;
    pc.rx_desc = o.rx_desc;
    pc.tx_desc = o.tx_desc;
    pc.endpoint.port_rate_bytes_per_sec = static_cast<uint64_t>(o.port_rate_gbps * 1e9 / 8);
    pc.shards = o.shards;
    pc.shard_tx = shard_tx;
    pc.shard_rx = shard_rx;
    // The port's IP interface: the addresses its QPs use and --address,
    // in the VLAN of its first tagged QP, with the MAC its QPs send from
    // (their local_mac, else the port's).
    const auto index = static_cast<uint32_t>(&name - o.ports.data());
    auto& itf = pc.endpoint.interface;
    for (const std::string& a : o.addresses) itf.addresses.push_back(options::parse_ip("--address", a));
    for (const QpDef& q : qp_defs) {
      if (q.port != index) continue;
      const wire::PathSpec& path = q.attr.path;
      if (q.have_local_ip && std::find(itf.addresses.begin(), itf.addresses.end(), path.src_ip) ==
                                 itf.addresses.end())
        itf.addresses.push_back(path.src_ip);
      if (q.local_mac && wire::is_zero_mac(itf.mac)) itf.mac = *q.local_mac;
      if (path.vlan && !itf.vlan) {
        itf.vlan = true;
        itf.vlan_id = path.vlan_id;
        itf.pcp = path.pcp;
      }
    }
    // Pings leave port 0 from one of its addresses of the same family
    // (IPv6: at least its link-local one, which any address brings).
    for (const wire::IpAddress& dst : index == 0 ? ping_to : std::vector<wire::IpAddress>{}) {
      const bool can = dst.v6 ? !itf.addresses.empty()
                              : std::any_of(itf.addresses.begin(), itf.addresses.end(),
                                            [](const wire::IpAddress& a) { return !a.v6; });
      if (!can)
        throw ConfigError("--ping", fmt::format("{}: port 0 has no {}address to ping from (give "
                                                "--address or a QP's local_ip)",
                                                options::format_ip(dst), dst.v6 ? "" : "IPv4 "));
    }
    try {
      eng.add_port(pc);
    } catch (const ConfigError& e) {
      apps::rethrow_as_shard_flag(e);  // the engine names its field; the user gave a flag
    }
  }

  std::vector<engine::MrInfo> mrs;
  RecvRings rings;
  std::vector<MrDump> dumps;
  struct CloseDumps {  // on a configuration error after some were opened
    std::vector<MrDump>& d;
    ~CloseDumps() {
      for (MrDump& m : d)
        if (m.f) std::fclose(m.f);
    }
  } close_dumps{dumps};
  for (const MrDef& d : mr_defs) {
    if (d.port >= eng.port_count())
      throw ConfigError(d.where + ".port", fmt::format("no port {} (ports given: {})", d.port,
                                                       eng.port_count()));
    engine::MrSpec spec;
    spec.length = d.length;
    spec.key = d.key;
    spec.iova = d.iova;
    spec.access = d.access;
    try {
      mrs.push_back(eng.reg_mr(d.port, spec));
    } catch (const ConfigError& e) {
      throw ConfigError(d.where, e.what());
    }
    fill_memory(mrs.back(), d);
    if (!d.dump.empty()) {
      std::FILE* f = std::fopen(d.dump.c_str(), "wb");
      if (!f)
        throw ConfigError(d.dump_option, fmt::format("cannot write {}: {}", d.dump,
                                                     std::strerror(errno)));
      dumps.push_back({mrs.back(), d.dump, f});
    }
  }

  for (QpDef& q : qp_defs) {
    if (q.port >= eng.port_count())
      throw ConfigError(q.where + ".port", fmt::format("no port {} (ports given: {})", q.port,
                                                       eng.port_count()));
    auto& path = q.attr.path;
    path.src_mac = q.local_mac ? *q.local_mac : eng.port_mac(q.port);
    if (q.spec.type != transport::QpType::kUd) {
      if (!q.have_peer_ip) throw ConfigError(q.where, "peer_ip (--peer-ip) is required");
    }
    if (!q.have_local_ip) throw ConfigError(q.where, "local_ip (--local-ip) is required");
    if (q.have_peer_ip && path.src_ip.v6 != path.dst_ip.v6)
      throw ConfigError(q.where, "local and peer IP must be the same family");
    if (!q.have_peer_ip) path.dst_ip.v6 = path.src_ip.v6;
    path.udp_src_port = wire::udp_src_port_entropy(*q.spec.qpn, q.attr.dest_qpn);
    engine::QpHandle h;
    try {
      h = eng.create_qp(q.port, q.spec);
    } catch (const ConfigError& e) {
      throw ConfigError(q.where, e.what());
    }
    if (int rc = eng.connect_qp(h, q.attr); rc != 0)
      throw ConfigError(q.where, fmt::format("the QP refused its attributes ({})",
                                             std::strerror(rc)));
    if (q.recv_count) {
      const engine::MrInfo* mr = nullptr;
      for (const auto& m : mrs)
        if (m.port == q.port && (!q.recv_mr || m.lkey == *q.recv_mr)) mr = &m;
      if (!mr)
        throw ConfigError(q.where + ".recv.mr", "no MR with that key on the QP's port");
      if (q.recv_offset + uint64_t{q.recv_count} * q.recv_length > mr->length)
        throw ConfigError(q.where + ".recv", fmt::format("{} x {} bytes from offset {} do not "
                                                         "fit in the MR ({} bytes)",
                                                         q.recv_count, q.recv_length,
                                                         q.recv_offset, mr->length));
      RecvRing& ring = rings.add(h, *mr, q.recv_offset, q.recv_length, q.recv_count);
      for (uint32_t i = 0; i < q.recv_count; ++i) ring.post(eng, i);
    }
    fmt::print("qp {:#x} on port {}: {} -> {} peer qp {:#x}, rq_psn {:#x}, sq_psn {:#x}, "
               "mtu {}, cc {}\n",
               h.qpn, q.port, options::format_ip(path.src_ip), options::format_ip(path.dst_ip),
               q.attr.dest_qpn, q.attr.rq_psn, q.attr.sq_psn,
               transport::mtu_bytes(q.attr.path_mtu), q.spec.cc);
  }
  for (const auto& m : mrs)
    fmt::print("mr key {:#x} on port {}: {} bytes at iova {:#x}\n", m.rkey, m.port, m.length,
               m.iova);
  std::fflush(stdout);

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  eng.start();
  const uint64_t t0 = engine::now_ns();
  engine::Snapshot prev = eng.stats_now(), cur = prev;
  uint64_t last_live = t0, last_activity = t0;
  uint64_t last_frames = 0;
  std::vector<transport::WorkCompletion> wcs(256);
  std::vector<engine::PortIndex> wc_ports(wcs.size());
  uint64_t completions = 0, completion_errors = 0;
  uint64_t next_ping = t0;
  uint16_t ping_seq = 0;
  while (!g_quit.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!ping_to.empty()) {
      if (engine::now_ns() >= next_ping) {
        ++ping_seq;
        for (const wire::IpAddress& a : ping_to) eng.ping(0, a, ping_seq);
        next_ping += 1'000'000'000;
      }
      for (const auto& r : eng.ping_replies(0))
        fmt::print("ping: reply from {} seq={} time={:.1f} us\n", options::format_ip(r.from),
                   r.sequence, static_cast<double>(r.rtt_ns) / 1e3);
      std::fflush(stdout);
    }
    // The endpoint is a target: completions are counted, and each consumed
    // receive WQE goes back on its QP's receive queue.
    for (size_t n; (n = eng.poll_completions(wcs, wc_ports)) > 0;) {
      completions += n;
      for (size_t i = 0; i < n; ++i) {
        completion_errors += wcs[i].status != IBV_WC_SUCCESS;
        completion_log.write(wc_ports[i], wcs[i]);
        rings.consumed(wc_ports[i], wcs[i]);
      }
    }
    completion_log.flush();
    rings.retry(eng);
    cur = eng.stats();
    const uint64_t now = engine::now_ns();
    uint64_t frames = 0;
    for (const auto& p : cur.ports) frames += p.endpoint.rx_frames + p.endpoint.tx_frames;
    if (frames != last_frames) {
      last_frames = frames;
      last_activity = now;
    }
    if (o.stats_interval_s > 0 && now - last_live >= o.stats_interval_s * 1e9) {
      fmt::print("{}", engine::format_live_stats(prev, cur));
      std::fflush(stdout);
      prev = cur;
      last_live = now;
    }
    if (o.duration_s > 0 && now - t0 >= o.duration_s * 1e9) break;
    if (o.exit_when_idle_ms && now - last_activity >= o.exit_when_idle_ms * 1'000'000) break;
  }
  eng.stop();
  // What the workers completed after the last poll (stopped, the engine
  // drains the CQs inline); nothing is reposted any more.
  for (size_t n; (n = eng.poll_completions(wcs, wc_ports)) > 0;) {
    completions += n;
    for (size_t i = 0; i < n; ++i) {
      completion_errors += wcs[i].status != IBV_WC_SUCCESS;
      completion_log.write(wc_ports[i], wcs[i]);
    }
  }
  completion_log.flush();
  int rc = droce::kExitOk;
  // The workers are stopped: the regions hold their final bytes.
  for (MrDump& m : dumps) {
    const bool ok = std::fwrite(m.mr.addr, 1, m.mr.length, m.f) == m.mr.length;
    if (std::fclose(m.f) != 0 || !ok) {
      fmt::print(stderr, "error: mr key {:#x}: writing {} failed\n", m.mr.rkey, m.path);
      rc = droce::kExitFailure;
    }
    m.f = nullptr;
  }
  eng.close_ports();
  const engine::Snapshot fin = eng.stats();
  fmt::print("--- droce-endpoint counters\n{}", engine::format_counters(fin));
  fmt::print("completions {} (errors {})\n", completions, completion_errors);
  if (!o.json_out.empty()) {
    std::ofstream f(o.json_out);
    f << engine::to_json(fin) << "\n";
  }
  const auto missing = eng.mbufs_missing();
  for (size_t i = 0; i < missing.size(); ++i) {
    if (missing[i] != 0) {
      fmt::print(stderr, "error: mbuf leak: port {} pool is missing {} mbufs at shutdown\n",
                 i, missing[i]);
      rc = droce::kExitFailure;
    }
  }
  if (rc == droce::kExitOk) fmt::print("mbufs: all pools full at shutdown\n");
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  return droce::engine::run_app([&] { return run(argc, argv); });
}
