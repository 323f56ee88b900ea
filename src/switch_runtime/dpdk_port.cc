#include "droce/switch_runtime/dpdk_port.h"

#include <fmt/format.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "droce/engine/engine.h"

namespace droce::switch_runtime {

namespace {

// Jumbo frames and INT stacks fit one mbuf.
constexpr uint32_t kDataRoom = 9216 + 128;
// A TX queue that does not take a burst is tried again this often, then
// what is left is dropped and counted: the model has already sent it.
constexpr uint32_t kTxRetries = 8;

[[noreturn]] void bad(const std::string& option, const std::string& msg) {
  throw ConfigError(option, msg);
}

}  // namespace

uint16_t resolve_dpdk_port(const std::string& option, const std::string& name) {
  uint16_t id = 0;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &id) == 0) return id;
  char* end = nullptr;
  const unsigned long v = std::strtoul(name.c_str(), &end, 10);
  if (!name.empty() && !*end && v < RTE_MAX_ETHPORTS && rte_eth_dev_is_valid_port(v))
    return static_cast<uint16_t>(v);
  std::string known;
  uint16_t pid = 0;
  RTE_ETH_FOREACH_DEV(pid) {
    char n[RTE_ETH_NAME_MAX_LEN] = {};
    rte_eth_dev_get_name_by_port(pid, n);
    known += fmt::format("{}{} ({})", known.empty() ? "" : ", ", n, pid);
  }
  bad(option, fmt::format("no DPDK port '{}' (ports: {}; add one with --vdev)", name,
                          known.empty() ? "none" : known));
}

namespace {

uint32_t rx_mtu(const rte_eth_dev_info& info) {
  uint32_t mtu = kDataRoom - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN - 128;
  if (info.max_mtu) mtu = std::min<uint32_t>(mtu, info.max_mtu);
  if (info.max_rx_pktlen > RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN)
    mtu = std::min<uint32_t>(mtu, info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN);
  return std::max<uint32_t>(mtu, info.min_mtu);
}

}  // namespace

DpdkFramePort::DpdkFramePort(const std::string& option, const std::string& name,
                             uint16_t port_id, const DpdkPortOptions& o)
    : name_(name), port_id_(port_id) {
  const uint16_t id = port_id_;
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(id, &info); rc != 0)
    bad(option, fmt::format("'{}': cannot read device info: {}", name, rte_strerror(-rc)));
  rte_eth_conf conf{};
  conf.rxmode.mtu = rx_mtu(info);
  if (int rc = rte_eth_dev_configure(id, 1, 1, &conf); rc != 0)
    bad(option, fmt::format("'{}': rte_eth_dev_configure: {}", name, rte_strerror(-rc)));
  uint16_t rxd = o.rx_desc, txd = o.tx_desc;
  rte_eth_dev_adjust_nb_rx_tx_desc(id, &rxd, &txd);
  int socket = rte_eth_dev_socket_id(id);
  if (socket < 0) socket = SOCKET_ID_ANY;
  const uint32_t n = o.mbufs ? o.mbufs : rxd + txd + 2 * o.burst + 512;
  pool_ = rte_pktmbuf_pool_create(fmt::format("dsw_p{}", id).c_str(), n, 0, 0,
                                  kDataRoom + RTE_PKTMBUF_HEADROOM, socket);
  if (!pool_)
    bad("--mbufs", fmt::format("cannot create a pool of {} mbufs of {} bytes for '{}': {} "
                               "(more EAL memory: -m, or fewer --mbufs)",
                               n, kDataRoom, name, rte_strerror(rte_errno)));
  if (int rc = rte_eth_rx_queue_setup(id, 0, rxd, socket, nullptr, pool_); rc != 0)
    bad(option, fmt::format("'{}': RX queue setup: {}", name, rte_strerror(-rc)));
  if (int rc = rte_eth_tx_queue_setup(id, 0, txd, socket, nullptr); rc != 0)
    bad(option, fmt::format("'{}': TX queue setup: {}", name, rte_strerror(-rc)));
  if (int rc = rte_eth_dev_start(id); rc != 0)
    bad(option, fmt::format("'{}': rte_eth_dev_start: {}", name, rte_strerror(-rc)));
  rte_eth_promiscuous_enable(id);  // ENOTSUP is fine: most vdevs see every frame anyway
  rte_ether_addr a{};
  rte_eth_macaddr_get(id, &a);
  std::copy(a.addr_bytes, a.addr_bytes + 6, mac_.begin());
  rx_.assign(o.burst, nullptr);
}

