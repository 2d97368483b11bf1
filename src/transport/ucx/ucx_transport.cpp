// The ucx transport: ucx://host:port over UCP. A listener is a UCP listener on that socket
// address and a dial a UCP endpoint made to it (client-server wire-up through UCX's sockaddr
// connection manager: TCP here, RDMA CM where there is RDMA); the bytes then travel over
// whatever UCX picks (UCX_TLS): shared memory on one host, tcp, or RDMA.
#include <arpa/inet.h>

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "transport/transport.h"
#include "transport/ucx/ucx_connection.h"
#include "transport/ucx/ucx_hub.h"
#include "wcomm/errors.h"

namespace wcomm::transport {
namespace ucx {

// What the progress thread's connection callback needs; freed after the UCP listener (both
// under Hub::mu), so the callback never sees it gone.
struct ListenerState {
  std::shared_ptr<Hub> hub;        // (hub) none once retired (a retired one must not keep it alive)
  asio::any_io_executor executor;  // (hub)
  AcceptHandler handler;           // (hub) none: connection requests are refused
  std::string local;
  ucp_listener_h listener = nullptr;
  std::uint64_t retirements = 0;   // (hub) counts closes: a take-over ends a retirement
};

namespace {

// A closed listener is not destroyed at once: UCX 1.13's tcp connection manager hands a
// connection it accepted before ucp_listener_destroy, but whose request had not arrived yet,
// to the destroyed listener when the request comes (a use after free: it crashed a test whose
// peer was still dialing). So a closed listener refuses requests for kRetireFor first; a
// listener opened at its address meanwhile (a node restarting in this process) takes it over.
constexpr auto kRetireFor = std::chrono::seconds(2);

void on_connection_request(ucp_conn_request_h request, void* arg);

class UcxListener final : public Listener {
 public:
  UcxListener(std::shared_ptr<Hub> hub, asio::io_context& io, const Address& address, const sockaddr_storage& addr,
              socklen_t len)
      : address_(address) {
    std::lock_guard lock(hub->mu);
    if (auto retired = hub->retired_listeners.find(sockaddr_text(addr)); retired != hub->retired_listeners.end()) {
      state_ = std::move(retired->second);  // a node restarting at its address
      hub->retired_listeners.erase(retired);
      state_->hub = hub;
      state_->executor = io.get_executor();
      listener_ = state_->listener;
      return;
    }
    state_ = std::make_shared<ListenerState>();
    state_->hub = hub;
    state_->executor = io.get_executor();
    ucp_listener_params_t params{};
    params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
    params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    params.sockaddr.addrlen = len;
    params.conn_handler.cb = &on_connection_request;
    params.conn_handler.arg = state_.get();
    ucs_status_t s = ucp_listener_create(hub->worker(), &params, &listener_);
    if (s != UCS_OK) {
      listener_ = nullptr;
      throw ConnectionFailedError("cannot listen on " + address.to_string() + ": " + status_text(s) +
                                  " (is another node using that port, or is the address not local?)");
    }
    ucp_listener_attr_t attr{};
    attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
    state_->local = sockaddr_text(addr);
    if (ucp_listener_query(listener_, &attr) == UCS_OK) {
      const auto& sa = attr.sockaddr;
      if (sa.ss_family == AF_INET) address_.port = ntohs(reinterpret_cast<const sockaddr_in&>(sa).sin_port);
      if (sa.ss_family == AF_INET6) address_.port = ntohs(reinterpret_cast<const sockaddr_in6&>(sa).sin6_port);
      state_->local = sockaddr_text(sa);  // with the port chosen: where a restart finds it when retired
    }
    state_->listener = listener_;
  }
  ~UcxListener() override { close(); }

  Address address() const override { return address_; }
  void start(AcceptHandler handler) override {
    std::lock_guard lock(state_->hub->mu);
    state_->handler = std::move(handler);
  }
  void close() override {
    if (!state_) return;
    std::shared_ptr<Hub> hub = state_->hub;
    std::lock_guard lock(hub->mu);
    state_->handler = nullptr;  // refuses what still comes (see kRetireFor)
    state_->hub.reset();
    const std::uint64_t retirement = ++state_->retirements;
    hub->retired_listeners[state_->local] = state_;
    // Run by the hub's thread, or by the hub as it ends (before its worker), with Hub::mu.
    hub->run_at(Clock::now() + kRetireFor, [hub = hub.get(), state = state_, retirement] {
      auto it = hub->retired_listeners.find(state->local);
      if (state->retirements != retirement || it == hub->retired_listeners.end() || it->second != state) return;
      hub->retired_listeners.erase(it);  // else taken over meanwhile (and maybe closed again: a later task)
      ucp_listener_destroy(state->listener);
    });
    listener_ = nullptr;
    state_.reset();
  }

