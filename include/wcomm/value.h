// The Value model: everything a COMM v1 message can carry (the node types of docs/wire-format.md).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "wcomm/tensor.h"

namespace wcomm {

class Value;

struct None {
  friend bool operator==(None, None) { return true; }
};

// A byte string; travels as its own segment, so it is zero copy like a tensor.
struct Bytes {
  Buffer buffer;
  Bytes() = default;
  explicit Bytes(Buffer b) : buffer(std::move(b)) {}
  explicit Bytes(std::string_view s) : buffer(Buffer::copy_of(s.data(), s.size())) {}
  std::size_t size() const { return buffer.size(); }
  std::string_view view() const { return buffer.view(); }
  friend bool operator==(const Bytes& a, const Bytes& b) { return a.buffer == b.buffer; }
};

struct List {
  std::vector<Value> items;
  List() = default;
  List(std::initializer_list<Value> init);
  explicit List(std::vector<Value> v);  // (out of line: Value is incomplete here, for clang)
  friend bool operator==(const List& a, const List& b);
};

struct Tuple {
  std::vector<Value> items;
  Tuple() = default;
  Tuple(std::initializer_list<Value> init);
  explicit Tuple(std::vector<Value> v);
  friend bool operator==(const Tuple& a, const Tuple& b);
};

// A mapping whose keys may be any Value; insertion order is kept (it is the wire order).
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  Dict() = default;
  Dict(std::initializer_list<std::pair<Value, Value>> init);
  explicit Dict(std::vector<std::pair<Value, Value>> v);
  // The value under a string key, or nullptr.
  const Value* find(std::string_view key) const;
  friend bool operator==(const Dict& a, const Dict& b);
};

// A registered record type (a Python dataclass on the other side): type_id + version + fields.
struct Record {
  std::string type_id;
  std::uint32_t version = 1;
  std::vector<std::pair<std::string, Value>> fields;
  friend bool operator==(const Record& a, const Record& b);
};

// A registered custom codec's encoded form: type_id + version + one encoded value.
struct Custom {
  std::string type_id;
  std::uint32_t version = 1;
  std::shared_ptr<const Value> encoded;
  friend bool operator==(const Custom& a, const Custom& b);
};

// A Python pickle blob; only carried when allow_unsafe_pickle is set on both ends.
struct Pickled {
  Buffer data;
  friend bool operator==(const Pickled& a, const Pickled& b) { return a.data == b.data; }
};

// One node of a message. Integers span -2^63 .. 2^64-1: values above INT64_MAX are held as
// uint64_t, every other integer as int64_t (so equal numbers compare equal).
class Value {
 public:
  using Variant = std::variant<None, bool, std::int64_t, std::uint64_t, double, std::string, Bytes,
                               Tensor, List, Tuple, Dict, Record, Custom, Pickled>;

  Value() = default;
  Value(None) {}                                            // NOLINT
  Value(bool b) : v_(b) {}                                  // NOLINT
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  Value(I i) : v_(normalize(i)) {}                          // NOLINT
  Value(double d) : v_(d) {}                                // NOLINT
  Value(float d) : v_(static_cast<double>(d)) {}            // NOLINT
  Value(const char* s) : v_(std::string(s)) {}              // NOLINT
  Value(std::string s) : v_(std::move(s)) {}                // NOLINT
  Value(std::string_view s) : v_(std::string(s)) {}         // NOLINT
  Value(Bytes b) : v_(std::move(b)) {}                      // NOLINT
  Value(Tensor t) : v_(std::move(t)) {}                     // NOLINT
  Value(List l) : v_(std::move(l)) {}                       // NOLINT
  Value(Tuple t) : v_(std::move(t)) {}                      // NOLINT
  Value(Dict d) : v_(std::move(d)) {}                       // NOLINT
  Value(Record r) : v_(std::move(r)) {}                     // NOLINT
  Value(Custom c) : v_(std::move(c)) {}                     // NOLINT
  Value(Pickled p) : v_(std::move(p)) {}                    // NOLINT

  template <class T>
  bool is() const { return std::holds_alternative<T>(v_); }
  bool is_none() const { return is<None>(); }
  bool is_int() const { return is<std::int64_t>() || is<std::uint64_t>(); }
  template <class T>
  const T& as() const { return std::get<T>(v_); }
  template <class T>
  T& as() { return std::get<T>(v_); }
  template <class T>
  const T* get_if() const { return std::get_if<T>(&v_); }
  const Variant& variant() const { return v_; }
  Variant& variant() { return v_; }

  friend bool operator==(const Value& a, const Value& b) { return a.v_ == b.v_; }

 private:
  template <class I>
  static Variant normalize(I i) {
    if constexpr (std::is_unsigned_v<I>) {
      if (static_cast<std::uint64_t>(i) > static_cast<std::uint64_t>(INT64_MAX))
        return static_cast<std::uint64_t>(i);
    }
    return static_cast<std::int64_t>(i);
  }
  Variant v_;
};

// A short, readable, one-line summary of a value (tensors as dtype[shape], long strings and
// byte strings abbreviated), for CLIs and logs.
std::string summarize(const Value& value, std::size_t max_chars = 200);

}  // namespace wcomm
