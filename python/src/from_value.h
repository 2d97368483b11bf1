// wcomm::Value -> Python objects for a received message. Tensors come back over the buffers
// the core received into (no copy); byte strings become bytes objects, which CPython can only
// build by copying: those bytes are counted in `bytes_copied`.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>

#include "tensor_bridge.h"
#include "wcomm/value.h"

namespace wcomm::python {

namespace py = pybind11;

struct DecodeContext {
  // type_id -> ("record", version, build(fields_dict)) or ("custom", version, decoder(value))
  py::dict decoders;
  TensorMode mode = TensorMode::kAuto;
  std::uint64_t bytes_copied = 0;
};

// Throws SerializationError when a value has no Python form (an unhashable dict key, a
// decoder that raised) and UnknownCodecError for a type_id without a Python class.
py::object to_python(const Value& value, DecodeContext& ctx);

}  // namespace wcomm::python
