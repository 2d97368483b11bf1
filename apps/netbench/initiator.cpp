// The initiator side of the benchmark control protocol (docs/wire-format.md) and its report.
#include "netbench/initiator.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "netbench/bulk.h"
#include "netbench/clock.h"
#include "netbench/diagnostics.h"
#include "netbench/diagnostics_ping.h"
#include "netbench/json_value.h"
#include "netbench/link_sampler.h"
#include "netbench/load_phase.h"
#include "netbench/phase_progress.h"
#include "netbench/process_usage.h"
#include "netbench/protocol.h"
#include "netbench/report.h"
#include "netbench/stats.h"
#include "netbench/tensor_phase.h"
#include "netbench/throughput.h"

namespace wcomm::bench {
namespace {

std::string format(const char* fmt, auto... args) {
  char line[512];
  std::snprintf(line, sizeof line, fmt, args...);
  return line;
}

class Initiator {
 public:
  Initiator(Comm& comm, const Peer& responder, const InitiatorOptions& options)
      : options_(options),
        settings_(options.settings),
        control_(comm, responder, Seconds(options.settings.operation_timeout)) {}

  nlohmann::json run();

 private:
  void say(const std::string& line) const {
    if (options_.progress) options_.progress(line);
  }
  double hello();
  bool load_phase() const;
  Dict diagnostics();
  nlohmann::json latency(std::uint64_t payload_bytes);
  double ping_ms(const Bytes& payload);
  ThroughputTrial trial(const std::string& direction, std::uint64_t size, std::uint64_t count);
  nlohmann::json stop();

