#include "droce/oob/channel.h"

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
#include <thread>

#include "droce/config_error.h"

namespace droce::oob {
namespace {

sockaddr_in address_of(const std::string& host, uint16_t port, const std::string& option) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (::inet_pton(AF_INET, h.c_str(), &a.sin_addr) != 1)
    throw ConfigError(option, fmt::format("'{}' is not an IPv4 address", host));
  return a;
}

// Set-up messages are a few short lines each way: Nagle would hold each
// one back for the peer's delayed ACK.
void no_delay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int poll_in(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r;
}

}  // namespace

Channel::Channel(int fd) : fd_(fd) { no_delay(fd_); }

Channel::~Channel() {
  if (fd_ >= 0) ::close(fd_);
}

Channel::Channel(Channel&& o) noexcept
    : fd_(o.fd_),
      buf_(std::move(o.buf_)),
      while_waiting_(std::move(o.while_waiting_)),
      next_look_(o.next_look_) {
  o.fd_ = -1;
}

Channel& Channel::operator=(Channel&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    buf_ = std::move(o.buf_);
    while_waiting_ = std::move(o.while_waiting_);
    next_look_ = o.next_look_;
    o.fd_ = -1;
  }
  return *this;
}

void Channel::connect_to(const std::string& host, uint16_t port, double timeout_s,
                         const std::string& option) {
  const sockaddr_in a = address_of(host, port, option);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  if (fd_ >= 0) ::close(fd_);
  for (;;) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw Error(fmt::format("socket: {}", std::strerror(errno)));
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) == 0) break;
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (std::chrono::steady_clock::now() > deadline)
      throw Error(fmt::format("cannot connect to {}:{}: {}", host, port, std::strerror(err)));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  no_delay(fd_);
}

void Channel::send_line(const std::string& line) {
  const std::string s = line + "\n";
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) throw Error("out-of-band connection to the peer lost (send)");
    off += static_cast<size_t>(n);
  }
}

std::optional<std::string> Channel::try_recv_line(int timeout_ms) {
  for (;;) {
    if (auto nl = buf_.find('\n'); nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return line;
    }
    if (timeout_ms == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now < next_look_) return std::nullopt;
      next_look_ = now + kLookEvery;
    }
    if (poll_in(fd_, timeout_ms) <= 0) return std::nullopt;
    char tmp[4096];
    const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) throw Error("out-of-band connection to the peer lost (the peer exited?)");
    buf_.append(tmp, static_cast<size_t>(n));
  }
}

std::string Channel::recv_line(double timeout_s, const std::string& what) {
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
    throw Error(fmt::format("timed out after {} s waiting for the peer ({})", timeout_s, what));
  return *line;
}

void Channel::barrier(const std::string& tag, double timeout_s) {
  barrier_send(tag);
  barrier_recv(tag, timeout_s);
}

void Channel::barrier_recv(const std::string& tag, double timeout_s) {
  const std::string got = recv_line(timeout_s, "barrier " + tag);
  if (got != "SYNC " + tag)
    throw Error(fmt::format("peer out of step: expected 'SYNC {}', got '{}'", tag, got));
}

Listener::Listener(const std::string& bind, uint16_t port, int backlog,
                   const std::string& option) {
  sockaddr_in a = address_of(bind, port, option);
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) throw Error(fmt::format("socket: {}", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  socklen_t len = sizeof(a);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(fd_, backlog) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    throw ConfigError(option, fmt::format("cannot listen on {}:{}: {}", bind, port, err));
  }
  port_ = ntohs(a.sin_port);
  where_ = fmt::format("{}:{}", bind, port_);
}

Listener::~Listener() {
  if (fd_ >= 0) ::close(fd_);
}

Channel Listener::accept(double timeout_s) {
  if (poll_in(fd_, static_cast<int>(timeout_s * 1000)) <= 0)
    throw Error(fmt::format("no peer connected to {} within {} s", where_, timeout_s));
  const int fd = ::accept(fd_, nullptr, nullptr);
  if (fd < 0) throw Error(fmt::format("accept: {}", std::strerror(errno)));
  return Channel(fd);
}

}  // namespace droce::oob
