// Plain-TCP sockets of the latency-under-load traffic: connect, listen, lines, pacing, drain.
#include "netbench/load_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/line_io.h"
#include "netbench/clock.h"

namespace wcomm::bench {
namespace {

constexpr std::size_t kChunk = 16 * 1024;

std::runtime_error socket_error(const std::string& what, int error) {
  return std::runtime_error("load traffic: " + what + ": " + std::strerror(error));
}

sockaddr_in resolve(const std::string& host, std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (host.empty() || host == "0.0.0.0") {
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    return address;
  }
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) == 1) return address;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr)
    throw std::runtime_error("load traffic: cannot resolve '" + host + "'");
  address.sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
  freeaddrinfo(found);
  return address;
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

Socket connect_tcp(const std::string& host, std::uint16_t port, std::chrono::milliseconds timeout) {
  const sockaddr_in address = resolve(host, port);
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) throw socket_error("socket", errno);
  timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
  setsockopt(s.fd(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // bounds connect() too
  if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
    throw socket_error("connect to " + host + ":" + std::to_string(port), errno);
  const int one = 1;
  setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

Socket listen_tcp(const std::string& host, std::uint16_t port) {
  const sockaddr_in address = resolve(host, port);
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) throw socket_error("socket", errno);
  const int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0)
    throw socket_error("bind " + host + ":" + std::to_string(port), errno);
  if (::listen(s.fd(), 64) != 0) throw socket_error("listen", errno);
  return s;
}

std::string read_line(int fd) {
  Result<std::string> line = wcomm::read_line(fd, SteadyClock::time_point::max(), 4096);
  if (!line.ok()) throw std::runtime_error("load traffic: " + line.error().message);
  return std::move(line).value();
}

void write_all(int fd, const std::string& data) {
  if (Status written = wcomm::write_all(fd, data); !written.ok())
    throw std::runtime_error("load traffic: " + written.error().message);
}

std::uint64_t paced_send(int fd, double mbps, double seconds, const std::atomic<bool>& stop) {
  static const std::vector<char> zeros(kChunk, 0);
  const double rate = std::max(mbps, 0.001) * 1e6 / 8.0;  // bytes per second
  // Room for 5 ms of traffic (at least two chunks): smooth, yet not a sleep per chunk.
  const double capacity = std::max(2.0 * kChunk, rate * 0.005);
  double tokens = static_cast<double>(kChunk);
  std::uint64_t sent = 0;
  const auto start = BenchClock::now();
  auto last = start;
  while (!stop.load(std::memory_order_relaxed)) {
    const auto now = BenchClock::now();
    if (seconds_between(start, now) >= seconds) break;
    tokens = std::min(capacity, tokens + rate * seconds_between(last, now));
    last = now;
    if (tokens < static_cast<double>(kChunk)) {
      std::this_thread::sleep_for(std::chrono::duration<double>((static_cast<double>(kChunk) - tokens) / rate));
      continue;
    }
    const ssize_t n = ::send(fd, zeros.data(), kChunk, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      break;
    }
    sent += static_cast<std::uint64_t>(n);
    tokens -= static_cast<double>(n);
  }
  return sent;
}

std::uint64_t drain(int fd, const std::atomic<bool>& stop) {
  std::vector<char> buffer(256 * 1024);
  std::uint64_t received = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      break;
    }
    received += static_cast<std::uint64_t>(n);
  }
  return received;
}

}  // namespace wcomm::bench
