// The processes a cluster launch starts: `wcomm cluster worker` (one per node, started over
// SSH; V0.1's worker and ready / go / results protocol, v01-collectives-cluster.md 2.7) and
// `wcomm cluster rank` (one per rank, started by srun or mpirun, ranks from the environment).
// Either way the controller (rank 0's process) prints the one cluster report on stdout.
#pragma once

#include <string>

#include "cluster/failure_reason.h"  // kListeningMarker and the exit codes
#include "cluster/topology.h"

namespace wcomm::tools {

int run_cluster_worker(const cluster::ClusterTopology& topology, const std::string& node_id, double sample_interval,
                       bool quiet);
int run_cluster_rank(const cluster::ClusterTopology& topology, double sample_interval, bool quiet);

}  // namespace wcomm::tools
