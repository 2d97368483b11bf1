// Bulk goodput through the public Comm API: two processes, one sends `count` tensors of
// `bytes` each (up to 4 in flight), the other receives them; timed from the first send to the
// last byte received, as the receiver's acknowledgement reaches the sender.
// Usage: api_goodput [bytes (default 64 MiB)] [count (default 16)] [transport: tcp, unix or shm]
// Environment: WCOMM_BENCH_CHUNK_BYTES, WCOMM_BENCH_NOTSENT_LOWAT override those CommConfig keys.
#include <cstdlib>
#include "comm_pair.h"

using namespace wcomm::bench_programs;

int main(int argc, char** argv) {
  const std::uint64_t bytes = arg_or(argc, argv, 1, 64ull << 20);
  const std::uint64_t count = arg_or(argc, argv, 2, 16);
  const std::string transport = argc > 3 ? argv[3] : "tcp";
  wcomm::CommConfig config;
  config.max_message_bytes = std::max<std::uint64_t>(config.max_message_bytes, bytes + (1 << 20));
  config.max_peer_queued_bytes = 4 * config.max_message_bytes;
  // To compare against chunked frames and TCP_NOTSENT_LOWAT off (docs/performance.md).
  if (const char* v = std::getenv("WCOMM_BENCH_CHUNK_BYTES")) config.chunk_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("WCOMM_BENCH_NOTSENT_LOWAT")) config.tcp_notsent_lowat_bytes = std::strtoull(v, nullptr, 10);

  return run_comm_pair(
      transport, config,
      [&](wcomm::Comm& comm, const wcomm::Peer& peer) {  // receiver
        wcomm::Tensor into = wcomm::Tensor::zeros(wcomm::DType::kUInt8, {std::int64_t(bytes)});
        for (std::uint64_t i = 0; i < count + 1; ++i) comm.recv_into(peer, {into}).get();  // +1: warm-up
        comm.send(wcomm::Value("done"), peer).get();
      },
      [&](wcomm::Comm& comm, const wcomm::Peer& peer) {  // sender
        wcomm::Tensor payload = wcomm::Tensor::zeros(wcomm::DType::kUInt8, {std::int64_t(bytes)});
        comm.send(payload, peer).get();  // warm-up: connection and the receiver's pages
        const auto start = Clock::now();
        std::vector<wcomm::Future<wcomm::SendResult>> in_flight;
        for (std::uint64_t i = 0; i < count; ++i) {
          if (in_flight.size() == 4) {
            in_flight.front().get();
            in_flight.erase(in_flight.begin());
          }
          in_flight.push_back(comm.send(payload, peer));
        }
        for (auto& f : in_flight) f.get();
        comm.recv(peer).get();
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        std::printf("{\"what\": \"api_goodput_%s\", \"bytes\": %llu, \"count\": %llu, \"goodput_gb_s\": %.3f}\n",
                    transport.c_str(), static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(count),
                    double(bytes) * double(count) / seconds / 1e9);
      });
}
