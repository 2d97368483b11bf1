// Test helpers: a world of ranks, each a thread with its own Group (and Comm) on loopback,
// joined through a real rendezvous on a free port.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "process_util.h"
#include "wcomm/collectives/group.h"

namespace wcomm::test {

// A TCP port nobody listens on right now (tests/support/free_port.h).
using wcomm::testing::free_tcp_port;

inline RendezvousSpec local_spec(int rank, int world, std::uint16_t port) {
  RendezvousSpec spec;
  spec.rank = rank;
  spec.world = world;
  spec.master_addr = "127.0.0.1";
  spec.master_port = port;
  spec.bind_host = "127.0.0.1";
  spec.timeout = std::chrono::seconds(20);
  return spec;
}

// Runs body(group) on every rank of a world of `world` threads; rethrows the first failure.
inline void run_world(int world, const std::function<void(Group&)>& body, GroupOptions options = {}) {
  std::uint16_t port = free_tcp_port();
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto group = Group::create(local_spec(r, world, port), options);
        body(*group);
        group->barrier();  // nobody closes while another rank still needs it
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace wcomm::test
