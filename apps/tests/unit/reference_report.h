// The V0.1 benchmark report that the bench tests compare keys, units and shapes against
// (tests/data/reference-reports/v0.1-initiator-loopback.json), and a key-set helper.
#pragma once

#include <fstream>
#include <set>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace wcomm::bench::testing {

inline constexpr const char* kReferenceReportPath = WCOMM_TEST_DATA "/reference-reports/v0.1-initiator-loopback.json";

// The report is part of the repository, so a missing file fails the test that reads it (gtest
// reports the exception) rather than skipping it.
inline const nlohmann::json& reference_report() {
  static const nlohmann::json report = [] {
    std::ifstream in(kReferenceReportPath);
    if (!in) throw std::runtime_error(std::string("cannot read the reference report ") + kReferenceReportPath);
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
