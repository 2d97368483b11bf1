// The raw reference for small-message latency: two processes doing blocking write/read of a
// 64 B message over a TCP_NODELAY loopback socket. Usage: raw_tcp_pingpong [rounds] [bytes]
#include <sys/wait.h>

#include "raw_socket.h"

using namespace wcomm::bench_programs;

int main(int argc, char** argv) {
  const std::uint64_t rounds = arg_or(argc, argv, 1, 20000);
  const std::size_t size = arg_or(argc, argv, 2, 64);
  const std::uint64_t warmup = std::min<std::uint64_t>(1000, rounds);

  // The listener exists before the fork, so the child can connect at once.
  sockaddr_in address;
  const int listener = listen_on_loopback(address);

  std::vector<char> buffer(std::max<std::size_t>(size, 1), 'x');
  const pid_t child = fork();
  if (child == 0) {
    // Echo side.
    close(listener);
    const int fd = connect_to(address);
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