  const InitiatorOptions& options_;
  const BenchSettings& settings_;
  ControlChannel control_;
  ZeroPayloads zeros_;
  std::int64_t next_sequence_ = 0;
};

// The first exchange also pays for the dial and the COMM handshake: V0.1 reports it as the
// first-connection cost.
double Initiator::hello() {
  const auto start = BenchClock::now();
  auto sent = control_.post(Dict{{"op", "hello"},
                                 {"protocol_version", kBenchProtocolVersion},
                                 {"ping_count", settings_.ping_count},
                                 {"latency_under_load", load_phase()}});
  // This send dials the responder. When the dial fails (nobody listens there), say so as soon
  // as the core gives up, rather than waiting operation_timeout for a reply that cannot come.
  if (Result<SendResult>& result = sent.wait(); !result.ok()) {
    const Peer& peer = control_.peer();
    if (result.error().code != ErrorCode::kConnectionFailed) throw_error(result.error());
    throw_error({ErrorCode::kConnectionFailed,
                 "no benchmark responder reachable at " + peer.endpoints_text() + " ('" + peer.node_id +
                     "'): " + result.error().message + ". Start the responder there first (wcomm " +
                     "bench responder --peer " + control_.comm().local().node_id + ", or V0.1's), then the initiator."});
  }
  Dict reply = control_.expect("hello");
  const auto end = BenchClock::now();
  if (int_field(reply, "protocol_version") != kBenchProtocolVersion)
    throw BenchProtocolError("benchmark protocol: the responder speaks protocol_version " +
                             std::to_string(int_field(reply, "protocol_version")) + ", this initiator 1");
  return seconds_between(start, end) * 1e3;
}

// The responder's environment at the handshake and its ICMP ping to this node.
Dict Initiator::diagnostics() {
  control_.send(Dict{{"op", "diagnostics"}, {"ping_count", settings_.ping_count}});
  return control_.expect("diagnostics");
}

// A patterned (not zero) payload, so that an echo that is not the bytes sent is caught.
Bytes patterned_payload(std::uint64_t size) {
  Buffer buffer = Buffer::allocate(size);
  for (std::uint64_t i = 0; i < size; ++i) buffer.data()[i] = static_cast<std::uint8_t>(i * 131 + 7);
  return Bytes(std::move(buffer));
}

double Initiator::ping_ms(const Bytes& payload) {
  const std::int64_t sequence = next_sequence_++;
  const auto start = BenchClock::now();
  auto sent = control_.post(Dict{{"op", "ping"}, {"sequence", sequence}, {"payload", payload}});
  Dict pong = control_.expect("pong");
  const auto end = BenchClock::now();
  sent.get();
  // Checked after the clock stopped: the check is not part of the round trip.
  if (int_field(pong, "sequence") != sequence)
    throw BenchProtocolError("benchmark protocol: pong for sequence " + std::to_string(int_field(pong, "sequence")) +
                             ", expected " + std::to_string(sequence));
  const Bytes& echo = bytes_field(pong, "payload");
  if (echo.size() != payload.size() ||
      (payload.size() > 0 && std::memcmp(echo.buffer.data(), payload.buffer.data(), payload.size()) != 0))
    throw BenchProtocolError("benchmark protocol: the pong's payload is not the ping's (" +
                             std::to_string(echo.size()) + " bytes back for " + std::to_string(payload.size()) + ")");
  return seconds_between(start, end) * 1e3;
}

nlohmann::json Initiator::latency(std::uint64_t payload_bytes) {
  const Bytes payload = patterned_payload(payload_bytes);
  for (std::uint64_t i = 0; i < settings_.warmup_rounds; ++i) ping_ms(payload);
  std::vector<double> samples;
  samples.reserve(settings_.latency_rounds);
  for (std::uint64_t i = 0; i < settings_.latency_rounds; ++i) samples.push_back(ping_ms(payload));
  nlohmann::json summary = summarize(samples);
  say(format("latency %llu B: p50 %.3f ms, p99 %.3f ms over %zu rounds",
             static_cast<unsigned long long>(payload_bytes), summary["p50"].get<double>(),
             summary["p99"].get<double>(), samples.size()));
  return {{"payload_bytes", payload_bytes},
          {"rounds", settings_.latency_rounds},
          {"samples_ms", samples},
          {"summary_ms", std::move(summary)}};
}

// One phase: request -> ready -> bulk frames in the phase's direction(s) -> complete. The
// initiator's clock runs from `ready` to `complete`, so it covers the whole transfer as the
// application sees it (V0.1's end-to-end phase time).
ThroughputTrial Initiator::trial(const std::string& direction, std::uint64_t size, std::uint64_t count) {
  Comm& comm = control_.comm();
  const Peer& peer = control_.peer();
  const Seconds timeout = control_.timeout();
  const bool uploads = direction != "download";
  const bool downloads = direction != "upload";

  // Receives are posted before the request, so the responder's first frames find them.
  std::optional<BulkReceiver> receiver;
  if (downloads) receiver.emplace(comm, peer, kBulkTag, size, count, timeout);
  control_.send(Dict{{"op", direction}, {"size", size}, {"count", count}});
  control_.expect("ready");
  const auto start = BenchClock::now();
  if (uploads) send_bulk(comm, peer, zeros_, kBulkTag, size, count, timeout);
  if (receiver) receiver->wait();
  Dict complete = control_.expect("complete");
  const auto end = BenchClock::now();

  if (string_field(complete, "phase") != direction || size_field(complete, "size") != size ||
      size_field(complete, "count") != count)
    throw BenchProtocolError("benchmark protocol: 'complete' for " + summarize(Value(complete)) + ", expected phase " +
                             direction + " size " + std::to_string(size) + " count " + std::to_string(count));
  ThroughputTrial t;
  t.payload_bytes_per_message = size;
  t.messages_per_direction = count;
  t.streams = streams_of(direction);
  t.elapsed_s = seconds_between(start, end);
  t.responder_elapsed_s = number_field(complete, "responder_elapsed_s");
  return t;
}

nlohmann::json Initiator::stop() {
  control_.send(Dict{{"op", "stop"}});
  Dict stopped = control_.expect("stopped");
  const Value* report = stopped.find("report");
  return report != nullptr ? value_to_json(*report) : nlohmann::json(nullptr);
}

// Latency under load runs over plain TCP beside the Comm: only with a peer on the network.
bool Initiator::load_phase() const {
  return !settings_.load_fractions.empty() && !control_.peer().network_host().empty();
}

nlohmann::json Initiator::run() {
  settings_.validate();
  const Peer& peer = control_.peer();
  // A peer reached only through a Unix socket has no network path: no ICMP, no plain-TCP
  // load server, no interface to diagnose. The Comm phases run as usual.
  const std::string host = peer.network_host();
  if (!settings_.load_fractions.empty() && !load_phase())
    say("latency under load skipped: " + peer.node_id + " has no network address (" + peer.endpoints_text() + ")");
  const ProcessUsage usage_before = sample_process_usage();
  nlohmann::json report = nlohmann::json::object();
  report["schema_version"] = kReportSchemaVersion;
  report["started_at"] = utc_timestamp_now();
  report["transport"] = peer.endpoints().front().scheme;
  report["settings"] = settings_to_json(settings_);
  report["semantics"] = semantics_section();

  // Diagnostics of this node: a snapshot before, link samples all along, a snapshot after.
  const std::string interface =
      options_.interface.empty() ? (host.empty() ? std::string() : interface_for_peer(host)) : options_.interface;
  say("diagnostics: capturing the environment (interface " + (interface.empty() ? std::string("unknown") : interface) +
      ")");
  const nlohmann::json environment_before = capture_environment({interface, host, {}});
  LinkSampler sampler({interface, settings_.sample_interval, {}});
  sampler.start();
  say("initiator " + control_.comm().local().node_id + " -> " + peer.node_id + " at " + peer.endpoints_text());
  const double setup_ms = hello();
  report["connection_setup_ms"] = setup_ms;
  say(format("connected: first exchange (dial, handshake, hello) %.3f ms", setup_ms));

  say(format("diagnostics: responder environment and ICMP ping both ways (%llu pings each)",
             static_cast<unsigned long long>(settings_.ping_count)));
  const Dict responder_diagnostics = diagnostics();
  report["responder_environment_at_handshake"] = value_to_json(field(responder_diagnostics, "environment_before"));
  report["ping_to_initiator"] = value_to_json(field(responder_diagnostics, "ping_to_initiator"));
  report["ping_to_responder"] = host.empty() ? no_network_ping(peer)
                                             : run_ping(host, PingOptions{settings_.ping_count, 0.2, 2.0, interface, {}});

  nlohmann::json latency = nlohmann::json::array();
  PhaseProgress latency_progress("latency", settings_.latency_sizes.size());
  for (std::uint64_t size : settings_.latency_sizes) {
    latency.push_back(this->latency(size));
    say(latency_progress.line(latency.size(), "size " + std::to_string(size) + " B done"));
  }
  report["latency"] = std::move(latency);

  nlohmann::json throughput = {{"upload", nlohmann::json::array()},
                               {"download", nlohmann::json::array()},
                               {"bidirectional", nlohmann::json::array()}};
  PhaseProgress throughput_progress("goodput", settings_.directions.size() * settings_.throughput_sizes.size());
  std::size_t throughput_done = 0;
  for (const std::string& direction : settings_.directions) {
    for (std::uint64_t size : settings_.throughput_sizes) {
      const std::uint64_t count = throughput_message_count(settings_, size);
      std::vector<ThroughputTrial> trials;
      for (std::uint64_t i = 0; i < settings_.throughput_trials; ++i) trials.push_back(trial(direction, size, count));
      nlohmann::json entry = aggregate_trials(trials);
      say(throughput_progress.line(++throughput_done, "") +
          format("%s %llu B x %llu: median %.1f Mbps aggregate over %zu trials", direction.c_str(),
                 static_cast<unsigned long long>(size), static_cast<unsigned long long>(count),
                 entry["aggregate_goodput_mbps"]["p50"].get<double>(), trials.size()));
      throughput[direction].push_back(std::move(entry));
    }
  }
  report["throughput"] = std::move(throughput);

  // V0.1 writes null when no tensor sizes are given.
  report["tensor"] = settings_.tensor_sizes.empty()
                         ? nlohmann::json(nullptr)
                         : run_tensor_phase(control_, settings_, next_sequence_, options_.progress,
                                            options_.torch_version);

  // Background load on plain TCP to the responder's port + 1, Comm pings in the foreground.
  const Bytes probe_payload = patterned_payload(settings_.load_probe_size);
  report["latency_under_load"] =
      !load_phase()
          ? nlohmann::json::array()
          : run_load_phase(settings_, report["throughput"],
                           LoadPhaseTarget{host, static_cast<std::uint16_t>(peer.port + 1)},
                           [&] { return ping_ms(probe_payload); }, options_.progress, &control_);

  nlohmann::json initiator = node_section(control_.comm().local().node_id, interface);
  initiator["tcp_socket_before_stop"] = host.empty() ? nlohmann::json(nullptr) : tcp_sockets(host);
  initiator["link_samples"] = sampler.stop();
  add_environment_section(initiator, environment_before, capture_environment({interface, host, {}}));
  add_process_usage(initiator, usage_before, sample_process_usage());
  // What carried the run, before the stop ends it (V0.1's "transport" key says "tcp" for any
  // host:port peer, as V0.1 did; with auto, one host's nodes talk over shared memory).
  const PeerStats carried = control_.comm().stats().peers.at(peer.node_id);
  say("stop: collecting the responder's report");
  report["responder"] = stop();
  report["initiator"] = std::move(initiator);
  report["wcomm"] = wcomm_section();
  report["wcomm"]["carried_by"] = {
      {"peer", peer.node_id}, {"transport", carried.transport}, {"payload_path", carried.payload_path}};
  report["finished_at"] = utc_timestamp_now();
  say("done");
  return report;
}

}  // namespace

nlohmann::json run_initiator(Comm& comm, const Peer& responder, const InitiatorOptions& options) {
  return Initiator(comm, responder, options).run();
}

}  // namespace wcomm::bench
