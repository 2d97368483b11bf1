// The transports wcomm knows, by address scheme: one line each.
#include "transport/transport.h"
#include "wcomm/errors.h"

namespace wcomm::transport {

const Transport& tcp_transport();   // tcp/
const Transport& unix_transport();  // unix/
const Transport& shm_transport();   // shm/

const Transport* find_transport(std::string_view scheme) {
  for (const Transport* t : {&tcp_transport(), &unix_transport(), &shm_transport()})
    if (t->scheme() == scheme) return t;
  return nullptr;
}

std::unique_ptr<Listener> listen(asio::io_context& io, const Address& address, const Options& options) {
  const Transport* t = find_transport(address.scheme);
  if (!t) throw ConnectionFailedError("no transport for address '" + address.to_string() + "'");
  return t->listen(io, address, options);
}

std::shared_ptr<PendingDial> dial(asio::io_context& io, const Address& address, Clock::time_point deadline,
                                  const Options& options, DialHandler handler) {
  if (const Transport* t = find_transport(address.scheme)) return t->dial(io, address, deadline, options, std::move(handler));
  asio::post(io, [handler = std::move(handler)] { handler(asio::error::address_family_not_supported, nullptr); });
  return nullptr;
}

}  // namespace wcomm::transport
