// The benchmark report: its schema version, fixed sections, the node sections' skeleton, and
// writing it to disk. docs/benchmark-report.md describes every key.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace wcomm::bench {

// The V0.1 report schema this report keeps: every V0.1 key with the same meaning and units
// (wcomm adds its own keys beside them, under "wcomm").
inline constexpr int kReportSchemaVersion = 4;

// V0.1's "semantics" section, word for word.
nlohmann::json semantics_section();

// An initiator / responder section with V0.1's keys; the diagnostics keys start null and the
// node fills them (add_environment_section, link_samples, add_process_usage). `interface` is
// the interface diagnosed, or empty (null).
nlohmann::json node_section(const std::string& node_id, const std::string& interface);

// The report's "wcomm" section: what produced it, and which V0.1 keys are placeholders.
nlohmann::json wcomm_section();

// Writes `report` as indented JSON to `path` (via a temporary file and a rename, so a reader
// never sees half a report). Throws std::runtime_error naming the path on failure.
void write_report(const nlohmann::json& report, const std::string& path);

}  // namespace wcomm::bench
