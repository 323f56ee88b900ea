// The process's droce behind libdroce-verbs (runtime.h): EAL and the
// engine started the first time the application opens the device, stopped
// when the library is unloaded (the application's exit).
#include "runtime.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "droce/transport/requester.h"

namespace droce::verbs {

namespace {

std::atomic<engine::Engine*> g_fast{nullptr};

void complain(const std::string& what) {
  std::fprintf(stderr, "libdroce-verbs: %s\n", what.c_str());
}

}  // namespace

Runtime& runtime() {
  // Never destroyed by the C++ runtime: the library's destructor below
  // stops the engine first, at a point the application chose (exit).
  static Runtime* rt = new Runtime;
  return *rt;
}

engine::Engine* engine_fast() { return g_fast.load(std::memory_order_acquire); }

bool ensure_config(Runtime& rt) {
  if (!rt.config_tried) {
    rt.config_tried = true;
    try {
      rt.cfg = load_config_from_env();
      rt.config_ok = true;
    } catch (const ConfigError& e) {
      // A key of the file: say which file.
      const char* path = std::getenv("DROCE_VERBS_CONFIG");
      if (e.option() == "DROCE_VERBS_CONFIG" || !path || e.option() == path)
        complain(e.what());
      else
        complain(std::string(path) + ": " + e.what());
    }
  }
  if (!rt.config_ok) errno = EINVAL;
  return rt.config_ok;
}

bool ensure_engine(Runtime& rt) {
  if (rt.eng) return true;
  if (!ensure_config(rt)) return false;
  if (rt.engine_tried) {
    errno = ENODEV;
    return false;
  }
  rt.engine_tried = true;
  const Config& c = rt.cfg;
  std::vector<std::string> args{"libdroce-verbs"};
  args.insert(args.end(), c.eal.begin(), c.eal.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // rte_eal_init pins the calling thread (the application's) to the main
  // lcore's CPUs; the application placed its threads itself, so its mask
  // comes back afterwards. Threads the engine starts later inherit it.
  cpu_set_t saved;
  const bool have_mask = sched_getaffinity(0, sizeof saved, &saved) == 0;
  try {
    engine::init_eal(static_cast<int>(args.size()), argv.data());
  } catch (const droce::ConfigError& e) {
    if (have_mask) sched_setaffinity(0, sizeof saved, &saved);
    complain(std::string("eal: ") + e.what());
    errno = EINVAL;
    return false;
  }
  if (have_mask) sched_setaffinity(0, sizeof saved, &saved);
  try {
    engine::EngineConfig ec;
    ec.idle_sleep_us = c.idle_sleep_us;
    ec.telemetry = c.telemetry;
    ec.run_to_completion = false;  // the worker runs by itself
    ec.callers_step = c.callers_step;
    auto eng = std::make_unique<engine::Engine>(ec);
    engine::PortConfig pc;
    pc.name = c.port;
    pc.endpoint.port_rate_bytes_per_sec =
        static_cast<uint64_t>(c.port_rate_gbps * 1e9 / 8);
    pc.endpoint.interface.addresses = c.addresses;
    rt.port = eng->add_port(pc);
    rt.port_id = eng->port_id(rt.port);
    rt.mac = eng->port_mac(rt.port);
    rt.mtu = transport::active_mtu(c.mtu, eng->port_mtu(rt.port));
    rt.gids = gid_table(rt.mac, c.addresses);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(c.start_timeout_ms);
    if (!c.wait_for.empty()) {
      while (::access(c.wait_for.c_str(), F_OK) != 0) {
        if (std::chrono::steady_clock::now() >= deadline)
          throw droce::ConfigError("wait_for", "'" + c.wait_for + "' did not appear within " +
                                                    std::to_string(c.start_timeout_ms) + " ms");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      // A socket's file appears at bind(), before its owner listens; a
      // memif client connecting in between is refused and does not try
      // again.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    for (;;) {
      try {
        eng->start();  // a port that started stays started
        break;
      } catch (const droce::ConfigError& e) {
        if (e.option() != "port" || std::chrono::steady_clock::now() >= deadline) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    rt.eng = std::move(eng);
  } catch (const droce::ConfigError& e) {
    complain(e.what());
    errno = EINVAL;
    return false;
  } catch (const std::exception& e) {
    complain(e.what());
    errno = ENODEV;
    return false;
  }
  g_fast.store(rt.eng.get(), std::memory_order_release);
  if (rt.cfg.telemetry)
    rt.stats_thread = std::thread([&rt] {
      std::unique_lock lock(rt.mu);
      while (!rt.stopping) {
        rt.stats_cv.wait_for(lock, std::chrono::milliseconds(100));
        if (rt.stopping || !rt.eng) break;
        try {
          rt.eng->stats();
        } catch (const std::exception&) {
          break;  // the engine is going away
        }
      }
    });
  return true;
}

namespace {

// The application is exiting: stop the worker, close the port (a memif or
// veth peer sees the link go down, and its QPs then time out as a NIC's
// peer's would) and give EAL's memory back.
__attribute__((destructor)) void shut_down() {
  Runtime& rt = runtime();
  {
    std::lock_guard lock(rt.mu);
    rt.stopping = true;
  }
  rt.stats_cv.notify_all();
  if (rt.stats_thread.joinable()) rt.stats_thread.join();
  std::lock_guard lock(rt.mu);
  if (!rt.eng) return;
  g_fast.store(nullptr, std::memory_order_release);
  try {
    if (rt.cfg.counters_at_exit)
      std::fprintf(stderr, "libdroce-verbs: counters at exit\n%s",
                   engine::format_counters(rt.eng->stats_now(), true).c_str());
    rt.eng->stop();
    rt.eng->close_ports();
    rt.eng.reset();
    engine::cleanup_eal();
  } catch (const std::exception& e) {
    complain(std::string("shutdown: ") + e.what());
  }
}

}  // namespace

}  // namespace droce::verbs
