// The first message to a peer, from a standing start: a configured peer, a peer added at run
// time (Comm::add_peer, the other side configured), and a peer that joins (add_peer here, the
// other side knowing nobody and accepting joins on loopback). Each round makes two fresh
// Comms in this process and times from just before add_peer (or send) to the send's ack: the
// dial, the handshake, the message and its acknowledgement. The three kinds take turns.
//   first_message [ROUNDS=200] [TRANSPORT=tcp]
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench_common.h"
#include <spdlog/spdlog.h>

#include "wcomm/comm.h"

using namespace wcomm;
using namespace wcomm::bench_programs;

namespace {

double one_round(const std::string& kind, const std::string& transport) {
  CommConfig config;
  config.transport = transport;
  const Peer a_at{"node-a", "127.0.0.1", free_port()}, b_at{"node-b", "127.0.0.1", free_port()};
  CommConfig b_config = config;
  std::vector<Peer> a_peers, b_peers;
  if (kind == "configured") {
    a_peers = {b_at};
    b_peers = {a_at};
  } else if (kind == "added") {
    b_peers = {a_at};
  } else {  // joined
    b_config.accept_unknown_peers = true;
    b_config.allow_unauthenticated_joins = true;
  }
  auto b = Comm::create({b_at, b_peers, "127.0.0.1", b_config});
  auto a = Comm::create({a_at, a_peers, "127.0.0.1", config});
  const auto start = Clock::now();
  const Peer& to_b = kind == "configured" ? a->peer("node-b") : a->add_peer(b_at);
  Future<SendResult> first = a->send(std::string("first"), to_b, {}, {.ack = true});
  Result<SendResult>* sent = first.wait_for(std::chrono::seconds(10));  // (points into `first`)
  const double us = micros_between(start, Clock::now());
  if (!sent || !sent->ok()) die(kind + ": the first message failed: " + (sent ? sent->error().message : "no answer in 10 s"));
  a->close();
  b->close();
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // a join is logged at info, once a round
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
  const std::string transport = argc > 2 ? argv[2] : "tcp";
  const std::vector<std::string> kinds = {"configured", "added", "joined"};
  std::map<std::string, std::vector<double>> us;
  for (int i = 0; i < rounds; ++i)
    for (const auto& kind : kinds) us[kind].push_back(one_round(kind, transport));
  const double base = percentile(us["configured"], 50);
  for (const auto& kind : kinds)
    std::printf("{\"what\": \"first message, %s peer\", \"transport\": \"%s\", \"rounds\": %d, \"p50_us\": %.1f, "
                "\"p90_us\": %.1f, \"vs_configured_p50\": %.2f}\n",
                kind.c_str(), transport.c_str(), rounds, percentile(us[kind], 50), percentile(us[kind], 90),
                percentile(us[kind], 50) / base);
}
