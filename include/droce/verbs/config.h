// libdroce-verbs' configuration: what a user gives the preloaded provider
// (docs/VERBS.md "Configuration") in a TOML file named by
// DROCE_VERBS_CONFIG. DPDK-free, so every key is tested without EAL.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "droce/config_error.h"
#include "droce/wire/headers.h"
#include "droce/wire/packet.h"

namespace droce::verbs {

// An address the application reaches, with the MAC to send to: verbs
// names a peer by its GID only.
struct Neighbour {
  wire::IpAddress ip;
  wire::MacAddress mac{};
};

struct Config {
  std::string source;  // the file it came from (messages)
  // The name ibv_get_device_list reports.
  std::string device = "droce0";
  // EAL arguments (without a program name): the vdev, --file-prefix, lcores.
  std::vector<std::string> eal;
  // The DPDK port: a name as ethdev knows it or a decimal port id.
  std::string port = "0";
  // The port's addresses: its GIDs after the link-local one, and the
  // addresses its IP interface answers ARP and neighbour solicitations for.
  std::vector<wire::IpAddress> addresses;
  // The port's active MTU (bytes: 256..4096).
  uint32_t mtu = 4096;
  // Congestion control of every QP (cc::make_algorithm) and its parameters.
  std::string cc = "none";
  std::map<std::string, std::string, std::less<>> cc_params;
  // The link rate the port emulates (Gb/s; 0 = unlimited).
  double port_rate_gbps = 100;
  // The worker sleeps this long when idle (0 = busy poll).
  uint32_t idle_sleep_us = 0;
  // DSCP of every QP's packets (the AH's traffic class wins when set).
  uint8_t dscp = 0;
  // Peers' MACs; others are resolved by ARP / ND (link-local GIDs carry
  // their MAC in their EUI-64).
  std::vector<Neighbour> neighbours;
  // Register /droce/* DPDK telemetry.
  bool telemetry = true;
  // What ibv_query_port reports as the port's state. true: the link as the
  // PMD sees it. false (the default): active once the port has started, as
  // a NIC whose cable is in; a memif port's link is down until the peer
  // process has started its own, and applications check that the port is
  // active before they exchange addresses with that peer (frames wait for
  // the link meanwhile).
  bool report_link = false;
  // At exit, the port's counters that are not zero on stderr (what
  // droce-perf --counters prints): a check that the run had no parse, ICRC
  // or other receive errors.
  bool counters_at_exit = false;
  // The program's posts and CQ polls run a pass of the data path too
  // (EngineConfig::callers_step); false: only the worker does.
  bool callers_step = true;
  // A port that does not start is tried again for this long (ms): a memif
  // client's port starts only once its server has made the socket, and
  // two programs that meet over TCP first open their devices at about
  // the same time.
  uint32_t start_timeout_ms = 10'000;
  // Start the port only once this path exists (and 200 ms more: a socket's
  // file appears before its owner listens), waiting up to
  // start_timeout_ms: a memif client whose server's socket is not there,
  // or refuses it, when its port starts does not connect later.
  std::string wait_for;
};

// The TOML text of a configuration; `source` names it in messages. Throws
// ConfigError naming the key: unknown keys, wrong types, values out of
// range, addresses and MACs that do not parse.
Config parse_config(std::string_view text, const std::string& source);
// The file named by DROCE_VERBS_CONFIG (ConfigError("DROCE_VERBS_CONFIG")
// when unset or unreadable).
Config load_config_from_env();

}  // namespace droce::verbs
