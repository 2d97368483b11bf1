// Small-message latency through the public Comm API: two processes, a 64 B Bytes payload,
// send().get() then recv().get(), as an application would write it.
// Usage: api_pingpong [rounds] [bytes] [recv_busy_poll_us (default: CommConfig's; 0 sleeps at once)]
#include <sys/wait.h>
#include <unistd.h>

#include "bench_common.h"
#include "wcomm/comm.h"

using namespace wcomm::bench_programs;

int main(int argc, char** argv) {
  const std::uint64_t rounds = arg_or(argc, argv, 1, 20000);
  const std::size_t size = arg_or(argc, argv, 2, 64);
  wcomm::CommConfig config;
  config.recv_busy_poll_us = arg_or(argc, argv, 3, config.recv_busy_poll_us);
  const std::uint64_t warmup = std::min<std::uint64_t>(1000, rounds);
  const std::uint64_t total = warmup + rounds;

  int port_pipe[2];
  if (pipe(port_pipe) != 0) die("api_pingpong: pipe failed");
  // Fork before any Comm exists: a Comm owns a thread, which a fork would not carry over.
  const pid_t child = fork();
  if (child != 0) {
    // Echo side: listens on an ephemeral port, which the child (the dialer) learns by pipe.
    // The child's directory entry is never dialed, so its port is a placeholder.
    auto comm = wcomm::Comm::create(wcomm::CommSpec{{"echo", "127.0.0.1", 0}, {{"ping", "127.0.0.1", 1}}, "", config});
    write_port(port_pipe[1], comm->port());
    const wcomm::Peer& peer = comm->peer("ping");
    for (std::uint64_t i = 0; i < total; ++i) {
      wcomm::Received got = comm->recv(peer).get();
      comm->send(std::move(got.value), peer).get();
    }
    int status = 0;
    waitpid(child, &status, 0);
    comm->close();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }

  const std::uint16_t port = read_port(port_pipe[0]);
  auto comm = wcomm::Comm::create(wcomm::CommSpec{{"ping", "127.0.0.1", 0}, {{"echo", "127.0.0.1", port}}, "", config});
  const wcomm::Peer& peer = comm->peer("echo");
  const wcomm::Bytes payload(std::string(size, 'x'));
  std::vector<double> rtt_us;
  rtt_us.reserve(rounds);
  for (std::uint64_t i = 0; i < total; ++i) {
    const auto start = Clock::now();
    comm->send(wcomm::Value(payload), peer).get();
    wcomm::Received got = comm->recv(peer).get();
    const auto end = Clock::now();
    if (!got.value.is<wcomm::Bytes>() || got.value.as<wcomm::Bytes>().size() != size)
      die("api_pingpong: the echo is not the payload sent");
    if (i >= warmup) rtt_us.push_back(micros_between(start, end));
  }
  print_rtt_json("api_pingpong", size, rtt_us);
  comm->close();
  return 0;
}
