// launch_cluster: the SSH sequence (check aliases, copy the topology, start the workers, wait
// until each listens, start the controller, gather) and the srun / mpirun one, driven by one
// poll loop over every child's output.
#include "cluster/cluster_launch.h"

#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>

#include "netbench/clock.h"
#include "cluster/child_process.h"
#include "cluster/failure_reason.h"
#include "cluster/launch_plan.h"
#include "cluster/cluster_worker.h"
#include "wcomm/errors.h"

namespace wcomm::tools {
namespace {

using Clock = std::chrono::steady_clock;
using cluster::ChildProcess;

volatile std::sig_atomic_t g_interrupt_signal = 0;
extern "C" void on_interrupt(int sig) { g_interrupt_signal = sig; }

constexpr double kStopGraceS = 10.0;  // for workers to end once their input closed
constexpr double kTermGraceS = 3.0;   // after SIGTERM, before SIGKILL

std::string self_executable() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "wcomm" : p.string();
}

bool program_exists(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    std::string dir = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (::access((dir + "/" + name).c_str(), X_OK) == 0) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

// One child the launcher follows: an scp, a node's ssh session, or the srun / mpirun job.
struct Job {
  std::string name;  // node id, or "srun" / "mpirun"
  std::unique_ptr<ChildProcess> child;
  bool listening = false;
  int listening_ranks = 0;
  std::string pid;  // the worker's, from its listening line
  bool done = false;  // exited, output read, on_exit() run
  std::string state = "not started";  // starting, running, finished, failed, stopped
  std::vector<std::string> stderr_lines;
};

class Launch {
 public:
  Launch(const cluster::ClusterTopology& t, const LaunchOptions& o)
      : t_(t), o_(o), deadline_(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.timeout))) {
    for (const auto& c : t.settings.collectives) cells_ += c == "barrier" ? 1 : static_cast<int>(t.settings.payload_sizes.size());
    started_at_ = bench::utc_timestamp_now();
  }

  LaunchOutcome run_ssh();
  LaunchOutcome run_batch(const cluster::BatchPlan& plan);

 private:
  void say(const std::string& line) {
    if (!o_.quiet) std::fprintf(stderr, "cluster: %s\n", line.c_str());
  }
  double left_s() const { return std::chrono::duration<double>(deadline_ - Clock::now()).count(); }

  Job& start(const std::string& name, const cluster::Argv& argv, const std::map<std::string, std::string>& env = {}) {
    auto job = std::make_unique<Job>();
    job->name = name;
    job->child = std::make_unique<ChildProcess>(argv, env);
    job->state = "starting";
    jobs_.push_back(std::move(job));
    return *jobs_.back();
  }

  // Reads every child's output and reaps exits, waiting at most `wait_ms` for something to happen.
  void pump(int wait_ms) {
    std::vector<pollfd> fds;
    for (auto& j : jobs_)
      if (j->child)
        for (int fd : j->child->open_fds()) fds.push_back({fd, POLLIN, 0});
    if (!fds.empty()) ::poll(fds.data(), fds.size(), wait_ms);
    else if (wait_ms > 0) ::usleep(static_cast<useconds_t>(wait_ms) * 1000);
    for (auto& j : jobs_) {
      if (!j->child) continue;
      for (auto& line : j->child->pump()) on_line(*j, line);
      if (!j->done && j->child->poll_exit()) {
        for (auto& line : j->child->pump()) on_line(*j, line);
        j->done = true;
        on_exit(*j);
      }
    }
    heartbeat();
  }

