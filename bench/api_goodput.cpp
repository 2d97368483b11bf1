// Bulk goodput through the public Comm API: two processes, one sends `count` tensors of
// `bytes` each (up to 4 in flight), the other receives them; timed from the first send to the
// last byte received, as the receiver's acknowledgement reaches the sender.
// Usage: api_goodput [bytes (default 64 MiB)] [count (default 16)] [transport: tcp, unix, shm or tls
//        (comm_pair.h)]
//        [recv, or how many recv_into are posted ahead (default 1)]
// Environment: WCOMM_BENCH_CHUNK_BYTES, WCOMM_BENCH_NOTSENT_LOWAT, WCOMM_BENCH_QUEUE_TARGET_US
// override those CommConfig keys (the last: tcp_target_queue_delay_us).
#include <cstdlib>
#include <deque>

#include "comm_pair.h"

using namespace wcomm::bench_programs;

constexpr std::uint64_t kInFlight = 4;
constexpr std::uint64_t kWarmUp = kInFlight;  // sent together: storage for each in flight

int main(int argc, char** argv) {
  const std::uint64_t bytes = arg_or(argc, argv, 1, 64ull << 20);
  const std::uint64_t count = arg_or(argc, argv, 2, 16);
  const std::string transport = argc > 3 ? argv[3] : "tcp";
  // "recv": plain recv into storage the library allocates (and reuses, see block_cache.h);
  // a number N: recv_into N destinations in turn, each posted N messages ahead (default 1).
  const bool plain_recv = argc > 4 && std::string(argv[4]) == "recv";
  const std::uint64_t ahead = plain_recv ? 1 : std::max<std::uint64_t>(1, arg_or(argc, argv, 4, 1));
  wcomm::CommConfig config;
  config.max_message_bytes = std::max<std::uint64_t>(config.max_message_bytes, bytes + (1 << 20));
  config.max_peer_queued_bytes = 4 * config.max_message_bytes;
  // To compare against chunked frames and TCP_NOTSENT_LOWAT off (docs/performance.md).
  if (const char* v = std::getenv("WCOMM_BENCH_CHUNK_BYTES")) config.chunk_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("WCOMM_BENCH_NOTSENT_LOWAT")) config.tcp_notsent_lowat_bytes = std::strtoull(v, nullptr, 10);
  if (const char* v = std::getenv("WCOMM_BENCH_QUEUE_TARGET_US")) config.tcp_target_queue_delay_us = std::strtoull(v, nullptr, 10);

  return run_comm_pair(
      transport, config,
      [&](wcomm::Comm& comm, const wcomm::Peer& peer) {  // receiver
        comm.recv(peer).get();  // the sender's hello: it has connected (this side only listens)
        if (plain_recv) {
          comm.send(wcomm::Value("ready"), peer).get();
          for (std::uint64_t i = 0; i < count + kWarmUp; ++i) comm.recv(peer).get();
          comm.send(wcomm::Value("done"), peer).get();
          return;
        }
        // `ahead` destinations in turn, each given to a recv_into posted `ahead` messages early;
        // the first `ahead` before the sender starts. A message that arrives before its
        // recv_into is received into fresh storage and copied over; once one has, every later
        // one does (the inbox never empties): with more posted ahead than the sender keeps in
        // flight (kInFlight), none does.
        std::vector<wcomm::Tensor> into;
        for (std::uint64_t i = 0; i < ahead; ++i) into.push_back(wcomm::Tensor::zeros(wcomm::DType::kUInt8, {std::int64_t(bytes)}));
        std::deque<wcomm::Future<wcomm::Received>> posted;
        for (std::uint64_t i = 0; i < count + kWarmUp; ++i) {
          if (posted.size() == ahead) {
            posted.front().get();
            posted.pop_front();
          }
          posted.push_back(comm.recv_into(peer, {into[i % ahead]}));
          if (i + 1 == std::min(ahead, count + kWarmUp)) comm.send(wcomm::Value("ready"), peer).get();
        }
        for (auto& f : posted) f.get();
        comm.send(wcomm::Value("done"), peer).get();
      },
      [&](wcomm::Comm& comm, const wcomm::Peer& peer) {  // sender
        wcomm::Tensor payload = wcomm::Tensor::zeros(wcomm::DType::kUInt8, {std::int64_t(bytes)});
        comm.send(wcomm::Value("hello"), peer).get();
        comm.recv(peer).get();  // ready: the receiver's first recvs are posted
        // Warm-up: the connection, and the receiver's pages for as many messages as are in
        // flight at once (each has its own storage until received; later ones reuse it).
        std::vector<wcomm::Future<wcomm::SendResult>> warm_up;
        for (std::uint64_t i = 0; i < kWarmUp; ++i) warm_up.push_back(comm.send(payload, peer));
        for (auto& f : warm_up) f.get();
        const auto start = Clock::now();
        std::vector<wcomm::Future<wcomm::SendResult>> in_flight;
        for (std::uint64_t i = 0; i < count; ++i) {
          if (in_flight.size() == kInFlight) {
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
