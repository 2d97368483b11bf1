// Typed Dict field reads with errors that name the field (src/core/dict_fields.h).
#include "core/dict_fields.h"

namespace wcomm::fields {
namespace {

std::string quoted(std::string_view key) { return "field '" + std::string(key) + "'"; }

Error wrong_type(std::string_view key, const char* expected, const Value& value) {
  return {ErrorCode::kProtocol, quoted(key) + " is not " + expected + " (it is " + kind_of(value) + ")"};
}

}  // namespace

std::string kind_of(const Value& value) {
  if (value.is<std::int64_t>()) return value.as<std::int64_t>() < 0 ? "a negative integer" : "an integer";
  if (value.is<std::uint64_t>()) return "an integer";  // always above INT64_MAX
  if (value.is_none()) return "None";
  if (value.is<bool>()) return "a bool";
  if (value.is<double>()) return "a float";
  if (value.is<std::string>()) return "a string";
  if (value.is<Bytes>()) return "a byte string";
  if (value.is<Tensor>()) return "a tensor";
  if (value.is<List>()) return "a list";
  if (value.is<Tuple>()) return "a tuple";
  if (value.is<Dict>()) return "a dict";
  if (value.is<Record>()) return "a record";
  if (value.is<Custom>()) return "a custom value";
  return "a pickle";
}

Result<const Value*> required(const Dict& dict, std::string_view key) {
  const Value* value = dict.find(key);
  if (value == nullptr) return Error{ErrorCode::kProtocol, quoted(key) + " is missing"};
  return value;
}

Result<std::string> string(const Dict& dict, std::string_view key) {
  Result<const Value*> field = required(dict, key);
  if (!field) return field.error();
  if (const auto* s = field.value()->get_if<std::string>()) return *s;
  return wrong_type(key, "a string", *field.value());
}

Result<std::string> string_or_bytes(const Dict& dict, std::string_view key) {
  Result<const Value*> field = required(dict, key);
  if (!field) return field.error();
  if (const auto* s = field.value()->get_if<std::string>()) return *s;
  if (const auto* b = field.value()->get_if<Bytes>()) return std::string(b->view());
  return wrong_type(key, "a string or byte string", *field.value());
}

Result<std::int64_t> int64(const Dict& dict, std::string_view key) {
  Result<const Value*> field = required(dict, key);
  if (!field) return field.error();
  if (const auto* i = field.value()->get_if<std::int64_t>()) return *i;
  if (field.value()->is<std::uint64_t>())
    return Error{ErrorCode::kProtocol, quoted(key) + " is too large for a signed 64-bit integer"};
  return wrong_type(key, "an integer", *field.value());
}

Result<std::uint64_t> uint64(const Dict& dict, std::string_view key) {
  Result<const Value*> field = required(dict, key);
  if (!field) return field.error();
  if (const auto* u = field.value()->get_if<std::uint64_t>()) return *u;
  if (const auto* i = field.value()->get_if<std::int64_t>(); i && *i >= 0) return static_cast<std::uint64_t>(*i);
  return wrong_type(key, "a non-negative integer", *field.value());
}

Result<double> number(const Dict& dict, std::string_view key) {
  Result<const Value*> field = required(dict, key);
  if (!field) return field.error();
  const Value& value = *field.value();
  if (const auto* d = value.get_if<double>()) return *d;
  if (const auto* i = value.get_if<std::int64_t>()) return static_cast<double>(*i);
  if (const auto* u = value.get_if<std::uint64_t>()) return static_cast<double>(*u);
  return wrong_type(key, "a number", value);
}

Result<bool> boolean(const Dict& dict, std::string_view key) {
  Result<const Value*> field = required(dict, key);
  if (!field) return field.error();
  if (const auto* b = field.value()->get_if<bool>()) return *b;
  return wrong_type(key, "a bool", *field.value());
}

Result<const Bytes*> bytes(const Dict& dict, std::string_view key) {
  Result<const Value*> field = required(dict, key);
  if (!field) return field.error();
  if (const auto* b = field.value()->get_if<Bytes>()) return b;
  return wrong_type(key, "a byte string", *field.value());
}

Result<const std::vector<Value>*> sequence(const Dict& dict, std::string_view key) {
  Result<const Value*> field = required(dict, key);
  if (!field) return field.error();
  if (const auto* l = field.value()->get_if<List>()) return &l->items;
  if (const auto* t = field.value()->get_if<Tuple>()) return &t->items;
  return wrong_type(key, "a list or tuple", *field.value());
}

}  // namespace wcomm::fields
