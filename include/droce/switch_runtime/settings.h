// droce-switch's settings: the switch ports (DPDK port names behind each),
// routes, the model's configuration and the run's options, from the command
// line and from a TOML file ([switch] with droce-sim's keys, [[ports]],
// [[routes]]; docs/SWITCH.md). DPDK-free: everything here is checked before
// EAL starts, and unit tests reach it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "droce/config_error.h"
#include "droce/fabric/switch.h"
#include "droce/wire/packet.h"

namespace droce::switch_runtime {

struct PortSpec {
  // DPDK ports (names or ids) behind this switch port. Several members form
  // one modelled link whose far end is an L2 segment: egress frames go to
  // the member that learned the destination MAC (unknown/multicast: all).
  std::vector<std::string> members;
  std::optional<uint64_t> rate_bps;
  std::optional<uint64_t> buffer_bytes;  // per_port buffer mode
  std::string origin;                    // the option or key it came from, for messages
};

struct RouteSpec {
  wire::IpAddress prefix;
  uint8_t len = 0;
  std::vector<uint16_t> ports;
  std::string origin;
};

struct Settings {
  std::vector<PortSpec> ports;
  std::vector<RouteSpec> routes;
  uint64_t default_rate_bps = 10 * fabric::kGbps;
  fabric::SwitchConfig cfg;  // buffer, classifier, pfc, int, seed, node_id
  fabric::EcnConfig ecn{};
  bool ecn_auto = true;      // thresholds scaled with each port's rate
  fabric::SchedulerConfig scheduler = fabric::SchedulerConfig::strict_priority();
  uint64_t port_buffer_bytes = 1 << 20;
  // Run.
  std::string capture;
  std::string json;
  double stats_interval = 1.0;
  double duration = 0;
  uint32_t idle_sleep_us = 0;
  uint32_t burst = 32;
  uint32_t mbufs = 0;
  uint16_t rx_desc = 1024, tx_desc = 1024;
};

// The command line's model options as the user spelled them (nullopt: not
// given). apply_flags turns them into Settings over what a --config file
// set: flags override the file.
struct Flags {
  std::optional<std::string> rate, buffer, buffer_mode, port_buffer, classifier;
  std::optional<std::string> ecn_mode, ecn_point, kmin, kmax, ecn_k;
  std::optional<double> pmax;
  bool pfc = false;
  std::optional<std::string> pfc_priorities, xoff, xon, pfc_watchdog;
  std::optional<uint32_t> pfc_quanta;
  bool int_on = false;
  std::optional<uint64_t> seed;
  std::optional<std::string> load_balance, flowlet_gap;
  std::vector<std::string> ports, routes;  // --port, --route
};

// "NAME[+NAME...][@RATE]".
PortSpec parse_port_spec(const std::string& option, const std::string& text);
// "PREFIX[/LEN]=PORT[,PORT...]"; PREFIX may be "default" or "default6".
RouteSpec parse_route_spec(const std::string& option, const std::string& text);
// "3" or "3,4": a mask of PFC priorities.
uint8_t parse_priorities(const std::string& option, const std::string& text);

// A TOML file's settings into `s`. Throws ConfigError("FILE:LINE:COL: key: what").
void load_config(const std::string& file, Settings& s);
// The same from text (`source` names it in messages).
void load_config_text(std::string_view text, const std::string& source, Settings& s);
void apply_flags(const Flags& f, Settings& s);
// Everything that can be checked before EAL starts; ConfigError otherwise.
void validate(Settings& s);
// The model's configuration: one fabric::PortConfig per switch port, the
// route table. Port MACs are the caller's (the DPDK ports' own).
fabric::SwitchConfig build_switch_config(const Settings& s);

}  // namespace droce::switch_runtime
