// The transports wcomm knows, by address scheme: one line each.
#include "transport/transport.h"
#include "wcomm/errors.h"

namespace wcomm::transport {

const Transport& tcp_transport();   // tcp/
const Transport& unix_transport();  // unix/
const Transport& shm_transport();   // shm/
#ifdef WCOMM_HAVE_UCX
const Transport& ucx_transport();   // ucx/
#endif

const Transport* find_transport(std::string_view scheme) {
  for (const Transport* t : {&tcp_transport(), &unix_transport(), &shm_transport()})
    if (t->scheme() == scheme) return t;
#ifdef WCOMM_HAVE_UCX
  if (scheme == "ucx") return &ucx_transport();
#endif
  return nullptr;
}

std::string remote_host_of(std::string_view description) {
  const auto arrow = description.find(" <-> ");
  if (arrow == std::string_view::npos) return {};
  std::string_view remote = description.substr(arrow + 5);
  return std::string(remote.substr(0, remote.rfind(':')));
}

namespace {
std::string no_transport(const Address& address) {
  if (address.scheme == "ucx")
    return "no transport for address '" + address.to_string() +
           "': this build of wcomm has no ucx transport (it was configured with WCOMM_WITH_UCX=OFF or without "
           "UCX: install libucx-dev and configure with -DWCOMM_WITH_UCX=ON)";
  return "no transport for address '" + address.to_string() + "'";
}
}  // namespace

std::unique_ptr<Listener> listen(asio::io_context& io, const Address& address, const Options& options) {
  const Transport* t = find_transport(address.scheme);
  if (!t) throw ConnectionFailedError(no_transport(address));
  return t->listen(io, address, options);
}

std::shared_ptr<PendingDial> dial(asio::io_context& io, const Address& address, Clock::time_point deadline,
                                  const Options& options, DialHandler handler) {
  if (const Transport* t = find_transport(address.scheme)) return t->dial(io, address, deadline, options, std::move(handler));
  asio::post(io, [handler = std::move(handler)] { handler(asio::error::address_family_not_supported, nullptr); });
  return nullptr;
}

}  // namespace wcomm::transport
