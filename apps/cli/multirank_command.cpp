// `wcomm multirank`: V0.1's two-host collectives tool (responder / initiator, ranks alternating
// between hosts, start / ready / results on the control tag) plus a local mode that runs every
// rank on this host (--local-ranks N). See docs/collectives.md.
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "netbench/clock.h"
#include "netbench/diagnostics.h"
#include "netbench/json_value.h"
#include "netbench/link_sampler.h"
#include "netbench/report.h"
#include "cli/cli_parse.h"
#include "cli/commands.h"
#include "multirank/multirank_rank.h"
#include "multirank/multirank_report.h"
#include "multirank/multirank_settings.h"

namespace wcomm::tools {
namespace {

constexpr const char* kTwoHostMode = "two_physical_stations_with_alternating_logical_ranks";
constexpr const char* kLocalMode = "local_ranks_on_one_host";
constexpr const char* kLimitations =
    "Models multi-connection contention and collective synchronization; does not model independent radios, "
    "hidden terminals, or AP airtime fairness among more than two stations.";

struct GlobalOptions {
  std::string local_host;
  std::string remote_host;
  int base_port = 9400;
  int ranks_per_host = 2;
  std::string bind_host = "0.0.0.0";
  std::string interface;
  double sample_interval = 1.0;
  std::string output;
  int local_ranks = 0;
  bool quiet = false;
};

enum class Role { kInitiator, kResponder, kLocal };

// V0.1's initiator waits for the responder's rank 1 to listen: plain connects, then close.
void probe(const std::string& host, int port, double timeout) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1)
    throw InvalidArgumentError("--remote-host '" + host + "' is not an IPv4 address");
  while (true) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::close(fd);
    if (rc == 0) return;
    if (std::chrono::steady_clock::now() >= deadline)
      throw OperationTimeoutError("timed out waiting for " + host + ":" + std::to_string(port));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // V0.1's probe period
  }
}