  void on_line(Job& j, const std::string& line) {
    j.stderr_lines.push_back(line);
    if (j.stderr_lines.size() > 200) j.stderr_lines.erase(j.stderr_lines.begin());
    if (line.find(cluster::kListeningMarker) != std::string::npos) {
      ++j.listening_ranks;
      static const std::regex kMarker(R"((?:ranks (\S+) )?listening \(pid (\d+)\))");
      std::smatch m;
      if (std::regex_search(line, m, kMarker)) j.pid = m[2].str();
      if (!j.listening && m.size() > 2 && m[2].matched && o_.launcher == "ssh")
        say(j.name + ": listening (" + (m[1].matched ? "ranks " + m[1].str() + ", " : std::string()) + "pid " + m[2].str() + ")");
      if (!j.listening && o_.launcher == "ssh" && j.name == t_.controller)
        say("running: all " + std::to_string(t_.nodes.size()) + " nodes, " + std::to_string(cells_) + " measurements to make, " +
            std::to_string(static_cast<int>(left_s())) + " s left before the timeout");
      j.listening = true;
      j.state = "running";
      return;
    }
    // The controller's per-(collective, size) lines: progress and an estimate of time left.
    static const std::regex kCell(R"(multirank: (rank 0 \S+ \d+ B: p50 \S+ ms))");
    std::smatch m;
    if ((j.name == t_.controller || o_.launcher != "ssh") && std::regex_search(line, m, kCell)) {
      ++cells_done_;
      double elapsed = std::chrono::duration<double>(Clock::now() - running_since_).count();
      double estimate = cells_done_ ? elapsed / cells_done_ * (cells_ - cells_done_) : 0;
      say(j.name + ": " + m[1].str() + " (" + std::to_string(cells_done_) + "/" + std::to_string(cells_) +
          " done, about " + std::to_string(static_cast<int>(estimate + 0.5)) + " s left)");
    }
  }

  void on_exit(Job& j) {
    const ChildProcess& c = *j.child;
    const bool by_us = j.state == "stopping" && WIFSIGNALED(c.raw_status());
    if (c.succeeded()) j.state = "finished";
    else if (by_us || c.exit_code() == cluster::kExitStoppedByLauncher) j.state = "stopped";
    else if (c.exit_code() == cluster::kExitPeerFailed) j.state = "stopped, a peer failed";
    else j.state = "failed";
    if (!j.name.starts_with("copy ")) say(j.name + ": " + (c.succeeded() ? "finished" : j.state + " (" + c.describe_exit() + ")"));
  }

  void heartbeat() {
    if (o_.quiet || Clock::now() < next_heartbeat_) return;
    next_heartbeat_ = Clock::now() + std::chrono::seconds(10);
    int running = 0;
    for (auto& j : jobs_)
      if (j->child && !j->child->exited() && !j->name.starts_with("copy ")) ++running;
    if (running)
      say(std::to_string(running) + " running, " + std::to_string(cells_done_) + "/" + std::to_string(cells_) +
          " measurements done, " + std::to_string(static_cast<int>(left_s())) + " s left before the timeout");
  }

  bool all_exited() const {
    for (auto& j : jobs_)
      if (j->child && !j->done) return false;
    return true;
  }

  // Stops every child still running: closes its input (a worker ends when its SSH session's
  // input does; srun / mpirun get SIGTERM and end their tasks), then SIGTERM, then SIGKILL.
  void stop_all() {
    for (auto& j : jobs_)
      if (j->child && !j->done) {
        j->state = "stopping";
        j->child->close_stdin();
        if (o_.launcher != "ssh") j->child->signal(SIGTERM);
      }
    auto wait_for = [&](double seconds) {
      auto until = Clock::now() + std::chrono::duration<double>(seconds);
      while (!all_exited() && Clock::now() < until) pump(100);
    };
    wait_for(kStopGraceS);
    for (auto& j : jobs_)
      if (j->child && !j->child->exited()) j->child->signal(SIGTERM);
    wait_for(kTermGraceS);
    for (auto& j : jobs_)
      if (j->child && !j->child->exited()) j->child->signal(SIGKILL);
    wait_for(kTermGraceS);
  }

  static std::string reason_of(const Job& j) {
    return cluster::session_failure_reason({.stderr_lines = j.stderr_lines,
                                            .exit_text = j.child->describe_exit(),
                                            .exit_code = j.child->exit_code(),
                                            .signaled = WIFSIGNALED(j.child->raw_status()),
                                            .pid = j.pid,
                                            .is_copy = j.name.starts_with("copy ")});
  }

