// The Connection over a connected stream socket (TCP or Unix): what the socket transports
// share. Only their listeners and dialers differ.
#pragma once

#include <memory>
#include <string>

#include <asio.hpp>

#include "transport/transport.h"

namespace wcomm::transport {

// Takes over the socket's descriptor (it leaves asio's reactor; see socket_stream.cpp).
template <class Socket>
std::unique_ptr<Connection> make_socket_stream(Socket socket, std::string description);

std::unique_ptr<Connection> make_socket_stream_from_fd(asio::any_io_executor executor, int fd,
                                                       std::string description);

template <class Socket>
std::unique_ptr<Connection> make_socket_stream(Socket socket, std::string description) {
  asio::any_io_executor executor = socket.get_executor();
  std::error_code ec;
  const int fd = socket.release(ec);
  return make_socket_stream_from_fd(std::move(executor), ec ? -1 : fd, std::move(description));
}

// A dial with one deadline: connects socket to endpoint, or fails with timed_out once the
// deadline passes. The handler runs on the loop, never inline.
template <class Socket, class Endpoint, class Handler>
void connect_with_deadline(std::shared_ptr<Socket> socket, const Endpoint& endpoint, Clock::time_point deadline,
                           Handler handler) {
  auto timer = std::make_shared<asio::steady_timer>(socket->get_executor(), deadline);
  auto timed_out = std::make_shared<bool>(false);
  timer->async_wait([socket, timed_out](std::error_code ec) {
    if (ec) return;
    *timed_out = true;
    std::error_code ignored;
    socket->close(ignored);  // the connect completes with operation_aborted
  });
  socket->async_connect(endpoint, [socket, timer, timed_out, handler = std::move(handler)](std::error_code ec) mutable {
    timer->cancel();
    if (*timed_out) ec = asio::error::timed_out;
    handler(ec);
  });
}

}  // namespace wcomm::transport
