// The shm transport's own round trip, below the Comm API: two processes joined by the shm
// transport bounce a message of `bytes` bytes (as one frame of that size would travel), each
// side busy-polling its ring with try_read. What is left over of a Comm round trip (api_pingpong
// ... shm) is the cost of the API's per-message work; this is the transport's, the figure to
// hold against ucx_perftest tag_lat over UCX's shared memory.
// Usage: shm_ring_pingpong [rounds] [bytes]
#include <sys/wait.h>
#include <unistd.h>

#include <asio.hpp>

#include "bench_common.h"
#include "comm_pair.h"
#include "transport/transport.h"

using namespace wcomm::bench_programs;
namespace transport = wcomm::transport;

namespace {

// The connection, once the dial or the accept has finished.
std::unique_ptr<transport::Connection> connect(asio::io_context& io, bool listen, const std::string& path, int ready_fd) {
  std::unique_ptr<transport::Connection> connection;
  std::unique_ptr<transport::Listener> listener;
  std::shared_ptr<transport::PendingDial> dial;
  const auto address = wcomm::Address::parse("shm://" + path);
  auto take = [&](std::error_code ec, std::unique_ptr<transport::Connection> c) {
    if (ec) die("shm_ring_pingpong: " + ec.message());
    connection = std::move(c);
    io.stop();
  };
  if (listen) {
    listener = transport::listen(io, address, {});
    listener->start(take);
    write_port(ready_fd, 1);
  } else {
    dial = transport::dial(io, address, std::chrono::steady_clock::now() + std::chrono::seconds(10), {}, take);
  }
  io.run();
  io.restart();
  if (listener) listener->close();
  return connection;
}

void write_all(transport::Connection& c, const std::vector<std::uint8_t>& message) {
  std::error_code ec;
  const std::vector<asio::const_buffer> buffers{asio::buffer(message)};
  if (c.try_write(buffers, ec) != message.size() || ec) die("shm_ring_pingpong: the ring took less than a message");
}

void read_all(transport::Connection& c, std::vector<std::uint8_t>& into) {
  std::size_t got = 0;
  std::error_code ec;
  while (got < into.size()) {
    got += c.try_read({asio::buffer(into)}, got, ec);
    if (ec) die("shm_ring_pingpong: " + ec.message());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t rounds = arg_or(argc, argv, 1, 100000);
  const std::size_t size = arg_or(argc, argv, 2, 64);
  const std::uint64_t warmup = std::min<std::uint64_t>(1000, rounds);
  const std::string path = "/tmp/wcomm-ring-" + std::to_string(getpid()) + ".sock";
  int ready[2];
  if (pipe(ready) != 0) die("pipe failed");
  const pid_t child = fork();
  pin_to_cpu(child != 0 ? 0 : 1);
  asio::io_context io;
  std::vector<std::uint8_t> message(size, 'x'), echo(size);
  if (child != 0) {  // echo
    auto c = connect(io, true, path, ready[1]);
    for (std::uint64_t i = 0; i < warmup + rounds; ++i) {
      read_all(*c, echo);
      write_all(*c, echo);
    }
    int status = 0;
    waitpid(child, &status, 0);
    c->close();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  read_port(ready[0]);
  auto c = connect(io, false, path, -1);
  std::vector<double> rtt_us;
  rtt_us.reserve(rounds);
  for (std::uint64_t i = 0; i < warmup + rounds; ++i) {
    const auto start = Clock::now();
    write_all(*c, message);
    read_all(*c, echo);
    if (i >= warmup) rtt_us.push_back(micros_between(start, Clock::now()));
  }
  if (echo != message) die("shm_ring_pingpong: the echo is not the message sent");
  print_rtt_json("shm_ring_pingpong", size, rtt_us);
  c->close();
  return 0;
}
