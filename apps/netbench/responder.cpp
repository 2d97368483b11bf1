// The responder side of the benchmark control protocol (docs/wire-format.md).
#include "netbench/responder.h"

#include <cstdio>

#include "netbench/bulk.h"
#include "netbench/clock.h"
#include "netbench/diagnostics.h"
#include "netbench/diagnostics_ping.h"
#include "netbench/json_value.h"
#include "netbench/link_sampler.h"
#include "netbench/load_server.h"
#include "netbench/process_usage.h"
#include "netbench/protocol.h"
#include "netbench/report.h"
#include "netbench/tensor_load.h"

namespace wcomm::bench {
namespace {

class Responder {
 public:
  Responder(Comm& comm, const Peer& initiator, const ResponderOptions& options)
      : options_(options), control_(comm, initiator, options.operation_timeout) {}

  nlohmann::json run();

 private:
  void say(const std::string& line) const {
    if (options_.progress) options_.progress(line);
  }
  // Answers one request; returns false after `stop`.
  bool handle(Dict request);
  void phase(const std::string& direction, const Dict& request);
  nlohmann::json own_report();
  void start_diagnostics();

  const ResponderOptions& options_;
  ControlChannel control_;
  ZeroPayloads zeros_;
  ProcessUsage usage_before_ = sample_process_usage();
  std::string interface_;
  nlohmann::json environment_before_;
  std::optional<LinkSampler> sampler_;
  std::optional<LoadServer> load_server_;  // while the initiator asked for latency under load
  std::optional<TensorDrain> tensor_drain_;  // during a tensor-background scenario
  nlohmann::json final_report_;
};

bool Responder::handle(Dict request) {
  const std::string op = op_of(request);
  if (op == "ping") {
    // The echo reuses the received payload's buffer: nothing is copied.
    control_.post(Dict{{"op", "pong"}, {"sequence", field(request, "sequence")}, {"payload", field(request, "payload")}});
    return true;
  }
  if (op == "hello") {
    const std::int64_t version = int_field(request, "protocol_version");
    if (version != kBenchProtocolVersion)
      throw BenchProtocolError("the initiator speaks benchmark protocol_version " + std::to_string(version) +
                               ", this responder 1");
    const Value* under_load = request.find("latency_under_load");
    if (under_load != nullptr && under_load->is<bool>() && under_load->as<bool>() && !load_server_) {
      if (control_.comm().port() == 0)
        throw BenchProtocolError("latency under load needs a TCP port for the load server; this responder listens "
                                 "only on " + control_.comm().local().endpoints_text());
      const auto port = static_cast<std::uint16_t>(control_.comm().port() + 1);
      try {
        load_server_.emplace("", port);
      } catch (const std::runtime_error& e) {
        throw BenchProtocolError(std::string("cannot start the load server: ") + e.what());
      }
      say("load server listening on port " + std::to_string(port));
    }
    say("hello from " + control_.peer().node_id);
    control_.send(Dict{{"op", "hello"}, {"protocol_version", kBenchProtocolVersion}});
    return true;
  }
  if (op == "upload" || op == "download" || op == "bidirectional") {
    phase(op, request);
    return true;
  }
  if (op == "tensor_ping") {
    control_.post(Dict{{"op", "tensor_pong"}, {"sequence", field(request, "sequence")}, {"payload", field(request, "payload")}});
    return true;
  }
  if (op == "tensor_load") {
    // wcomm: the initiator loads the Comm connection itself with tensors (tensor_load.h).
    const std::string action = string_field(request, "action");
    if (action == "start") {
      tensor_drain_.emplace(control_.comm(), control_.peer(), control_.timeout());
      control_.send(Dict{{"op", "tensor_load"}, {"action", "started"}});
    } else if (action == "stop") {
      const std::uint64_t received = tensor_drain_ ? tensor_drain_->finish() : 0;
      tensor_drain_.reset();
      control_.send(Dict{{"op", "tensor_load"}, {"action", "stopped"},
                         {"bytes_received", static_cast<std::int64_t>(received)}});
    } else {
      throw BenchProtocolError("tensor_load: unknown action '" + action + "'");
    }
    return true;
  }
  if (op == "tensor_structures") {
    control_.post(Dict{{"op", "tensor_structures"}, {"payload", field(request, "payload")}});
    return true;
  }
  if (op == "diagnostics") {
    const Value* count = request.find("ping_count");
    PingOptions ping;
    if (count != nullptr && count->is_int()) ping.count = size_field(request, "ping_count");
    ping.interface = interface_;
    const std::string host = control_.peer().network_host();
    if (!host.empty()) say("diagnostics: ICMP ping to " + host);
    const nlohmann::json ping_result = host.empty() ? no_network_ping(control_.peer()) : run_ping(host, ping);
    control_.send(Dict{{"op", "diagnostics"},
                       {"environment_before", json_to_value(environment_before_)},
                       {"ping_to_initiator", json_to_value(ping_result)}});
    return true;
  }
  if (op == "stop") {
    say("stop: sending the report");
    if (load_server_) load_server_->stop();
    final_report_ = own_report();
    control_.send(Dict{{"op", "stopped"}, {"report", json_to_value(final_report_)}});
    return false;
  }
  throw BenchProtocolError("unknown request op '" + op + "'");
}

// The responder's clock runs from sending `ready` until its side of the phase is done: every
// frame received (upload), written (download), or both (bidirectional).
void Responder::phase(const std::string& direction, const Dict& request) {
  const std::uint64_t size = size_field(request, "size");
  const std::uint64_t count = size_field(request, "count");
  Comm& comm = control_.comm();
  const Peer& peer = control_.peer();
  const Seconds timeout = control_.timeout();
  const bool receives = direction != "download";
  const bool sends = direction != "upload";

  std::optional<BulkReceiver> receiver;
  if (receives) receiver.emplace(comm, peer, kBulkTag, size, count, timeout);
  const auto start = BenchClock::now();
  // Queued ahead of the bulk frames on the same connection, so it arrives first.
  auto ready = control_.post(Dict{{"op", "ready"}});
  if (sends) send_bulk(comm, peer, zeros_, kBulkTag, size, count, timeout);
  if (receiver) receiver->wait();
  const auto end = BenchClock::now();
  ready.get();
  control_.send(Dict{{"op", "complete"},
                     {"phase", direction},
                     {"size", size},
                     {"count", count},
                     {"responder_elapsed_s", seconds_between(start, end)}});
}

// This node's diagnostics: a snapshot before the session and link samples until `stop`.
void Responder::start_diagnostics() {
  const std::string host = control_.peer().network_host();
  interface_ = options_.interface.empty() ? (host.empty() ? std::string() : interface_for_peer(host)) : options_.interface;
  environment_before_ = capture_environment({interface_, host, {}});
  sampler_.emplace(LinkSamplerOptions{interface_, options_.sample_interval, {}});
  sampler_->start();
}

nlohmann::json Responder::own_report() {
  nlohmann::json report = node_section(control_.comm().local().node_id, interface_);
  report["link_samples"] = sampler_->stop();
  add_environment_section(report, environment_before_,
                          capture_environment({interface_, control_.peer().network_host(), {}}));
  add_process_usage(report, usage_before_, sample_process_usage());
  return report;
}

nlohmann::json Responder::run() {
  start_diagnostics();
  say("responder " + control_.comm().local().node_id + " waiting for " + control_.peer().node_id);
  bool first = true;
  for (;;) {
    Dict request = control_.receive(first ? options_.first_request_timeout : std::optional<Seconds>(control_.timeout()));
    first = false;
    bool more = true;
    try {
      more = handle(std::move(request));
    } catch (const BenchProtocolError& e) {
      // A request this responder cannot serve: say so to the initiator, which stops.
      say(std::string("error: ") + e.what());
      control_.send(Dict{{"op", "error"}, {"message", e.what()}});
      continue;
    } catch (const MessageTooLargeError& e) {
      // A size over this node's limits (refused before anything was sent).
      say(std::string("error: ") + e.what());
      control_.send(Dict{{"op", "error"}, {"message", e.what()}});
      continue;
    }
    if (!more) return final_report_;
  }
}

}  // namespace

nlohmann::json run_responder(Comm& comm, const Peer& initiator, const ResponderOptions& options) {
  return Responder(comm, initiator, options).run();
}

}  // namespace wcomm::bench
