#include "oob.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>
#include <thread>

#include "droce/engine/engine.h"

namespace droce::perf {

namespace {

sockaddr_in make_addr(const std::string& host, uint16_t port, const char* option) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (::inet_pton(AF_INET, h.c_str(), &a.sin_addr) != 1)
    throw droce::ConfigError(option, fmt::format("'{}' is not an IPv4 address", host));
  return a;
}

void nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

Oob::Oob(int fd) : fd_(fd) { nodelay(fd_); }

Oob::~Oob() {
  if (fd_ >= 0) ::close(fd_);
}

Oob::Oob(Oob&& o) noexcept
    : fd_(o.fd_), buf_(std::move(o.buf_)), while_waiting_(std::move(o.while_waiting_)) {
  o.fd_ = -1;
}

Oob& Oob::operator=(Oob&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    buf_ = std::move(o.buf_);
    while_waiting_ = std::move(o.while_waiting_);
    o.fd_ = -1;
  }
  return *this;
}

void Oob::connect_to(const std::string& host, uint16_t port, double timeout) {
  sockaddr_in a = make_addr(host, port, "connect");
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000));
  for (;;) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw Failure(fmt::format("socket: {}", std::strerror(errno)));
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) break;
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    // The server may not listen yet (it starts EAL first): retry.
    if (std::chrono::steady_clock::now() > deadline)
      throw Failure(fmt::format("cannot connect to {}:{}: {}", host, port,
                                std::strerror(err)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  nodelay(fd_);
}

void Oob::send_line(const std::string& line) {
  const std::string s = line + "\n";
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) throw Failure("out-of-band connection to the peer lost (send)");
    off += static_cast<size_t>(n);
  }
}

std::optional<std::string> Oob::try_recv_line(int timeout_ms) {
  for (;;) {
    if (auto nl = buf_.find('\n'); nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return line;
    }
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    char tmp[4096];
    const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) throw Failure("out-of-band connection to the peer lost (the peer exited?)");
    buf_.append(tmp, static_cast<size_t>(n));
  }
}

std::string Oob::recv_line(double timeout_s, const std::string& what) {
  std::optional<std::string> line;
  if (while_waiting_) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(timeout_s));
    while (!(line = try_recv_line(0)) && std::chrono::steady_clock::now() < deadline)
      while_waiting_();
  } else {
    line = try_recv_line(static_cast<int>(timeout_s * 1000));
  }
  if (!line)
    throw Failure(fmt::format("timed out after {} s waiting for the peer ({})", timeout_s,
                              what));
  return *line;
}

void Oob::barrier(const std::string& tag, double timeout_s) {
  barrier_send(tag);
  barrier_recv(tag, timeout_s);
}

void Oob::barrier_recv(const std::string& tag, double timeout_s) {
  const std::string got = recv_line(timeout_s, "barrier " + tag);
  if (got != "SYNC " + tag)
    throw Failure(fmt::format("peer out of step: expected 'SYNC {}', got '{}'", tag, got));
}

Listener::Listener(const std::string& bind, uint16_t port, int backlog)
    : where_(fmt::format("{}:{}", bind, port)) {
  sockaddr_in a = make_addr(bind, port, "bind");
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) throw Failure(fmt::format("socket: {}", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(fd_, backlog) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    throw droce::ConfigError("port", fmt::format("cannot listen on {}: {}", where_, err));
  }
}

Listener::~Listener() {
  if (fd_ >= 0) ::close(fd_);
}

Oob Listener::accept(double timeout) {
  pollfd p{fd_, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(timeout * 1000));
  } while (r < 0 && errno == EINTR);
  if (r <= 0)
    throw Failure(fmt::format("no client connected to {} within {} s", where_, timeout));
  const int fd = ::accept(fd_, nullptr, nullptr);
  if (fd < 0) throw Failure(fmt::format("accept: {}", std::strerror(errno)));
  return Oob(fd);
}

std::map<std::string, std::string> parse_kv(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream in(line);
  std::string tok;
  in >> tok;  // the message name
  while (in >> tok) {
    const auto eq = tok.find('=');
    if (eq != std::string::npos) out[tok.substr(0, eq)] = tok.substr(eq + 1);
  }
  return out;
}

uint64_t kv_u64(const std::map<std::string, std::string>& kv, const std::string& key) {
  auto it = kv.find(key);
  if (it == kv.end()) throw Failure(fmt::format("peer message lacks '{}'", key));
  // The peer is another droce-perf, but its words are still input: a
  // malformed number is a clear failure, not std::stoull's bare message.
  size_t used = 0;
  uint64_t v = 0;
  try {
    v = std::stoull(it->second, &used, 0);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != it->second.size())
    throw Failure(fmt::format("peer message: {}='{}' is not a number", key, it->second));
  return v;
}

}  // namespace droce::perf
