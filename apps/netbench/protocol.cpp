// Field access and the request/reply channel of the benchmark control protocol.
#include "netbench/protocol.h"

#include <cstdio>

#include "core/dict_fields.h"

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

// The field read by the core helper, or BenchProtocolError in this protocol's words: a missing
// field is "required", a mistyped one is named by the type this protocol expected.
template <class T>
T or_throw(Result<T> read, const Dict& message, std::string_view key, const char* expected) {
  if (read.ok()) return std::move(read).value();
  bad_field(message, key, message.find(key) == nullptr ? "required" : expected);
}

}  // namespace

const Value& field(const Dict& message, std::string_view key) {
  return *or_throw(fields::required(message, key), message, key, "required");
}

std::string op_of(const Dict& message) { return string_field(message, "op"); }

std::int64_t int_field(const Dict& message, std::string_view key) {
  return or_throw(fields::int64(message, key), message, key, "integer");
}

std::uint64_t size_field(const Dict& message, std::string_view key) {
  return or_throw(fields::uint64(message, key), message, key, "non-negative integer");
}

double number_field(const Dict& message, std::string_view key) {
  return or_throw(fields::number(message, key), message, key, "number");
}

std::string string_field(const Dict& message, std::string_view key) {
  return or_throw(fields::string(message, key), message, key, "string");
}

const Bytes& bytes_field(const Dict& message, std::string_view key) {
  return *or_throw(fields::bytes(message, key), message, key, "bytes");
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