  nlohmann::json nodes_status() const {
    nlohmann::json out = nlohmann::json::object();
    for (auto& j : jobs_) {
      if (j->name.starts_with("copy ")) continue;
      nlohmann::json tail(std::vector<std::string>(
          j->stderr_lines.end() - std::min<std::ptrdiff_t>(10, static_cast<std::ptrdiff_t>(j->stderr_lines.size())),
          j->stderr_lines.end()));
      out[j->name] = {{"state", j->state}, {"exit", j->child ? j->child->describe_exit() : "not started"},
                      {"stderr_tail", tail}};
    }
    return out;
  }

  LaunchOutcome fail(const std::optional<std::string>& node, const std::string& reason, int code) {
    nlohmann::json nodes_json = nodes_status();
    for (const auto& n : t_.nodes)
      if (o_.launcher == "ssh" && !nodes_json.contains(n.node_id))
        nodes_json[n.node_id] = {{"state", "not started"}, {"exit", "not started"}, {"stderr_tail", nlohmann::json::array()}};
    say("failed: " + (node ? *node + ": " : std::string()) + reason);
    nlohmann::json report = {{"schema_version", 1},
                             {"mode", "physical_multi_node_wifi"},
                             {"status", code == 130 ? "interrupted" : "failed"},
                             {"launcher", o_.launcher},
                             {"started_at", started_at_},
                             {"finished_at", bench::utc_timestamp_now()},
                             {"failure", {{"node", node ? nlohmann::json(*node) : nlohmann::json(nullptr)}, {"reason", reason}}},
                             {"nodes_status", nodes_json}};
    return {report, code};
  }

  // After a failure, a timeout or an interrupt: stop everything, then name the cause.
  LaunchOutcome stop_and_report(const std::string& phase) {
    const int sig = g_interrupt_signal;
    const bool timed_out = !sig && left_s() <= 0;
    std::vector<std::string> still_running;
    for (auto& j : jobs_)
      if (j->child && !j->done && !j->name.starts_with("copy ")) still_running.push_back(j->name);
    stop_all();
    if (sig) return fail(std::nullopt, std::string("interrupted by ") + (sig == SIGINT ? "SIGINT (Ctrl-C)" : "SIGTERM") +
                                          " while " + phase + "; every worker was stopped", 130);
    if (timed_out) {
      std::string names;
      for (auto& n : still_running) names += (names.empty() ? "" : ", ") + n;
      char limit[32];
      std::snprintf(limit, sizeof limit, "%g", o_.timeout);
      return fail(still_running.empty() ? std::nullopt : std::optional<std::string>(still_running.front()),
                  std::string("cluster benchmark exceeded ") + limit + "s while " + phase +
                      (names.empty() ? "" : "; still running: " + names),
                  1);
    }
    // The node that failed on its own, rather than one that stopped because a peer failed or
    // because the launcher stopped it.
    note_failures();
    Job* primary = nullptr;
    for (auto& j : failed_order_)
      if (j->state == "failed") {
        primary = j;
        break;
      }
    if (!primary && !failed_order_.empty()) primary = failed_order_.front();
    if (!primary) return fail(std::nullopt, "the launch failed while " + phase, 1);
    std::string name = primary->name.starts_with("copy ") ? primary->name.substr(5) : primary->name;
    std::string reason = reason_of(*primary);
    if (primary->name.starts_with("copy ")) reason = "copying the topology failed: " + reason;
    return fail(name, reason, 1);
  }

  // Pumps until `done` holds; false when a child failed, the deadline passed or a signal came.
  template <class Done>
  bool wait_until(Done done) {
    while (true) {
      note_failures();
      if (!failed_order_.empty() || g_interrupt_signal || left_s() <= 0) return false;
      if (done()) return true;
      pump(100);
    }
  }

  void note_failures() {
    for (auto& j : jobs_)
      if (j->child && j->done && !j->child->succeeded() &&
          std::find(failed_order_.begin(), failed_order_.end(), j.get()) == failed_order_.end())
        failed_order_.push_back(j.get());
  }

