#include "droce/endpoint_config/config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "droce/options/multipath.h"
#include "droce/wire/ethernet.h"

namespace droce::endpoint_config {
namespace {

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

// A value given as a string or an integer ("8us" or 8000, "64" or 64), as
// text for the options parsers, which name the key in their errors.
std::optional<std::string> get_text(const toml::table& t, const std::string& where,
                                    std::string_view key) {
  const toml::node* n = t.get(key);
  if (!n) return std::nullopt;
  if (auto s = n->value<std::string>()) return *s;
  if (n->is_integer()) {
    const int64_t i = *n->value<int64_t>();
    if (i < 0) throw ConfigError(key_path(where, key), fmt::format("{} is negative", i));
    return std::to_string(i);
  }
  throw ConfigError(key_path(where, key), "expected an integer or a string");
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

MrDef read_mr(const toml::table& t, const std::string& w) {
  check_keys(t, w, {"port", "length", "key", "iova", "fill", "dump", "access"});
  MrDef m;
  m.where = w;
  m.port = static_cast<uint32_t>(get_uint(t, w, "port", 0, 1023));
  if (!t.contains("length")) throw ConfigError(key_path(w, "length"), "missing");
  m.length = get_uint(t, w, "length", 0, UINT64_MAX >> 1);
  if (t.contains("key")) m.key = static_cast<uint32_t>(get_uint(t, w, "key", 0, UINT32_MAX));
  m.iova = get_uint(t, w, "iova", 0, UINT64_MAX >> 1);
  if (auto s = get_str(t, w, "fill")) parse_fill(key_path(w, "fill"), *s, m);
  if (auto s = get_str(t, w, "dump")) {
    m.dump = *s;
    m.dump_option = key_path(w, "dump");
  }
  if (const toml::node* n = t.get("access")) {
    const toml::array* acc = n->as_array();
    if (!acc) throw ConfigError(key_path(w, "access"), "expected an array of strings");
    m.access = parse_access(key_path(w, "access"), *acc);
  }
  return m;
}

// The transport sprays only an RC QP's requests (QueuePair::modify).
void set_multipath(QpDef& q, const options::MultipathText& text,
                   const options::MultipathNames& names, std::string_view rc) {
  const options::Multipath m = options::parse_multipath(text, names);
  if (m.entropy.mode != transport::EntropyMode::kFixed && q.spec.type != transport::QpType::kRc)
    throw ConfigError(names.entropy, fmt::format("{} needs {} (with selective repeat)",
                                                 transport::to_string(m.entropy.mode), rc));
  options::apply_multipath(m, q.attr);
}

QpDef read_qp(const toml::table& t, const std::string& w) {
  check_keys(t, w,
             {"port", "qpn", "peer_qpn", "type", "rq_psn", "sq_psn", "mtu", "local_mac",
              "peer_mac", "local_ip", "peer_ip", "dscp", "ecn", "vlan", "pcp", "cc",
              "cc_params", "qkey", "max_send_wr", "max_recv_wr", "recv",
              "selective_repeat", "ack_every_n", "min_rnr_timer", "lcore", "access",
              "max_dest_rd_atomic", "pkey", "honour_credits", "recovery", "entropy",
              "entropy_paths", "flowlet_gap", "reorder_tolerance", "reorder_window",
              "rto_low", "reth_every_packet", "tail_probe", "reorder_window_min"});
  QpDef q;
  q.where = w;
  q.port = static_cast<uint32_t>(get_uint(t, w, "port", 0, 1023));
  if (!t.contains("qpn")) throw ConfigError(key_path(w, "qpn"), "missing");
  if (t.contains("lcore"))
    q.spec.lcore = static_cast<int>(get_uint(t, w, "lcore", 0, 1023));
  q.spec.qpn = static_cast<uint32_t>(get_uint(t, w, "qpn", 0, UINT32_MAX));
  if (auto s = get_str(t, w, "type")) q.spec.type = options::parse_qp_type(key_path(w, "type"), *s);
  q.spec.caps.max_send_wr = static_cast<uint32_t>(get_uint(t, w, "max_send_wr", 256, 1u << 20));
  q.spec.caps.max_recv_wr = static_cast<uint32_t>(get_uint(t, w, "max_recv_wr", 256, 1u << 20));
  if (auto s = get_str(t, w, "cc")) q.spec.cc = *s;
  if (const toml::node* n = t.get("cc_params")) {
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
  at.dest_qpn = static_cast<uint32_t>(get_uint(t, w, "peer_qpn", 0, 0xFFFFFF));
  at.rq_psn = static_cast<uint32_t>(get_uint(t, w, "rq_psn", 0, 0xFFFFFF));
  at.sq_psn = static_cast<uint32_t>(get_uint(t, w, "sq_psn", 0, 0xFFFFFF));
  at.path_mtu = options::parse_mtu(key_path(w, "mtu"), get_uint(t, w, "mtu", 1024, 1u << 20));
  at.qkey = static_cast<uint32_t>(get_uint(t, w, "qkey", 0, UINT32_MAX));
  at.ack_every_n = static_cast<uint32_t>(get_uint(t, w, "ack_every_n", 0, 1u << 20));
  at.min_rnr_timer = static_cast<uint8_t>(get_uint(t, w, "min_rnr_timer", 12, 31));
  // The remote operations the QP accepts, checked before the region's
  // own access (IBA 9.7.5.1.3 / 10.6.3; a refusal is a remote access
  // error NAK); local_write is a region flag and means nothing here.
  if (const toml::node* n = t.get("access")) {
    const toml::array* acc = n->as_array();
    if (!acc) throw ConfigError(key_path(w, "access"), "expected an array of strings");
    at.qp_access_flags = parse_access(key_path(w, "access"), *acc) & ~IBV_ACCESS_LOCAL_WRITE;
  }
  // READs and atomics the responder holds at once; one more is an
  // invalid request NAK (IBA 9.7.5.2). The transport takes at least 1.
  at.max_dest_rd_atomic = static_cast<uint8_t>(
      get_uint(t, w, "max_dest_rd_atomic", at.max_dest_rd_atomic, 255));
  if (at.max_dest_rd_atomic == 0)
    throw ConfigError(key_path(w, "max_dest_rd_atomic"), "0 is out of range 1..255");
  // The BTH P_Key it sends and accepts (IBA 10.9): partition 0 (the low
  // 15 bits) is invalid, a QP there could talk to no one.
  at.pkey = static_cast<uint16_t>(get_uint(t, w, "pkey", 0xFFFF, 0xFFFF));
  if ((at.pkey & 0x7FFF) == 0)
    throw ConfigError(key_path(w, "pkey"),
                      fmt::format("{:#x} is in the invalid partition 0 (IBA 10.9)",
                                  at.pkey));
  // Multipath (docs/MULTIPATH.md): the loss recovery, the UDP source ports
  // of the QP's requests, selective repeat's reorder tolerance. recovery =
  // "sr" and selective_repeat = true say the same.
  options::MultipathText mp;
  mp.recovery = get_str(t, w, "recovery");
  mp.entropy = get_str(t, w, "entropy");
  mp.entropy_paths = get_text(t, w, "entropy_paths");
  mp.flowlet_gap = get_text(t, w, "flowlet_gap");
  mp.reorder_tolerance = get_text(t, w, "reorder_tolerance");
  mp.reorder_window = get_text(t, w, "reorder_window");
  mp.reorder_window_min = get_text(t, w, "reorder_window_min");
  mp.rto_low = get_text(t, w, "rto_low");
  if (const toml::node* n = t.get("reth_every_packet")) {
    if (!n->is_boolean())
      throw ConfigError(key_path(w, "reth_every_packet"), "expected true or false");
    mp.reth_every_packet = n->as_boolean()->get();
  }
  if (const toml::node* n = t.get("tail_probe")) {
    if (!n->is_boolean()) throw ConfigError(key_path(w, "tail_probe"), "expected true or false");
    mp.tail_probe = n->as_boolean()->get();
  }
  if (const toml::node* n = t.get("selective_repeat")) {
    auto b = n->value<bool>();
    if (!b) throw ConfigError(key_path(w, "selective_repeat"), "expected true or false");
    const std::string_view sr = *b ? "sr" : "gbn";
    if (mp.recovery && options::parse_recovery(key_path(w, "recovery"), *mp.recovery) !=
                           options::parse_recovery("", sr))
      throw ConfigError(key_path(w, "selective_repeat"),
                        fmt::format("{} contradicts recovery = \"{}\"", *b, *mp.recovery));
    mp.recovery = std::string(sr);
  }
  set_multipath(q, mp, options::MultipathNames::keys(w), "type = \"rc\"");
  // End-to-end credits (IBA 9.7.7.2): the QP's own SENDs and WRITEs
  // with immediate wait for the peer's credits.
  if (const toml::node* n = t.get("honour_credits")) {
    auto b = n->value<bool>();
    if (!b) throw ConfigError(key_path(w, "honour_credits"), "expected true or false");
    at.honour_credits = *b;
  }
  fill_path(q, t, w);
  if (const toml::node* n = t.get("recv")) {
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
  return q;
}

}  // namespace

void load_config_text(std::string_view text, const std::string& source, Definitions& d) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw ConfigError("config", fmt::format("{}:{}:{}: {}", source, b.line, b.column,
                                            e.description()));
  }
  check_keys(root, "config", {"mr", "qp"});
  if (const toml::array* a = root["mr"].as_array()) {
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string w = fmt::format("mr[{}]", i);
      const toml::table* t = a->get(i)->as_table();
      if (!t) throw ConfigError(w, "expected a table ([[mr]])");
      d.mrs.push_back(read_mr(*t, w));
    }
  } else if (root.contains("mr")) {
    throw ConfigError("mr", "expected an array of tables ([[mr]])");
  }
  if (const toml::array* a = root["qp"].as_array()) {
    for (size_t i = 0; i < a->size(); ++i) {
      const std::string w = fmt::format("qp[{}]", i);
      const toml::table* t = a->get(i)->as_table();
      if (!t) throw ConfigError(w, "expected a table ([[qp]])");
      d.qps.push_back(read_qp(*t, w));
    }
  } else if (root.contains("qp")) {
    throw ConfigError("qp", "expected an array of tables ([[qp]])");
  }
}

void load_config(const std::string& file, Definitions& d) {
  std::ifstream in(file);
  if (!in) throw ConfigError("--config", fmt::format("cannot read {}: {}", file, std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  load_config_text(text.str(), file, d);
}

void flags_to_defs(const FlagDefs& o, Definitions& d) {
  std::vector<MrDef>& mrs = d.mrs;
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
  set_multipath(q, o.multipath, options::MultipathNames::flags(), "--qp-type rc");
  q.recv_count = o.recv_wqes;
  q.recv_length = o.recv_size;
  if (o.recv_wqes) {
    if (mrs.empty()) throw ConfigError("--recv-wqes", "needs an MR (--mr-size)");
    q.recv_mr = mrs.back().key;  // resolved after registration if unset
  }
  d.qps.push_back(std::move(q));
}

void fill_region(uint8_t* addr, uint64_t length, uint64_t iova, const MrDef& d) {
  switch (d.fill) {
    case Fill::kZero: break;  // registered regions start zeroed
    case Fill::kCounter:
      // By VA, not by offset: a peer that READs VA v gets v mod 256 whatever
      // the region's iova, so it can check data without knowing the layout.
      for (uint64_t i = 0; i < length; ++i) addr[i] = static_cast<uint8_t>(iova + i);
      break;
    case Fill::kByte: std::memset(addr, d.fill_byte, length); break;
    case Fill::kFile: {
      // The file's bytes from the region's first VA; a shorter file leaves
      // the rest zero, a longer one is refused rather than cut.
      std::ifstream f(d.fill_file, std::ios::binary);
      if (!f)
        throw ConfigError(d.fill_option, fmt::format("cannot read {}: {}", d.fill_file,
                                                     std::strerror(errno)));
      f.read(reinterpret_cast<char*>(addr), static_cast<std::streamsize>(length));
      if (f.bad())
        throw ConfigError(d.fill_option, fmt::format("cannot read {}", d.fill_file));
      if (f.gcount() == static_cast<std::streamsize>(length) && f.peek() != EOF)
        throw ConfigError(d.fill_option, fmt::format("{} is longer than the region ({} bytes)",
                                                     d.fill_file, length));
      break;
    }
  }
}

endpoint::InterfaceConfig port_interface(uint32_t index, const std::vector<wire::IpAddress>& addresses,
                                         const std::vector<QpDef>& qps) {
  endpoint::InterfaceConfig itf;
  itf.addresses = addresses;
  for (const QpDef& q : qps) {
    if (q.port != index) continue;
    const wire::PathSpec& path = q.attr.path;
    if (q.have_local_ip &&
        std::find(itf.addresses.begin(), itf.addresses.end(), path.src_ip) == itf.addresses.end())
      itf.addresses.push_back(path.src_ip);
    if (q.local_mac && wire::is_zero_mac(itf.mac)) itf.mac = *q.local_mac;
    if (path.vlan && !itf.vlan) {
      itf.vlan = true;
      itf.vlan_id = path.vlan_id;
      itf.pcp = path.pcp;
    }
  }
  return itf;
}

void finish_path(QpDef& q, const wire::MacAddress& port_mac) {
  auto& path = q.attr.path;
  path.src_mac = q.local_mac ? *q.local_mac : port_mac;
  if (q.spec.type != transport::QpType::kUd && !q.have_peer_ip)
    throw ConfigError(q.where, "peer_ip (--peer-ip) is required");
  if (!q.have_local_ip) throw ConfigError(q.where, "local_ip (--local-ip) is required");
  if (q.have_peer_ip && path.src_ip.v6 != path.dst_ip.v6)
    throw ConfigError(q.where, "local and peer IP must be the same family");
  if (!q.have_peer_ip) path.dst_ip.v6 = path.src_ip.v6;
  path.udp_src_port = wire::udp_src_port_entropy(*q.spec.qpn, q.attr.dest_qpn);
}

}  // namespace droce::endpoint_config
