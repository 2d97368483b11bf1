// The shm transport: shm:///path and shm://@name. A Unix stream socket at that name carries
// the set-up (shared memory and eventfds, handed over with SCM_RIGHTS) and afterwards only
// tells each side when the other is gone; the bytes move through shared-memory rings.
#include <spdlog/spdlog.h>

#include <memory>
#include <set>
#include <string>

#include "transport/shm/shm_connection.h"
#include "transport/socket_listener.h"
#include "transport/shm/shm_setup.h"
#include "transport/socket_stream.h"
#include "transport/unix/unix_socket.h"

namespace wcomm::transport {
namespace {

using asio::local::stream_protocol;
using Socket = stream_protocol::socket;

// An accepted peer that does not send its set-up within this long is dropped.
constexpr auto kSetupTimeout = std::chrono::seconds(10);

std::string describe(const Address& address, pid_t peer) {
  return "shm " + address.to_string() + " (pid " + std::to_string(peer) + ")";
}

// Hands over the set-up socket's descriptor to the connection.
std::unique_ptr<Connection> connect_endpoint(Socket& socket, std::unique_ptr<shm::Endpoint> endpoint,
                                             const Address& address) {
  std::error_code ignored;
  endpoint->socket = shm::UniqueFd(socket.release(ignored));
  const pid_t peer = endpoint->peer_pid;
  if (!endpoint->cma_refused.empty())
    spdlog::warn("wcomm: {}: large payloads from the peer come through the ring (cross-memory attach refused: {})",
                 address.to_string(), endpoint->cma_refused);
  return shm::make_connection(socket.get_executor(), std::move(endpoint), describe(address, peer));
}

// What the accept loop shares with set-ups still in progress (they may outlive the listener).
struct AcceptState {
  AcceptHandler handler;
  bool closed = false;
  std::set<std::shared_ptr<Socket>> setting_up;
};

class ShmListener final : public Listener {
 public:
  ShmListener(stream_protocol::acceptor acceptor, Address address)
      : acceptor_(std::move(acceptor)), address_(std::move(address)), retry_(acceptor_.get_executor()) {}
  ~ShmListener() override { close(); }

  Address address() const override { return address_; }
  void start(AcceptHandler handler) override {
    state_->handler = std::move(handler);
    accept_next();
  }
  void close() override {
    if (state_->closed) return;
    state_->closed = true;
    std::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
    for (const auto& socket : state_->setting_up) socket->close(ignored);
    state_->setting_up.clear();
    unlink_unix(address_);
  }

 private:
  void accept_next() {
    acceptor_.async_accept([this, state = state_](std::error_code ec, Socket socket) {
      if (ec == asio::error::operation_aborted || state->closed) return;
      if (ec) {
        // Out of descriptors or memory: back off instead of spinning (see socket_listener.h).
        accept_failures_.warn("wcomm: accepting on " + address_.to_string() + " failed: " + ec.message() +
                              "; retrying every 100 ms");
        state->handler(ec, nullptr);
        retry_.expires_after(std::chrono::milliseconds(100));
        retry_.async_wait([this, state](std::error_code ec) {
          if (!ec && !state->closed) accept_next();
        });
        return;
      }
      set_up(state, std::make_shared<Socket>(std::move(socket)), address_);
      accept_next();
    });
  }

  static void set_up(const std::shared_ptr<AcceptState>& state, std::shared_ptr<Socket> socket, Address address) {
    state->setting_up.insert(socket);
    auto timer = std::make_shared<asio::steady_timer>(socket->get_executor(), kSetupTimeout);
    timer->async_wait([socket](std::error_code ec) {
      std::error_code ignored;
      if (!ec) socket->close(ignored);  // the set-up's wait ends with operation_aborted
    });
    socket->async_wait(Socket::wait_read, [state, socket, timer, address](std::error_code ec) {
      timer->cancel();
      state->setting_up.erase(socket);
      if (ec || state->closed) return;
      std::string error;
      auto endpoint = shm::accept_setup(socket->native_handle(), error);
      if (!endpoint) {
        spdlog::warn("wcomm: shm set-up on {} failed: {}", address.to_string(), error);
        return;
      }
      state->handler({}, connect_endpoint(*socket, std::move(endpoint), address));
    });
  }