  Job* job(const std::string& name) {
    for (auto& j : jobs_)
      if (j->name == name) return j.get();
    return nullptr;
  }

  const cluster::ClusterTopology& t_;
  const LaunchOptions& o_;
  Clock::time_point deadline_;
  Clock::time_point running_since_ = Clock::now();
  Clock::time_point next_heartbeat_ = Clock::now() + std::chrono::seconds(10);
  std::vector<std::unique_ptr<Job>> jobs_;
  std::vector<Job*> failed_order_;
  int cells_ = 0, cells_done_ = 0;
  std::string started_at_;
};

LaunchOutcome Launch::run_ssh() {
  const cluster::SshPlan plan = cluster::plan_ssh(t_, o_.config_path);
  // 1. Copy the topology file, to every node at once.
  for (const auto& [node, argv] : plan.copies) {
    say(node + ": preparing (copying the topology to " + argv.back() + ")");
    start("copy " + node, argv);
  }
  if (!wait_until([&] { return all_exited(); })) return stop_and_report("copying the topology");
  // 2. Every worker but the controller, then wait until each listens; then the controller.
  for (const auto& node : plan.start_order) {
    if (node == t_.controller) continue;
    say(node + ": starting (ranks " + nlohmann::json(t_.node(node).ranks).dump() + ")");
    start(node, plan.ssh_argv(t_, node));
  }
  if (!wait_until([&] {
        for (const auto& node : plan.start_order)
          if (node != t_.controller && !job(node)->listening) return false;
        return true;
      }))
    return stop_and_report("starting the workers");
  say(t_.controller + ": starting (controller, ranks " + nlohmann::json(t_.controller_node().ranks).dump() + ")");
  running_since_ = Clock::now();
  Job& controller = start(t_.controller, plan.ssh_argv(t_, t_.controller));
  // 3. Wait for every session to end.
  if (!wait_until([&] { return all_exited(); })) return stop_and_report("running the benchmark");
  nlohmann::json report;
  try {
    report = nlohmann::json::parse(controller.child->out());
  } catch (const std::exception& e) {
    return fail(t_.controller, std::string("the controller's output is not a JSON report: ") + e.what(), 1);
  }
  report["launch"] = {{"launcher", "ssh"}, {"nodes_status", nodes_status()}};
  say("all " + std::to_string(t_.nodes.size()) + " nodes finished");
  return {report, 0};
}

LaunchOutcome Launch::run_batch(const cluster::BatchPlan& plan) {
  say("starting " + std::to_string(t_.world()) + " ranks with " + plan.argv.front());
  running_since_ = Clock::now();
  Job& job = start(plan.argv.front(), plan.argv, plan.environment);
  bool announced = false;
  if (!wait_until([&] {
        if (!announced && job.listening_ranks >= t_.world()) {
          say("all " + std::to_string(t_.world()) + " ranks listening");
          announced = true;
        }
        return all_exited();
      })) {
    // A rank's own error line names its rank and node: that is the failure to report.
    const int sig = g_interrupt_signal;
    if (sig || left_s() <= 0 || failed_order_.empty()) return stop_and_report("running the benchmark");
    stop_all();
    std::optional<cluster::RankFailure> failed = cluster::batch_rank_failure(job.stderr_lines);
    if (!failed) return fail(std::nullopt, plan.argv.front() + " failed: " + reason_of(job), 1);
    return fail(failed->node, failed->reason + " [" + plan.argv.front() + " " + job.child->describe_exit() + "]", 1);
  }
  nlohmann::json report;
  try {
    report = nlohmann::json::parse(job.child->out());
  } catch (const std::exception& e) {
    return fail(std::nullopt, "rank 0's output is not a JSON report: " + std::string(e.what()), 1);
  }
  report["launch"] = {{"launcher", o_.launcher}, {"command", plan.argv}, {"nodes_status", nodes_status()}};
  say("all " + std::to_string(t_.world()) + " ranks finished");
  return {report, 0};
}

