// V0.1's rendering of values for the node CLI's lines (see v01_format.h).
#include "cli/v01_format.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace wcomm::tools {
namespace {

// Python's repr of a str: single quotes unless the text has one and no double quote;
// backslash escapes for the quote, the backslash and control characters; other characters
// (UTF-8 included) as they are.
void append_str_repr(std::string& out, const std::string& s) {
  const bool double_quotes = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = double_quotes ? '"' : '\'';
  out += quote;
  for (unsigned char c : s) {
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char esc[5];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      out += esc;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
}

class Describer {
 public:
  std::string out;

  void value(const Value& v) {
    std::visit([this](const auto& x) { node(x); }, v.variant());
  }

 private:
  void node(None) { out += "None"; }
  void node(bool b) { out += b ? "True" : "False"; }
  void node(std::int64_t i) { out += std::to_string(i); }
  void node(std::uint64_t i) { out += std::to_string(i); }
  void node(double d) { out += python_float_repr(d); }
  void node(const std::string& s) { append_str_repr(out, s); }
  void node(const Bytes& b) { out += "bytes(length=" + std::to_string(b.size()) + ")"; }
  void node(const Tensor& t) {
    out += "Tensor(shape=(";
    const Shape& shape = t.shape();
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (i) out += ", ";
      out += std::to_string(shape[i]);
    }
    if (shape.size() == 1) out += ',';
    out += "), dtype=torch.";
    out += dtype_name(t.dtype());
    out += ')';
  }
  void node(const List& l) { sequence(l.items, "[", "]", false); }
  void node(const Tuple& t) { sequence(t.items, "(", ")", t.items.size() == 1); }
  void node(const Dict& d) {
    out += '{';
    for (std::size_t i = 0; i < d.items.size(); ++i) {
      if (i) out += ", ";
      value(d.items[i].first);
      out += ": ";
      value(d.items[i].second);
    }
    out += '}';
  }
  void node(const Record& r) {
    out += r.type_id + "(";
    for (std::size_t i = 0; i < r.fields.size(); ++i) {
      if (i) out += ", ";
      out += r.fields[i].first + "=";
      value(r.fields[i].second);
    }
    out += ')';
  }
  void node(const Custom& c) {
    out += c.type_id + "(";
    if (c.encoded) value(*c.encoded);
    out += ')';
  }
  void node(const Pickled& p) { out += "pickle(length=" + std::to_string(p.data.size()) + ")"; }

  void sequence(const std::vector<Value>& items, const char* open, const char* close, bool trailing_comma) {
    out += open;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i) out += ", ";
      value(items[i]);
    }
    if (trailing_comma) out += ',';
    out += close;
  }
};

}  // namespace

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // The shortest digits that round-trip, in d.ddde±x form, then laid out as Python does.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(r.ptr - buf));
  const bool negative = sci.front() == '-';
  if (negative) sci.remove_prefix(1);
  const auto e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e))
    if (c != '.') digits += c;
  const int exponent = std::atoi(std::string(sci.substr(e + 1)).c_str());
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[8];
    std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp;
  }
  if (exponent < 0) return out + "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  const auto int_digits = static_cast<std::size_t>(exponent) + 1;
  if (digits.size() <= int_digits) return out + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

std::string describe_v01(const Value& value) {
  Describer d;
  d.value(value);
  return std::move(d.out);
}

}  // namespace wcomm::tools
