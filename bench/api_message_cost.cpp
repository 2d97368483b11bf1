// The software cost of one message through the public Comm API, with no waiting in it: two
// Comms in one process, one thread. Each round sends a 64 B Bytes payload a->b, receives it
// at b, sends it back b->a and receives it at a; the message is always there when recv() is
// called, so a round is two sends and two recvs of pure work (no wake-up, no spin, no
// cross-core cache traffic). Half a round is what a busy-polled round trip pays per side on
// top of the transport's own latency.
// Usage: api_message_cost [rounds] [bytes] [transport: shm (default), unix or tcp]
#include <unistd.h>

#include "bench_common.h"
#include "wcomm/comm.h"

using namespace wcomm::bench_programs;

int main(int argc, char** argv) {
  const std::uint64_t rounds = arg_or(argc, argv, 1, 200000);
  const std::size_t size = arg_or(argc, argv, 2, 64);
  const std::string transport = argc > 3 ? argv[3] : "shm";
  if (transport != "tcp" && transport != "unix" && transport != "shm")
    die("transport must be tcp, unix or shm, got " + transport);
  const std::string path = "/tmp/wcomm-cost-" + std::to_string(getpid());
  auto address = [&](const std::string& side, std::uint16_t port) {
    return transport == "tcp" ? wcomm::Address::tcp("127.0.0.1", port)
                              : wcomm::Address::parse(transport + "://" + path + side + ".sock");
  };
  wcomm::CommConfig config;
  config.recv_busy_poll_us = 0;  // never needed: every recv finds its message
  auto a = wcomm::Comm::create(wcomm::CommSpec{{"a", "", 0, {address("a", 0)}}, {{"b", "", 0, {address("b", 1)}}}, "", config});
  auto b = wcomm::Comm::create(
      wcomm::CommSpec{{"b", "", 0, {address("b", 0)}}, {{"a", "", 0, {address("a", a->port())}}}, "", config});
  const wcomm::Peer to_b = a->peer("b");
  const wcomm::Peer to_a = b->peer("a");
  const wcomm::Bytes payload(std::string(size, 'x'));
  const std::uint64_t warmup = std::min<std::uint64_t>(1000, rounds);
  // The first message dials and sets up the transport; then every recv finds its message.
  auto round = [&] {
    a->send(wcomm::Value(payload), to_b).get();
    wcomm::Received at_b = b->recv(to_a).get();
    b->send(std::move(at_b.value), to_a).get();
    wcomm::Received at_a = a->recv(to_b).get();
    if (!at_a.value.is<wcomm::Bytes>() || at_a.value.as<wcomm::Bytes>().size() != size)
      die("api_message_cost: the echo is not the payload sent");
  };
  for (std::uint64_t i = 0; i < warmup; ++i) round();
  const auto transport_used = a->stats().peers.at("b").transport;
  const auto start = Clock::now();
  for (std::uint64_t i = 0; i < rounds; ++i) round();
  const double per_message_ns = micros_between(start, Clock::now()) * 1000.0 / double(2 * rounds);
  std::printf("{\"what\": \"api_message_cost\", \"transport\": \"%s\", \"payload_bytes\": %zu, \"rounds\": %llu, "
              "\"ns_per_message\": %.1f}\n",
              transport_used.c_str(), size, static_cast<unsigned long long>(rounds), per_message_ns);
  a->close();
  b->close();
}
