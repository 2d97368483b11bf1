// Cluster-key authentication of a connection (CommConfig::cluster_key; docs/wire-format.md,
// "auth"): fresh nonces from both sides, and proofs that are HMAC-SHA256 (OpenSSL) over both
// nonces, both node ids, the connection id and which side is proving.
#pragma once

#include <string>
#include <string_view>

namespace wcomm::auth {

// 32 random bytes from OpenSSL's generator, as 64 lowercase hex characters.
std::string new_nonce();

struct Exchange {
  std::string dialer_nonce, acceptor_nonce;
  std::string dialer_id, acceptor_id;
  std::string connection_id;
};

// The proof the given side ("dialer" or "acceptor") sends, as 64 lowercase hex characters.
std::string proof(std::string_view key, std::string_view side, const Exchange& exchange);
// Whether `claimed` is that proof (compared in constant time).
bool verify(std::string_view key, std::string_view side, const Exchange& exchange, std::string_view claimed);

}  // namespace wcomm::auth
