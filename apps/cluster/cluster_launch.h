// The cluster launcher: starts a topology's job over SSH (a worker per node, V0.1's sequence
// with readiness and cleanup), or through srun / mpirun (a rank per task), follows it with
// progress lines, and returns one report. On a failed node, a timeout or Ctrl-C it stops every
// worker and the report says which node failed and why.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/topology.h"

namespace wcomm::tools {

struct LaunchOptions {
  std::string config_path;   // the --config argument as given
  std::string launcher = "ssh";  // ssh, slurm or mpirun
  double timeout = 3600.0;   // the whole run, seconds
  std::string hostfile;      // mpirun's --hostfile
  std::vector<std::string> launcher_args;  // extra srun / mpirun arguments
  bool quiet = false;        // no progress lines
};

struct LaunchOutcome {
  nlohmann::json report;  // the cluster report, or {status: failed, failure: {node, reason}, nodes_status}
  int exit_code = 0;      // 0 done, 1 a node failed or the run timed out, 130 interrupted
};

// SIGINT / SIGTERM stop the launch (the handler only sets a flag the launcher polls).
void install_launch_signal_handlers();
bool launch_interrupted();

// The plan as --dry-run prints it. Throws InvalidArgumentError on bad options.
nlohmann::json launch_dry_run(const cluster::ClusterTopology& topology, const LaunchOptions& options);

// Checks what can be checked without touching a host (ssh aliases resolve; srun / mpirun
// exist), then runs the job. Throws InvalidArgumentError when a check fails (nothing started).
LaunchOutcome launch_cluster(const cluster::ClusterTopology& topology, const LaunchOptions& options);

}  // namespace wcomm::tools
