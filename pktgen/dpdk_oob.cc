#include "droce/pktgen/dpdk_oob.h"

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

namespace droce::pktgen {
namespace {

sockaddr_in make_addr(const std::string& host, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (::inet_pton(AF_INET, h.c_str(), &a.sin_addr) != 1)
    throw std::invalid_argument(fmt::format("--oob-host: '{}' is not an IPv4 address", host));
  return a;
}

void nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

RankOob::RankOob(uint32_t rank, uint32_t ranks, const std::string& host, uint16_t port,
                 double timeout_s)
    : rank_(rank), ranks_(ranks), timeout_s_(timeout_s) {
  sockaddr_in a = make_addr(host, port);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  if (rank == 0) {
    fds_.assign(ranks, -1);
    bufs_.assign(ranks, {});
    const int l = ::socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0) throw OobError(fmt::format("socket: {}", std::strerror(errno)));
    const int one = 1;
    ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(l, 64) != 0) {
      const std::string err = std::strerror(errno);
      ::close(l);
      throw OobError(fmt::format("cannot listen on {}:{}: {}", host, port, err));
    }
    for (uint32_t got = 1; got < ranks;) {
      pollfd p{l, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
        ::close(l);
        throw OobError(fmt::format("only {} of {} ranks connected to {}:{} within {} s", got,
                                   ranks, host, port, timeout_s));
      }
      const int fd = ::accept(l, nullptr, nullptr);
      if (fd < 0) continue;
      nodelay(fd);
      std::string buf;
      const std::string hello = recv_line(fd, buf, "HELLO");
      uint32_t r = 0;
      if (std::sscanf(hello.c_str(), "HELLO rank=%u", &r) != 1 || r == 0 || r >= ranks ||
          fds_[r] >= 0) {
        ::close(fd);
        ::close(l);
        throw OobError(fmt::format("unexpected greeting '{}' (ranks {})", hello, ranks));
      }
      fds_[r] = fd;
      bufs_[r] = buf;
      ++got;
    }
    ::close(l);
  } else {
    fds_.assign(1, -1);
    bufs_.assign(1, {});
    for (;;) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (fd < 0) throw OobError(fmt::format("socket: {}", std::strerror(errno)));
      if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
        fds_[0] = fd;
        break;
      }
      const int err = errno;
      ::close(fd);
      if (std::chrono::steady_clock::now() > deadline)
        throw OobError(fmt::format("cannot connect to rank 0 at {}:{}: {}", host, port,
                                   std::strerror(err)));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    nodelay(fds_[0]);
    send_line(fds_[0], fmt::format("HELLO rank={}", rank));
  }
}

RankOob::~RankOob() {
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
}

void RankOob::send_line(int fd, const std::string& line) {
  const std::string s = line + "\n";
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) throw OobError("out-of-band connection lost (a rank exited?)");
    off += static_cast<size_t>(n);
  }
}

std::string RankOob::recv_line(int fd, std::string& buf, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s_ * 1000));
  for (;;) {
    if (auto nl = buf.find('\n'); nl != std::string::npos) {
      std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{fd, POLLIN, 0};
    const int r = left > 0 ? ::poll(&p, 1, static_cast<int>(left)) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) throw OobError(fmt::format("timed out after {} s waiting for {}", timeout_s_, what));
    char tmp[4096];
    const ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) throw OobError(fmt::format("out-of-band connection lost waiting for {}", what));
    buf.append(tmp, static_cast<size_t>(n));
  }
}

std::vector<std::string> RankOob::all_gather(const std::string& line) {
  std::vector<std::string> all(ranks_);
  if (rank_ == 0) {
    all[0] = line;
    for (uint32_t r = 1; r < ranks_; ++r)
      all[r] = recv_line(fds_[r], bufs_[r], fmt::format("rank {}", r));
    for (uint32_t r = 1; r < ranks_; ++r)
      for (const std::string& l : all) send_line(fds_[r], l);
  } else {
    send_line(fds_[0], line);
    for (uint32_t r = 0; r < ranks_; ++r) all[r] = recv_line(fds_[0], bufs_[0], "rank 0");
  }
  return all;
}

void RankOob::barrier(const std::string& tag) {
  for (const std::string& l : all_gather("SYNC " + tag))
    if (l != "SYNC " + tag)
      throw OobError(fmt::format("a rank is out of step: expected 'SYNC {}', got '{}'", tag, l));
}

std::vector<std::pair<std::string, std::string>> split_kv(const std::string& line) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(line);
  std::string tok;
  while (in >> tok) {
    const auto eq = tok.find('=');
    if (eq == std::string::npos) continue;
    out.emplace_back(tok.substr(0, eq), tok.substr(eq + 1));
  }
  return out;
}

std::string kv_get(const std::string& line, const std::string& key) {
  for (auto& [k, v] : split_kv(line))
    if (k == key) return v;
  throw OobError(fmt::format("peer line '{}' has no {}", line, key));
}

}  // namespace droce::pktgen
