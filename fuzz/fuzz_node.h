// A real node for the connection-level fuzz targets: node-b, a Comm on loopback that knows
// node-a. feed() connects to it over TCP, writes the input, ends the stream and waits until
// node-b has closed its side: the bytes went through the transport, the handshake and the
// frame reader exactly as a hostile peer's would. A fresh Comm every 32 inputs drops what
// earlier inputs left in its inbox.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>

#include "wcomm/comm.h"

namespace wcomm::fuzz {

class FuzzNode {
 public:
  explicit FuzzNode(CommConfig config) : config_(std::move(config)) {
    config_.transport = "tcp";
    config_.handshake_timeout_s = 2;
    config_.heartbeat_interval_s = 0;
  }

  void feed(const std::uint8_t* data, std::size_t size) {
    if (!comm_ || ++fed_ % 32 == 0) {
      comm_.reset();
      comm_ = Comm::create({{"node-b", "127.0.0.1", 0}, {{"node-a", "127.0.0.1", 1}}, "127.0.0.1", config_});
    }
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(comm_->port());
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{5, 0};  // node-b ends every connection at the end of the stream
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
      std::size_t sent = 0;
      while (sent < size) {
        const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
        if (n <= 0) break;
        sent += static_cast<std::size_t>(n);
      }
      ::shutdown(fd, SHUT_WR);
      char sink[4096];
      while (::recv(fd, sink, sizeof sink, 0) > 0) {
      }
    }
    ::close(fd);
  }

 private:
  CommConfig config_;
  std::shared_ptr<Comm> comm_;
  std::uint64_t fed_ = 0;
};

}  // namespace wcomm::fuzz
