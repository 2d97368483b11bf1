// The benchmark control protocol of docs/wire-format.md: tags, op names, and a small request/reply
// channel over Comm whose messages are dicts with string keys (V0.1 interoperable).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "wcomm/comm.h"

namespace wcomm::bench {

inline constexpr std::uint32_t kControlTag = 0xFFFFFF00u;
inline constexpr std::uint32_t kBulkTag = 0xFFFFFF01u;
inline constexpr std::int64_t kBenchProtocolVersion = 1;

// The peer answered something the protocol does not allow at this point (wrong op, missing or
// mistyped field, echo that does not match). The message says which and what was expected.
class BenchProtocolError : public std::runtime_error {
 public:
  explicit BenchProtocolError(const std::string& message) : std::runtime_error(message) {}
};

// Typed access to the fields of a control message; each throws BenchProtocolError naming the
// op and the field when it is missing or of another type.
std::string op_of(const Dict& message);
const Value& field(const Dict& message, std::string_view key);
std::int64_t int_field(const Dict& message, std::string_view key);
std::uint64_t size_field(const Dict& message, std::string_view key);  // a non-negative int
double number_field(const Dict& message, std::string_view key);       // float or int
std::string string_field(const Dict& message, std::string_view key);
const Bytes& bytes_field(const Dict& message, std::string_view key);

// Control messages to and from one peer on kControlTag. Every operation is bounded by the
// channel's timeout (V0.1's operation_timeout) and throws wcomm's typed errors on failure.
class ControlChannel {
 public:
  ControlChannel(Comm& comm, const Peer& peer, Seconds timeout) : comm_(comm), peer_(peer), timeout_(timeout) {}

  // Queues a message; the returned future completes when it is written.
  Future<SendResult> post(Dict message);
  // Sends and waits for the write to finish.
  void send(Dict message);
  // The next control message. `timeout` overrides the channel's (nullopt: wait forever).
  Dict receive();
  Dict receive(std::optional<Seconds> timeout);
  // Receives the next message and checks that its op is `expected_op` (an "error" reply from
  // the peer is turned into a BenchProtocolError carrying its message).
  Dict expect(std::string_view expected_op);

  Comm& comm() const { return comm_; }
  const Peer& peer() const { return peer_; }
  Seconds timeout() const { return timeout_; }

 private:
  Comm& comm_;
  const Peer& peer_;
  Seconds timeout_;
};

}  // namespace wcomm::bench
