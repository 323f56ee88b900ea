// The out-of-band channel droce's tools meet their peers over before any
// RDMA traffic flows, as perftest does: line-based text messages over one
// TCP connection (IPv4, TCP_NODELAY). droce-perf uses one Channel per peer;
// droce-pktgen's DPDK ranks use a RankGroup (rank_group.h) built on it.
// DPDK-free.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace droce::oob {

// The peer vanished, said something out of step, or did not answer in
// time: the run fails (kExitFailure), unlike a ConfigError.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One TCP connection to a peer.
class Channel {
 public:
  Channel() = default;
  explicit Channel(int fd);  // takes an accepted connection
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  Channel(Channel&& o) noexcept;
  Channel& operator=(Channel&& o) noexcept;

  // Retries until timeout_s while the peer does not listen yet (it may
  // start later, e.g. after its EAL). A host that is not an IPv4 address is
  // a ConfigError naming `option`.
  void connect_to(const std::string& host, uint16_t port, double timeout_s,
                  const std::string& option = "connect");

  // `line` must not contain '\n'.
  void send_line(const std::string& line);
  // A complete line if one arrives within timeout_ms. 0: just look, at the
  // socket at most every kLookEvery (a line already read is returned at
  // once): looking is a system call of about a microsecond, and callers
  // that spin (an application running the engine's loop while it waits for
  // its peer) would otherwise make one per pass of the loop, between a
  // frame arriving and its answer.
  std::optional<std::string> try_recv_line(int timeout_ms);
  static constexpr std::chrono::microseconds kLookEvery{20};
  // Throws Error naming `what` after timeout_s.
  std::string recv_line(double timeout_s, const std::string& what);
  // Called over and over while recv_line() waits, instead of blocking in
  // the kernel: an engine run to completion has no thread of its own, and
  // the peer's frames must be answered while this side waits for a line.
  void set_while_waiting(std::function<void()> f) { while_waiting_ = std::move(f); }

  // Both sides send the tag, then wait for the peer's (perftest's
  // ctx_hand_shake barrier).
  void barrier(const std::string& tag, double timeout_s);
  // The two halves of barrier(), for a side that meets several peers: it
  // first hears every peer, then answers them all.
  void barrier_recv(const std::string& tag, double timeout_s);
  void barrier_send(const std::string& tag) { send_line("SYNC " + tag); }

  bool connected() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
  std::string buf_;
  std::function<void()> while_waiting_;
  std::chrono::steady_clock::time_point next_look_{};
};

// A listening socket, open for the whole set-up so that every peer's
// connect lands in the backlog while earlier peers are served.
class Listener {
 public:
  // Port 0 picks a free port (port() tells which). A bad address or a port
  // in use is a ConfigError naming `option`.
  Listener(const std::string& bind, uint16_t port, int backlog,
           const std::string& option = "port");
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  uint16_t port() const { return port_; }
  // Throws Error when nobody connects within timeout_s.
  Channel accept(double timeout_s);

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::string where_;
};

}  // namespace droce::oob
