// The initiator's side of the latency-under-load background traffic: N plain-TCP connections
// to the responder's load server, each paced at its share of the target rate.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "netbench/load_socket.h"

namespace wcomm::bench {

struct LoadResult {
  std::uint64_t bytes_sent = 0;      // by this side (upload, bidirectional)
  std::uint64_t bytes_received = 0;  // from the server (download, bidirectional)
  double elapsed_s = 0.0;            // from GO until every stream ended
  std::size_t connections = 0;       // one-way TCP connections (bidirectional: 2 x streams)
};

class LoadClient {
 public:
  // Connects `streams` connections per direction that carries load (bidirectional: `streams`
  // upload plus `streams` download connections, as V0.1) and completes the handshake up to
  // READY on each (throws std::runtime_error on failure). `per_stream_mbps` is each
  // connection's rate.
  LoadClient(const std::string& host, std::uint16_t port, const std::string& direction, std::size_t streams,
             double per_stream_mbps, double duration_s, std::chrono::milliseconds timeout);
  ~LoadClient();  // aborts a running load (no result)
  LoadClient(const LoadClient&) = delete;
  LoadClient& operator=(const LoadClient&) = delete;

  // Sends GO on every connection and starts the traffic in the background.
  void go();
  // Waits for every stream to finish (paced sending for duration_s, then until EOF).
  LoadResult wait();

 private:
  struct Stream {
    std::string direction;  // upload or download
    Socket socket;
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
    std::thread thread;
  };
  void run_stream(Stream& stream);

  double per_stream_mbps_;
  double duration_s_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Stream>> streams_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace wcomm::bench
