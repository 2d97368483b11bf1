// Building message payloads from command-line text: JSON -> Value, tensor shapes and the
// arange tensors `wcomm node send --tensor-shape` sends (V0.1's values), files as Bytes.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "wcomm/tensor.h"
#include "wcomm/value.h"

namespace wcomm::tools {

// A mistake in what the user typed (bad option value, unreadable file). The CLI prints the
// message and exits with status 2; the message already names the option at fault.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// JSON -> Value: objects become a Dict with string keys, arrays a List, integers int, other
// numbers float, plus strings, bools and null. ordered_json, because the order the user wrote
// an object's keys in is the order the Dict keeps (and sends).
Value json_to_value(const nlohmann::ordered_json& json);

// Parses the JSON text given to `option` (e.g. "--json"); UsageError names the option.
Value parse_json_option(std::string_view option, const std::string& text);

// Like parse_json_option, but the text must be a JSON object (a piggypayload is a map).
Value parse_json_object_option(std::string_view option, const std::string& text);

// "3,224,224" -> {3, 224, 224}; "" or "scalar" -> {} (a 0-d tensor). UsageError names `option`.
Shape parse_shape(std::string_view option, std::string_view text);

// The dtype named by `text` ("float32", ..., or torch's names: "half", "float", "double",
// "short", "int", "long", "torch.float32"); UsageError names `option` and lists the dtypes.
DType parse_dtype_option(std::string_view option, std::string_view text);

// V0.1's generated tensor, torch.arange(numel, dtype).reshape(shape): element i holds i
// converted to dtype (integers wrap, as torch's do; float16 and bfloat16 round to nearest,
// where torch's own half-precision arange drifts past 2048 / 256 elements; bool, which
// torch.arange refuses, alternates False, True), so a receiver can check where every element
// landed.
Tensor arange_tensor(DType dtype, const Shape& shape);

// The whole file at path as Bytes; UsageError names `option` and the reason.
Bytes read_file_bytes(std::string_view option, const std::string& path);

}  // namespace wcomm::tools
