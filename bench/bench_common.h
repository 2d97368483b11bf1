// Helpers shared by the stand-alone benchmark programs in bench/: round-trip statistics and a
// pipe to hand a port number from the listening process to its forked peer.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace wcomm::bench_programs {

using Clock = std::chrono::steady_clock;

inline double micros_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// numpy-style linear percentile (q in 0..100) of unsorted samples.
inline double percentile(std::vector<double> samples, double q) {
  std::sort(samples.begin(), samples.end());
  const double rank = q / 100.0 * static_cast<double>(samples.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, samples.size() - 1);
  const double t = rank - static_cast<double>(lo);
  return samples[lo] * (1.0 - t) + samples[hi] * t;
}

// One JSON line with the round-trip figures, for run_core_bench.sh.
inline void print_rtt_json(const char* what, std::size_t payload_bytes, const std::vector<double>& rtt_us) {
  double sum = 0;
  for (double x : rtt_us) sum += x;
  std::printf(
      "{\"what\": \"%s\", \"payload_bytes\": %zu, \"rounds\": %zu, \"p50_us\": %.3f, \"p99_us\": %.3f, "
      "\"mean_us\": %.3f, \"min_us\": %.3f}\n",
      what, payload_bytes, rtt_us.size(), percentile(rtt_us, 50), percentile(rtt_us, 99),
      sum / static_cast<double>(rtt_us.size()), *std::min_element(rtt_us.begin(), rtt_us.end()));
  std::fflush(stdout);
}

[[noreturn]] inline void die(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::exit(1);
}

// A loopback port free now (bound and let go): good enough for a benchmark.
inline std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    die("cannot find a free loopback port");
  ::close(fd);
  return ntohs(a.sin_port);
}

// Writes / reads one 16-bit value through a pipe (the listener's port, from parent to child).
inline void write_port(int fd, std::uint16_t port) {
  if (write(fd, &port, sizeof port) != sizeof port) die("cannot write the port to the pipe");
}
inline std::uint16_t read_port(int fd) {
  std::uint16_t port = 0;
  if (read(fd, &port, sizeof port) != sizeof port) die("cannot read the port from the pipe");
  return port;
}

inline std::uint64_t arg_or(int argc, char** argv, int index, std::uint64_t fallback) {
  return argc > index ? std::strtoull(argv[index], nullptr, 10) : fallback;
}

}  // namespace wcomm::bench_programs
