// `wcomm cluster sweep` (V0.1's experiment_sweep, v01-collectives-cluster.md 3): one cluster
// launch per experiment cell in a seeded random order, resumable, with one summary JSON and
// its HTML page.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/cluster_launch.h"

namespace wcomm::tools {

struct SweepOptions {
  std::string config_path;
  std::string output_dir;
  std::vector<std::string> suites = {"scheduler", "ring", "broadcast", "chunk"};
  std::int64_t rounds = 30;
  std::int64_t warmup_rounds = 3;
  std::int64_t seed = 20260827;
  int first_port = 9800;
  double launch_timeout = 1800;
  std::int64_t payload_bytes = 0;  // wcomm: every cell's payload size (0: V0.1's 1 or 4 MiB)
  bool restart = false;            // wcomm: forget finished cells and run every cell again
  bool dry_run = false;            // wcomm: print the cells in run order with their configs; run nothing
  LaunchOptions launch;            // launcher, hostfile, launcher arguments, quiet
};

// Returns the exit code: 0 every cell done, 1 a launch failed, 2 bad input, 130 interrupted.
int run_sweep(const SweepOptions& options);

}  // namespace wcomm::tools
