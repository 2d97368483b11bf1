// The encoder-cache compatibility hash: SHA-256 (OpenSSL's EVP digest) over the fields that
// must agree between producer and consumer.
#include <openssl/evp.h>

#include <cstdio>
#include <memory>

#include "wcomm/xfer/cache_service.h"

namespace wcomm::xfer {

namespace {
void add_field(EVP_MD_CTX* ctx, const std::string& field) {
  // Length first: ("ab", "c") and ("a", "bc") must not hash alike.
  const std::uint64_t n = field.size();
  EVP_DigestUpdate(ctx, &n, sizeof n);
  EVP_DigestUpdate(ctx, field.data(), field.size());
}
}  // namespace

std::string compat_hash(const CacheCompat& compat) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw InvalidArgumentError("compat_hash: OpenSSL could not set up SHA-256");
  add_field(ctx.get(), compat.version);
  add_field(ctx.get(), compat.model_id);
  add_field(ctx.get(), compat.dtype);
  add_field(ctx.get(), std::to_string(compat.block_bytes));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &len);
  std::string hex(2 * len, '0');
  for (unsigned i = 0; i < len; ++i) std::snprintf(&hex[2 * i], 3, "%02x", digest[i]);
  return hex;
}

}  // namespace wcomm::xfer