std::string wcomm_for_tasks(const cluster::ClusterTopology& t) {
  const std::string& configured = t.controller_node().wcomm;
  return configured.empty() ? self_executable() : configured;
}

// An alias is usable when ssh resolves it (ssh -G reads the ssh config; nothing is contacted)
// to a host name that resolves.
void check_alias(const cluster::ClusterTopology& t, const cluster::ClusterNode& n) {
  ChildProcess probe({"ssh", "-G", n.ssh_alias});
  probe.close_stdin();
  auto until = Clock::now() + std::chrono::seconds(10);
  while (!probe.poll_exit() && Clock::now() < until) {
    probe.pump();
    ::usleep(20000);
  }
  probe.pump();
  const std::string where = t.path + ": " + n.node_id + ".ssh_alias: '" + n.ssh_alias + "'";
  if (!probe.succeeded()) throw InvalidArgumentError(where + ": ssh -G refused it: " + probe.err());
  std::string hostname;
  std::size_t at = probe.out().find("\nhostname ");
  if (probe.out().starts_with("hostname ")) at = 0;
  else if (at != std::string::npos) ++at;
  if (at != std::string::npos) {
    std::size_t end = probe.out().find('\n', at);
    hostname = probe.out().substr(at + 9, end - at - 9);
  }
  addrinfo* found = nullptr;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  if (hostname.empty() || ::getaddrinfo(hostname.c_str(), nullptr, &hints, &found) != 0)
    throw InvalidArgumentError(where + " is unreachable: its host name '" + hostname +
                               "' does not resolve (add the alias to the ssh config, or fix its HostName)");
  ::freeaddrinfo(found);
}

}  // namespace

void install_launch_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

bool launch_interrupted() { return g_interrupt_signal != 0; }

nlohmann::json launch_dry_run(const cluster::ClusterTopology& t, const LaunchOptions& o) {
  if (o.launcher == "ssh") return cluster::plan_ssh(t, o.config_path).dry_run();
  if (o.launcher == "slurm") return cluster::plan_slurm(t, o.config_path, wcomm_for_tasks(t), o.launcher_args).dry_run();
  if (o.launcher == "mpirun")
    return cluster::plan_mpirun(t, o.config_path, wcomm_for_tasks(t), o.hostfile, o.launcher_args).dry_run();
  throw InvalidArgumentError("--launcher '" + o.launcher + "': use ssh, slurm or mpirun");
}

LaunchOutcome launch_cluster(const cluster::ClusterTopology& t, const LaunchOptions& o) {
  if (!(o.timeout > 0)) throw InvalidArgumentError("--timeout must be positive");
  // V0.1 leaves the world-size rules to the workers; checked here, they fail before any host.
  try {
    t.settings.validate_for_world(t.world());
  } catch (const InvalidArgumentError& e) {
    throw InvalidArgumentError(t.path + ": benchmark: " + e.what() + " (world size " + std::to_string(t.world()) + ")");
  }
  Launch launch(t, o);
  if (o.launcher == "ssh") {
    for (const auto& n : t.nodes) check_alias(t, n);
    return launch.run_ssh();
  }
  nlohmann::json plan_json = launch_dry_run(t, o);  // validates the launcher's name
  cluster::BatchPlan plan = o.launcher == "slurm"
                                ? cluster::plan_slurm(t, o.config_path, wcomm_for_tasks(t), o.launcher_args)
                                : cluster::plan_mpirun(t, o.config_path, wcomm_for_tasks(t), o.hostfile, o.launcher_args);
  if (!program_exists(plan.argv.front()))
    throw InvalidArgumentError("--launcher " + o.launcher + ": '" + plan.argv.front() + "' is not in PATH");
  if (o.launcher == "mpirun" && !o.hostfile.empty() && !std::filesystem::exists(o.hostfile))
    throw InvalidArgumentError("--hostfile '" + o.hostfile + "' does not exist");
  return launch.run_batch(plan);
}

}  // namespace wcomm::tools
