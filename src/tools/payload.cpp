// Payloads for the node CLI: JSON -> Value, shapes, pattern tensors and file contents.
#include "tools/payload.h"

#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>

namespace wcomm::tools {
namespace {

constexpr std::size_t kPatternModulus = 251;

std::string in_quotes(std::string_view s) { return "'" + std::string(s) + "'"; }

// Exact for the integers 0..250 the pattern uses: they need at most 8 significant bits, so
// dropping float32's low mantissa bits loses nothing (no rounding needed).
std::uint16_t to_float16_bits(float f) {
  if (f == 0.0f) return 0;
  auto bits = std::bit_cast<std::uint32_t>(f);
  auto exponent = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  return static_cast<std::uint16_t>((exponent << 10) | ((bits >> 13) & 0x3ff));
}
std::uint16_t to_bfloat16_bits(float f) { return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(f) >> 16); }

template <class T, class Convert>
void fill_pattern(const Tensor& tensor, Convert convert) {
  T* out = tensor.data_as<T>();
  std::size_t n = tensor.numel();
  for (std::size_t i = 0; i < n; ++i) out[i] = convert(static_cast<unsigned>(i % kPatternModulus));
}

}  // namespace

Value json_to_value(const nlohmann::ordered_json& json) {
  using Type = nlohmann::ordered_json::value_t;
  switch (json.type()) {
    case Type::null:
    case Type::discarded:
      return None{};
    case Type::boolean:
      return json.get<bool>();
    case Type::number_integer:
      return json.get<std::int64_t>();
    case Type::number_unsigned:
      return json.get<std::uint64_t>();
    case Type::number_float:
      return json.get<double>();
    case Type::string:
      return json.get<std::string>();
    case Type::binary:
      return Bytes(Buffer::copy_of(json.get_binary().data(), json.get_binary().size()));
    case Type::array: {
      List list;
      list.items.reserve(json.size());
      for (const auto& item : json) list.items.push_back(json_to_value(item));
      return list;
    }
    case Type::object: {
      Dict dict;
      dict.items.reserve(json.size());
      for (const auto& [key, item] : json.items()) dict.items.emplace_back(Value(key), json_to_value(item));
      return dict;
    }
  }
  return None{};
}

Value parse_json_option(std::string_view option, const std::string& text) {
  try {
    return json_to_value(nlohmann::ordered_json::parse(text));
  } catch (const nlohmann::json::parse_error& e) {
    throw UsageError(std::string(option) + ": not valid JSON: " + e.what());
  }
}

Value parse_json_object_option(std::string_view option, const std::string& text) {
  Value value = parse_json_option(option, text);
  if (!value.is<Dict>()) throw UsageError(std::string(option) + ": must be a JSON object, e.g. '{\"trace_id\": \"t1\"}'");
  return value;
}

Shape parse_shape(std::string_view option, std::string_view text) {
  Shape shape;
  if (text.empty() || text == "scalar") return shape;
  std::string_view rest = text;
  while (true) {
    auto comma = rest.find(',');
    std::string_view part = rest.substr(0, comma);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    std::int64_t dim = -1;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), dim);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || dim < 0)
      throw UsageError(std::string(option) + ": " + in_quotes(text) +
                       " is not a shape; give non-negative integers separated by commas, e.g. 3,224,224");
    shape.push_back(dim);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (shape.size() > static_cast<std::size_t>(kMaxTensorDims))
    throw UsageError(std::string(option) + ": at most " + std::to_string(kMaxTensorDims) + " dimensions");
  return shape;
}

DType parse_dtype_option(std::string_view option, std::string_view text) {
  if (auto dtype = parse_dtype(text)) return *dtype;
  throw UsageError(std::string(option) + ": unknown dtype " + in_quotes(text) +
                   "; use one of uint8 int8 int16 int32 int64 float16 bfloat16 float32 float64 bool");
}

Tensor pattern_tensor(DType dtype, const Shape& shape) {
  if (!tensor_nbytes(dtype, shape)) throw UsageError("--tensor-shape: the tensor's size overflows");
  Tensor tensor = Tensor::empty(dtype, shape);
  switch (dtype) {
    case DType::kUInt8: fill_pattern<std::uint8_t>(tensor, [](unsigned v) { return static_cast<std::uint8_t>(v); }); break;
    case DType::kInt8: fill_pattern<std::int8_t>(tensor, [](unsigned v) { return static_cast<std::int8_t>(v); }); break;
    case DType::kInt16: fill_pattern<std::int16_t>(tensor, [](unsigned v) { return static_cast<std::int16_t>(v); }); break;
    case DType::kInt32: fill_pattern<std::int32_t>(tensor, [](unsigned v) { return static_cast<std::int32_t>(v); }); break;
    case DType::kInt64: fill_pattern<std::int64_t>(tensor, [](unsigned v) { return static_cast<std::int64_t>(v); }); break;
    case DType::kFloat16: fill_pattern<std::uint16_t>(tensor, [](unsigned v) { return to_float16_bits(static_cast<float>(v)); }); break;
    case DType::kBFloat16: fill_pattern<std::uint16_t>(tensor, [](unsigned v) { return to_bfloat16_bits(static_cast<float>(v)); }); break;
    case DType::kFloat32: fill_pattern<float>(tensor, [](unsigned v) { return static_cast<float>(v); }); break;
    case DType::kFloat64: fill_pattern<double>(tensor, [](unsigned v) { return static_cast<double>(v); }); break;
    case DType::kBool: fill_pattern<std::uint8_t>(tensor, [](unsigned v) { return static_cast<std::uint8_t>(v != 0); }); break;
  }
  return tensor;
}

Bytes read_file_bytes(std::string_view option, const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw UsageError(std::string(option) + ": cannot open " + in_quotes(path) + ": " + std::strerror(errno));
  auto size = static_cast<std::streamoff>(in.tellg());
  if (size < 0) throw UsageError(std::string(option) + ": cannot determine the size of " + in_quotes(path));
  Buffer buffer = Buffer::allocate(static_cast<std::size_t>(size));
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(buffer.data()), size))
    throw UsageError(std::string(option) + ": cannot read " + in_quotes(path));
  return Bytes(std::move(buffer));
}

}  // namespace wcomm::tools
