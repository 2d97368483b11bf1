// The sub-commands of the `wcomm` executable; each parses its own arguments (argv[0] is the
// sub-command's name) and returns the process exit code.
#pragma once

namespace wcomm::tools {

int run_node(int argc, char** argv);    // wcomm node: the V0.1 node CLI (send / recv / echo)
int run_bench(int argc, char** argv);   // wcomm bench: responder / initiator
int run_report(int argc, char** argv);  // wcomm report: a report (bench, multirank, cluster, sweep) as an HTML page
int run_multirank(int argc, char** argv);  // wcomm multirank: collectives among ranks (V0.1's tool)
int run_cluster(int argc, char** argv);    // wcomm cluster: launch / worker / rank / sweep across nodes

}  // namespace wcomm::tools
