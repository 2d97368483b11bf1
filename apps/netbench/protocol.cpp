// Field access and the request/reply channel of the benchmark control protocol.
#include "netbench/protocol.h"

#include <cstdio>

namespace wcomm::bench {
namespace {

std::string describe_op(const Dict& message) {
  const Value* op = message.find("op");
  if (op != nullptr && op->is<std::string>()) return "'" + op->as<std::string>() + "' message";
  return "control message";
}

[[noreturn]] void bad_field(const Dict& message, std::string_view key, const char* expected) {
  throw BenchProtocolError("benchmark protocol: " + describe_op(message) + " has no " + expected +
                           " field '" + std::string(key) + "' (" + summarize(Value(message)) + ")");
}

}  // namespace

const Value& field(const Dict& message, std::string_view key) {
  const Value* value = message.find(key);
  if (value == nullptr) bad_field(message, key, "required");
  return *value;
}

std::string op_of(const Dict& message) { return string_field(message, "op"); }

std::int64_t int_field(const Dict& message, std::string_view key) {
  const Value& value = field(message, key);
  if (value.is<std::int64_t>()) return value.as<std::int64_t>();
  bad_field(message, key, "integer");
}

std::uint64_t size_field(const Dict& message, std::string_view key) {
  const Value& value = field(message, key);
  if (value.is<std::uint64_t>()) return value.as<std::uint64_t>();
  if (value.is<std::int64_t>() && value.as<std::int64_t>() >= 0)
    return static_cast<std::uint64_t>(value.as<std::int64_t>());
  bad_field(message, key, "non-negative integer");
}

double number_field(const Dict& message, std::string_view key) {
  const Value& value = field(message, key);
  if (value.is<double>()) return value.as<double>();
  if (value.is<std::int64_t>()) return static_cast<double>(value.as<std::int64_t>());
  if (value.is<std::uint64_t>()) return static_cast<double>(value.as<std::uint64_t>());
  bad_field(message, key, "number");
}

std::string string_field(const Dict& message, std::string_view key) {
  const Value& value = field(message, key);
  if (value.is<std::string>()) return value.as<std::string>();
  bad_field(message, key, "string");
}

const Bytes& bytes_field(const Dict& message, std::string_view key) {
  const Value& value = field(message, key);
  if (value.is<Bytes>()) return value.as<Bytes>();
  bad_field(message, key, "bytes");
}

Future<SendResult> ControlChannel::post(Dict message) {
  return comm_.send(Value(std::move(message)), peer_, Value(), {.tag = kControlTag, .timeout = timeout_});
}

void ControlChannel::send(Dict message) { post(std::move(message)).get(); }

Dict ControlChannel::receive() { return receive(timeout_); }

Dict ControlChannel::receive(std::optional<Seconds> timeout) {
  // No timeout in the core: waiting here lets this thread read the reply itself (the receive
  // fast path), so a measured round trip holds no extra thread wake-up.
  Future<Received> pending = comm_.recv(peer_, {.tag = kControlTag});
  if (timeout && pending.wait_for(*timeout) == nullptr) {
    pending.cancel();  // a reply that beat the cancel is still taken below
    if (Result<Received>& late = pending.wait(); !late.ok() && late.error().code == ErrorCode::kCancelled) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", timeout->count());
      throw_error({ErrorCode::kOperationTimeout,
                   "recv to/from '" + peer_.node_id + "' timed out after " + seconds + " s (benchmark control tag)"});
    }
  }
  Received got = pending.get();
  if (!got.value.is<Dict>())
    throw BenchProtocolError("benchmark protocol: expected a dict on the control tag from '" + peer_.node_id +
                             "', got " + summarize(got.value));
  return std::move(got.value.as<Dict>());
}

Dict ControlChannel::expect(std::string_view expected_op) {
  Dict reply = receive();
  const std::string op = op_of(reply);
  if (op == expected_op) return reply;
  if (op == "error") {
    const Value* message = reply.find("message");
    throw BenchProtocolError("benchmark peer '" + peer_.node_id + "' reported an error: " +
                             (message != nullptr && message->is<std::string>() ? message->as<std::string>()
                                                                               : summarize(Value(reply))));
  }
  throw BenchProtocolError("benchmark protocol: expected '" + std::string(expected_op) + "' from '" +
                           peer_.node_id + "', got '" + op + "'");
}

}  // namespace wcomm::bench
