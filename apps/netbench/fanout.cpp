// Fan-out fairness: one sender thread per peer, acknowledged sends, Jain's index.
#include "netbench/fanout.h"

#include <atomic>
#include <deque>
#include <random>
#include <stdexcept>
#include <thread>

namespace wcomm::bench {

double jain_index(const std::vector<double>& values) {
  double sum = 0, squares = 0;
  for (double v : values) {
    sum += v;
    squares += v * v;
  }
  if (values.empty() || squares == 0) return 0.0;
  return sum * sum / (static_cast<double>(values.size()) * squares);
}

nlohmann::json run_fanout(Comm& comm, const std::vector<Peer>& peers, const FanoutOptions& o) {
  if (peers.empty()) throw std::invalid_argument("fan-out needs at least one peer");
  Tensor payload = Tensor::empty(DType::kUInt8, {static_cast<std::int64_t>(o.message_bytes)});
  std::mt19937_64 random(23);
  for (std::uint64_t i = 0; i < o.message_bytes; ++i) payload.data()[i] = static_cast<std::uint8_t>(random());
  // The connections first, so that dialing is not part of the race.
  for (const Peer& p : peers) comm.send(Value("hello"), p, {}, {.tag = kFanoutTag, .timeout = o.timeout, .ack = true}).get();

  struct PerPeer {
    std::atomic<std::uint64_t> bytes{0};
    double last_done_s = 0;
    std::string error;
  };
  std::vector<std::unique_ptr<PerPeer>> state;
  for (std::size_t i = 0; i < peers.size(); ++i) state.push_back(std::make_unique<PerPeer>());
  const auto start = std::chrono::steady_clock::now();
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<std::thread> senders;
  for (std::size_t i = 0; i < peers.size(); ++i)
    senders.emplace_back([&, i] {
      const CommOptions options{.tag = kFanoutTag, .timeout = o.timeout, .ack = true};
      std::deque<Future<SendResult>> in_flight;
      try {
        while (since() < o.duration_s) {
          while (in_flight.size() >= o.in_flight) {
            in_flight.front().wait().value();
            in_flight.pop_front();
            // Only what the peer read within the window counts.
            if (since() <= o.duration_s) state[i]->bytes += o.message_bytes;
          }
          in_flight.push_back(comm.send(payload, peers[i], {}, options));
        }
        for (auto& f : in_flight) f.wait().value();
        state[i]->last_done_s = since();
      } catch (const CommError& e) {
        state[i]->error = e.what();
      }
    });
  for (auto& t : senders) t.join();
  for (const Peer& p : peers) comm.send(Value(), p, {}, {.tag = kFanoutTag, .timeout = o.timeout}).get();

  nlohmann::json per_peer = nlohmann::json::array();
  std::vector<double> goodputs;
  double aggregate = 0;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (!state[i]->error.empty())
      throw std::runtime_error("fan-out to '" + peers[i].node_id + "' failed: " + state[i]->error);
    const double mbps = static_cast<double>(state[i]->bytes.load()) * 8.0 / o.duration_s / 1e6;
    goodputs.push_back(mbps);
    aggregate += mbps;
    per_peer.push_back({{"peer", peers[i].node_id}, {"goodput_mbps", mbps}, {"bytes", state[i]->bytes.load()}});
  }
  return {{"scenario", "fanout"},
          {"peers", peers.size()},
          {"message_bytes", o.message_bytes},
          {"duration_s", o.duration_s},
          {"in_flight_per_peer", o.in_flight},
          {"per_peer", per_peer},
          {"aggregate_goodput_mbps", aggregate},
          {"jain_index", jain_index(goodputs)},
          {"stats", {{"messages_chunked", comm.stats().messages_chunked}, {"chunks_sent", comm.stats().chunks_sent}}}};
}

std::uint64_t run_sink(Comm& comm, const Peer& source, Seconds first_message_timeout, Seconds timeout) {
  std::uint64_t bytes = 0;
  bool first = true;
  for (;;) {
    const CommOptions options{.tag = kFanoutTag, .timeout = first ? first_message_timeout : timeout};
    Received r = comm.recv(source, options).get();
    first = false;
    if (r.value.is_none()) return bytes;
    bytes += r.wire_bytes;
  }
}

}  // namespace wcomm::bench
