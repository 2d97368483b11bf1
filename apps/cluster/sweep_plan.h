// The experiment sweep's cells (V0.1's variants, v01-collectives-cluster.md 3.2), their
// order (Python's random.Random(seed).shuffle, 3.3, so a seed gives V0.1's order) and each
// cell's cluster config derived from the base topology (3.4).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace wcomm::cluster {

struct SweepVariant {
  std::string name;
  std::string suite;
  std::string collective;
  std::int64_t payload_bytes = 0;
  std::vector<int> ring = {0, 1, 2, 3};
  std::string extra_key;  // a benchmark setting ("" none)
  std::int64_t extra_value = 0;
  std::map<std::string, std::int64_t> comm;  // egress settings
};

inline const std::vector<std::string> kSweepSuites = {"scheduler", "ring", "broadcast", "chunk",
                                                      "p2p", "p2p-knee", "p2p-confirm"};

// The variants of `suites` in V0.1's order (suite by suite in kSweepSuites order). Throws
// InvalidArgumentError "unknown experiment suites: ..." for an unknown name.
std::vector<SweepVariant> sweep_variants(const std::vector<std::string>& suites);

// Python's random.Random(seed).shuffle(items) applied to 0..n-1: the resulting order.
std::vector<std::size_t> python_shuffle_order(std::size_t n, std::int64_t seed);

// The cell's cluster config: the base with base_port, ring, comm and benchmark replaced.
YAML::Node variant_config(const YAML::Node& base, const SweepVariant& v, int base_port, std::int64_t rounds,
                          std::int64_t warmup_rounds);

}  // namespace wcomm::cluster
