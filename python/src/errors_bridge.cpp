// Maps wcomm error codes to the exception classes of wireless_comm.errors.
#include "errors_bridge.h"

#include <stdexcept>
#include <system_error>

namespace wcomm::python {
namespace {

// Looked up once and kept for the life of the process: static py::objects would be
// destroyed after the interpreter is gone.
struct ErrorClasses {
  PyObject* by_code[static_cast<int>(ErrorCode::kDeliveryUnknown) + 1] = {};
  PyObject* queue_overflow = nullptr;      // MessageTooLargeError and BackpressureError
  PyObject* piggypayload_too_large = nullptr;  // MessageTooLargeError and SerializationError
};

const ErrorClasses& classes() {
  static ErrorClasses* cached = [] {
    auto* c = new ErrorClasses;
    py::module_ errors = py::module_::import("wireless_comm.errors");
    auto set = [&](ErrorCode code, py::object cls) {
      c->by_code[static_cast<int>(code)] = py::reinterpret_borrow<py::object>(cls).release().ptr();
    };
    set(ErrorCode::kBackpressure, errors.attr("BackpressureError"));
    set(ErrorCode::kConnectionClosed, errors.attr("ConnectionClosedError"));
    set(ErrorCode::kConnectionFailed, errors.attr("ConnectionFailedError"));
    set(ErrorCode::kMessageTooLarge, errors.attr("MessageTooLargeError"));
    set(ErrorCode::kOperationTimeout, errors.attr("OperationTimeoutError"));
    set(ErrorCode::kProtocol, errors.attr("ProtocolError"));
    set(ErrorCode::kSerialization, errors.attr("SerializationError"));
    set(ErrorCode::kUnknownCodec, errors.attr("UnknownCodecError"));
    set(ErrorCode::kUnsupportedPayload, errors.attr("UnsupportedPayloadError"));
    set(ErrorCode::kCancelled, py::module_::import("asyncio").attr("CancelledError"));
    // Operations on a closed Comm fail like those on a closed connection (V0.1 has no
    // separate class); the message says which.
    set(ErrorCode::kClosed, errors.attr("ConnectionClosedError"));
    set(ErrorCode::kInvalidArgument, py::reinterpret_borrow<py::object>(PyExc_ValueError));
    set(ErrorCode::kPeerRestarted, errors.attr("PeerRestartedError"));
    set(ErrorCode::kDeliveryUnknown, errors.attr("DeliveryUnknownError"));
    c->queue_overflow = py::object(errors.attr("QueueOverflowError")).release().ptr();
    c->piggypayload_too_large = py::object(errors.attr("PiggypayloadTooLargeError")).release().ptr();
    return c;
  }();
  return *cached;
}

}  // namespace

py::handle error_class(ErrorCode code) { return classes().by_code[static_cast<int>(code)]; }

py::handle error_class(ErrorCode code, const std::string& message) {
  // Two MessageTooLarge failures that V0.1 reports as BackpressureError (a message over
  // max_peer_queued_bytes, comm.cpp's "can never fit the send queue") and SerializationError
  // (a piggypayload over max_metadata_bytes, the codec's "piggypayload ...") get a class that
  // is both. The core has one code for them, so its message tells them apart.
  if (code == ErrorCode::kMessageTooLarge) {
    if (message.find("max_peer_queued_bytes") != std::string::npos) return classes().queue_overflow;
    if (message.rfind("piggypayload", 0) == 0) return classes().piggypayload_too_large;
  }
  return error_class(code);
}

py::object make_exception(const Error& error) { return error_class(error.code, error.message)(error.message); }

void raise_error(ErrorCode code, const std::string& message) {
  PyErr_SetString(error_class(code, message).ptr(), message.c_str());
  throw py::error_already_set();
}

void register_error_translator() {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const CommError& e) {
      PyErr_SetString(error_class(e.code(), e.what()).ptr(), e.what());
    } catch (const std::out_of_range& e) {
      PyErr_SetString(PyExc_KeyError, e.what());
    } catch (const std::system_error& e) {
      // OSError(errno, message): EBADF for a closed event descriptor, as pyzmq raises.
      PyErr_SetObject(PyExc_OSError, py::make_tuple(e.code().value(), e.what()).ptr());
    }
  });
}

}  // namespace wcomm::python
