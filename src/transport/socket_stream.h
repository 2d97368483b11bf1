// The Connection over a connected stream socket (TCP or Unix): what the socket transports
// share. Only their listeners and dialers differ.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <asio.hpp>

#include "transport/transport.h"

namespace wcomm::transport {

// Takes over the socket's descriptor (it leaves asio's reactor; see socket_stream.cpp).
// queue_target > 0 (TCP only): what the connection holds in the kernel is bounded to its
// path's delivery in min RTT + queue_target (tcp/send_queue_bound.h).
template <class Socket>
std::unique_ptr<Connection> make_socket_stream(Socket socket, std::string description,
                                               std::chrono::microseconds queue_target = {});

std::unique_ptr<Connection> make_socket_stream_from_fd(asio::any_io_executor executor, int fd,
                                                       std::string description,
                                                       std::chrono::microseconds queue_target = {});

// Loop: registers a duplicate of fd with the loop as `watcher` on first use (asio owns and
// closes the duplicate). Transports watch their descriptors this way, only while waiting: a
// descriptor registered for good would wake the loop on every segment. On failure (no
// descriptor left, fd already closed) watcher stays empty and the error says why.
std::error_code watch_duplicate(std::optional<asio::posix::stream_descriptor>& watcher,
                                const asio::any_io_executor& executor, int fd);

template <class Socket>
std::unique_ptr<Connection> make_socket_stream(Socket socket, std::string description,
                                               std::chrono::microseconds queue_target) {
  asio::any_io_executor executor = socket.get_executor();
  std::error_code ec;
  const int fd = socket.release(ec);
  return make_socket_stream_from_fd(std::move(executor), ec ? -1 : fd, std::move(description), queue_target);
}

// A dial with one deadline: connects socket to endpoint, or fails with timed_out once the
// deadline passes (operation_aborted once cancelled). The handler runs on the loop, never inline.
template <class Socket>
class SocketDial final : public PendingDial, public std::enable_shared_from_this<SocketDial<Socket>> {
 public:
  SocketDial(std::shared_ptr<Socket> socket, Clock::time_point deadline)
      : socket_(std::move(socket)), timer_(socket_->get_executor(), deadline) {}

  template <class Endpoint, class Handler>
  void connect(const Endpoint& endpoint, Handler handler) {
    if (cancelled_) return fail(asio::error::operation_aborted, std::move(handler));  // while resolving
    timer_.async_wait([self = shared(), this](std::error_code ec) {
      if (ec || finished_) return;
      timed_out_ = true;
      std::error_code ignored;
      socket_->close(ignored);  // the connect completes with operation_aborted
    });
    socket_->async_connect(endpoint, [self = shared(), this, handler = std::move(handler)](std::error_code ec) mutable {
      finished_ = true;
      timer_.cancel();
      if (timed_out_) ec = asio::error::timed_out;
      if (cancelled_) ec = asio::error::operation_aborted;
      handler(ec);
    });
  }
  // Fails the dial before it connects (e.g. a name that cannot be resolved), on the loop.
  void fail(std::error_code ec, std::function<void(std::error_code)> handler) {
    finished_ = true;
    asio::post(socket_->get_executor(), [self = shared(), this, ec, handler = std::move(handler)] {
      handler(cancelled_ ? asio::error::operation_aborted : ec);
    });
  }
  void cancel() override {
    if (finished_) return;
    cancelled_ = true;
    std::error_code ignored;
    socket_->close(ignored);
    timer_.cancel();
  }

 private:
  std::shared_ptr<SocketDial> shared() { return this->shared_from_this(); }
  std::shared_ptr<Socket> socket_;
  asio::steady_timer timer_;
  bool finished_ = false, timed_out_ = false, cancelled_ = false;
};

template <class Socket>
std::shared_ptr<SocketDial<Socket>> make_socket_dial(std::shared_ptr<Socket> socket, Clock::time_point deadline) {
  return std::make_shared<SocketDial<Socket>>(std::move(socket), deadline);
}

}  // namespace wcomm::transport