  stream_protocol::acceptor acceptor_;
  Address address_;
  asio::steady_timer retry_;
  ThrottledWarning accept_failures_;
  std::shared_ptr<AcceptState> state_ = std::make_shared<AcceptState>();
};

// Connects (one deadline for connect and set-up), sends the set-up, waits for the reply.
class ShmDial final : public PendingDial, public std::enable_shared_from_this<ShmDial> {
 public:
  ShmDial(asio::io_context& io, Address address, Clock::time_point deadline)
      : socket_(std::make_shared<Socket>(io)), address_(std::move(address)), deadline_(deadline), timer_(io) {}

  void start(DialHandler handler) {
    connect_ = make_socket_dial(socket_, deadline_);
    connect_->connect(unix_endpoint(address_), [self = shared_from_this(), handler = std::move(handler)](
                                                   std::error_code ec) mutable {
      self->connect_.reset();
      if (ec) return handler(ec, nullptr);
      self->send_setup(std::move(handler));
    });
  }
  void cancel() override {
    cancelled_ = true;
    if (connect_) return connect_->cancel();
    std::error_code ignored;
    socket_->close(ignored);
    timer_.cancel();
  }

 private:
  void send_setup(DialHandler handler) {
    std::string error;
    std::error_code code;
    endpoint_ = cancelled_ ? nullptr : shm::start_dialer(socket_->native_handle(), shm::kDefaultRingBytes, error, code);
    if (!endpoint_) {
      // With transport auto the caller goes on to the peer's next address (unix or tcp).
      if (!cancelled_) spdlog::warn("wcomm: shm set-up with {} failed: {}", address_.to_string(), error);
      return handler(cancelled_ ? asio::error::operation_aborted : code, nullptr);
    }
    timer_.expires_at(deadline_);
    timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec) return;
      self->timed_out_ = true;
      std::error_code ignored;
      self->socket_->close(ignored);
    });
    socket_->async_wait(Socket::wait_read, [self = shared_from_this(), handler = std::move(handler)](std::error_code ec) {
      self->timer_.cancel();
      if (self->timed_out_) ec = asio::error::timed_out;
      if (self->cancelled_) ec = asio::error::operation_aborted;
      if (ec) return handler(ec, nullptr);
      std::string error;
      if (!shm::finish_dialer(*self->endpoint_, self->socket_->native_handle(), error)) {
        spdlog::warn("wcomm: shm set-up with {} failed: {}", self->address_.to_string(), error);
        return handler(asio::error::connection_refused, nullptr);
      }
      handler({}, connect_endpoint(*self->socket_, std::move(self->endpoint_), self->address_));
    });
  }

  std::shared_ptr<Socket> socket_;
  Address address_;
  Clock::time_point deadline_;
  asio::steady_timer timer_;
  std::shared_ptr<SocketDial<Socket>> connect_;
  std::unique_ptr<shm::Endpoint> endpoint_;
  bool cancelled_ = false, timed_out_ = false;
};

class ShmTransport final : public Transport {
 public:
  std::string_view scheme() const override { return "shm"; }

  std::unique_ptr<Listener> listen(asio::io_context& io, const Address& address, const Options&) const override {
    return std::make_unique<ShmListener>(listen_unix(io, address), address);
  }

  std::shared_ptr<PendingDial> dial(asio::io_context& io, const Address& address, Clock::time_point deadline,
                                    const Options&, DialHandler handler) const override {
    auto attempt = std::make_shared<ShmDial>(io, address, deadline);
    attempt->start(std::move(handler));
    return attempt;
  }
};

}  // namespace

const Transport& shm_transport() {
  static const ShmTransport transport;
  return transport;
}

}  // namespace wcomm::transport
