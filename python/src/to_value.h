// Python objects -> wcomm::Value for sending. Bytes-like objects and tensors are borrowed, not
// copied: every object whose memory the Value points into is appended to `keepalive`, which
// the caller must hold until the send completes.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>

#include "wcomm/value.h"

namespace wcomm::python {

namespace py = pybind11;

struct EncodeContext {
  // type -> ("record", type_id, version, field_names) or ("custom", type_id, version, encoder)
  py::dict encoders;
  bool allow_pickle = false;
  std::size_t max_depth = 64;
  py::list keepalive;
};

// Throws UnsupportedPayloadError for what cannot travel (naming the type and the fix),
// SerializationError for containers nested deeper than max_depth.
Value to_value(py::handle obj, EncodeContext& ctx, std::size_t depth = 0);

}  // namespace wcomm::python
