// JSON <-> Value conversion for report sections carried in control messages.
#include "netbench/json_value.h"

#include <string>
#include <type_traits>

namespace wcomm::bench {

Value json_to_value(const nlohmann::json& json) {
  switch (json.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return Value();
    case nlohmann::json::value_t::boolean:
      return Value(json.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(json.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return Value(json.get<std::uint64_t>());
    case nlohmann::json::value_t::number_float:
      return Value(json.get<double>());
    case nlohmann::json::value_t::string:
      return Value(json.get<std::string>());
    case nlohmann::json::value_t::array: {
      List list;
      list.items.reserve(json.size());
      for (const auto& item : json) list.items.push_back(json_to_value(item));
      return Value(std::move(list));
    }
    case nlohmann::json::value_t::object: {
      Dict dict;
      dict.items.reserve(json.size());
      for (const auto& [key, item] : json.items()) dict.items.emplace_back(Value(key), json_to_value(item));
      return Value(std::move(dict));
    }
    case nlohmann::json::value_t::binary:
      break;
  }
  return Value();
}

nlohmann::json value_to_json(const Value& value) {
  return std::visit(
      [&](const auto& v) -> nlohmann::json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, None>) {
          return nullptr;
        } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::int64_t> ||
                             std::is_same_v<T, std::uint64_t> || std::is_same_v<T, double> ||
                             std::is_same_v<T, std::string>) {
          return v;
        } else if constexpr (std::is_same_v<T, List> || std::is_same_v<T, Tuple>) {
          nlohmann::json out = nlohmann::json::array();
          for (const auto& item : v.items) out.push_back(value_to_json(item));
          return out;
        } else if constexpr (std::is_same_v<T, Dict>) {
          nlohmann::json out = nlohmann::json::object();
          for (const auto& [key, item] : v.items)
            out[key.template is<std::string>() ? key.template as<std::string>() : summarize(key)] = value_to_json(item);
          return out;
        } else {
          return summarize(value);
        }
      },
      value.variant());
}

}  // namespace wcomm::bench
