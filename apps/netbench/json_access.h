// Forgiving reads of report JSON for the HTML report: a report may come from V0.1, from an
// older wcomm with null placeholders, or be cut short, and the page must still render.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace wcomm::bench {

// object[key], or a null value when `object` is not an object or has no such key.
inline const nlohmann::json& field(const nlohmann::json& object, std::string_view key) {
  static const nlohmann::json kNull;
  if (!object.is_object()) return kNull;
  const auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

// field(field(object, a), b) ..., for a path of keys.
inline const nlohmann::json& field_path(const nlohmann::json& object, std::initializer_list<std::string_view> keys) {
  const nlohmann::json* at = &object;
  for (const auto key : keys) at = &field(*at, key);
  return *at;
}

inline std::optional<double> number_of(const nlohmann::json& value) {
  if (!value.is_number()) return std::nullopt;
  return value.get<double>();
}

// The numbers of an array (other elements skipped); empty for anything else.
inline std::vector<double> numbers_of(const nlohmann::json& array) {
  std::vector<double> out;
  if (!array.is_array()) return out;
  out.reserve(array.size());
  for (const auto& v : array) {
    if (v.is_number()) out.push_back(v.get<double>());
  }
  return out;
}

inline std::string string_of(const nlohmann::json& value, const std::string& otherwise = "") {
  return value.is_string() ? value.get<std::string>() : otherwise;
}

// Table cells: object[key] as a number (0 when missing), a figure with three decimals, and a
// value as text (a string as it is, anything else as its JSON; escape it for the page).
inline double number_or_zero(const nlohmann::json& object, std::string_view key) {
  return number_of(field(object, key)).value_or(0.0);
}
inline std::string three_decimals(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", v);
  return text;
}
inline std::string display_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace wcomm::bench
