// The accept loop the socket transports share (TCP and Unix listeners differ only in how
// they bind and describe a connection).
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include <asio.hpp>

#include "transport/transport.h"

namespace wcomm::transport {

// A failure that repeats (accepting at the descriptor limit) is logged at most every 10 s,
// with how many times it happened since.
class ThrottledWarning {
 public:
  void warn(const std::string& text) {
    ++count_;
    const auto now = std::chrono::steady_clock::now();
    if (logged_ && now - last_ < std::chrono::seconds(10)) return;
    spdlog::warn("{} ({} time{} in the last 10 s)", text, count_, count_ == 1 ? "" : "s");
    logged_ = true;
    last_ = now;
    count_ = 0;
  }

 private:
  bool logged_ = false;
  std::chrono::steady_clock::time_point last_{};
  std::uint64_t count_ = 0;
};

template <class Protocol>
class SocketListener : public Listener {
 public:
  using Acceptor = typename Protocol::acceptor;
  using Socket = typename Protocol::socket;
  using Wrap = std::function<std::unique_ptr<Connection>(Socket)>;

  // acceptor is bound and listening; address says where (ports resolved).
  SocketListener(Acceptor acceptor, Address address, Wrap wrap)
      : acceptor_(std::move(acceptor)), address_(std::move(address)), wrap_(std::move(wrap)),
        retry_(acceptor_.get_executor()) {}

  Address address() const override { return address_; }
  void start(AcceptHandler handler) override {
    handler_ = std::move(handler);
    accept_next();
  }
  void close() override {
    std::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
  }

 private:
  void accept_next() {
    acceptor_.async_accept([this](std::error_code ec, Socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) {
        handler_({}, wrap_(std::move(socket)));
        return accept_next();
      }
      // Out of descriptors or memory: accepting again at once fails again at once (a spinning
      // loop). Back off a little; connecting peers wait in the backlog meanwhile.
      accept_failures_.warn("wcomm: accepting on " + address_.to_string() + " failed: " + ec.message() +
                            "; retrying every 100 ms");
      handler_(ec, nullptr);
      retry_.expires_after(std::chrono::milliseconds(100));
      retry_.async_wait([this](std::error_code ec) {
        if (!ec) accept_next();
      });
    });
  }

  Acceptor acceptor_;
  Address address_;
  Wrap wrap_;
  AcceptHandler handler_;
  asio::steady_timer retry_;
  ThrottledWarning accept_failures_;
};

}  // namespace wcomm::transport
