// TlsContext: the OpenSSL configuration every TLS connection of a Comm shares (this node's
// certificate and key, the CA that peers' certificates must chain to, TLS 1.3 only).
#pragma once

#include <memory>

#include "wcomm/config.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace wcomm::transport {

class TlsContext {
 public:
  // Loads and checks the files (the key must match the certificate); InvalidArgumentError
  // naming the file and what OpenSSL found wrong.
  static std::shared_ptr<const TlsContext> load(const TlsConfig& config);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* native() const { return ctx_; }

 private:
  explicit TlsContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;
};

}  // namespace wcomm::transport
