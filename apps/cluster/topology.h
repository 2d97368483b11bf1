// The cluster topology file (V0.1's cluster YAML, v01-collectives-cluster.md 2.1) and its
// validation (2.2): which node runs which ranks, where, and the benchmark settings. Loading
// touches no host; every error names the offending node and key.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "multirank/multirank_settings.h"
#include "wcomm/config.h"

namespace wcomm::cluster {

inline constexpr const char* kRemoteConfigName = ".wireless_comm_cluster.yaml";

struct ClusterNode {
  std::string node_id;
  std::string host;       // where this node's ranks are advertised and dialled
  std::vector<int> ranks; // in file order; the lowest is the node's coordinator rank
  std::string ssh_alias;  // destination for ssh / scp (the launcher only)
  std::string interface;  // network interface for diagnostics (must exist on the node)
  std::string bind_host = "0.0.0.0";
  std::string python = "python3";  // V0.1: the interpreter that runs wireless_comm on the node
  std::string wcomm;               // wcomm: the `wcomm` executable on the node (then python is unused)
  std::string workdir = ".";

  int coordinator_rank() const;
};

struct ClusterTopology {
  std::string path;  // the file it was loaded from
  std::string controller;
  int base_port = 0;
  std::vector<ClusterNode> nodes;
  std::vector<int> ring;
  tools::MultirankSettings settings;
  nlohmann::json settings_json;  // the report's `settings` (YAML types kept: `timeout: 120` stays 120)
  CommConfig comm;

  int world() const { return static_cast<int>(ring.size()); }
  const ClusterNode& node(const std::string& node_id) const;  // throws InvalidArgumentError
  const ClusterNode& controller_node() const { return node(controller); }
  const ClusterNode& node_of_rank(int rank) const;
};

// Loads and validates (V0.1's rules without the world-dependent settings checks). Throws
// InvalidArgumentError "<file>: <node>.<key>: <what> (<V0.1's sentence>)".
ClusterTopology load_topology(const std::string& path);
ClusterTopology parse_topology(const std::string& yaml_text, const std::string& origin);

}  // namespace wcomm::cluster
