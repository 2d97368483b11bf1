// The responder's latency-under-load server (docs/wire-format.md): plain TCP on the responder's
// port + 1, one JSON line {"direction", "duration_s", "target_mbps"} per connection ->
// "READY\n" -> "GO\n" -> raw bytes until EOF. "upload": this side drains what the initiator
// sends; "download": it sends paced zeros at target_mbps for duration_s, then closes its
// side; "bidirectional": both.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "netbench/load_socket.h"

namespace wcomm::bench {

class LoadServer {
 public:
  // Listens at once; throws std::runtime_error when host:port cannot be bound.
  LoadServer(const std::string& host, std::uint16_t port);
  ~LoadServer();  // stop()
  LoadServer(const LoadServer&) = delete;
  LoadServer& operator=(const LoadServer&) = delete;

  // Closes the listener and every connection, and joins the threads.
  void stop();

 private:
  void accept_loop();
  void serve(int fd);

  Socket listener_;
  std::atomic<bool> stopping_{false};
  std::mutex mutex_;
  std::vector<int> connections_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

}  // namespace wcomm::bench
