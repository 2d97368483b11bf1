// Small-message latency through the public Comm API: two processes, a 64 B Bytes payload,
// send().get() then recv().get(), as an application would write it; or, with the fifth
// argument "recv_for", recv_for(peer, no end).get() (the receive that makes no promise), or
// "timeout", recv(peer, {.timeout = 10 s}).get() (a recv with a timeout of its own).
// Usage: api_pingpong [rounds] [bytes] [recv_busy_poll_us (default: CommConfig's; 0 sleeps at once)]
//                     [transport: tcp (default), unix or shm] [recv: future (default), recv_for or timeout]
#include "comm_pair.h"

using namespace wcomm::bench_programs;

int main(int argc, char** argv) {
  const std::uint64_t rounds = arg_or(argc, argv, 1, 20000);
  const std::size_t size = arg_or(argc, argv, 2, 64);
  wcomm::CommConfig config;
  config.recv_busy_poll_us = arg_or(argc, argv, 3, config.recv_busy_poll_us);
  const std::string transport = argc > 4 ? argv[4] : "tcp";
  const std::string mode = argc > 5 ? argv[5] : "future";
  const bool use_recv_for = mode == "recv_for";
  const std::optional<wcomm::Seconds> timeout =
      mode == "timeout" ? std::optional<wcomm::Seconds>(10) : std::nullopt;
  const auto recv = [use_recv_for, timeout](wcomm::Comm& comm, const wcomm::Peer& peer) {
    return use_recv_for ? comm.recv_for(peer, wcomm::Seconds(1e9)).get() : comm.recv(peer, {.timeout = timeout}).get();
  };
  const std::uint64_t warmup = std::min<std::uint64_t>(1000, rounds);
  const std::uint64_t total = warmup + rounds;

  return run_comm_pair(
      transport, config,
      [&](wcomm::Comm& comm, const wcomm::Peer& peer) {  // echo
        for (std::uint64_t i = 0; i < total; ++i) {
          wcomm::Received got = recv(comm, peer);
          comm.send(std::move(got.value), peer).get();
        }
      },
      [&](wcomm::Comm& comm, const wcomm::Peer& peer) {
        const wcomm::Bytes payload(std::string(size, 'x'));
        std::vector<double> rtt_us;
        rtt_us.reserve(rounds);
        for (std::uint64_t i = 0; i < total; ++i) {
          const auto start = Clock::now();
          comm.send(wcomm::Value(payload), peer).get();
          wcomm::Received got = recv(comm, peer);
          const auto end = Clock::now();
          if (!got.value.is<wcomm::Bytes>() || got.value.as<wcomm::Bytes>().size() != size)
            die("api_pingpong: the echo is not the payload sent");
          if (i >= warmup) rtt_us.push_back(micros_between(start, end));
        }
        print_rtt_json(("api_pingpong_" + transport + (mode == "future" ? "" : "_" + mode)).c_str(), size, rtt_us);
      });
}
