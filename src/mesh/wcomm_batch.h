// How the wcomm transport carries mesh messages: each Comm message is one Bytes value
// holding one or more mesh messages, each a 4-byte little-endian length and its bytes. While a
// peer's previous Comm send is in flight, new messages join the next batch, so many small
// messages cost one Comm send (and one system call) instead of one each.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "wcomm/errors.h"

namespace wcomm::mesh {

inline void batch_append(std::string& batch, std::string_view message) {
  const auto n = static_cast<std::uint32_t>(message.size());
  const char len[4] = {static_cast<char>(n), static_cast<char>(n >> 8), static_cast<char>(n >> 16),
                       static_cast<char>(n >> 24)};
  batch.append(len, 4);
  batch.append(message);
}

// Calls fn(message) for each message of a batch; SerializationError for a malformed one.
template <class Fn>
void batch_for_each(std::string_view batch, Fn&& fn) {
  std::size_t at = 0;
  while (at < batch.size()) {
    if (batch.size() - at < 4) throw SerializationError("mesh batch: a length cut short");
    const auto* p = reinterpret_cast<const unsigned char*>(batch.data() + at);
    const std::uint32_t n = p[0] | (p[1] << 8) | (p[2] << 16) | (std::uint32_t{p[3]} << 24);
    at += 4;
    if (batch.size() - at < n) throw SerializationError("mesh batch: a message cut short");
    fn(batch.substr(at, n));
    at += n;
  }
}

}  // namespace wcomm::mesh
