// PickleCodec: Python pickle for the mesh's value types, so a C++ entity reads what pyzmq's
// send_pyobj wrote and writes what recv_pyobj reads. Encodes protocol 4 (without framing,
// which is optional); decodes protocols 2-5 over the opcodes those types use.
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "wcomm/errors.h"
#include "wcomm/mesh/codec.h"

namespace wcomm::mesh {
namespace {

enum Op : unsigned char {
  kMark = '(', kStop = '.', kBinInt = 'J', kBinInt1 = 'K', kBinInt2 = 'M', kNone = 'N',
  kBinFloat = 'G', kBinUnicode = 'X', kBinBytes = 'B', kShortBinBytes = 'C', kAppend = 'a',
  kAppends = 'e', kBinGet = 'h', kLongBinGet = 'j', kBinPut = 'q', kLongBinPut = 'r',
  kSetItem = 's', kSetItems = 'u', kTuple = 't', kEmptyTuple = ')', kEmptyList = ']',
  kEmptyDict = '}', kProto = 0x80, kTuple1 = 0x85, kTuple2 = 0x86, kTuple3 = 0x87,
  kNewTrue = 0x88, kNewFalse = 0x89, kLong1 = 0x8a, kLong4 = 0x8b, kShortBinUnicode = 0x8c,
  kBinUnicode8 = 0x8d, kBinBytes8 = 0x8e, kMemoize = 0x94, kFrame = 0x95, kByteArray8 = 0x96,
};

void put_le(std::string& out, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void encode_sized(std::string& out, std::string_view s, unsigned char op1, unsigned char op4, unsigned char op8) {
  if (s.size() < 256) {
    out.push_back(static_cast<char>(op1));
    put_le(out, s.size(), 1);
  } else if (s.size() <= 0xffffffffu) {
    out.push_back(static_cast<char>(op4));
    put_le(out, s.size(), 4);
  } else {
    out.push_back(static_cast<char>(op8));
    put_le(out, s.size(), 8);
  }
  out.append(s);
}

void encode_long1(std::string& out, const unsigned char* le, int n) {
  out.push_back(static_cast<char>(kLong1));
  out.push_back(static_cast<char>(n));
  out.append(reinterpret_cast<const char*>(le), n);
}

void encode_value(std::string& out, const Value& v, int depth) {
  if (depth > 200) throw SerializationError("pickle: value nested deeper than 200 levels");
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, None>) {
          out.push_back(kNone);
        } else if constexpr (std::is_same_v<T, bool>) {
          out.push_back(static_cast<char>(x ? kNewTrue : kNewFalse));
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          if (x >= 0 && x < 256) {
            out.push_back(kBinInt1);
            put_le(out, x, 1);
          } else if (x >= 0 && x < 65536) {
            out.push_back(kBinInt2);
            put_le(out, x, 2);
          } else if (x >= INT32_MIN && x <= INT32_MAX) {
            out.push_back(kBinInt);
            put_le(out, static_cast<std::uint32_t>(static_cast<std::int32_t>(x)), 4);
          } else {
            unsigned char le[8];
            for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>((static_cast<std::uint64_t>(x) >> (8 * i)) & 0xff);
            encode_long1(out, le, 8);
          }
        } else if constexpr (std::is_same_v<T, std::uint64_t>) {
          unsigned char le[9] = {};  // > INT64_MAX: a ninth byte keeps the sign positive
          for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>((x >> (8 * i)) & 0xff);
          encode_long1(out, le, 9);
        } else if constexpr (std::is_same_v<T, double>) {
          out.push_back(kBinFloat);
          const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
          for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
        } else if constexpr (std::is_same_v<T, std::string>) {
          encode_sized(out, x, kShortBinUnicode, kBinUnicode, kBinUnicode8);
        } else if constexpr (std::is_same_v<T, Bytes>) {
          encode_sized(out, x.view(), kShortBinBytes, kBinBytes, kBinBytes8);
        } else if constexpr (std::is_same_v<T, List>) {
          out.push_back(kEmptyList);
          if (x.items.empty()) return;
          out.push_back(kMark);
          for (const Value& item : x.items) encode_value(out, item, depth + 1);
          out.push_back(kAppends);
        } else if constexpr (std::is_same_v<T, Tuple>) {
          if (x.items.empty()) {
            out.push_back(kEmptyTuple);
            return;
          }
          if (x.items.size() > 3) out.push_back(kMark);
          for (const Value& item : x.items) encode_value(out, item, depth + 1);
          static constexpr unsigned char kSmall[] = {0, kTuple1, kTuple2, kTuple3};
          out.push_back(static_cast<char>(x.items.size() > 3 ? static_cast<unsigned char>(kTuple) : kSmall[x.items.size()]));
        } else if constexpr (std::is_same_v<T, Dict>) {
          out.push_back(kEmptyDict);
          if (x.items.empty()) return;
          out.push_back(kMark);
          for (const auto& [k, val] : x.items) {
            encode_value(out, k, depth + 1);
            encode_value(out, val, depth + 1);
          }
          out.push_back(kSetItems);
        } else if constexpr (std::is_same_v<T, Pickled>) {
          throw SerializationError("pickle codec: a Pickled blob cannot be nested in a mesh message");
        } else {
          throw SerializationError(
              "pickle codec: cannot encode a tensor, record or custom value (the mesh carries None, bool, int, "
              "float, str, bytes, list, tuple and dict)");
        }
      },
      v.variant());
}

