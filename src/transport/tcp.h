// TCP transport: listener, dialer and the Stream over a connected socket.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <asio.hpp>

#include "transport/stream.h"
#include "wcomm/errors.h"

namespace wcomm::transport {

struct TcpOptions {
  bool nodelay = true;
};

std::unique_ptr<Stream> make_tcp_stream(asio::ip::tcp::socket socket, const TcpOptions& options);

class TcpListener {
 public:
  using AcceptHandler = std::function<void(std::error_code, std::unique_ptr<Stream>)>;
  // Binds host:port (port 0: ephemeral) with SO_REUSEADDR. ConnectionFailedError if it cannot.
  TcpListener(asio::io_context& io, const std::string& host, std::uint16_t port, TcpOptions options);
  std::uint16_t port() const { return port_; }
  // Accepts connections until close(), calling handler for each (loop thread).
  void start(AcceptHandler handler);
  void close();

 private:
  void accept_next();
  asio::ip::tcp::acceptor acceptor_;
  TcpOptions options_;
  AcceptHandler handler_;
  std::uint16_t port_ = 0;
};

using DialHandler = std::function<void(std::error_code, std::unique_ptr<Stream>)>;
// Resolves host and connects once (no retry: the caller owns the retry policy).
void async_dial_tcp(asio::io_context& io, const std::string& host, std::uint16_t port,
                    TcpOptions options, DialHandler handler);

}  // namespace wcomm::transport
