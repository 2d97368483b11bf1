// The floor of a round trip in which both sides sleep until the other wakes them: two
// processes, two eventfds, each side blocked in read() until the other writes. No bytes are
// moved and no network stack is crossed, so this is what any same-host transport that does
// not spin pays per round trip (two wake-ups), set beside the TCP loopback round trip in
// bench/run_shm_bench.sh. Usage: raw_wakeup_pingpong [rounds]
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_common.h"

using namespace wcomm::bench_programs;

namespace {
void ring(int fd) {
  const std::uint64_t one = 1;
  if (write(fd, &one, sizeof one) != sizeof one) {
    std::perror("raw_wakeup_pingpong: write");
    std::exit(1);
  }
}
bool wait_for(int fd) {
  std::uint64_t count;
  return read(fd, &count, sizeof count) == sizeof count;
}
}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t rounds = arg_or(argc, argv, 1, 20000);
  const std::uint64_t warmup = std::min<std::uint64_t>(1000, rounds);
  const int ping = eventfd(0, EFD_CLOEXEC), pong = eventfd(0, EFD_CLOEXEC);
  if (ping < 0 || pong < 0) {
    std::perror("raw_wakeup_pingpong: eventfd");
    return 1;
  }
  const pid_t child = fork();
  if (child == 0) {
    for (std::uint64_t i = 0; i < warmup + rounds && wait_for(ping); ++i) ring(pong);
    _exit(0);
  }
  std::vector<double> rtt_us;
  rtt_us.reserve(rounds);
  for (std::uint64_t i = 0; i < warmup + rounds; ++i) {
    const auto start = Clock::now();
    ring(ping);
    if (!wait_for(pong)) return 1;
    const auto end = Clock::now();
    if (i >= warmup) rtt_us.push_back(micros_between(start, end));
  }
  waitpid(child, nullptr, 0);
  print_rtt_json("raw_wakeup_pingpong", 0, rtt_us);
  return 0;
}
