// Payloads for the node CLI: JSON -> Value, shapes, pattern tensors and file contents.
#include "cli/payload.h"

#include <bit>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>

namespace wcomm::tools {
namespace {

std::string in_quotes(std::string_view s) { return "'" + std::string(s) + "'"; }

// float32 -> float16 bits, rounding to nearest even; past float16's range, infinity.
std::uint16_t to_float16_bits(float f) {
  const auto bits = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const int exponent = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  std::uint32_t mantissa = bits & 0x7fffffu;
  if (exponent >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);  // inf (no NaNs here)
  if (exponent <= 0) {                                                       // subnormal or zero
    if (exponent < -10) return static_cast<std::uint16_t>(sign);
    mantissa |= 0x800000u;
    const int shift = 14 - exponent;
    std::uint32_t half = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  std::uint32_t half = (static_cast<std::uint32_t>(exponent) << 10) | (mantissa >> 13);
  const std::uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1))) ++half;  // may carry into inf: right
  return static_cast<std::uint16_t>(sign | half);
}
// float32 -> bfloat16 bits, rounding to nearest even.
std::uint16_t to_bfloat16_bits(float f) {
  const auto bits = std::bit_cast<std::uint32_t>(f);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

template <class T, class Convert>
void fill_arange(const Tensor& tensor, Convert convert) {
  T* out = tensor.data_as<T>();
  const std::size_t n = tensor.numel();
  for (std::size_t i = 0; i < n; ++i) out[i] = convert(static_cast<std::uint64_t>(i));
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
  // torch's names too, as V0.1 takes the dtype from the torch module: torch.float32, half, ...
  std::string_view name = text;
  if (name.substr(0, 6) == "torch.") name.remove_prefix(6);
  static constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
      {"half", "float16"}, {"float", "float32"}, {"double", "float64"},
      {"short", "int16"},  {"int", "int32"},     {"long", "int64"}};
  for (const auto& [alias, wire] : kAliases)
    if (name == alias) name = wire;
  if (auto dtype = parse_dtype(name)) return *dtype;
  throw UsageError(std::string(option) + ": unknown dtype " + in_quotes(text) +
                   "; use one of uint8 int8 int16 int32 int64 float16 bfloat16 float32 float64 bool "
                   "(or torch's half float double short int long)");
}

Tensor arange_tensor(DType dtype, const Shape& shape) {
  if (!tensor_nbytes(dtype, shape)) throw UsageError("--tensor-shape: the tensor's size overflows");
  Tensor tensor = Tensor::empty(dtype, shape);
  using U = std::uint64_t;
  switch (dtype) {
    // Integers wrap as torch.arange's do (uint8: i mod 256).
    case DType::kUInt8: fill_arange<std::uint8_t>(tensor, [](U i) { return static_cast<std::uint8_t>(i); }); break;
    case DType::kInt8: fill_arange<std::int8_t>(tensor, [](U i) { return static_cast<std::int8_t>(i); }); break;
    case DType::kInt16: fill_arange<std::int16_t>(tensor, [](U i) { return static_cast<std::int16_t>(i); }); break;
    case DType::kInt32: fill_arange<std::int32_t>(tensor, [](U i) { return static_cast<std::int32_t>(i); }); break;
    case DType::kInt64: fill_arange<std::int64_t>(tensor, [](U i) { return static_cast<std::int64_t>(i); }); break;
    case DType::kFloat16: fill_arange<std::uint16_t>(tensor, [](U i) { return to_float16_bits(static_cast<float>(i)); }); break;
    case DType::kBFloat16: fill_arange<std::uint16_t>(tensor, [](U i) { return to_bfloat16_bits(static_cast<float>(i)); }); break;
    case DType::kFloat32: fill_arange<float>(tensor, [](U i) { return static_cast<float>(i); }); break;
    case DType::kFloat64: fill_arange<double>(tensor, [](U i) { return static_cast<double>(i); }); break;
    case DType::kBool: fill_arange<std::uint8_t>(tensor, [](U i) { return static_cast<std::uint8_t>(i & 1); }); break;
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
