// What a launch runs, computed from the topology alone (so --dry-run can print it and the
// launcher runs exactly that): the copies and remote worker commands of the SSH launcher
// (V0.1's, v01-collectives-cluster.md 2.5 / 2.6), and the srun / mpirun command lines.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/topology.h"

namespace wcomm::cluster {

using Argv = std::vector<std::string>;

// POSIX shell quoting as Python's shlex.quote: bare when only [A-Za-z0-9@%+=:,./_-].
std::string shell_quote(const std::string& word);
std::string shell_join(const Argv& argv);
// The path as Python's os.path.normpath writes it ("./a//b/" -> "a/b"): how V0.1 prints it.
std::string normalise_path(const std::string& path);

struct SshPlan {
  std::vector<std::pair<std::string, Argv>> copies;  // node_id -> scp argv, in file order
  std::map<std::string, std::string> workers;        // node_id -> remote shell command
  std::vector<std::string> start_order;              // every other node in file order, controller last
  Argv ssh_argv(const ClusterTopology& t, const std::string& node_id) const;  // ssh ALIAS bash -lc '<cmd>'
  nlohmann::json dry_run() const;                    // V0.1's {copies, workers}
};

// `config_path`: the --config argument as given (V0.1 prints and copies it normalised).
SshPlan plan_ssh(const ClusterTopology& topology, const std::string& config_path);

struct BatchPlan {
  std::string launcher;  // "slurm" or "mpirun"
  Argv argv;
  std::map<std::string, std::string> environment;  // set for the launcher process (and passed to ranks)
  nlohmann::json dry_run() const;
};

// srun / mpirun running `wcomm cluster rank --config <absolute path>` in W tasks. `wcomm` is the
// executable the tasks run; `extra` goes before it (e.g. --partition, --oversubscribe).
BatchPlan plan_slurm(const ClusterTopology& topology, const std::string& config_path, const std::string& wcomm,
                     const Argv& extra);
BatchPlan plan_mpirun(const ClusterTopology& topology, const std::string& config_path, const std::string& wcomm,
                      const std::string& hostfile, const Argv& extra);

}  // namespace wcomm::cluster
