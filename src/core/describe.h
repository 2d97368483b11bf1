// Internal helpers that render tensor types for error messages and summaries, so that every
// message names a tensor the same way: float32[3,224,224].
#pragma once

#include <string>

#include "wcomm/tensor.h"

namespace wcomm::detail {

inline std::string describe_shape(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(shape[i]);
  }
  out += ']';
  return out;
}

inline std::string describe_tensor_type(DType dtype, const Shape& shape) {
  return std::string(dtype_name(dtype)) + describe_shape(shape);
}

}  // namespace wcomm::detail
