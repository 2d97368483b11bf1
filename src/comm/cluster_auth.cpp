// Cluster-key proofs with OpenSSL's HMAC-SHA256 (cluster_auth.h).
#include "comm/cluster_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

namespace wcomm::auth {
namespace {

std::string hex(const unsigned char* data, std::size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[data[i] >> 4];
    out[2 * i + 1] = digits[data[i] & 15];
  }
  return out;
}

}  // namespace

std::string new_nonce() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("OpenSSL could not draw a random nonce");
  return hex(bytes, sizeof bytes);
}

std::string proof(std::string_view key, std::string_view side, const Exchange& e) {
  // Every field is followed by a nul byte, so no two different exchanges read alike.
  std::string message = "wcomm cluster auth v1";
  for (std::string_view field : {side, std::string_view(e.dialer_nonce), std::string_view(e.acceptor_nonce),
                                 std::string_view(e.dialer_id), std::string_view(e.acceptor_id),
                                 std::string_view(e.connection_id)}) {
    message.push_back('\0');
    message.append(field);
  }
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &length))
    throw std::runtime_error("OpenSSL's HMAC-SHA256 failed");
  return hex(mac, length);
}

bool verify(std::string_view key, std::string_view side, const Exchange& exchange, std::string_view claimed) {
  const std::string expected = proof(key, side, exchange);
  return claimed.size() == expected.size() && CRYPTO_memcmp(claimed.data(), expected.data(), expected.size()) == 0;
}

}  // namespace wcomm::auth
