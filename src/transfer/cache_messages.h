// The encoder-cache service's two messages (seed 003's XferReq / XferAck) as wcomm Values on
// reserved tags of the control Comm, with checked decoding.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "wcomm/value.h"
#include "wcomm/xfer/types.h"

namespace wcomm::xfer {

struct CacheRequest {
  std::uint64_t request_id = 0;
  std::string key;
  DescList blocks;           // the consumer's blocks, in order
  std::string version;
  std::string compat_hash;
  std::string agent_metadata;  // the consumer agent's metadata (msgpack)
  double timeout_s = 0;        // how long the consumer waits; the producer gives up then too
};

struct CacheAck {
  std::uint64_t request_id = 0;
  std::string key;
  bool ok = false;
  std::string reason;
  std::uint64_t bytes = 0;
};

Value to_value(const CacheRequest& r);
Value to_value(const CacheAck& a);
// nullopt with `why` set for a malformed message.
std::optional<CacheRequest> request_from(const Value& v, std::string& why);
std::optional<CacheAck> ack_from(const Value& v, std::string& why);

}  // namespace wcomm::xfer