 private:
  std::shared_ptr<ListenerState> state_;
  ucp_listener_h listener_ = nullptr;
  Address address_;
};

// Progress thread, Hub::mu held.
void on_connection_request(ucp_conn_request_h request, void* arg) {
  auto* state = static_cast<ListenerState*>(arg);
  if (!state->handler) {  // not started yet, or closed (retired)
    ucp_listener_reject(state->listener, request);
    return;
  }
  Hub& hub = *state->hub;
  std::string peer = "?";
  ucp_conn_request_attr_t attr{};
  attr.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
  if (ucp_conn_request_query(request, &attr) == UCS_OK) peer = sockaddr_text(attr.client_address);
  auto channel = std::make_shared<Channel>(state->executor);
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.conn_request = request;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a dead peer fails the connection instead of hanging it
  params.err_handler.cb = &Hub::on_endpoint_error;
  params.err_handler.arg = channel.get();
  if (ucs_status_t s = ucp_ep_create(hub.worker(), &params, &channel->ep); s != UCS_OK) {
    spdlog::warn("wcomm ucx: cannot accept a connection from {}: {}", peer, status_text(s));
    return;
  }
  hub.attach(channel);
  hub.send_control(*channel, Kind::kHello);  // tells the dialer it is connected
  // Made here and handed over on the listener's loop: should that loop end first (its node
  // closing), the connection is destroyed unhanded, which ends it, so the dialer does not go
  // on writing into a channel nobody reads.
  auto connection = make_connection(state->hub, std::move(channel), "ucx " + state->local + " <-> " + peer);
  asio::post(state->executor, [handler = state->handler, connection = std::move(connection)]() mutable {
    handler({}, std::move(connection));
  });
}

// A dial: done when the listener's HELLO (or anything else) arrives, or the endpoint fails.
class UcxDial final : public PendingDial, public std::enable_shared_from_this<UcxDial> {
 public:
  UcxDial(asio::io_context& io, std::shared_ptr<Hub> hub, Clock::time_point deadline, DialHandler handler,
          std::string description)
      : hub_(std::move(hub)),
        channel_(std::make_shared<Channel>(io.get_executor())),
        timer_(io, deadline),
        handler_(std::move(handler)),
        description_(std::move(description)) {}

  void start(const sockaddr_storage& addr, socklen_t len) {
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
    params.sockaddr.addrlen = len;
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &Hub::on_endpoint_error;
    params.err_handler.arg = channel_.get();
    {
      std::lock_guard lock(hub_->mu);
      if (ucs_status_t s = ucp_ep_create(hub_->worker(), &params, &channel_->ep); s != UCS_OK) {
        channel_->ep = nullptr;
        spdlog::debug("wcomm ucx: dial {}: ucp_ep_create: {}", description_, status_text(s));
        finish(asio::error::connection_refused, false);
        return;
      }
      channel_->on_connected = [self = shared_from_this()](std::error_code ec) { self->finish(ec, true); };
      hub_->attach(channel_);
    }
    hub_->wake();
    timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec) return;
      std::lock_guard lock(self->hub_->mu);
      self->finish(asio::error::timed_out, false);
    });
  }

  void cancel() override {
    std::lock_guard lock(hub_->mu);
    finish(asio::error::operation_aborted, false);
  }

 private:
  // Hub::mu held. in_callback: called inside UCX's progress, where the endpoint may not be
  // closed at once.
  void finish(std::error_code ec, bool in_callback) {
    if (finished_) return;
    finished_ = true;
    channel_->on_connected = nullptr;
    if (ec && channel_->ep) {
      if (in_callback) hub_->close_later(channel_);
      else hub_->close_now(*channel_);
    }
    asio::post(channel_->executor, [self = shared_from_this(), ec] {
      self->timer_.cancel();
      if (ec) return self->handler_(ec, nullptr);
      self->handler_({}, make_connection(self->hub_, self->channel_, "ucx -> " + self->description_));
    });
  }

  std::shared_ptr<Hub> hub_;
  std::shared_ptr<Channel> channel_;
  asio::steady_timer timer_;
  DialHandler handler_;
  std::string description_;
  bool finished_ = false;  // (hub)
};

class UcxTransport final : public Transport {
 public:
  std::string_view scheme() const override { return "ucx"; }

  std::unique_ptr<Listener> listen(asio::io_context& io, const Address& address, const Options&) const override {
    std::string error;
    auto hub = Hub::get(error);
    if (!hub) throw ConnectionFailedError("cannot listen on " + address.to_string() + ": " + error);
    sockaddr_storage addr{};
    socklen_t len = 0;
    if (!resolve(address.host, address.port, addr, len, error))
      throw ConnectionFailedError("cannot listen on " + address.to_string() + ": " + error);
    return std::make_unique<UcxListener>(std::move(hub), io, address, addr, len);
  }

  std::shared_ptr<PendingDial> dial(asio::io_context& io, const Address& address, Clock::time_point deadline,
                                    const Options&, DialHandler handler) const override {
    std::string error;
    auto hub = Hub::get(error);
    sockaddr_storage addr{};
    socklen_t len = 0;
    if (hub && !resolve(address.host, address.port, addr, len, error)) hub = nullptr;
    if (!hub) {
      spdlog::warn("wcomm ucx: cannot dial {}: {}", address.to_string(), error);
      asio::post(io, [handler = std::move(handler)] { handler(asio::error::host_unreachable, nullptr); });
      return nullptr;
    }
    auto attempt = std::make_shared<UcxDial>(io, std::move(hub), deadline, std::move(handler), sockaddr_text(addr));
    attempt->start(addr, len);
    return attempt;
  }
};

}  // namespace
}  // namespace ucx

const Transport& ucx_transport() {
  static const ucx::UcxTransport transport;
  return transport;
}

}  // namespace wcomm::transport
