// `wcomm bench responder|initiator`: the V0.1 benchmark command line over the bench layer.
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "netbench/diagnostics_proc.h"
#include "netbench/fanout.h"
#include "netbench/initiator.h"
#include "netbench/report.h"
#include "netbench/responder.h"
#include "cli/cli_parse.h"
#include "cli/commands.h"
#include "wcomm/comm.h"

namespace wcomm::tools {
namespace {

struct CommonOptions {
  std::string config;
  std::string peer;
  std::string interface;
  std::string output;
  bool quiet = false;
  double operation_timeout = 120.0;
};

void add_common_options(CLI::App& sub, CommonOptions& o) {
  // --config is accepted before or after the sub-command (V0.1 took it before).
  sub.add_option("--config", o.config, "node config (YAML: local, peers, comm)");
  sub.add_option("--peer", o.peer, "node_id of the other side, as listed in the config's peers")->required();
  sub.add_option("--interface", o.interface, "network interface to diagnose (default: the one the route to the peer leaves by)");
  sub.add_option("--output", o.output, "write the JSON report to this file");
  sub.add_flag("--quiet", o.quiet, "no progress lines on stderr");
  // --timeout is V0.1's name for it.
  sub.add_option("--operation-timeout,--timeout", o.operation_timeout, "seconds any one exchange or phase may take")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

void add_initiator_options(CLI::App& sub, bench::BenchSettings& s, std::string& torch_version) {
  sub.add_option("--latency-sizes", s.latency_sizes, "payload sizes of the ping rounds, bytes")
      ->delimiter(',')->capture_default_str();
  sub.add_option("--latency-rounds", s.latency_rounds, "timed pings per size")->capture_default_str();
  sub.add_option("--warmup-rounds", s.warmup_rounds, "untimed pings before each size")->capture_default_str();
  sub.add_option("--throughput-sizes", s.throughput_sizes, "bulk message sizes, bytes")
      ->delimiter(',')->capture_default_str();
  sub.add_option("--throughput-target-bytes", s.throughput_target_bytes, "payload bytes per direction per trial")
      ->capture_default_str();
  sub.add_option("--throughput-trials", s.throughput_trials, "trials per direction and size")->capture_default_str();
  sub.add_option("--directions", s.directions, "throughput phases: upload, download, bidirectional")
      ->delimiter(',')->capture_default_str();
  sub.add_option("--min-throughput-messages", s.min_throughput_messages)->capture_default_str();
  sub.add_option("--max-throughput-messages", s.max_throughput_messages)->capture_default_str();
  sub.add_option("--ping-count", s.ping_count, "ICMP pings each way in the diagnostics")->capture_default_str();
  sub.add_option("--random-seed", s.random_seed)->capture_default_str();
  sub.add_option("--sample-interval", s.sample_interval, "link sampling period, s")->capture_default_str();
  sub.add_option("--tensor-sizes", s.tensor_sizes, "float32 tensor round-trip sizes, bytes (multiples of 4)")
      ->delimiter(',');
  sub.add_option("--tensor-rounds", s.tensor_rounds)->capture_default_str();
  sub.add_option("--load-fractions", s.load_fractions, "latency under load: background load as fractions of the measured capacity")
      ->delimiter(',');
  sub.add_option("--load-directions", s.load_directions)->delimiter(',')->capture_default_str();
  sub.add_option("--load-concurrencies", s.load_concurrencies)->delimiter(',')->capture_default_str();
  sub.add_option("--load-duration", s.load_duration)->capture_default_str();
  sub.add_option("--load-probe-interval", s.load_probe_interval)->capture_default_str();
  sub.add_option("--load-probe-size", s.load_probe_size)->capture_default_str();
  sub.add_option("--load-backgrounds", s.load_backgrounds,
                 "what loads the link: tcp (plain TCP streams beside the Comm, V0.1) and/or tensor (tensors over "
                 "the foreground Comm connection, upload; needs a wcomm responder)")
      ->delimiter(',')->capture_default_str();
  sub.add_option("--load-tensor-bytes", s.load_tensor_bytes, "tensor background: bytes per tensor")
      ->capture_default_str();
  sub.add_option("--torch-version", torch_version,
                 "recorded as tensor.torch_version (python -m wireless_comm.benchmark passes its torch's)");
}

bench::ProgressSink progress_sink(bool quiet) {
  if (quiet) return {};
  return [](const std::string& line) { std::fprintf(stderr, "wcomm bench: %s\n", line.c_str()); };
}

void emit(const nlohmann::json& report, const std::string& output) {
  if (output.empty()) {
    std::cout << report.dump(2) << std::endl;
  } else {
    bench::write_report(report, output);
  }
}

}  // namespace

int run_bench(int argc, char** argv) {
  CLI::App app{"Benchmark the link to another node: start `responder` on one node, then `initiator` on the "
               "other; the initiator's report holds both sides.",
               "wcomm bench"};
  app.fallthrough();
  app.require_subcommand(1);
  CommonOptions common;
  bench::BenchSettings settings;
  std::optional<double> wait_timeout;
  app.add_option("--config", common.config, "node config (YAML: local, peers, comm)");
  CLI::App* responder = app.add_subcommand("responder", "serve one initiator until it stops");
  CLI::App* initiator = app.add_subcommand("initiator", "run the benchmark against a responder");
  add_common_options(*responder, common);
  add_common_options(*initiator, common);
  responder->add_option("--wait-timeout", wait_timeout, "give up when no initiator arrives within this many seconds")
      ->check(CLI::PositiveNumber);
  std::string torch_version;
  add_initiator_options(*initiator, settings, torch_version);
  responder->add_option("--sample-interval", settings.sample_interval, "link sampling period, s")
      ->capture_default_str();
  std::optional<std::uint64_t> chunk_bytes;
  initiator->add_option("--chunk-bytes", chunk_bytes,
                        "override the config's comm.chunk_bytes (0: no chunked frames), e.g. to compare "
                        "head-of-line blocking with chunking on and off");
  // Fan-out fairness: this node sends to several `sink`s at once.
  CLI::App* fanout = app.add_subcommand("fanout", "send to several peers at once; report each one's goodput and "
                                                  "Jain's fairness index (the peers run `wcomm bench sink`)");
  CLI::App* sink = app.add_subcommand("sink", "receive a fan-out from --peer until it ends");
  std::vector<std::string> fanout_peers;
  bench::FanoutOptions fanout_options;
  fanout->add_option("--config", common.config, "node config (YAML: local, peers, comm)");
  fanout->add_option("--peers", fanout_peers, "node_ids to send to, as listed in the config's peers")
      ->delimiter(',')->required();
  fanout->add_option("--message-bytes", fanout_options.message_bytes, "bytes per message")->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 30));
  fanout->add_option("--duration", fanout_options.duration_s, "seconds of sending")->capture_default_str()
      ->check(CLI::PositiveNumber);
  fanout->add_option("--in-flight", fanout_options.in_flight, "messages in flight per peer")->capture_default_str()
      ->check(CLI::Range(1, 64));
  fanout->add_option("--output", common.output, "write the JSON report to this file");
  fanout->add_flag("--quiet", common.quiet, "no progress lines on stderr");
  sink->add_option("--config", common.config, "node config (YAML: local, peers, comm)");
  sink->add_option("--peer", common.peer, "node_id of the sending node")->required();
  sink->add_flag("--quiet", common.quiet, "no summary line on stderr");
  sink->add_option("--wait-timeout", wait_timeout, "give up when nothing arrives within this many seconds")
      ->check(CLI::PositiveNumber);

