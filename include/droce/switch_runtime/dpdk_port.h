// A DPDK ethdev as a FramePort: one RX and one TX queue, its own mempool of
// jumbo-sized mbufs, promiscuous (a switch port sees every frame).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "droce/switch_runtime/frame_port.h"
#include "droce/switch_runtime/settings.h"

struct rte_mbuf;
struct rte_mempool;

namespace droce::switch_runtime {

struct DpdkPortOptions {
  uint16_t rx_desc = 1024, tx_desc = 1024;
  uint32_t burst = 32;
  uint32_t mbufs = 0;  // 0: from the descriptors and the burst
};

class DpdkFramePort final : public FramePort {
 public:
  // Opens and starts ethdev `port_id`, given by the user as `name` in the
  // setting `option` (both for a ConfigError). EAL must be up.
  DpdkFramePort(const std::string& option, const std::string& name, uint16_t port_id,
                const DpdkPortOptions& o);
  ~DpdkFramePort() override;

  const std::string& name() const override { return name_; }
  wire::MacAddress mac() const override { return mac_; }
  size_t receive(size_t max, const std::function<void(std::span<const uint8_t>)>& frame) override;
  void send(std::span<const uint8_t> frame) override;
  void flush() override;
  std::optional<bool> link_up() override;
  const FramePortCounters& counters() const override { return c_; }
  uint16_t port_id() const { return port_id_; }

 private:
  std::string name_;
  uint16_t port_id_ = 0;
  rte_mempool* pool_ = nullptr;
  wire::MacAddress mac_{};
  std::vector<rte_mbuf*> rx_;
  std::vector<rte_mbuf*> tx_;  // queued by send(), for the next flush()
  std::vector<uint8_t> linear_;  // a multi-segment frame, made contiguous
  FramePortCounters c_;
};

// The DPDK port a user named (its name or its id); ConfigError(option)
// listing the ports there are when there is none.
uint16_t resolve_dpdk_port(const std::string& option, const std::string& name);
// The DPDK ports behind every switch port of `s`, opened in order; a DPDK
// port named twice is a ConfigError.
std::vector<std::vector<std::unique_ptr<FramePort>>> open_dpdk_ports(const Settings& s);

}  // namespace droce::switch_runtime
