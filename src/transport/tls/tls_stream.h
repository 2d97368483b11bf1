// TlsStream: a Connection that is TLS 1.3 over a connected stream socket (CommConfig::tls).
// The handshake runs on the loop, started by the first write or wait for readable, which wait
// for it; the Comm's handshake deadline and bound on pending handshakes cover it too. Thread model: docs/thread-model.md, "TLS".
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <system_error>

#include <asio.hpp>

#include "transport/transport.h"

namespace wcomm::transport {

class TlsContext;

// Takes over fd (a connected socket). accepting: this side is the TLS server. queue_target
// > 0: the send queue bound, as a plain TCP stream has it (tcp/send_queue_bound.h).
std::unique_ptr<Connection> make_tls_stream(asio::any_io_executor executor, int fd, std::string description,
                                            std::shared_ptr<const TlsContext> context, bool accepting,
                                            std::chrono::microseconds queue_target = {});

// What the TLS layer refuses, with a message that says what to do (tls_stream.cpp).
const std::error_category& tls_category();

}  // namespace wcomm::transport
