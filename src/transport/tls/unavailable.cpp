// The stand-in for TLS in a build without it (WCOMM_WITH_TLS=OFF, or libssl-dev missing): a
// config that asks for TLS fails at Comm::create, saying how to get it. Nothing else here is
// reached: no TlsContext is ever made, so no connection asks for a TLS stream.
#include "transport/tls/tls_context.h"
#include "transport/tls/tls_stream.h"
#include "wcomm/errors.h"

namespace wcomm::transport {

std::shared_ptr<const TlsContext> TlsContext::load(const TlsConfig&) {
  throw InvalidArgumentError(
      "CommConfig.tls: this build of wcomm has no TLS (configured with WCOMM_WITH_TLS=OFF or without "
      "OpenSSL's libssl): install libssl-dev and configure with -DWCOMM_WITH_TLS=ON");
}

TlsContext::~TlsContext() = default;

std::unique_ptr<Connection> make_tls_stream(asio::any_io_executor, int, std::string, std::shared_ptr<const TlsContext>,
                                            bool, std::chrono::microseconds) {
  return nullptr;  // (unreachable: there is no TlsContext to ask for one)
}

const std::error_category& tls_category() { return std::generic_category(); }

}  // namespace wcomm::transport
