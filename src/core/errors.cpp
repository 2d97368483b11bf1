// ErrorCode names and the mapping from an Error value to the typed exception that the public
// API throws.
#include "wcomm/errors.h"

namespace wcomm {

const char* error_code_name(ErrorCode code) {
  // The names of the typed exceptions (and of the Python V0.1 errors), so that logs and the
  // exceptions a user catches say the same thing.
  switch (code) {
    case ErrorCode::kBackpressure: return "BackpressureError";
    case ErrorCode::kConnectionClosed: return "ConnectionClosedError";
    case ErrorCode::kConnectionFailed: return "ConnectionFailedError";
    case ErrorCode::kMessageTooLarge: return "MessageTooLargeError";
    case ErrorCode::kOperationTimeout: return "OperationTimeoutError";
    case ErrorCode::kProtocol: return "ProtocolError";
    case ErrorCode::kSerialization: return "SerializationError";
    case ErrorCode::kUnknownCodec: return "UnknownCodecError";
    case ErrorCode::kUnsupportedPayload: return "UnsupportedPayloadError";
    case ErrorCode::kCancelled: return "CancelledError";
    case ErrorCode::kClosed: return "ClosedError";
    case ErrorCode::kInvalidArgument: return "InvalidArgumentError";
    case ErrorCode::kPeerRestarted: return "PeerRestartedError";
    case ErrorCode::kDeliveryUnknown: return "DeliveryUnknownError";
  }
  return "UnknownError";
}

void throw_error(const Error& error) {
  switch (error.code) {
    case ErrorCode::kBackpressure: throw BackpressureError(error.message);
    case ErrorCode::kConnectionClosed: throw ConnectionClosedError(error.message);
    case ErrorCode::kConnectionFailed: throw ConnectionFailedError(error.message);
    case ErrorCode::kMessageTooLarge: throw MessageTooLargeError(error.message);
    case ErrorCode::kOperationTimeout: throw OperationTimeoutError(error.message);
    case ErrorCode::kProtocol: throw ProtocolError(error.message);
    case ErrorCode::kSerialization: throw SerializationError(error.message);
    case ErrorCode::kUnknownCodec: throw UnknownCodecError(error.message);
    case ErrorCode::kUnsupportedPayload: throw UnsupportedPayloadError(error.message);
    case ErrorCode::kCancelled: throw CancelledError(error.message);
    case ErrorCode::kClosed: throw ClosedError(error.message);
    case ErrorCode::kInvalidArgument: throw InvalidArgumentError(error.message);
    case ErrorCode::kPeerRestarted: throw PeerRestartedError(error.message);
    case ErrorCode::kDeliveryUnknown: throw DeliveryUnknownError(error.message);
  }
  // An out-of-range code (a cast from a bad integer) still surfaces as a CommError.
  throw CommError(error.code, error.message);
}

}  // namespace wcomm
