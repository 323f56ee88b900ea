// droce-perf's out-of-band channel: line-based messages over TCP, as
// perftest meets its peer before any RDMA traffic (docs/DROCE-PERF.md "Set-up, out
// of band"). A client connects; a server listens once and accepts one
// connection per client (--clients).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

namespace droce::perf {

// A runtime failure (peer vanished, completion error, data mismatch,
// timeout): "error: ..." and exit code 1.
class Failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One TCP connection to the peer.
class Oob {
 public:
  Oob() = default;
  explicit Oob(int fd);  // an accepted connection
  ~Oob();
  Oob(const Oob&) = delete;
  Oob& operator=(const Oob&) = delete;
  Oob(Oob&& o) noexcept;
  Oob& operator=(Oob&& o) noexcept;

  // Retries while the server does not listen yet (it starts EAL first).
  void connect_to(const std::string& host, uint16_t port, double timeout);

  void send_line(const std::string& line);
  // A complete line if one arrives within timeout_ms (0: just look).
  std::optional<std::string> try_recv_line(int timeout_ms);
  std::string recv_line(double timeout_s, const std::string& what);
  // Called over and over while recv_line() waits, instead of blocking in
  // the kernel: an engine run to completion has no thread of its own, and
  // the peer's frames must be answered while this side waits for a line.
  void set_while_waiting(std::function<void()> f) { while_waiting_ = std::move(f); }
  // Both sides send the tag, then wait for the peer's (perftest's
  // ctx_hand_shake barrier).
  void barrier(const std::string& tag, double timeout_s);
  // The two halves of barrier(), for a server that meets several clients:
  // it first hears every client, then answers them all.
  void barrier_recv(const std::string& tag, double timeout_s);
  void barrier_send(const std::string& tag) { send_line("SYNC " + tag); }

 private:
  int fd_ = -1;
  std::string buf_;
  std::function<void()> while_waiting_;
};

// The server's listening socket, open for the whole set-up so that every
// client's connect lands in the backlog while earlier clients are served.
class Listener {
 public:
  Listener(const std::string& bind, uint16_t port, int backlog);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  Oob accept(double timeout);

 private:
  int fd_ = -1;
  std::string where_;
};

// key=value tokens after a leading word.
std::map<std::string, std::string> parse_kv(const std::string& line);
uint64_t kv_u64(const std::map<std::string, std::string>& kv, const std::string& key);

}  // namespace droce::perf
