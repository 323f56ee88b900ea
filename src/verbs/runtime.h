// The process's droce behind libdroce-verbs: its configuration, the one
// in-process engine (EAL, the port, a worker that runs the data path by
// itself) and what every verbs object of the provider needs of them.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "droce/engine/engine.h"
#include "droce/verbs/config.h"
#include "droce/verbs/translate.h"

namespace droce::verbs {

struct Runtime {
  // The control plane (setup and teardown verbs) is one thread at a time
  // in the engine; applications call them from any thread.
  std::mutex mu;
  bool config_tried = false;
  bool config_ok = false;
  Config cfg;
  bool engine_tried = false;
  std::unique_ptr<engine::Engine> eng;
  engine::PortIndex port = 0;
  uint16_t port_id = 0;
  wire::MacAddress mac{};
  // The configured MTU where the link carries it, else the largest that
  // fits (active_mtu): what ibv_query_port reports and QPs are capped at.
  uint32_t mtu = 0;
  std::vector<ibv_gid> gids;
  // Refreshes the stats snapshot DPDK telemetry reads (the engine takes
  // one only when its control plane asks; the application never does).
  std::thread stats_thread;
  std::condition_variable stats_cv;
  bool stopping = false;  // rt.mu
};

// The one Runtime (never destroyed before the library's destructor).
Runtime& runtime();
// The configuration, loaded once; false (errno EINVAL, the message printed
// once on stderr) when it is missing or wrong.
bool ensure_config(Runtime& rt);
// EAL and the engine, started once (rt.mu held); false with errno set when
// that failed (the message printed on stderr).
bool ensure_engine(Runtime& rt);
// The engine for posters and pollers (any thread, no lock): set once the
// engine has started.
engine::Engine* engine_fast();

}  // namespace droce::verbs
