// TlsContext: see tls_context.h.
#include "transport/tls/tls_context.h"

#include <cstring>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <string>

#include "wcomm/errors.h"

namespace wcomm::transport {
namespace {

std::string openssl_reason() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  // A system call's failure (a file that is missing or unreadable): its errno, in words.
  if (ERR_SYSTEM_ERROR(e)) return std::strerror(static_cast<int>(ERR_GET_REASON(e)));
  const char* reason = ERR_reason_error_string(e);
  return reason ? reason : "OpenSSL error " + std::to_string(e);
}

}  // namespace

std::shared_ptr<const TlsContext> TlsContext::load(const TlsConfig& config) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_method());
  if (!ctx) throw InvalidArgumentError("comm.tls: cannot create an OpenSSL context: " + openssl_reason());
  std::shared_ptr<const TlsContext> out(new TlsContext(ctx));
  const auto fail = [](const std::string& what, const std::string& file) {
    throw InvalidArgumentError("comm.tls." + what + " '" + file + "': " + openssl_reason());
  };
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  // AES-GCM first (AES-NI); no session tickets: connections are long-lived and a ticket would
  // be unsolicited data on the stream after the handshake.
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  SSL_CTX_set_num_tickets(ctx, 0);
  // Partial writes: a non-blocking write returns after each record the socket took.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Read ahead: one receive takes many records (not two per record); TlsStream knows when the
  // bytes OpenSSL holds are only part of a record (tls_stream.cpp, readable_without_socket).
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, 256 * 1024);
  if (SSL_CTX_use_certificate_chain_file(ctx, config.cert_file.c_str()) != 1) fail("cert_file", config.cert_file);
  if (SSL_CTX_use_PrivateKey_file(ctx, config.key_file.c_str(), SSL_FILETYPE_PEM) != 1)
    fail("key_file", config.key_file);
  if (SSL_CTX_check_private_key(ctx) != 1)
    throw InvalidArgumentError("comm.tls.key_file '" + config.key_file + "' does not belong to the certificate in '" +
                               config.cert_file + "'");
  if (SSL_CTX_load_verify_locations(ctx, config.ca_file.c_str(), nullptr) != 1) fail("ca_file", config.ca_file);
  // Mutual: both ends must present a certificate that chains to the CA.
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  return out;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

}  // namespace wcomm::transport