// A stack-machine reader. Containers live behind shared pointers so that a memo reference
// (BINGET) and the stack see the same object while it is being filled.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  Value run() {
    while (true) {
      const unsigned char op = byte();
      switch (op) {
        case kProto: {
          const unsigned proto = byte();
          if (proto < 2 || proto > 5) fail("pickle protocol " + std::to_string(proto) + " (2-5 are read)");
          break;
        }
        case kFrame: take(8); break;
        case kStop: {
          if (stack_.size() != 1 || !marks_.empty()) fail("a STOP with " + std::to_string(stack_.size()) + " values on the stack");
          return std::move(*stack_.back());
        }
        case kNone: push(None{}); break;
        case kNewTrue: push(true); break;
        case kNewFalse: push(false); break;
        case kBinInt1: push(static_cast<std::int64_t>(le(1))); break;
        case kBinInt2: push(static_cast<std::int64_t>(le(2))); break;
        case kBinInt: push(static_cast<std::int64_t>(static_cast<std::int32_t>(le(4)))); break;
        case kLong1: push(read_long(le(1))); break;
        case kLong4: push(read_long(le(4))); break;
        case kBinFloat: {
          std::uint64_t bits = 0;
          for (char c : take(8)) bits = (bits << 8) | static_cast<unsigned char>(c);
          push(std::bit_cast<double>(bits));
          break;
        }
        case kShortBinUnicode: push(std::string(take(le(1)))); break;
        case kBinUnicode: push(std::string(take(le(4)))); break;
        case kBinUnicode8: push(std::string(take(le(8)))); break;
        case kShortBinBytes: push(Bytes(take(le(1)))); break;
        case kBinBytes: push(Bytes(take(le(4)))); break;
        case kBinBytes8:
        case kByteArray8: push(Bytes(take(le(8)))); break;
        case kEmptyList: push(List{}); break;
        case kEmptyDict: push(Dict{}); break;
        case kEmptyTuple: push(Tuple{}); break;
        case kMark: marks_.push_back(stack_.size()); break;
        case kTuple1:
        case kTuple2:
        case kTuple3: {
          const std::size_t n = op - kTuple1 + 1;
          if (stack_.size() < n) fail("a TUPLE" + std::to_string(n) + " with too few values");
          push_tuple(stack_.size() - n);
          break;
        }
        case kTuple: push_tuple(pop_mark()); break;
        case kAppend: {
          if (stack_.size() < 2) fail("an APPEND with nothing to append to");
          auto item = pop();
          target<List>("APPEND").items.push_back(*item);
          break;
        }
        case kAppends: {
          const std::size_t at = pop_mark();
          if (at == 0) fail("an APPENDS with nothing to append to");
          List& list = as<List>(*stack_[at - 1], "APPENDS");
          for (std::size_t i = at; i < stack_.size(); ++i) list.items.push_back(*stack_[i]);
          stack_.resize(at);
          break;
        }
        case kSetItem: {
          if (stack_.size() < 3) fail("a SETITEM with too few values");
          auto value = pop();
          auto key = pop();
          target<Dict>("SETITEM").items.emplace_back(*key, *value);
          break;
        }
        case kSetItems: {
          const std::size_t at = pop_mark();
          if (at == 0 || (stack_.size() - at) % 2 != 0) fail("a SETITEMS with an odd number of values or no dict");
          Dict& dict = as<Dict>(*stack_[at - 1], "SETITEMS");
          for (std::size_t i = at; i < stack_.size(); i += 2) dict.items.emplace_back(*stack_[i], *stack_[i + 1]);
          stack_.resize(at);
          break;
        }
        case kMemoize: memo_put(memo_.size()); break;
        case kBinPut: memo_put(le(1)); break;
        case kLongBinPut: memo_put(le(4)); break;
        case kBinGet: memo_get(le(1)); break;
        case kLongBinGet: memo_get(le(4)); break;
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(std::string("opcode ") + hex + " at byte " + std::to_string(pos_ - 1) +
               " (only None, bool, int, float, str, bytes, list, tuple and dict are read: was a class instance, "
               "set or other Python object sent?)");
        }
      }
    }
  }

 private:
  using Ptr = std::shared_ptr<Value>;

  [[noreturn]] void fail(const std::string& what) const { throw SerializationError("pickle codec: cannot decode " + what); }

  unsigned char byte() { return static_cast<unsigned char>(take(1)[0]); }
  std::string_view take(std::uint64_t n) {
    if (n > data_.size() - pos_) fail("a message cut short (" + std::to_string(data_.size()) + " bytes)");
    std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::uint64_t le(int n) {
    std::string_view s = take(n);
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[i]);
    return v;
  }
  Value read_long(std::uint64_t n) {
    std::string_view s = take(n);
    if (n == 0) return std::int64_t{0};
    const bool negative = static_cast<unsigned char>(s[n - 1]) & 0x80;
    std::size_t used = n;  // the bytes beyond 8 may only be sign extension
    while (used > 8 && static_cast<unsigned char>(s[used - 1]) == (negative ? 0xff : 0x00)) --used;
    if (used > 8) fail("an integer wider than 64 bits");
    std::uint64_t v = negative ? ~std::uint64_t{0} : 0;
    for (std::size_t i = 0; i < used; ++i) {
      v &= ~(std::uint64_t{0xff} << (8 * i));
      v |= std::uint64_t{static_cast<unsigned char>(s[i])} << (8 * i);
    }
    if (negative) {
      if (!(v >> 63)) fail("an integer below -2^63");
      return static_cast<std::int64_t>(v);
    }
    return v;  // Value keeps what fits int64 as int64, the rest as uint64
  }
  void push(Value v) { stack_.push_back(std::make_shared<Value>(std::move(v))); }
  Ptr pop() {
    Ptr p = std::move(stack_.back());
    stack_.pop_back();
    return p;
  }
  std::size_t pop_mark() {
    if (marks_.empty()) fail("a MARK-consuming opcode without a MARK");
    std::size_t at = marks_.back();
    marks_.pop_back();
    return at;
  }
  void push_tuple(std::size_t at) {
    Tuple t;
    for (std::size_t i = at; i < stack_.size(); ++i) t.items.push_back(*stack_[i]);
    stack_.resize(at);
    push(std::move(t));
  }
  template <class T>
  T& as(Value& v, const char* op) {
    if (!v.is<T>()) fail(std::string("a ") + op + " on a value of the wrong type");
    return v.as<T>();
  }
  template <class T>
  T& target(const char* op) { return as<T>(*stack_.back(), op); }
  void memo_put(std::uint64_t index) {
    if (stack_.empty()) fail("a memo write with an empty stack");
    if (index > memo_.size() + 1'000'000) fail("a memo index out of range");
    if (memo_.size() <= index) memo_.resize(index + 1);
    memo_[index] = stack_.back();
  }
  void memo_get(std::uint64_t index) {
    if (index >= memo_.size() || !memo_[index]) fail("a memo read of an unset index");
    stack_.push_back(std::make_shared<Value>(*memo_[index]));
  }

  std::string_view data_;
  std::size_t pos_ = 0;
  std::vector<Ptr> stack_;
  std::vector<std::size_t> marks_;
  std::vector<Ptr> memo_;
};

}  // namespace

std::string PickleCodec::encode(const Value& value) const {
  std::string out;
  out.push_back(static_cast<char>(kProto));
  out.push_back(4);
  encode_value(out, value, 0);
  out.push_back(kStop);
  return out;
}

Value PickleCodec::decode(std::string_view data) const { return Reader(data).run(); }

}  // namespace wcomm::mesh
