// load_topology: V0.1's cluster YAML with its checks in V0.1's order, each error naming the
// node and key it is about.
#include "cluster/topology.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "core/config_yaml.h"
#include "wcomm/errors.h"

namespace wcomm::cluster {
namespace {

class Checker {
 public:
  explicit Checker(std::string origin) : origin_(std::move(origin)) {}

  // "<file>: <where>: <what>"; `where` is the node and key ("node-b.ranks"), or a top-level key.
  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw InvalidArgumentError(origin_ + ": " + (where.empty() ? "" : where + ": ") + what);
  }

  void only_keys(const YAML::Node& map, const std::vector<std::string>& allowed, const std::string& location,
                 const std::string& where) const {
    std::set<std::string> unknown;
    for (const auto& item : map) {
      std::string key = item.first.IsScalar() ? item.first.Scalar() : "?";
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) unknown.insert(key);
    }
    if (unknown.empty()) return;
    std::string names, all;
    for (auto& u : unknown) names += (names.empty() ? "" : ", ") + u;
    for (auto& a : allowed) all += (all.empty() ? "" : ", ") + a;
    fail(where, "unknown fields in " + location + ": " + names + " (allowed: " + all + ")");
  }

 private:
  std::string origin_;
};

// An integer written as one (`1`, not `"1"`, `true` or `1.0`).
std::optional<long long> as_integer(const YAML::Node& node) {
  if (!node.IsScalar() || node.Tag() == "!") return std::nullopt;
  const std::string& s = node.Scalar();
  long long value = 0;
  const char* begin = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
  auto [end, ec] = std::from_chars(begin, s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || begin == s.data() + s.size()) return std::nullopt;
  return value;
}

