// Error values used inside the library and the typed exceptions they become at the public
// boundary (the same names as the Python V0.1 package's errors).
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace wcomm {

enum class ErrorCode {
  kBackpressure,        // a peer's send queue is full and the caller asked not to wait
  kConnectionClosed,    // the connection ended while the operation was waiting on it
  kConnectionFailed,    // the peer could not be reached (dial refused until the deadline)
  kMessageTooLarge,     // a message or part of it exceeds a configured limit
  kOperationTimeout,    // the operation's timeout expired
  kProtocol,            // the peer broke the COMM v1 protocol
  kSerialization,       // a value could not be encoded or decoded
  kUnknownCodec,        // a record / custom type_id that is not registered
  kUnsupportedPayload,  // a value the codec cannot carry (e.g. a non-contiguous tensor)
  kCancelled,           // the caller cancelled the operation
  kClosed,              // the Comm was closed
  kInvalidArgument,     // bad input to an API call or a bad configuration value
  kPeerRestarted,       // the peer restarted (a new incarnation): what was in flight with the old one is gone
  // A send with CommOptions::ack whose frame went out whole but whose acknowledgement never
  // came (the connection ended, the Comm closed, or the send's timeout or cancel came first):
  // the peer may have it. Every other failed send was certainly not delivered.
  kDeliveryUnknown,
};

const char* error_code_name(ErrorCode code);

// An error as a value: a code plus a message that says what went wrong and what to do.
struct Error {
  ErrorCode code;
  std::string message;
};

// Base of every exception wcomm throws.
class CommError : public std::runtime_error {
 public:
  CommError(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

#define WCOMM_DECLARE_ERROR(Name, Code)                                                  \
  class Name : public CommError {                                                        \
   public:                                                                               \
    explicit Name(const std::string& message) : CommError(ErrorCode::Code, message) {} \
                                                                                         \
   protected:                                                                            \
    Name(ErrorCode code, const std::string& message) : CommError(code, message) {}      \
  };
WCOMM_DECLARE_ERROR(BackpressureError, kBackpressure)
WCOMM_DECLARE_ERROR(ConnectionClosedError, kConnectionClosed)
WCOMM_DECLARE_ERROR(ConnectionFailedError, kConnectionFailed)
WCOMM_DECLARE_ERROR(MessageTooLargeError, kMessageTooLarge)
WCOMM_DECLARE_ERROR(OperationTimeoutError, kOperationTimeout)
WCOMM_DECLARE_ERROR(ProtocolError, kProtocol)
WCOMM_DECLARE_ERROR(SerializationError, kSerialization)
WCOMM_DECLARE_ERROR(UnknownCodecError, kUnknownCodec)
WCOMM_DECLARE_ERROR(UnsupportedPayloadError, kUnsupportedPayload)
WCOMM_DECLARE_ERROR(CancelledError, kCancelled)
WCOMM_DECLARE_ERROR(ClosedError, kClosed)
WCOMM_DECLARE_ERROR(InvalidArgumentError, kInvalidArgument)
#undef WCOMM_DECLARE_ERROR

// A ConnectionClosedError (code that catches those keeps working) that says why: the peer
// restarted, so what was in flight with its old incarnation will never complete.
class PeerRestartedError : public ConnectionClosedError {
 public:
  explicit PeerRestartedError(const std::string& message)
      : ConnectionClosedError(ErrorCode::kPeerRestarted, message) {}
};

// A ConnectionClosedError (code that catches those keeps working) whose message may have been
// delivered: it went out whole, but its acknowledgement never came. Sending it again may
// deliver it twice, unless it carries a retry key (CommOptions::retry_key).
class DeliveryUnknownError : public ConnectionClosedError {
 public:
  explicit DeliveryUnknownError(const std::string& message)
      : ConnectionClosedError(ErrorCode::kDeliveryUnknown, message) {}
};

// Throws the typed exception that matches error.code.
[[noreturn]] void throw_error(const Error& error);

// Either a value or an Error. Small on purpose: get() throws the typed exception.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : state_(std::move(error)) {}  // NOLINT
  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return std::get<1>(state_); }
  T& value() & { check(); return std::get<0>(state_); }
  T&& value() && { check(); return std::get<0>(std::move(state_)); }
  const T& value() const& { check(); return std::get<0>(state_); }

 private:
  void check() const { if (!ok()) throw_error(error()); }
  std::variant<T, Error> state_;
};

// Result<void>: success, or an Error.
struct Ok {};
using Status = Result<Ok>;

}  // namespace wcomm
