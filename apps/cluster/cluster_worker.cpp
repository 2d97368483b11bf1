// `wcomm cluster worker` and `wcomm cluster rank`: run this process's ranks of a cluster job
// (the per-rank loop of `wcomm multirank`) and gather every node's results at rank 0.
#include "cluster/cluster_worker.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "netbench/clock.h"
#include "netbench/diagnostics.h"
#include "netbench/diagnostics_proc.h"
#include "netbench/json_value.h"
#include "netbench/link_sampler.h"
#include "multirank/multirank_rank.h"
#include "multirank/multirank_report.h"
#include "wcomm/collectives/group.h"
#include "wcomm/errors.h"

namespace wcomm::tools {
namespace {

constexpr const char* kClusterMode = "physical_multi_node_wifi";
using Clock = std::chrono::steady_clock;

// Over SSH the worker's stdin is the session's channel: when the launcher stops (or loses) the
// session, stdin ends and the worker must not outlive it. A terminal or /dev/null is not
// watched, so a worker started by hand keeps running.
void stop_when_stdin_closes(const std::string& who) {
  struct stat st {};
  if (::fstat(0, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return;
  std::thread([who] {
    char buf[256];
    while (true) {
      ssize_t n = ::read(0, buf, sizeof buf);
      if (n > 0 || (n < 0 && errno == EINTR)) continue;
      std::fprintf(stderr, "%s: stopped: the launcher closed this worker's input\n", who.c_str());
      std::fflush(stderr);
      std::_Exit(cluster::kExitStoppedByLauncher);
    }
  }).detach();
}

// Failures caused by another rank's loss say so (exit 3), so the launcher can tell the node
// that failed from those that stopped because of it.
int report_failure(const std::string& who, const std::exception& e) {
  const auto* comm_error = dynamic_cast<const CommError*>(&e);
  const bool peer = comm_error && (comm_error->code() == ErrorCode::kConnectionClosed ||
                                   comm_error->code() == ErrorCode::kConnectionFailed ||
                                   comm_error->code() == ErrorCode::kPeerRestarted);
  std::fprintf(stderr, "%s: %s: %s\n", who.c_str(), peer ? "stopped, a peer failed" : "error", e.what());
  return peer ? cluster::kExitPeerFailed : 1;
}

struct LocalRun {
  nlohmann::json before, after, samples;
  std::optional<bench::LinkSampler> sampler;
  bench::EnvironmentOptions env;

  void start(const std::string& interface, const std::string& peer_host, double interval) {
    env = bench::EnvironmentOptions{.interface = interface, .peer_host = peer_host, .commands = {}};
    before = bench::capture_environment(env);
    if (!interface.empty()) {
      sampler.emplace(bench::LinkSamplerOptions{.interface = interface, .interval_s = interval, .commands = {}});
      sampler->start();
    }
  }
  nlohmann::json finish(const std::string& node_id, const std::vector<int>& ranks) {
    after = bench::capture_environment(env);
    samples = sampler ? sampler->stop() : nlohmann::json::array();
    nlohmann::json side = side_report(ranks, before, after, samples);
    side["node_id"] = node_id;
    return side;
  }
};

// Runs `ranks` concurrently, one thread each; rethrows the first failure.
std::vector<nlohmann::json> run_ranks(const std::vector<int>& ranks, int world,
                                      const std::vector<std::shared_ptr<Comm>>& comms,
                                      const std::vector<Group*>& groups, const MultirankSettings& settings,
                                      const std::vector<int>& ring, bool progress) {
  std::vector<nlohmann::json> results(ranks.size());
  std::vector<std::exception_ptr> errors(ranks.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        RankContext ctx = rank_context(ranks[i], world, comms[i], groups[i], settings);
        ctx.ring = ring;
        ctx.progress = progress && i == 0;
        results[i] = run_rank(ctx);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return results;
}

nlohmann::json sorted_by_rank(nlohmann::json results) {
  std::sort(results.begin(), results.end(),
            [](const nlohmann::json& a, const nlohmann::json& b) { return a["rank"].get<int>() < b["rank"].get<int>(); });
  return results;
}

nlohmann::json cluster_report(const cluster::ClusterTopology& t, const std::string& started_at,
                              const nlohmann::json& nodes, const nlohmann::json& rank_results) {
  nlohmann::json sorted = sorted_by_rank(rank_results);
  return {{"schema_version", 1},
          {"started_at", started_at},
          {"finished_at", bench::utc_timestamp_now()},
          {"mode", kClusterMode},
          {"physical_node_count", nodes.size()},
          {"world_size", t.world()},
          {"ring", t.ring},
          {"settings", t.settings_json},
          {"nodes", nodes},
          {"rank_results", sorted},
          {"collective_summary", collective_summary(sorted)}};
}

void print_json(const nlohmann::json& j) { std::cout << j.dump(2, ' ', true) << std::endl; }

bool is_op(const Value& v, const char* op) {
  const Dict* d = v.get_if<Dict>();
  const Value* o = d ? d->find("op") : nullptr;
  return o && *o == Value(op);
}

}  // namespace

int run_cluster_worker(const cluster::ClusterTopology& t, const std::string& node_id, double sample_interval,
                       bool quiet) {
  const std::string who = "cluster worker " + node_id;
  stop_when_stdin_closes(who);
  try {
    const cluster::ClusterNode& me = t.node(node_id);
    const int world = t.world();
    const bool controller = node_id == t.controller;
    const MultirankSettings& s = t.settings;
    const Seconds timeout(s.timeout);
    s.validate_for_world(world);
    if (!bench::network_interface_exists(me.interface)) throw InvalidArgumentError("network interface '" + me.interface + "' does not exist");

    // V0.1's directory: rank r at its node's host, port base_port + r.
    std::vector<Peer> directory;
    for (int r = 0; r < world; ++r)
      directory.push_back(Peer{.node_id = "rank-" + std::to_string(r), .host = t.node_of_rank(r).host,
                               .port = static_cast<std::uint16_t>(t.base_port + r)});
    std::vector<std::shared_ptr<Comm>> comms;
    for (int r : me.ranks) {
      CommSpec spec;
      spec.local = directory[r];
      for (int k = 0; k < world; ++k)
        if (k != r) spec.peers.push_back(directory[k]);
      spec.bind_host = me.bind_host;
      spec.comm = t.comm;
      comms.push_back(Comm::create(spec));
    }
    std::fprintf(stderr, "%s: ranks %s %s%d)\n", who.c_str(), nlohmann::json(me.ranks).dump().c_str(), cluster::kListeningMarker,
                 static_cast<int>(::getpid()));
    std::fflush(stderr);

    std::string remote_host;
    for (const auto& n : t.nodes)
      if (n.node_id != node_id) {
        remote_host = n.host;
        break;
      }
    LocalRun local;
    local.start(me.interface, remote_host, sample_interval);

    // ready / go between each node's coordinator rank and rank 0.
    const int coordinator = me.coordinator_rank();
    const std::size_t ci = static_cast<std::size_t>(std::find(me.ranks.begin(), me.ranks.end(), coordinator) - me.ranks.begin());
    std::shared_ptr<Comm> coord = comms[ci];
    if (controller) {
      std::vector<std::pair<const cluster::ClusterNode*, Future<Received>>> readies;
      for (const auto& n : t.nodes)
        if (n.node_id != node_id)
          readies.emplace_back(&n, coord->recv(coord->peer("rank-" + std::to_string(n.coordinator_rank())),
                                               {.tag = kControlTag, .timeout = timeout}));
      for (auto& [n, f] : readies) {
        Received got = f.get();
        if (!(got.value == Value(Dict{{"op", "ready"}, {"node_id", n->node_id}})) || !got.piggypayload.is_none())
          throw ProtocolError("node '" + n->node_id + "' sent an invalid ready message");
      }
      for (const auto& n : t.nodes)
        if (n.node_id != node_id)
          coord->send(Dict{{"op", "go"}}, coord->peer("rank-" + std::to_string(n.coordinator_rank())), {},
                      {.tag = kControlTag, .timeout = timeout}).get();
    } else {
      const Peer& zero = coord->peer("rank-0");
      const auto deadline = Clock::now() + std::chrono::duration<double>(s.timeout);
      while (true) {
        const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
        if (left <= 0) throw OperationTimeoutError("timed out connecting to cluster controller");
        try {
          coord->send(Dict{{"op", "ready"}, {"node_id", node_id}}, zero, {},
                      {.tag = kControlTag, .timeout = Seconds(std::min(5.0, left))}).get();
          break;
        } catch (const CommError&) {
          std::this_thread::sleep_for(std::chrono::duration<double>(std::min(0.2, std::max(0.0, left))));
        }
      }
      Received go = coord->recv(zero, {.tag = kControlTag, .timeout = timeout}).get();
      if (!(go.value == Value(Dict{{"op", "go"}})) || !go.piggypayload.is_none())
        throw ProtocolError("controller sent an invalid go message");
    }

    std::vector<std::unique_ptr<Group>> owned;
    std::vector<Group*> groups(me.ranks.size(), nullptr);
    if (s.algorithm != "v01")
      for (std::size_t i = 0; i < me.ranks.size(); ++i) {
        owned.push_back(std::make_unique<Group>(comms[i], me.ranks[i], world, GroupOptions{.timeout = timeout}));
        groups[i] = owned.back().get();
      }
    const std::string started_at = bench::utc_timestamp_now();
    std::vector<nlohmann::json> results = run_ranks(me.ranks, world, comms, groups, s, t.ring, !quiet);
    nlohmann::json side = local.finish(node_id, me.ranks);
    nlohmann::json rank_results(results);

    if (!controller) {
      coord->send(Dict{{"op", "results"}, {"node_id", node_id}, {"rank_results", bench::json_to_value(rank_results)},
                       {"side", bench::json_to_value(side)}},
                  coord->peer("rank-0"), {}, {.tag = kControlTag, .timeout = timeout, .ack = true}).get();
      print_json({{"schema_version", 1}, {"node_id", node_id}, {"side", side}, {"rank_results", rank_results}});
    } else {
      nlohmann::json nodes = {{node_id, side}};
      for (const auto& n : t.nodes) {
        if (n.node_id == node_id) continue;
        const Peer& from = coord->peer("rank-" + std::to_string(n.coordinator_rank()));
        Received got = coord->recv(from, {.tag = kControlTag, .timeout = timeout}).get();
        // A retried ready whose first attempt also arrived is still queued ahead of the results
        // (V0.1 then fails; v01-collectives-cluster.md 2.7): skip it.
        while (got.value == Value(Dict{{"op", "ready"}, {"node_id", n.node_id}}))
          got = coord->recv(from, {.tag = kControlTag, .timeout = timeout}).get();
        nlohmann::json remote = bench::value_to_json(got.value);
        if (!is_op(got.value, "results") || remote.value("node_id", "") != n.node_id || !got.piggypayload.is_none())
          throw ProtocolError("node '" + n.node_id + "' sent invalid results");
        for (auto& r : remote["rank_results"]) rank_results.push_back(r);
        nodes[n.node_id] = remote["side"];
      }
      print_json(cluster_report(t, started_at, nodes, rank_results));
    }
    for (auto& g : owned) g->close();
    for (auto& c : comms) c->close();
    return 0;
  } catch (const std::exception& e) {
    return report_failure(who, e);
  }
}

int run_cluster_rank(const cluster::ClusterTopology& t, double sample_interval, bool quiet) {
  std::string who = "cluster rank";
  try {
    // The node a rank runs on: the launcher's name for it, else the host name.
    const std::string node = [] {
      for (const char* var : {"SLURMD_NODENAME", "OMPI_COMM_WORLD_NODE_NAME"})
        if (const char* v = std::getenv(var); v && *v) return std::string(v);
      char host[256] = {};
      ::gethostname(host, sizeof host - 1);
      return std::string(host);
    }();
    RendezvousSpec spec = rendezvous_from_env();
    who = "cluster rank " + std::to_string(spec.rank) + " on " + node;
    const int world = t.world();
    if (spec.world != world)
      throw InvalidArgumentError("the launcher started " + std::to_string(spec.world) + " ranks (" + spec.source +
                                 ") but the topology " + t.path + " has " + std::to_string(world));
    const MultirankSettings& s = t.settings;
    s.validate_for_world(world);
    spec.comm = t.comm;
    spec.timeout = std::chrono::duration<double>(s.timeout);
    const Seconds timeout(s.timeout);
    // One rank per node captures the node's diagnostics: the launcher's local rank 0.
    bool node_leader = true;
    for (const char* var : {"SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"})
      if (const char* v = std::getenv(var); v && *v) {
        node_leader = std::string(v) == "0";
        break;
      }

    auto group = Group::create(spec, GroupOptions{.timeout = timeout});
    std::shared_ptr<Comm> comm = group->comm();
    std::fprintf(stderr, "%s: %s%d)\n", who.c_str(), cluster::kListeningMarker, static_cast<int>(::getpid()));
    const int rank = spec.rank;
    const std::string toward = comm->peer("rank-" + std::to_string(rank == 0 ? 1 % world : 0)).host;
    LocalRun local;
    if (node_leader) local.start(bench::interface_for_peer(toward), toward, sample_interval);

    std::vector<Group*> groups = {s.algorithm != "v01" ? group.get() : nullptr};
    group->barrier();  // every rank starts its loop together, as V0.1's go does
    const std::string started_at = bench::utc_timestamp_now();
    nlohmann::json result = run_ranks({rank}, world, {comm}, groups, s, t.ring, !quiet && rank == 0)[0];
    nlohmann::json side = node_leader ? local.finish(node, {rank}) : nlohmann::json(nullptr);

    if (rank != 0) {
      // Acknowledged: this process exits right after, and its close() waits at most 2 s for
      // rank 0 to read what it was sent; only an ack says rank 0 has it. (Before close()
      // lingered, rank 0 waited out its timeout for rank 2's results on the emulated Wi-Fi
      // cell: the kernel had reset the connection over unread bytes; docs/wifi.md.)
      comm->send(Dict{{"op", "results"}, {"node_id", node}, {"rank_results", bench::json_to_value(nlohmann::json::array({result}))},
                      {"side", bench::json_to_value(side)}},
                 comm->peer("rank-0"), {}, {.tag = kControlTag, .timeout = timeout, .ack = true}).get();
    } else {
      nlohmann::json rank_results = nlohmann::json::array({result});
      nlohmann::json nodes = nlohmann::json::object();
      std::map<std::string, std::vector<int>> ranks_of;
      ranks_of[node].push_back(0);
      if (!side.is_null()) nodes[node] = side;
      for (int k = 1; k < world; ++k) {
        Received got = comm->recv(comm->peer("rank-" + std::to_string(k)), {.tag = kControlTag, .timeout = timeout}).get();
        nlohmann::json remote = bench::value_to_json(got.value);
        if (!is_op(got.value, "results")) throw ProtocolError("rank " + std::to_string(k) + " sent invalid results");
        const std::string from = remote.value("node_id", "rank-" + std::to_string(k));
        for (auto& r : remote["rank_results"]) rank_results.push_back(r);
        ranks_of[from].push_back(k);
        if (!remote["side"].is_null()) nodes[from] = remote["side"];
      }
      for (auto& [name, ranks] : ranks_of) {
        if (!nodes.contains(name)) nodes[name] = {{"node_id", name}};
        nodes[name]["local_ranks"] = ranks;  // every rank that ran there, not only the leader's
      }
      nlohmann::json report = cluster_report(t, started_at, nodes, rank_results);
      report["launcher"] = spec.source;
      print_json(report);
    }
    group->close();
    return 0;
  } catch (const std::exception& e) {
    return report_failure(who, e);
  }
}

}  // namespace wcomm::tools