DpdkFramePort::~DpdkFramePort() {
  for (rte_mbuf* mb : tx_) rte_pktmbuf_free(mb);
  tx_.clear();
  rte_eth_dev_stop(port_id_);
  rte_eth_dev_close(port_id_);
}

size_t DpdkFramePort::receive(size_t max,
                              const std::function<void(std::span<const uint8_t>)>& frame) {
  const uint16_t want = static_cast<uint16_t>(std::min(max, rx_.size()));
  const uint16_t n = rte_eth_rx_burst(port_id_, 0, rx_.data(), want);
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* mb = rx_[i];
    const uint32_t len = mb->pkt_len;
    const uint8_t* d = rte_pktmbuf_mtod(mb, const uint8_t*);
    if (mb->nb_segs > 1) {
      linear_.resize(len);
      d = static_cast<const uint8_t*>(rte_pktmbuf_read(mb, 0, len, linear_.data()));
    }
    ++c_.rx_frames;
    c_.rx_bytes += len;
    frame({d, len});
    rte_pktmbuf_free(mb);
  }
  return n;
}

void DpdkFramePort::send(std::span<const uint8_t> frame) {
  if (frame.size() > static_cast<size_t>(rte_pktmbuf_data_room_size(pool_) - RTE_PKTMBUF_HEADROOM)) {
    ++c_.tx_too_big;
    return;
  }
  rte_mbuf* mb = rte_pktmbuf_alloc(pool_);
  if (!mb) {
    ++c_.tx_alloc_failed;
    return;
  }
  char* d = rte_pktmbuf_append(mb, static_cast<uint16_t>(frame.size()));
  std::memcpy(d, frame.data(), frame.size());
  tx_.push_back(mb);
}

void DpdkFramePort::flush() {
  if (tx_.empty()) return;
  uint16_t done = 0;
  const uint16_t n = static_cast<uint16_t>(tx_.size());
  for (uint32_t tries = 0; done < n && tries < kTxRetries; ++tries)
    done += rte_eth_tx_burst(port_id_, 0, tx_.data() + done, n - done);
  for (uint16_t i = 0; i < done; ++i) {
    ++c_.tx_frames;
    c_.tx_bytes += tx_[i]->pkt_len;
  }
  for (uint16_t i = done; i < n; ++i) {
    ++c_.tx_dropped;
    rte_pktmbuf_free(tx_[i]);
  }
  tx_.clear();
}

std::optional<bool> DpdkFramePort::link_up() { return engine::port_link_up(port_id_); }

std::vector<std::vector<std::unique_ptr<FramePort>>> open_dpdk_ports(const Settings& s) {
  DpdkPortOptions o;
  o.rx_desc = s.rx_desc;
  o.tx_desc = s.tx_desc;
  o.burst = s.burst;
  o.mbufs = s.mbufs;
  std::map<uint16_t, std::string> seen;  // port id -> as given
  std::vector<std::vector<std::unique_ptr<FramePort>>> ports;
  for (const PortSpec& spec : s.ports) {
    auto& members = ports.emplace_back();
    for (const std::string& name : spec.members) {
      const uint16_t id = resolve_dpdk_port(spec.origin, name);
      if (auto it = seen.find(id); it != seen.end())
        bad(spec.origin, fmt::format("DPDK port '{}' is already used (as '{}')", name, it->second));
      seen[id] = name;
      members.push_back(std::make_unique<DpdkFramePort>(spec.origin, name, id, o));
    }
  }
  return ports;
}

}  // namespace droce::switch_runtime
