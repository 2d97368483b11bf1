// The byte patterns both sides of a transfer test make, and the digest they compare.
#pragma once

#include <openssl/sha.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace wcomm::xfer::testing {

// xorshift bytes from a seed: the test and its peer process make the same ones.
inline std::vector<std::uint8_t> pattern(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint8_t> out(n);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : out) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    b = static_cast<std::uint8_t>(x);
  }
  return out;
}

inline std::string sha256_hex(const void* data, std::size_t n) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(static_cast<const unsigned char*>(data), n, digest);
  char hex[2 * SHA256_DIGEST_LENGTH + 1];
  for (int i = 0; i < SHA256_DIGEST_LENGTH; ++i) std::snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  return hex;
}

}  // namespace wcomm::xfer::testing
