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
  ReservedPort() {
    static thread_local std::mt19937 random{std::random_device{}()};
    std::uniform_int_distribution<int> below_ephemeral(16384, 32767);
    for (int attempt = 0; attempt < 1000 && fd_ < 0; ++attempt) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) break;
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<std::uint16_t>(below_ephemeral(random)));
      if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        continue;
      }
      int one = 1;  // from now on a node's own bind (with SO_REUSEADDR) may share the port
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      fd_ = fd;
      port_ = ntohs(addr.sin_port);
    }
    if (fd_ < 0) throw std::runtime_error("ReservedPort: no free loopback port below the ephemeral range");
  }
  ~ReservedPort() { ::close(fd_); }
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
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