std::optional<double> as_number(const YAML::Node& node) {
  if (auto i = as_integer(node)) return static_cast<double>(*i);
  if (!node.IsScalar() || node.Tag() == "!") return std::nullopt;
  const std::string& s = node.Scalar();
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

std::optional<std::vector<int>> as_int_list(const YAML::Node& node) {
  if (!node.IsSequence()) return std::nullopt;
  std::vector<int> out;
  for (const auto& item : node) {
    auto v = as_integer(item);
    if (!v) return std::nullopt;
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

std::string list_text(const std::vector<int>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

const std::vector<std::string> kTopKeys = {"controller", "base_port", "nodes", "ring", "benchmark", "comm"};
const std::vector<std::string> kNodeKeys = {"node_id", "host", "ranks", "ssh_alias", "interface",
                                            "bind_host", "python", "workdir", "wcomm"};
const std::vector<std::string> kRequiredNodeKeys = {"host", "interface", "node_id", "ranks", "ssh_alias"};
const std::vector<std::string> kBenchmarkKeys = {"payload_sizes", "rounds", "warmup_rounds", "collectives", "timeout",
                                                 "broadcast_root", "ring_exchange_concurrency", "allreduce_block_bytes",
                                                 "reduce", "dtype", "algorithm"};

void read_benchmark(const Checker& c, const YAML::Node& b, ClusterTopology& t) {
  if (!b || !b.IsMap()) c.fail("benchmark", "missing or not a mapping (benchmark must be a mapping)");
  c.only_keys(b, kBenchmarkKeys, "benchmark", "benchmark");
  tools::MultirankSettings& s = t.settings;
  auto integer = [&](const char* key, std::int64_t& out) {
    if (!b[key]) return;
    auto v = as_integer(b[key]);
    if (!v) c.fail(std::string("benchmark.") + key, "must be an integer");
    out = *v;
  };
  auto optional_integer = [&](const char* key, std::optional<std::int64_t>& out) {
    if (!b[key] || b[key].IsNull()) return;
    auto v = as_integer(b[key]);
    if (!v) c.fail(std::string("benchmark.") + key, "must be an integer or null");
    out = *v;
  };
  auto text = [&](const char* key, std::string& out) {
    if (!b[key]) return;
    if (!b[key].IsScalar()) c.fail(std::string("benchmark.") + key, "must be a string");
    out = b[key].Scalar();
  };
  bool integer_timeout = false;
  if (b["payload_sizes"]) {
    const YAML::Node& p = b["payload_sizes"];
    if (!p.IsSequence()) c.fail("benchmark.payload_sizes", "benchmark.payload_sizes must be a list of integers");
    s.payload_sizes.clear();
    for (const auto& item : p) {
      auto v = as_integer(item);
      if (!v) c.fail("benchmark.payload_sizes", "benchmark.payload_sizes must be a list of integers");
      s.payload_sizes.push_back(*v);
    }
  }
  integer("rounds", s.rounds);
  integer("warmup_rounds", s.warmup_rounds);
  if (b["collectives"]) {
    if (!b["collectives"].IsSequence()) c.fail("benchmark.collectives", "must be a list of collective names");
    s.collectives.clear();
    for (const auto& item : b["collectives"]) s.collectives.push_back(item.IsScalar() ? item.Scalar() : "?");
  }
  if (b["timeout"]) {
    auto v = as_number(b["timeout"]);
    if (!v) c.fail("benchmark.timeout", "must be a number of seconds");
    s.timeout = *v;
    integer_timeout = as_integer(b["timeout"]).has_value();
  }
  integer("broadcast_root", s.broadcast_root);
  optional_integer("ring_exchange_concurrency", s.ring_exchange_concurrency);
  optional_integer("allreduce_block_bytes", s.allreduce_block_bytes);
  text("reduce", s.reduce);
  text("dtype", s.dtype);
  text("algorithm", s.algorithm);
  try {
    s.validate();
  } catch (const InvalidArgumentError& e) {
    c.fail("benchmark", e.what());
  }
  t.settings_json = s.to_json();
  if (integer_timeout) t.settings_json["timeout"] = static_cast<std::int64_t>(s.timeout);
  // A V0.1 file (none of wcomm's keys named) reports V0.1's eight settings only, whatever
  // wcomm's defaults are.
  if (!b["reduce"] && !b["dtype"] && !b["algorithm"])
    for (const char* key : {"reduce", "dtype", "algorithm"}) t.settings_json.erase(key);
}

// `comm` is a node config's comm section, checked as a node config's is (core's parse_comm_config).
void read_comm(const YAML::Node& comm, const std::string& origin, ClusterTopology& t) {
  if (!comm || comm.IsNull()) return;
  if (!comm.IsMap()) throw InvalidArgumentError(origin + ": comm: must be a mapping (comm must be a mapping)");
  t.comm = parse_comm_config(comm, origin);
}

}  // namespace

int ClusterNode::coordinator_rank() const { return *std::min_element(ranks.begin(), ranks.end()); }

const ClusterNode& ClusterTopology::node(const std::string& node_id) const {
  for (const auto& n : nodes)
    if (n.node_id == node_id) return n;
  throw InvalidArgumentError("unknown cluster node '" + node_id + "'");
}

const ClusterNode& ClusterTopology::node_of_rank(int rank) const {
  for (const auto& n : nodes)
    if (std::find(n.ranks.begin(), n.ranks.end(), rank) != n.ranks.end()) return n;
  throw InvalidArgumentError("no node owns rank " + std::to_string(rank));
}

ClusterTopology parse_topology(const std::string& yaml_text, const std::string& origin) {
  Checker c(origin);
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    c.fail("", std::string("not valid YAML: ") + e.what());
  }
  ClusterTopology t;
  t.path = origin;
  if (!root.IsMap()) c.fail("", "cluster configuration root must be a mapping");
  c.only_keys(root, kTopKeys, "configuration", "");

  // Nodes: shape first, then each node's keys.
  const YAML::Node nodes = root["nodes"];
  if (!nodes || !nodes.IsSequence()) c.fail("nodes", "missing or not a list (nodes must be a list)");
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const YAML::Node& n = nodes[i];
    std::string where = "nodes[" + std::to_string(i) + "]";
    if (!n.IsMap()) c.fail(where, where + " must be a mapping");
    if (n["node_id"] && n["node_id"].IsScalar()) where += " (" + n["node_id"].Scalar() + ")";
    c.only_keys(n, kNodeKeys, "nodes[" + std::to_string(i) + "]", where);
    std::string missing;
    for (auto& key : kRequiredNodeKeys)
      if (!n[key]) missing += (missing.empty() ? "" : ", ") + key;
    if (!missing.empty()) c.fail(where, "nodes[" + std::to_string(i) + "] is missing required fields: " + missing);
    auto ranks = as_int_list(n["ranks"]);
    if (!ranks) c.fail(where + ".ranks", "nodes[" + std::to_string(i) + "].ranks must be a list of integers");
    ClusterNode node;
    node.ranks = *ranks;
    auto field = [&](const char* key, std::string& out) {
      if (!n[key]) return;
      const std::string id = n["node_id"].IsScalar() && !n["node_id"].Scalar().empty() ? n["node_id"].Scalar() : where;
      if (!n[key].IsScalar() || n[key].Scalar().empty()) c.fail(id + "." + key, id + "." + key + " must be non-empty");
      out = n[key].Scalar();
    };
    for (auto [key, out] : {std::pair{"node_id", &node.node_id}, {"host", &node.host}, {"ssh_alias", &node.ssh_alias},
                            {"interface", &node.interface}, {"bind_host", &node.bind_host}, {"python", &node.python},
                            {"workdir", &node.workdir}, {"wcomm", &node.wcomm}})
      field(key, *out);
    t.nodes.push_back(std::move(node));
  }
  auto ring = as_int_list(root["ring"]);
  if (!ring) c.fail("ring", "missing or not a list of integers (ring must be a list of integer ranks)");
  t.ring = *ring;

  // Topology.
  if (t.nodes.size() < 2) c.fail("nodes", "cluster benchmark requires at least two physical nodes");
  const YAML::Node controller = root["controller"];
  if (!controller || !controller.IsScalar() || controller.Scalar().empty())
    c.fail("controller", "missing or empty (controller must be a non-empty string)");
  t.controller = controller.Scalar();
  auto base_port = root["base_port"] ? as_integer(root["base_port"]) : std::nullopt;
  if (!base_port) c.fail("base_port", "missing or not an integer (base_port must be an integer)");
  std::map<std::string, std::string> seen_ids;
  for (const auto& n : t.nodes)
    if (!seen_ids.emplace(n.node_id, n.node_id).second)
      c.fail(n.node_id + ".node_id", "'" + n.node_id + "' is used by two nodes (cluster node_id values must be unique)");
  if (!seen_ids.count(t.controller))
    c.fail("controller", "'" + t.controller + "' is not a configured node_id (controller must name a configured node)");
  std::map<int, std::string> owner;
  for (const auto& n : t.nodes) {
    if (n.ranks.empty()) c.fail(n.node_id + ".ranks", "empty (every physical node must own at least one rank)");
    for (int r : n.ranks) {
      auto [it, fresh] = owner.emplace(r, n.node_id);
      if (!fresh)
        c.fail(n.node_id + ".ranks", "rank " + std::to_string(r) + " is also owned by " +
                                         (it->second == n.node_id ? "this node" : it->second) +
                                         " (ranks must be unique and contiguous from zero)");
    }
  }
  const int world = static_cast<int>(owner.size());
  for (const auto& [r, id] : owner)
    if (r < 0 || r >= world)
      c.fail(id + ".ranks", "rank " + std::to_string(r) + " leaves a gap: the " + std::to_string(world) +
                                " ranks must be 0.." + std::to_string(world - 1) +
                                " (ranks must be unique and contiguous from zero)");
  std::vector<int> sorted_ring = t.ring;
  std::sort(sorted_ring.begin(), sorted_ring.end());
  std::vector<int> all;
  for (int r = 0; r < world; ++r) all.push_back(r);
  if (sorted_ring != all)
    c.fail("ring", list_text(t.ring) + " is not a permutation of ranks 0.." + std::to_string(world - 1) +
                       " (ring must contain every rank exactly once)");
  if (owner[0] != t.controller)
    c.fail("controller", "'" + t.controller + "' does not own rank 0, " + owner[0] +
                             " does (controller node must own rank 0)");
  t.base_port = static_cast<int>(*base_port);
  if (*base_port <= 0 || *base_port + world - 1 > 65535)
    c.fail("base_port", std::to_string(*base_port) + " + " + std::to_string(world - 1) +
                            " ranks leaves 1..65535 (rank port range is invalid)");

  read_benchmark(c, root["benchmark"], t);
  read_comm(root["comm"], origin, t);
  return t;
}

ClusterTopology load_topology(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InvalidArgumentError(path + ": cannot read the topology file");
  std::stringstream text;
  text << in.rdbuf();
  return parse_topology(text.str(), path);
}

}  // namespace wcomm::cluster
