// Value containers (List, Tuple, Dict, Record, Custom) and summarize(), the one-line rendering
// of a value for CLIs and logs.
#include "wcomm/value.h"

#include <charconv>
#include <cstdio>

#include "core/describe.h"

namespace wcomm {

List::List(std::initializer_list<Value> init) : items(init) {}
Tuple::Tuple(std::initializer_list<Value> init) : items(init) {}
Dict::Dict(std::initializer_list<std::pair<Value, Value>> init) : items(init) {}
List::List(std::vector<Value> v) : items(std::move(v)) {}
Tuple::Tuple(std::vector<Value> v) : items(std::move(v)) {}
Dict::Dict(std::vector<std::pair<Value, Value>> v) : items(std::move(v)) {}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (const auto* s = k.get_if<std::string>(); s && *s == key) return &v;
  return nullptr;
}

bool operator==(const List& a, const List& b) { return a.items == b.items; }
bool operator==(const Tuple& a, const Tuple& b) { return a.items == b.items; }
bool operator==(const Dict& a, const Dict& b) { return a.items == b.items; }

bool operator==(const Record& a, const Record& b) {
  return a.type_id == b.type_id && a.version == b.version && a.fields == b.fields;
}

bool operator==(const Custom& a, const Custom& b) {
  if (a.type_id != b.type_id || a.version != b.version) return false;
  if (!a.encoded || !b.encoded) return a.encoded == b.encoded;
  return *a.encoded == *b.encoded;
}

namespace {

// Strings longer than this are cut even when the whole summary has room, so one long string
// cannot hide the rest of the structure.
constexpr std::size_t kMaxStringChars = 48;

// Writes a summary and stops descending once the output is over its budget, so summarising a
// million-element list costs no more than summarising a short one.
class Summarizer {
 public:
  explicit Summarizer(std::size_t budget) : budget_(budget) {}

  void value(const Value& v) {
    if (full()) return;
    std::visit([this](const auto& x) { node(x); }, v.variant());
  }

  std::string finish() {
    if (out_.size() <= budget_) return out_;
    std::size_t keep = budget_ > 3 ? budget_ - 3 : 0;
    return utf8_prefix(out_, keep) + "...";
  }

 private:
  bool full() const { return out_.size() > budget_; }

  // The longest prefix of s of at most n bytes that does not split a UTF-8 sequence.
  static std::string utf8_prefix(const std::string& s, std::size_t n) {
    if (n >= s.size()) return s;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    return s.substr(0, n);
  }

  void node(None) { out_ += "None"; }
  void node(bool b) { out_ += b ? "True" : "False"; }
  void node(std::int64_t i) { out_ += std::to_string(i); }
  void node(std::uint64_t i) { out_ += std::to_string(i); }
  void node(double d) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, d);
    std::string s(buf, r.ptr);
    // Keep floats recognisable as floats (3.0, not 3), as Python prints them.
    if (s.find_first_of(".eninf") == std::string::npos) s += ".0";
    out_ += s;
  }
  void node(const std::string& s) {
    std::string body = s.size() > kMaxStringChars ? utf8_prefix(s, kMaxStringChars) : s;
    out_ += '\'';
    for (unsigned char c : body) {
      if (c == '\'' || c == '\\') {
        out_ += '\\';
        out_ += static_cast<char>(c);
      } else if (c == '\n') {
        out_ += "\\n";
      } else if (c == '\t') {
        out_ += "\\t";
      } else if (c < 0x20 || c == 0x7f) {
        char esc[5];
        std::snprintf(esc, sizeof esc, "\\x%02x", c);
        out_ += esc;
      } else {
        out_ += static_cast<char>(c);
      }
    }
    if (body.size() < s.size()) out_ += "...";
    out_ += '\'';
  }
  void node(const Bytes& b) { out_ += "bytes(" + std::to_string(b.size()) + ")"; }
  void node(const Tensor& t) { out_ += "tensor(" + detail::describe_tensor_type(t.dtype(), t.shape()) + ")"; }
  void node(const List& l) { sequence(l.items, "[", "]", false); }
  void node(const Tuple& t) { sequence(t.items, "(", ")", t.items.size() == 1); }
  void node(const Dict& d) {
    out_ += '{';
    for (std::size_t i = 0; i < d.items.size() && !full(); ++i) {
      if (i) out_ += ", ";
      value(d.items[i].first);
      out_ += ": ";
      value(d.items[i].second);
    }
    out_ += '}';
  }
  void node(const Record& r) {
    out_ += r.type_id + "(";
    for (std::size_t i = 0; i < r.fields.size() && !full(); ++i) {
      if (i) out_ += ", ";
      out_ += r.fields[i].first + "=";
      value(r.fields[i].second);
    }
    out_ += ')';
  }
  void node(const Custom& c) {
    out_ += "custom(" + c.type_id + ", ";
    if (c.encoded) value(*c.encoded); else out_ += "None";
    out_ += ')';
  }
  void node(const Pickled& p) { out_ += "pickle(" + std::to_string(p.data.size()) + ")"; }

  void sequence(const std::vector<Value>& items, const char* open, const char* close, bool trailing_comma) {
    out_ += open;
    for (std::size_t i = 0; i < items.size() && !full(); ++i) {
      if (i) out_ += ", ";
      value(items[i]);
    }
    if (trailing_comma) out_ += ',';
    out_ += close;
  }

  std::size_t budget_;
  std::string out_;
};

}  // namespace

std::string summarize(const Value& value, std::size_t max_chars) {
  Summarizer s(max_chars);
  s.value(value);
  return s.finish();
}

}  // namespace wcomm