int run(const GlobalOptions& g, Role role, MultirankSettings settings) {
  const bool local = role == Role::kLocal;
  const int world = local ? g.local_ranks : 2 * g.ranks_per_host;
  if (!local && g.ranks_per_host <= 0) throw InvalidArgumentError("ranks per host must be positive");
  if (local && g.local_ranks <= 0) throw InvalidArgumentError("--local-ranks must be positive");
  if (g.base_port <= 0 || g.base_port + world - 1 > 65535) throw InvalidArgumentError("rank port range is invalid");
  const std::string local_host = g.local_host.empty() ? "127.0.0.1" : g.local_host;
  const std::string remote_host = local ? local_host : g.remote_host;
  std::vector<int> mine;
  for (int r = 0; r < world; ++r)
    if (local || (r % 2 == 0) == (role == Role::kInitiator)) mine.push_back(r);
  if (role != Role::kResponder) {
    settings.validate();
    if (local) settings.validate_for_world(world);
  }

  // One Comm per local rank, every other rank a peer (V0.1's directory).
  std::vector<Peer> directory;
  for (int r = 0; r < world; ++r) {
    bool here = local || std::find(mine.begin(), mine.end(), r) != mine.end();
    directory.push_back(Peer{.node_id = "rank-" + std::to_string(r), .host = here ? local_host : remote_host,
                             .port = static_cast<std::uint16_t>(g.base_port + r)});
  }
  std::vector<std::shared_ptr<Comm>> comms(world);
  for (int r : mine) {
    CommSpec spec;
    spec.local = directory[r];
    for (int k = 0; k < world; ++k)
      if (k != r) spec.peers.push_back(directory[k]);
    spec.bind_host = local && g.bind_host == "0.0.0.0" ? local_host : g.bind_host;
    comms[r] = Comm::create(spec);
  }

  std::string interface = g.interface.empty() ? bench::interface_for_peer(remote_host) : g.interface;
  bench::EnvironmentOptions env{.interface = interface, .peer_host = remote_host, .commands = {}};
  nlohmann::json before = bench::capture_environment(env);
  std::optional<bench::LinkSampler> sampler;
  if (!interface.empty()) {
    sampler.emplace(bench::LinkSamplerOptions{.interface = interface, .interval_s = g.sample_interval, .commands = {}});
    sampler->start();
  }
  auto say = [&](const std::string& line) { if (!g.quiet) std::fprintf(stderr, "multirank: %s\n", line.c_str()); };

  // The control exchange between rank 0 (initiator) and rank 1 (responder).
  if (role == Role::kInitiator) {
    say("waiting for the responder at " + remote_host + ":" + std::to_string(g.base_port + 1));
    probe(remote_host, g.base_port + 1, settings.timeout);
    const Peer& one = comms[0]->peer("rank-1");
    comms[0]->send(Dict{{"op", "start"}, {"settings", settings.to_value()}}, one, {},
                   {.tag = kControlTag, .timeout = Seconds(settings.timeout)}).get();
    Received ready = comms[0]->recv(one, {.tag = kControlTag, .timeout = Seconds(settings.timeout)}).get();
    if (settings.agree_with(ready.value)) say("the responder is V0.1's: running V0.1's ring allreduce with it");
  } else if (role == Role::kResponder) {
    say("waiting for the initiator's start");
    const Peer& zero = comms[1]->peer("rank-0");
    Received start = comms[1]->recv(zero, {.tag = kControlTag, .timeout = Seconds(3600)}).get();
    const Dict* d = start.value.get_if<Dict>();
    const Value* op = d ? d->find("op") : nullptr;
    const Value* s = d ? d->find("settings") : nullptr;
    if (!op || !(*op == Value("start")) || !s) throw ProtocolError("invalid multi-rank start message");
    settings = MultirankSettings::from_value(*s);
    comms[1]->send(settings.ready_message(), zero, {}, {.tag = kControlTag, .timeout = Seconds(settings.timeout)}).get();
  }
  if (!local) settings.validate_for_world(world);

  // Every local rank runs its loop on a thread of its own.
  std::vector<std::unique_ptr<Group>> groups(world);
  if (settings.algorithm != "v01")
    for (int r : mine) groups[r] = std::make_unique<Group>(comms[r], r, world, GroupOptions{.timeout = Seconds(settings.timeout)});
  std::string started_at = bench::utc_timestamp_now();
  say("running " + std::to_string(world) + " ranks (" + std::to_string(mine.size()) + " here)");
  std::vector<nlohmann::json> results(world);
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int r : mine)
    threads.emplace_back([&, r] {
      try {
        RankContext ctx = rank_context(r, world, comms[r], groups[r].get(), settings);
        ctx.progress = !g.quiet && r == mine.front();
        results[r] = run_rank(ctx);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (int r : mine)
    if (errors[r]) std::rethrow_exception(errors[r]);
  nlohmann::json after = bench::capture_environment(env);
  nlohmann::json samples = sampler ? sampler->stop() : nlohmann::json::array();
  nlohmann::json side = side_report(mine, before, after, samples);
  nlohmann::json rank_results = nlohmann::json::array();
  for (int r : mine) rank_results.push_back(results[r]);

  nlohmann::json report = {{"schema_version", 1}, {"started_at", started_at}, {"world_size", world},
                           {"settings", settings.to_json()}, {"side", side}};
  if (role == Role::kResponder) {
    comms[1]->send(Dict{{"op", "results"}, {"rank_results", bench::json_to_value(rank_results)},
                        {"side", bench::json_to_value(side)}},
                   comms[1]->peer("rank-0"), {}, {.tag = kControlTag, .timeout = Seconds(settings.timeout)}).get();
    report["mode"] = kTwoHostMode;
    report["limitations"] = kLimitations;
    report["rank_results"] = rank_results;
  } else {
    if (role == Role::kInitiator) {
      Received got = comms[0]->recv(comms[0]->peer("rank-1"), {.tag = kControlTag, .timeout = Seconds(settings.timeout)}).get();
      nlohmann::json remote = bench::value_to_json(got.value);
      if (!remote.is_object() || remote.value("op", "") != "results") throw ProtocolError("invalid remote multi-rank results");
      for (auto& r : remote["rank_results"]) rank_results.push_back(r);
      report["remote_side"] = remote["side"];
      report["mode"] = kTwoHostMode;
      report["limitations"] = kLimitations;
    } else {
      report["mode"] = kLocalMode;
    }
    std::sort(rank_results.begin(), rank_results.end(),
              [](const nlohmann::json& a, const nlohmann::json& b) { return a["rank"].get<int>() < b["rank"].get<int>(); });
    report["rank_results"] = rank_results;
    report["collective_summary"] = collective_summary(rank_results);
  }
  report["finished_at"] = bench::utc_timestamp_now();
  for (auto& gr : groups)
    if (gr) gr->close();
  for (auto& c : comms)
    if (c) c->close();
  if (g.output.empty()) {
    std::cout << report.dump(2, ' ', true) << std::endl;
  } else {
    bench::write_report(report, g.output);
    say("wrote multirank report to " + g.output);
  }
  return 0;
}

}  // namespace

int run_multirank(int argc, char** argv) {
  CLI::App app{"Collectives among ranks on two hosts (V0.1's multirank), or on this host with --local-ranks"};
  app.name("wcomm multirank");
  GlobalOptions g;
  MultirankSettings s;
  app.add_option("--local-host", g.local_host, "address this host's ranks are advertised at (default with --local-ranks: 127.0.0.1)");
  app.add_option("--remote-host", g.remote_host, "address of the other host's ranks");
  app.add_option("--base-port", g.base_port, "rank r listens on base-port + r")->capture_default_str();
  app.add_option("--ranks-per-host", g.ranks_per_host, "ranks on each host (world = 2 x this)")->capture_default_str();
  app.add_option("--bind-host", g.bind_host, "listen address of every local rank")->capture_default_str();
  app.add_option("--interface", g.interface, "network interface for diagnostics (default: the route to --remote-host)");
  app.add_option("--sample-interval", g.sample_interval, "seconds between link samples")->capture_default_str();
  app.add_option("--output", g.output, "write the JSON report there (default: stdout)");
  app.add_option("--local-ranks", g.local_ranks, "wcomm: run N ranks on this host, no responder (then `initiator` is optional)");
  app.add_flag("--quiet", g.quiet, "no progress lines on stderr");
  CLI::App* responder = app.add_subcommand("responder", "own the odd ranks; settings come from the initiator");
  CLI::App* initiator = app.add_subcommand("initiator", "own the even ranks and drive the run");
  initiator->add_option("--payload-sizes", s.payload_sizes, "payload sizes, bytes")->delimiter(',')->capture_default_str();
  initiator->add_option("--rounds", s.rounds, "timed iterations per collective and size")->capture_default_str();
  initiator->add_option("--warmup-rounds", s.warmup_rounds, "untimed iterations first")->capture_default_str();
  initiator->add_option("--collectives", s.collectives, "barrier, broadcast, allgather, ring_allreduce")->delimiter(',')->capture_default_str();
  initiator->add_option("--timeout", s.timeout, "seconds any send or receive may take")->capture_default_str();
  initiator->add_option("--broadcast-root", s.broadcast_root, "the broadcast's root rank")->capture_default_str();
  initiator->add_option("--ring-exchange-concurrency", s.ring_exchange_concurrency, "ring_exchange senders per phase");
  initiator->add_option("--allreduce-block-bytes", s.allreduce_block_bytes, "ring_allreduce block size (v01 algorithm)");
  initiator->add_option("--reduce", s.reduce, "wcomm: ring_allreduce's reduction (sum, prod, min, max, xor, and, or)")->capture_default_str();
  initiator->add_option("--dtype", s.dtype, "wcomm: element type of the reduction")->capture_default_str();
  initiator->add_option("--algorithm", s.algorithm,
                        "wcomm: Group's allreduce (auto, ring, recursive_doubling) or v01 (V0.1's ring and tags; taken by itself with a V0.1 responder)")
      ->capture_default_str();
  app.require_subcommand(0, 1);
  if (auto code = parse_command_line(app, argc, argv)) return *code;
  Role role;
  if (g.local_ranks > 0) {
    if (responder->parsed()) {
      std::fprintf(stderr, "wcomm multirank: --local-ranks runs every rank here: it takes no responder\n");
      return 2;
    }
    role = Role::kLocal;
  } else if (responder->parsed() || initiator->parsed()) {
    role = responder->parsed() ? Role::kResponder : Role::kInitiator;
    if (g.local_host.empty() || g.remote_host.empty()) {
      std::fprintf(stderr, "wcomm multirank: --local-host and --remote-host are required (or --local-ranks N)\n");
      return 2;
    }
  } else {
    std::fprintf(stderr, "wcomm multirank: give a subcommand (responder or initiator), or --local-ranks N\n%s",
                 app.help().c_str());
    return 2;
  }
  try {
    return run(g, role, s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wcomm multirank: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace wcomm::tools