  if (auto exit_code = parse_command_line(app, argc, argv)) return *exit_code;
  if (common.config.empty()) {
    std::fprintf(stderr, "wcomm bench: --config FILE is required (the node's YAML config)\n");
    return 2;
  }
  settings.operation_timeout = common.operation_timeout;
  if (fanout->parsed() || sink->parsed()) {
    try {
      NodeConfig config = load_node_config(common.config);
      std::shared_ptr<Comm> comm = Comm::create(config);
      if (sink->parsed()) {
        const Peer& source = comm->peer(common.peer);
        const std::uint64_t bytes =
            bench::run_sink(*comm, source, Seconds(wait_timeout.value_or(common.operation_timeout)),
                            Seconds(common.operation_timeout));
        if (!common.quiet) std::fprintf(stderr, "wcomm bench sink: %llu bytes from %s\n",
                                        static_cast<unsigned long long>(bytes), source.node_id.c_str());
        comm->close();
        return 0;
      }
      std::vector<Peer> peers;
      for (const auto& id : fanout_peers) peers.push_back(comm->peer(id));
      fanout_options.timeout = Seconds(common.operation_timeout);
      nlohmann::json report = bench::run_fanout(*comm, peers, fanout_options);
      report["egress_quantum_bytes"] = config.comm.egress_quantum_bytes;
      report["egress_rate_bytes_per_second"] = config.comm.egress_rate_bytes_per_second;
      report["egress_max_bulk_flows"] = config.comm.egress_max_bulk_flows;
      report["chunk_bytes"] = config.comm.chunk_bytes;
      comm->close();
      emit(report, common.output);
      return 0;
    } catch (const std::out_of_range&) {
      std::fprintf(stderr, "wcomm bench: a peer named is not among the peers of %s\n", common.config.c_str());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "wcomm bench %s: %s\n", fanout->parsed() ? "fanout" : "sink", e.what());
      return 1;
    }
  }
  if (!common.interface.empty() && !bench::network_interface_exists(common.interface)) {
    std::fprintf(stderr,
                 "wcomm bench: --interface '%s': this host has no network interface of that name (`ip link` lists "
                 "them)\n",
                 common.interface.c_str());
    return 2;
  }
  try {
    settings.validate();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "wcomm bench: %s\n", e.what());
    return 2;
  }

  const bench::ProgressSink progress = progress_sink(common.quiet);
  const char* role = responder->parsed() ? "responder" : "initiator";
  try {
    NodeConfig config = load_node_config(common.config);
    if (chunk_bytes) config.comm.chunk_bytes = *chunk_bytes;
    settings.comm_chunk_bytes = config.comm.chunk_bytes;
    std::shared_ptr<Comm> comm = Comm::create(config);
    const Peer* peer = nullptr;
    try {
      peer = &comm->peer(common.peer);
    } catch (const std::out_of_range&) {
      std::fprintf(stderr, "wcomm bench: --peer '%s' is not among the peers of %s\n", common.peer.c_str(),
                   common.config.c_str());
      return 2;
    }
    nlohmann::json report;
    if (responder->parsed()) {
      if (progress)
        progress("responder " + config.local.node_id + " listening on " +
                 (config.local.addresses.empty() ? config.bind_host + ":" + std::to_string(comm->port())
                                                 : comm->local().endpoints_text()));
      bench::ResponderOptions options;
      if (wait_timeout) options.first_request_timeout = Seconds(*wait_timeout);
      options.operation_timeout = Seconds(common.operation_timeout);
      options.interface = common.interface;
      options.sample_interval = settings.sample_interval;
      options.progress = progress;
      report = bench::run_responder(*comm, *peer, options);
    } else {
      bench::InitiatorOptions options{settings, common.interface, progress, torch_version};
      report = bench::run_initiator(*comm, *peer, options);
    }
    comm->close();
    if (responder->parsed() && common.output.empty()) return 0;  // its report went to the initiator
    emit(report, common.output);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "wcomm bench %s: %s\n", role, e.what());
    return 1;
  }
}

}  // namespace wcomm::tools
