// The raw reference for small-message latency: two processes doing blocking write/read of a
// 64 B message over a TCP_NODELAY loopback socket. Usage: raw_tcp_pingpong [rounds] [bytes]
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "bench_common.h"

using namespace wcomm::bench_programs;

namespace {

void exact_write(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n <= 0) die("raw_tcp_pingpong: write failed");
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

// Returns false at end of stream.
bool exact_read(int fd, char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = read(fd, data, size);
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t rounds = arg_or(argc, argv, 1, 20000);
  const std::size_t size = arg_or(argc, argv, 2, 64);
  const std::uint64_t warmup = std::min<std::uint64_t>(1000, rounds);

  // The listener exists before the fork, so the child can connect at once.
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    die("raw_tcp_pingpong: cannot listen on loopback");

  std::vector<char> buffer(std::max<std::size_t>(size, 1), 'x');
  const pid_t child = fork();
  if (child == 0) {
    // Echo side.
    close(listener);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) die("raw_tcp_pingpong: connect failed");
    set_nodelay(fd);
    while (exact_read(fd, buffer.data(), size)) exact_write(fd, buffer.data(), size);
    _exit(0);
  }
  const int fd = accept(listener, nullptr, nullptr);
  if (fd < 0) die("raw_tcp_pingpong: accept failed");
  set_nodelay(fd);
  std::vector<double> rtt_us;
  rtt_us.reserve(rounds);
  for (std::uint64_t i = 0; i < warmup + rounds; ++i) {
    const auto start = Clock::now();
    exact_write(fd, buffer.data(), size);
    if (!exact_read(fd, buffer.data(), size)) die("raw_tcp_pingpong: the echo side closed");
    const auto end = Clock::now();
    if (i >= warmup) rtt_us.push_back(micros_between(start, end));
  }
  close(fd);
  waitpid(child, nullptr, 0);
  print_rtt_json("raw_tcp_pingpong", size, rtt_us);
  return 0;
}
