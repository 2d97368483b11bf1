// wcomm errors as Python exceptions: the classes of wireless_comm.errors (V0.1's names), an
// exception instance for a failed operation, and the translator for C++ exceptions.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "wcomm/errors.h"

namespace wcomm::python {

namespace py = pybind11;

// The Python class an error code maps to (e.g. kOperationTimeout -> OperationTimeoutError;
// kInvalidArgument -> ValueError; kClosed -> ConnectionClosedError; kCancelled ->
// asyncio.CancelledError).
py::handle error_class(ErrorCode code);

// The class for an error with this message: error_class(code), or for two MessageTooLarge
// failures a subclass that is also V0.1's class for them (QueueOverflowError,
// PiggypayloadTooLargeError).
py::handle error_class(ErrorCode code, const std::string& message);

// An exception instance for a completed-with-error operation.
py::object make_exception(const Error& error);

// Throws (as py::error_already_set) the Python exception for code with message.
[[noreturn]] void raise_error(ErrorCode code, const std::string& message);

// Registers the translator from wcomm::CommError (and std::out_of_range -> KeyError).
void register_error_translator();

}  // namespace wcomm::python
