// The commands of a launch: scp / ssh for the SSH launcher, srun / mpirun for the others.
#include "cluster/launch_plan.h"

#include <unistd.h>

#include <filesystem>

namespace wcomm::cluster {

std::string shell_quote(const std::string& word) {
  if (word.empty()) return "''";
  bool safe = true;
  for (unsigned char ch : word)
    if (!(std::isalnum(ch) || std::string_view("@%+=:,./_-").find(static_cast<char>(ch)) != std::string_view::npos))
      safe = false;
  if (safe) return word;
  std::string out = "'";
  for (char ch : word) out += ch == '\'' ? std::string("'\"'\"'") : std::string(1, ch);
  return out + "'";
}

std::string shell_join(const Argv& argv) {
  std::string out;
  for (const auto& a : argv) out += (out.empty() ? "" : " ") + shell_quote(a);
  return out;
}

std::string normalise_path(const std::string& path) {
  if (path.empty()) return ".";
  std::string s = std::filesystem::path(path).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s.empty() ? "." : s;
}

Argv SshPlan::ssh_argv(const ClusterTopology& t, const std::string& node_id) const {
  return {"ssh", t.node(node_id).ssh_alias, "bash", "-lc", shell_quote(workers.at(node_id))};
}

nlohmann::json SshPlan::dry_run() const {
  nlohmann::json copy_list = nlohmann::json::array();
  for (const auto& [node, argv] : copies) copy_list.push_back(argv);
  return {{"copies", copy_list}, {"workers", workers}};
}

SshPlan plan_ssh(const ClusterTopology& t, const std::string& config_path) {
  SshPlan plan;
  const std::string config = normalise_path(config_path);
  for (const auto& n : t.nodes) {
    plan.copies.emplace_back(n.node_id, Argv{"scp", config, n.ssh_alias + ":" + n.workdir + "/" + kRemoteConfigName});
    Argv worker_args{"worker", "--config", kRemoteConfigName, "--node-id", n.node_id};
    std::string run;
    if (n.wcomm.empty()) {
      Argv argv{n.python, "-m", "wireless_comm.cluster_benchmark"};
      argv.insert(argv.end(), worker_args.begin(), worker_args.end());
      run = "PYTHONPATH=src " + shell_join(argv);
    } else {
      Argv argv{n.wcomm, "cluster"};
      argv.insert(argv.end(), worker_args.begin(), worker_args.end());
      run = shell_join(argv);
    }
    plan.workers[n.node_id] = "cd " + shell_quote(n.workdir) + " && " + run;
    if (n.node_id != t.controller) plan.start_order.push_back(n.node_id);
  }
  plan.start_order.push_back(t.controller);
  return plan;
}

nlohmann::json BatchPlan::dry_run() const {
  return {{"launcher", launcher}, {"command", argv}, {"environment", environment}};
}

namespace {

std::string absolute(const std::string& path) { return std::filesystem::absolute(path).lexically_normal().string(); }

Argv rank_command(const std::string& wcomm, const std::string& config_path) {
  return {wcomm, "cluster", "rank", "--config", absolute(config_path)};
}

}  // namespace

BatchPlan plan_slurm(const ClusterTopology& t, const std::string& config_path, const std::string& wcomm,
                     const Argv& extra) {
  BatchPlan plan{.launcher = "slurm", .argv = {}, .environment = {}};
  // --kill-on-bad-exit: one failed rank ends the step, so no task waits out its timeout.
  plan.argv = {"srun", "--ntasks", std::to_string(t.world()), "--kill-on-bad-exit=1", "--job-name", "wcomm-cluster"};
  plan.argv.insert(plan.argv.end(), extra.begin(), extra.end());
  for (auto& a : rank_command(wcomm, config_path)) plan.argv.push_back(a);
  plan.environment["WCOMM_MASTER_PORT"] = std::to_string(t.base_port);
  return plan;
}

BatchPlan plan_mpirun(const ClusterTopology& t, const std::string& config_path, const std::string& wcomm,
                      const std::string& hostfile, const Argv& extra) {
  BatchPlan plan{.launcher = "mpirun", .argv = {}, .environment = {}};
  plan.argv = {"mpirun", "-np", std::to_string(t.world())};
  if (!hostfile.empty()) {
    plan.argv.push_back("--hostfile");
    plan.argv.push_back(absolute(hostfile));
  }
  if (::geteuid() == 0) plan.argv.push_back("--allow-run-as-root");  // Open MPI refuses root otherwise
  plan.argv.insert(plan.argv.end(), {"-x", "WCOMM_MASTER_PORT"});
  plan.argv.insert(plan.argv.end(), extra.begin(), extra.end());
  for (auto& a : rank_command(wcomm, config_path)) plan.argv.push_back(a);
  plan.environment["WCOMM_MASTER_PORT"] = std::to_string(t.base_port);
  return plan;
}

}  // namespace wcomm::cluster
