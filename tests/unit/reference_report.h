// The V0.1 benchmark report that the bench tests compare keys, units and shapes against
// (../shared/reference-reports/v0.1-initiator-loopback.json), and a key-set helper.
#pragma once

#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace wcomm::bench::testing {

// Null if the shared folder is not beside the checkout (the tests that need it then skip).
inline const nlohmann::json& reference_report() {
  static const nlohmann::json report = [] {
    std::ifstream in(WCOMM_SOURCE_DIR "/../shared/reference-reports/v0.1-initiator-loopback.json");
    if (!in) return nlohmann::json();
    return nlohmann::json::parse(in);
  }();
  return report;
}

inline std::set<std::string> keys_of(const nlohmann::json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

}  // namespace wcomm::bench::testing
