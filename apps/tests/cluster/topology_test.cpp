// The cluster topology file's checks (V0.1's rules, each error naming the node and key), the
// launch plans (V0.1's dry-run bytes, shell quoting, start order, srun / mpirun lines), sweep
// cells and their order, and ChildProcess.
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include <algorithm>

#include "cluster/child_process.h"
#include "cluster/launch_plan.h"
#include "cluster/sweep_plan.h"
#include "cluster/topology.h"
#include "wcomm/errors.h"

namespace wcomm::cluster {
namespace {

std::string node(const std::string& id, const std::string& ranks, const std::string& extra = "") {
  return "  - node_id: " + id + "\n    host: 192.0.2." + std::to_string(10 + id.back() - 'a') + "\n    ranks: " + ranks +
         "\n    ssh_alias: alias-" + id + "\n    interface: eth0\n" + extra;
}

std::string four(const std::string& head = "controller: node-a\nbase_port: 9400\n",
                 const std::string& tail = "ring: [0, 1, 2, 3]\nbenchmark: {}\n") {
  return head + "nodes:\n" + node("node-a", "[0]") + node("node-b", "[1]") + node("node-c", "[2]") + node("node-d", "[3]") + tail;
}

std::string error_of(const std::string& yaml) {
  try {
    parse_topology(yaml, "t.yaml");
  } catch (const InvalidArgumentError& e) {
    return e.what();
  }
  return "";
}

TEST(ClusterTopology, ParsesV01sFileWithDefaultsAndWcommsKey) {
  ClusterTopology t = parse_topology(four("controller: node-a\nbase_port: 9400\n",
                                          "ring: [0, 2, 1, 3]\nbenchmark:\n  rounds: 5\n  timeout: 120\n"
                                          "comm:\n  egress_quantum_bytes: 16384\n"),
                                     "t.yaml");
  EXPECT_EQ(t.world(), 4);
  EXPECT_EQ(t.ring, (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(t.node("node-c").host, "192.0.2.12");
  EXPECT_EQ(t.node("node-c").bind_host, "0.0.0.0");
  EXPECT_EQ(t.node("node-c").python, "python3");
  EXPECT_EQ(t.node("node-c").workdir, ".");
  EXPECT_EQ(t.node_of_rank(3).node_id, "node-d");
  EXPECT_EQ(t.settings.rounds, 5);
  EXPECT_TRUE(t.settings_json["timeout"].is_number_integer());  // YAML types kept, as V0.1
  EXPECT_FALSE(t.settings_json.contains("reduce"));              // V0.1's eight settings only
  EXPECT_EQ(t.comm.egress_quantum_bytes, 16384u);
}

TEST(ClusterTopology, EveryRuleNamesTheNodeAndKey) {
  const std::string head = "controller: node-a\nbase_port: 9400\nnodes:\n";
  const std::string tail = "ring: [0, 1, 2, 3]\nbenchmark: {}\n";
  struct Case {
    std::string yaml;
    std::vector<std::string> expect;
  };
  std::vector<Case> cases = {
      {"- 1\n", {"t.yaml: ", "cluster configuration root must be a mapping"}},
      {four() + "extra: 1\n", {"unknown fields in configuration: extra"}},
      {head + node("node-a", "[0]") + node("node-b", "[1]", "    sshalias: x\n") + tail,
       {"nodes[1] (node-b): unknown fields in nodes[1]: sshalias"}},
      {head + node("node-a", "[0]") + "  - node_id: node-b\n    ranks: [1]\n" + tail,
       {"nodes[1] (node-b): nodes[1] is missing required fields: host, interface, ssh_alias"}},
      {head + node("node-a", "[0]") + node("node-b", "[one]") + tail, {"nodes[1] (node-b).ranks", "list of integers"}},
      {head + node("node-a", "[0]") + node("node-b", "[true]") + tail, {"nodes[1] (node-b).ranks"}},
      {head + node("node-a", "[0, 1, 2, 3]") + "ring: [0, 1, 2, 3]\nbenchmark: {}\n",
       {"nodes: cluster benchmark requires at least two physical nodes"}},
      {"base_port: 9400\nnodes:\n" + node("node-a", "[0]") + node("node-b", "[1]") + "ring: [0, 1]\nbenchmark: {}\n",
       {"controller: missing or empty (controller must be a non-empty string)"}},
      {four("controller: node-a\nbase_port: '9400'\n"), {"base_port: ", "base_port must be an integer"}},
      {head + node("node-a", "[0]") + node("node-a", "[1]") + "ring: [0, 1]\nbenchmark: {}\n",
       {"node-a.node_id: 'node-a' is used by two nodes (cluster node_id values must be unique)"}},
      {four("controller: node-x\nbase_port: 9400\n"), {"controller: 'node-x' is not a configured node_id"}},
      {head + node("node-a", "[0]") + node("node-b", "[]") + "ring: [0]\nbenchmark: {}\n",
       {"node-b.ranks: empty (every physical node must own at least one rank)"}},
      {head + node("node-a", "[0, 1]") + node("node-b", "[1]") + "ring: [0, 1]\nbenchmark: {}\n",
       {"node-b.ranks: rank 1 is also owned by node-a (ranks must be unique and contiguous from zero)"}},
      {head + node("node-a", "[0, 0]") + node("node-b", "[1]") + "ring: [0, 1]\nbenchmark: {}\n",
       {"node-a.ranks: rank 0 is also owned by this node"}},
      {head + node("node-a", "[0]") + node("node-b", "[2]") + "ring: [0, 2]\nbenchmark: {}\n",
       {"node-b.ranks: rank 2 leaves a gap"}},
      {four("controller: node-a\nbase_port: 9400\n", "ring: [0, 1, 3]\nbenchmark: {}\n"),
       {"ring: [0, 1, 3] is not a permutation of ranks 0..3 (ring must contain every rank exactly once)"}},
      {four("controller: node-b\nbase_port: 9400\n"), {"controller: 'node-b' does not own rank 0, node-a does"}},
      {four("controller: node-a\nbase_port: 65533\n"), {"base_port: ", "rank port range is invalid"}},
      {four("controller: node-a\nbase_port: 9400\n", "ring: [0, 1, 2, 3]\n"), {"benchmark must be a mapping"}},
      {four("controller: node-a\nbase_port: 9400\n", "ring: [0, 1, 2, 3]\nbenchmark:\n  payload_sizes: 1024\n"),
       {"benchmark.payload_sizes must be a list of integers"}},
      {four("controller: node-a\nbase_port: 9400\n", "ring: [0, 1, 2, 3]\nbenchmark:\n  rounds: 0\n"),
       {"benchmark: rounds and timeout must be positive"}},
      {four("controller: node-a\nbase_port: 9400\n", "ring: [0, 1, 2, 3]\nbenchmark: {}\ncomm: [1]\n"),
       {"comm: must be a mapping"}},
      {four("controller: node-a\nbase_port: 9400\n", "ring: [0, 1, 2, 3]\nbenchmark: {}\ncomm:\n  egress_burst_bytes: 9\n"),
       {"t.yaml: ", "egress"}},
      {head + node("node-a", "[0]", "    workdir: ''\n") + node("node-b", "[1]") + "ring: [0, 1]\nbenchmark: {}\n",
       {"node-a.workdir: node-a.workdir must be non-empty"}},
  };
  for (const auto& c : cases) {
    const std::string message = error_of(c.yaml);
    ASSERT_FALSE(message.empty()) << c.yaml;
    for (const auto& part : c.expect) EXPECT_NE(message.find(part), std::string::npos) << message << "\n--- wanted: " << part;
  }
}

TEST(ClusterPlan, DryRunIsV01sOutputByteForByte) {
  const std::string data = WCOMM_TEST_DATA "/cluster/";
  std::ifstream in(data + "configs/cluster-four-node.example.yaml");
  std::stringstream text;
  text << in.rdbuf();
  ClusterTopology t = parse_topology(text.str(), "x");
  std::string out = plan_ssh(t, "./configs//cluster-four-node.example.yaml").dry_run().dump(2) + "\n";
  for (std::size_t at; (at = out.find("/tmp/wireless-comm")) != std::string::npos;) out.replace(at, 18, "<workdir>");
  std::ifstream ref(data + "v0.1-cluster-dry-run.txt");
  std::stringstream expected;
  expected << ref.rdbuf();
  EXPECT_EQ(out, expected.str());
}

TEST(ClusterPlan, ShellQuotingIsPythonsShlexQuote) {
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote(".venv/bin/python"), ".venv/bin/python");
  EXPECT_EQ(shell_quote("a@b%c+d=e:f,g./_-"), "a@b%c+d=e:f,g./_-");
  EXPECT_EQ(shell_quote("my dir"), "'my dir'");
  EXPECT_EQ(shell_quote("it's"), "'it'\"'\"'s'");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
  EXPECT_EQ(shell_join({"a b", "c"}), "'a b' c");
  EXPECT_EQ(normalise_path("./configs//x.yaml"), "configs/x.yaml");
  EXPECT_EQ(normalise_path("/a/b/"), "/a/b");
  EXPECT_EQ(normalise_path("a/../b"), "b");
}

TEST(ClusterPlan, WorkersStartBeforeTheControllerAndWcommNodesRunTheBinary) {
  ClusterTopology t = parse_topology(
      "controller: node-b\nbase_port: 9400\nnodes:\n" + node("node-a", "[1]", "    wcomm: /opt/w c/wcomm\n    workdir: /w\n") +
          node("node-b", "[0]") + node("node-c", "[2]") + "ring: [0, 1, 2]\nbenchmark: {}\n",
      "t.yaml");
  SshPlan plan = plan_ssh(t, "t.yaml");
  EXPECT_EQ(plan.start_order, (std::vector<std::string>{"node-a", "node-c", "node-b"}));
  EXPECT_EQ(plan.workers["node-a"], "cd /w && '/opt/w c/wcomm' cluster worker --config .wireless_comm_cluster.yaml --node-id node-a");
  EXPECT_EQ(plan.ssh_argv(t, "node-a"),
            (Argv{"ssh", "alias-node-a", "bash", "-lc", shell_quote(plan.workers["node-a"])}));
  BatchPlan srun = plan_slurm(t, "t.yaml", "/bin/wcomm", {"--partition", "p"});
  EXPECT_EQ(Argv(srun.argv.begin(), srun.argv.begin() + 3), (Argv{"srun", "--ntasks", "3"}));
  EXPECT_EQ(srun.environment.at("WCOMM_MASTER_PORT"), "9400");
  EXPECT_EQ(srun.argv.back().front(), '/');  // the config's absolute path: tasks may start elsewhere
  BatchPlan mpi = plan_mpirun(t, "t.yaml", "/bin/wcomm", "hosts", {});
  EXPECT_EQ(Argv(mpi.argv.begin(), mpi.argv.begin() + 3), (Argv{"mpirun", "-np", "3"}));
  EXPECT_EQ(::geteuid() == 0, std::find(mpi.argv.begin(), mpi.argv.end(), "--allow-run-as-root") != mpi.argv.end());
}

TEST(SweepPlan, CellsAndOrderAreV01s) {
  std::vector<SweepVariant> v = sweep_variants({"scheduler", "ring", "broadcast", "chunk"});
  ASSERT_EQ(v.size(), 16u);
  std::vector<std::string> order;
  for (std::size_t i : python_shuffle_order(v.size(), 20260827)) order.push_back(v[i].name);
  // V0.1's order for its default seed (v01-collectives-cluster.md 3.3).
  EXPECT_EQ(order, (std::vector<std::string>{"allreduce-block64k", "ring-0-2-1-3", "ring-0-3-1-2", "scheduler-c2",
                                             "scheduler-c1", "allreduce-block256k", "broadcast-root3", "broadcast-root1",
                                             "broadcast-root2", "ring-0-3-2-1", "scheduler-c4", "ring-0-2-3-1",
                                             "ring-0-1-2-3", "allreduce-block128k", "broadcast-root0", "ring-0-1-3-2"}));
  std::vector<SweepVariant> knee = sweep_variants({"p2p-knee"});
  order.clear();
  for (std::size_t i : python_shuffle_order(knee.size(), 20260827)) order.push_back(knee[i].name);
  EXPECT_EQ(order, (std::vector<std::string>{"p2p-byte-rr16k-rate35", "p2p-byte-rr64k-rate40", "p2p-byte-rr64k-rate50",
                                             "p2p-byte-rr64k-rate45", "p2p-byte-rr256k-rate35"}));
  EXPECT_EQ(sweep_variants({"p2p"}).size(), 11u);
  EXPECT_EQ(sweep_variants({"p2p"})[4].comm.at("egress_rate_bytes_per_second"), 1875000);
  try {
    sweep_variants({"ring", "zeta", "alpha"});
    FAIL();
  } catch (const InvalidArgumentError& e) {
    EXPECT_STREQ(e.what(), "unknown experiment suites: alpha, zeta");
  }
}

TEST(SweepPlan, CellConfigReplacesPortRingCommAndBenchmark) {
  YAML::Node base = YAML::Load(four("controller: node-a\nbase_port: 9400\n",
                                    "ring: [0, 1, 2, 3]\nbenchmark: {rounds: 99}\ncomm: {tcp_nodelay: false}\n"));
  SweepVariant v = sweep_variants({"chunk"})[0];
  YAML::Emitter out;
  out << variant_config(base, v, 9816, 5, 2);
  ClusterTopology t = parse_topology(out.c_str(), "cell.yaml");  // a valid topology
  EXPECT_EQ(t.base_port, 9816);
  EXPECT_EQ(t.settings.rounds, 5);
  EXPECT_EQ(t.settings.warmup_rounds, 2);
  EXPECT_EQ(t.settings.collectives, (std::vector<std::string>{"ring_allreduce"}));
  EXPECT_EQ(t.settings.allreduce_block_bytes, 65536);
  EXPECT_TRUE(t.comm.tcp_nodelay);  // comm replaced entirely
  EXPECT_EQ(t.nodes.size(), 4u);
}

TEST(ChildProcess, CapturesOutputLinesAndExitAndStopsOnClosedInput) {
  ChildProcess cat({"sh", "-c", "echo out; echo err1 >&2; echo err2 >&2; cat; exit 7"});
  std::vector<std::string> lines;
  cat.close_stdin();  // cat ends: input closed
  for (int i = 0; i < 500 && !cat.poll_exit(); ++i) {
    for (auto& l : cat.pump()) lines.push_back(l);
    ::usleep(10000);
  }
  for (auto& l : cat.pump()) lines.push_back(l);
  ASSERT_TRUE(cat.exited());
  EXPECT_EQ(cat.exit_code(), 7);
  EXPECT_EQ(cat.describe_exit(), "exit status 7");
  EXPECT_EQ(cat.out(), "out\n");
  EXPECT_EQ(lines, (std::vector<std::string>{"err1", "err2"}));
}

TEST(ChildProcess, SignalReachesTheWholeProcessGroup) {
  ChildProcess sleeper({"sh", "-c", "sleep 30 & wait"});
  sleeper.signal(SIGTERM);
  for (int i = 0; i < 500 && !sleeper.poll_exit(); ++i) {
    sleeper.pump();
    ::usleep(10000);
  }
  ASSERT_TRUE(sleeper.exited());
  EXPECT_EQ(sleeper.describe_exit(), "killed by signal 15");
  EXPECT_THROW(ChildProcess({}), std::exception);
}

}  // namespace
// The comm section is checked by core's parse_comm_config on the topology's own YAML: its
// messages name the line in the topology file (a re-emitted copy of the section, as the check
// was once made, named a line of that copy) and suggest close key names.
TEST(ClusterTopology, ACommSectionErrorNamesItsLineInTheTopologyFile) {
  const std::string yaml = four("controller: node-a\nbase_port: 9400\n",
                                "ring: [0, 1, 2, 3]\nbenchmark: {}\ncomm:\n  tcp_nodelay: true\n  egress_burst_bytes: 9\n");
  const auto line = 1 + std::count(yaml.begin(), yaml.begin() + yaml.find("egress_burst_bytes"), '\n');
  const std::string message = error_of(yaml);
  EXPECT_NE(message.find("comm.egress_burst_bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("(line " + std::to_string(line) + ")"), std::string::npos) << message << "\nwanted line " << line;
  const std::string typo = error_of(four("controller: node-a\nbase_port: 9400\n",
                                         "ring: [0, 1, 2, 3]\nbenchmark: {}\ncomm:\n  max_mesage_bytes: 10\n"));
  EXPECT_NE(typo.find("max_message_bytes"), std::string::npos) << typo;  // the close name it suggests
}

}  // namespace wcomm::cluster
