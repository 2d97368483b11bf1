// Entry point of the `wcomm` executable: dispatches to a sub-command.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "cli/commands.h"

namespace {

void print_usage() {
  std::fprintf(stderr,
               "usage: wcomm <command> [options]\n\n"
               "commands:\n"
               "  node    run a node: send, recv or echo messages (wcomm node --help)\n"
               "  bench   benchmark a link between two nodes (wcomm bench --help)\n"
               "  multirank  collectives among ranks on two hosts or this one (wcomm multirank --help)\n"
               "  cluster launch a cluster benchmark over ssh / slurm / mpirun, or sweep experiments (wcomm cluster --help)\n"
               "  report  render a bench report as an HTML page (wcomm report RUN.json -o RUN.html)\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h") {
    print_usage();
    return argc < 2 ? 2 : 0;
  }
  std::string_view command = argv[1];
  if (command == "node") return wcomm::tools::run_node(argc - 1, argv + 1);
  if (command == "bench") return wcomm::tools::run_bench(argc - 1, argv + 1);
  if (command == "multirank") return wcomm::tools::run_multirank(argc - 1, argv + 1);
  if (command == "cluster") return wcomm::tools::run_cluster(argc - 1, argv + 1);
  if (command == "report") return wcomm::tools::run_report(argc - 1, argv + 1);
  std::fprintf(stderr, "wcomm: unknown command '%s'\n\n", argv[1]);
  print_usage();
  return 2;
}
