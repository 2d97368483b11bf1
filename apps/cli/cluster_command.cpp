// `wcomm cluster`: launch a topology's job (ssh, slurm or mpirun), the worker and rank
// processes a launch starts, and experiment sweeps. See docs/cluster.md.
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>

#include "netbench/report.h"
#include "cluster/topology.h"
#include "cli/cli_parse.h"
#include "cluster/cluster_launch.h"
#include "cluster/cluster_sweep.h"
#include "cluster/cluster_worker.h"
#include "cli/commands.h"

namespace wcomm::tools {
namespace {

void add_launcher_options(CLI::App* app, LaunchOptions& o) {
  app->add_option("--launcher", o.launcher, "ssh (a worker per node over SSH), slurm (srun) or mpirun")
      ->check(CLI::IsMember({"ssh", "slurm", "mpirun"}))
      ->capture_default_str();
  app->add_option("--hostfile", o.hostfile, "mpirun's host file (--launcher mpirun)");
  app->add_option("--launcher-arg", o.launcher_args, "an extra srun / mpirun argument (repeatable)")->allow_extra_args(false);
  app->add_flag("--quiet", o.quiet, "no progress lines on stderr");
}

int launch(LaunchOptions& o, bool dry_run, const std::string& output) {
  try {
    cluster::ClusterTopology topology = cluster::load_topology(o.config_path);
    if (dry_run) {
      std::cout << launch_dry_run(topology, o).dump(2) << std::endl;
      return 0;
    }
    install_launch_signal_handlers();
    LaunchOutcome outcome = launch_cluster(topology, o);
    if (outcome.exit_code != 0) {
      const auto& f = outcome.report["failure"];
      std::fprintf(stderr, "wcomm cluster: %s%s\n",
                   f["node"].is_string() ? ("node " + f["node"].get<std::string>() + " failed: ").c_str() : "",
                   f["reason"].get<std::string>().c_str());
    }
    if (output.empty()) {
      std::cout << outcome.report.dump(2) << std::endl;
    } else {
      bench::write_report(outcome.report, output);
      std::fprintf(stderr, "wrote cluster report to %s\n", output.c_str());
    }
    return outcome.exit_code;
  } catch (const InvalidArgumentError& e) {
    std::fprintf(stderr, "wcomm cluster: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wcomm cluster: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int run_cluster(int argc, char** argv) {
  CLI::App app{"Collectives across a cluster: launch a topology's job, or sweep experiments (docs/cluster.md)"};
  app.name("wcomm cluster");
  app.require_subcommand(1, 1);

  LaunchOptions lo;
  bool dry_run = false;
  std::string output;
  CLI::App* launch_cmd = app.add_subcommand("launch", "run the topology's benchmark on every node; one report");
  launch_cmd->add_option("--config", lo.config_path, "the topology file (V0.1's cluster YAML)")->required();
  launch_cmd->add_flag("--dry-run", dry_run, "print every copy and remote command (or the srun / mpirun line); run nothing");
  launch_cmd->add_option("--output", output, "write the report there (default: stdout)");
  launch_cmd->add_option("--timeout", lo.timeout, "seconds the whole run may take")->capture_default_str();
  add_launcher_options(launch_cmd, lo);

  std::string config, node_id;
  double sample_interval = 1.0;
  bool quiet = false;
  CLI::App* worker_cmd = app.add_subcommand("worker", "run one node's ranks (started by launch over SSH)");
  worker_cmd->add_option("--config", config, "the topology file")->required();
  worker_cmd->add_option("--node-id", node_id, "this node's node_id")->required();
  worker_cmd->add_option("--sample-interval", sample_interval, "seconds between link samples")->capture_default_str();
  worker_cmd->add_flag("--quiet", quiet, "no progress lines");
  CLI::App* rank_cmd = app.add_subcommand("rank", "run one rank, rank and world from srun / mpirun / torchrun's environment");
  rank_cmd->add_option("--config", config, "the topology file")->required();
  rank_cmd->add_option("--sample-interval", sample_interval, "seconds between link samples")->capture_default_str();
  rank_cmd->add_flag("--quiet", quiet, "no progress lines");

  SweepOptions so;
  CLI::App* sweep_cmd = app.add_subcommand("sweep", "V0.1's experiment sweep: one launch per cell, seeded order, resumable");
  sweep_cmd->add_option("--config", so.config_path, "the base four-rank topology")->required();
  sweep_cmd->add_option("--output-dir", so.output_dir, "configs/, reports/, summary.json, summary.html go there")->required();
  sweep_cmd->add_option("--suites", so.suites, "scheduler, ring, broadcast, chunk, p2p, p2p-knee, p2p-confirm")
      ->delimiter(',')
      ->capture_default_str();
  sweep_cmd->add_option("--rounds", so.rounds, "timed iterations per cell")->capture_default_str();
  sweep_cmd->add_option("--warmup-rounds", so.warmup_rounds, "untimed iterations first")->capture_default_str();
  sweep_cmd->add_option("--seed", so.seed, "the order's seed (Python's random.Random(seed).shuffle)")->capture_default_str();
  sweep_cmd->add_option("--first-port", so.first_port, "cell i uses base port first-port + 8 i")->capture_default_str();
  sweep_cmd->add_option("--launch-timeout", so.launch_timeout, "seconds each launch may take")->capture_default_str();
  sweep_cmd->add_option("--payload-bytes", so.payload_bytes, "wcomm: every cell's payload size (default: V0.1's 1 or 4 MiB)");
  bool resume = false;
  sweep_cmd->add_flag("--resume", resume, "V0.1's flag: skip finished cells (wcomm always does for the same sweep)");
  sweep_cmd->add_flag("--restart", so.restart, "wcomm: forget finished cells and run them all again");
  sweep_cmd->add_flag("--dry-run", so.dry_run, "wcomm: print the cells in run order with their configs; run nothing");
  add_launcher_options(sweep_cmd, so.launch);

  if (auto code = parse_command_line(app, argc, argv)) return *code;
  if (launch_cmd->parsed()) return launch(lo, dry_run, output);
  if (sweep_cmd->parsed()) {
    install_launch_signal_handlers();
    return run_sweep(so);
  }
  const bool is_worker = worker_cmd->parsed();
  cluster::ClusterTopology topology;
  try {
    topology = cluster::load_topology(config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cluster %s: error: %s\n", is_worker ? ("worker " + node_id).c_str() : "rank", e.what());
    return 2;
  }
  return is_worker ? run_cluster_worker(topology, node_id, sample_interval, quiet)
                   : run_cluster_rank(topology, sample_interval, quiet);
}

}  // namespace wcomm::tools
