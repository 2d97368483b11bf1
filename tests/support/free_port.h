// Loopback TCP ports for tests to name in a config before the node that listens on them starts.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

namespace wcomm::testing {

// A loopback port held bound (not listening) while this object lives; a Comm, which sets
// SO_REUSEADDR, can still listen on it. It is picked at random below the kernel's ephemeral
// range (32768-60999 by default): the kernel never gives such a port to an outgoing connection,
// so after release it stays free for its node while parallel tests open thousands of
// connections (a port from bind(0) was once taken in that gap in CI). The bind is exclusive
// (SO_REUSEADDR is set only after it), so a port another socket holds, listens on or still
// has in TIME_WAIT is never handed out.
class ReservedPort {
 public:
  // consecutive > 1 holds that many ports in a row (port() is the first): a benchmark
  // responder also listens on its port + 1 (V0.1's load port).
  explicit ReservedPort(int consecutive = 1) {
    static thread_local std::mt19937 random{std::random_device{}()};
    std::uniform_int_distribution<int> below_ephemeral(16384, 32767 - consecutive);
    for (int attempt = 0; attempt < 1000 && fds_.empty(); ++attempt) {
      const int first = below_ephemeral(random);
      for (int k = 0; k < consecutive; ++k) {
        const int fd = bind_exclusively(static_cast<std::uint16_t>(first + k));
        if (fd < 0) break;
        fds_.push_back(fd);
      }
      if (static_cast<int>(fds_.size()) == consecutive) {
        port_ = static_cast<std::uint16_t>(first);
      } else {
        release();
      }
    }
    if (fds_.empty()) throw std::runtime_error("ReservedPort: no free loopback port below the ephemeral range");
  }
  ~ReservedPort() { release(); }
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  static int bind_exclusively(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd);
      return -1;
    }
    int one = 1;  // from now on a node's own bind (with SO_REUSEADDR) may share the port
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    return fd;
  }
  void release() {
    for (int fd : fds_) ::close(fd);
    fds_.clear();
  }

  std::vector<int> fds_;
  std::uint16_t port_ = 0;
};

// n distinct loopback ports, free a moment ago (all held at once, so they differ), for child
// processes that bind them themselves.
inline std::vector<std::uint16_t> free_tcp_ports(std::size_t n) {
  std::vector<std::unique_ptr<ReservedPort>> held;
  std::vector<std::uint16_t> ports;
  for (std::size_t i = 0; i < n; ++i) {
    held.push_back(std::make_unique<ReservedPort>());
    ports.push_back(held.back()->port());
  }
  return ports;
}

inline std::uint16_t free_tcp_port() { return free_tcp_ports(1).front(); }

}  // namespace wcomm::testing
