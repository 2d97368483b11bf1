// Peak memory of receiving one large tensor: the receiver's ru_maxrss before and after it
// receives a 200 MiB uint8 Tensor from a forked sender. Ideal: the growth is the tensor itself
// (1.0x); an intermediate copy would show as 2x. Usage: recv_rss [mib] [--into] [--transport T]
// (--into receives into a preallocated, already touched tensor with recv_into: ideal 0x; T is
// CommConfig::transport, default tcp).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "bench_common.h"
#include "wcomm/comm.h"

using namespace wcomm::bench_programs;

namespace {

long max_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t mib = 200;
  bool into = false;
  std::string transport = "tcp";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--into") == 0) into = true;
    else if (std::strcmp(argv[i], "--transport") == 0 && i + 1 < argc) transport = argv[++i];
    else mib = std::strtoull(argv[i], nullptr, 10);
  }
  const std::int64_t nbytes = static_cast<std::int64_t>(mib) << 20;

  int port_pipe[2];
  if (pipe(port_pipe) != 0) die("recv_rss: pipe failed");
  const pid_t child = fork();  // before any Comm (and its thread) exists
  if (child == 0) {
    // Sender: its queue bound must admit one message of this size (default 128 MiB). The
    // tensor is made first, so the receiver's clock covers the transfer, not the memset.
    const wcomm::Tensor tensor = wcomm::Tensor::zeros(wcomm::DType::kUInt8, {nbytes});
    const std::uint16_t port = read_port(port_pipe[0]);
    wcomm::CommConfig config;
    config.transport = transport;
    config.max_peer_queued_bytes = static_cast<std::uint64_t>(nbytes) + (1 << 20);
    config.max_message_bytes = std::max<std::uint64_t>(config.max_message_bytes, config.max_peer_queued_bytes);
    auto comm = wcomm::Comm::create(
        wcomm::CommSpec{{"sender", "127.0.0.1", 0}, {{"receiver", "127.0.0.1", port}}, "", config});
    comm->send(wcomm::Value(tensor), comm->peer("receiver")).get();
    // Wait for the receiver's word that it is done, so the connection outlives the transfer.
    comm->recv(comm->peer("receiver")).get();
    comm->close();
    _exit(0);
  }

  wcomm::CommConfig config;
  config.transport = transport;
  config.max_message_bytes = std::max<std::uint64_t>(config.max_message_bytes, static_cast<std::uint64_t>(nbytes) + (2 << 20));
  auto comm =
      wcomm::Comm::create(wcomm::CommSpec{{"receiver", "127.0.0.1", 0}, {{"sender", "127.0.0.1", 1}}, "", config});
  const wcomm::Peer& sender = comm->peer("sender");
  std::vector<wcomm::Tensor> destination;
  if (into) {
    destination.push_back(wcomm::Tensor::zeros(wcomm::DType::kUInt8, {nbytes}));  // touched: counted before
  }
  const long before = max_rss_kib();
  // The receive is posted before the sender learns the port, so the tensor cannot arrive
  // early (an early one would be buffered, then copied into `destination`).
  auto pending = into ? comm->recv_into(sender, destination) : comm->recv(sender);
  const auto start = Clock::now();
  write_port(port_pipe[1], comm->port());
  wcomm::Received got = pending.get();
  const auto end = Clock::now();
  const long after = max_rss_kib();
  if (!got.value.is<wcomm::Tensor>() || got.value.as<wcomm::Tensor>().nbytes() != static_cast<std::size_t>(nbytes))
    die("recv_rss: did not receive the tensor");
  comm->send(wcomm::Value("done"), sender).get();
  int status = 0;
  waitpid(child, &status, 0);
  comm->close();
  const double delta_kib = static_cast<double>(after - before);
  std::printf(
      "{\"what\": \"recv_rss\", \"mode\": \"%s\", \"payload_mib\": %llu, \"rss_before_kib\": %ld, "
      "\"rss_after_kib\": %ld, \"delta_kib\": %.0f, \"delta_over_payload\": %.3f, \"bytes_copied\": %llu, "
      "\"receive_s\": %.4f}\n",
      into ? "recv_into" : "recv", static_cast<unsigned long long>(mib), before, after, delta_kib,
      delta_kib * 1024.0 / static_cast<double>(nbytes),
      static_cast<unsigned long long>(comm->stats().bytes_copied),
      std::chrono::duration<double>(end - start).count());
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
