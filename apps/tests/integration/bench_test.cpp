// End-to-end benchmark runs on loopback: the bench layer's responder and initiator in two
// threads, and the `wcomm bench` command in two processes; each checks the report's V0.1 shape.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "netbench/bulk.h"
#include "netbench/html_report.h"
#include "netbench/initiator.h"
#include "netbench/protocol.h"
#include "netbench/responder.h"
#include "process_util.h"
#include "wcomm/comm.h"

namespace wcomm::bench {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::set<std::string> keys_of(const json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

const std::set<std::string> kTopLevelKeys = {
    "connection_setup_ms", "finished_at", "initiator", "latency", "latency_under_load", "ping_to_initiator",
    "ping_to_responder", "responder", "responder_environment_at_handshake", "schema_version", "semantics",
    "settings", "started_at", "tensor", "throughput", "transport"};
const std::set<std::string> kSummaryKeys = {
    "p01", "p05", "p25", "p50", "p75", "p90", "p95", "p99", "p99_9", "min", "max", "mean", "stddev", "range",
    "median_absolute_deviation", "coefficient_of_variation", "jitter_mean_abs_delta", "jitter_p95_abs_delta",
    "jitter_rms_delta", "outlier_count", "outlier_fraction", "outlier_threshold", "percentile_resolution",
    "sample_count"};
const std::set<std::string> kThroughputKeys = {
    "aggregate_goodput_mbps", "elapsed_s", "messages_per_direction", "messages_per_s", "payload_bytes_per_message",
    "per_direction_goodput_mbps", "streams", "total_payload_bytes", "total_payload_bytes_all_trials", "trial_count",
    "trials"};
const std::set<std::string> kTrialKeys = {
    "aggregate_goodput_mbps", "elapsed_s", "messages_per_direction", "messages_per_s", "payload_bytes_per_message",
    "per_direction_goodput_mbps", "responder_elapsed_s", "streams", "total_payload_bytes"};

// The short matrix of these tests: latency 0 and 64 B x 5 rounds, 64 KiB x 4 messages x 2 trials.
BenchSettings short_matrix() {
  BenchSettings s;
  s.latency_sizes = {0, 64};
  s.latency_rounds = 5;
  s.warmup_rounds = 2;
  s.throughput_sizes = {65536};
  s.throughput_target_bytes = 262144;
  s.throughput_trials = 2;
  s.operation_timeout = 30.0;
  return s;
}

// Checks everything the short matrix determines, and that measured values are sane.
void check_report(const json& report) {
  for (const auto& key : kTopLevelKeys) EXPECT_TRUE(report.contains(key)) << "missing " << key;
  EXPECT_EQ(report["schema_version"], 4);
  EXPECT_EQ(report["transport"], "tcp");
  EXPECT_LE(report["started_at"].get<std::string>(), report["finished_at"].get<std::string>());
  EXPECT_GT(report["connection_setup_ms"].get<double>(), 0.0);
  EXPECT_EQ(report["settings"]["latency_sizes"], json({0, 64}));
  EXPECT_EQ(report["settings"]["throughput_target_bytes"], 262144);
  EXPECT_EQ(keys_of(report["settings"]).size(), 21u);
  EXPECT_EQ(keys_of(report["semantics"]).size(), 7u);

  ASSERT_EQ(report["latency"].size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const json& entry = report["latency"][i];
    EXPECT_EQ(keys_of(entry), (std::set<std::string>{"payload_bytes", "rounds", "samples_ms", "summary_ms"}));
    EXPECT_EQ(entry["payload_bytes"], i == 0 ? 0 : 64);
    EXPECT_EQ(entry["rounds"], 5);
    ASSERT_EQ(entry["samples_ms"].size(), 5u);
    for (const auto& sample : entry["samples_ms"]) {
      EXPECT_GT(sample.get<double>(), 0.0);
      EXPECT_LT(sample.get<double>(), 30000.0);
    }
    EXPECT_EQ(keys_of(entry["summary_ms"]), kSummaryKeys);
    EXPECT_EQ(entry["summary_ms"]["sample_count"], 5);
  }

  ASSERT_EQ(keys_of(report["throughput"]), (std::set<std::string>{"upload", "download", "bidirectional"}));
  for (const auto& [direction, entries] : report["throughput"].items()) {
    const std::uint64_t streams = direction == "bidirectional" ? 2 : 1;
    ASSERT_EQ(entries.size(), 1u) << direction;
    const json& entry = entries[0];
    EXPECT_EQ(keys_of(entry), kThroughputKeys) << direction;
    EXPECT_EQ(entry["payload_bytes_per_message"], 65536);
    EXPECT_EQ(entry["messages_per_direction"], 4);  // 262144 / 65536
    EXPECT_EQ(entry["streams"], streams);
    EXPECT_EQ(entry["total_payload_bytes"], 262144 * streams);
    EXPECT_EQ(entry["total_payload_bytes_all_trials"], 2 * 262144 * streams);
    EXPECT_EQ(entry["trial_count"], 2);
    EXPECT_EQ(keys_of(entry["aggregate_goodput_mbps"]), kSummaryKeys);
    ASSERT_EQ(entry["trials"].size(), 2u);
    for (const auto& trial : entry["trials"]) {
      EXPECT_EQ(keys_of(trial), kTrialKeys);
      const double elapsed = trial["elapsed_s"];
      EXPECT_GT(elapsed, 0.0);
      EXPECT_GT(trial["responder_elapsed_s"].get<double>(), 0.0);
      const double aggregate = trial["aggregate_goodput_mbps"];
      EXPECT_NEAR(aggregate, 262144.0 * streams * 8 / elapsed / 1e6, 1e-6 * aggregate);
      EXPECT_DOUBLE_EQ(trial["per_direction_goodput_mbps"].get<double>(), aggregate / streams);
      EXPECT_NEAR(trial["messages_per_s"].get<double>(), 4.0 * streams / elapsed, 1e-6 * 4.0 * streams / elapsed);
    }
  }

  EXPECT_EQ(report["initiator"]["node_id"], "node-a");
  EXPECT_EQ(report["responder"]["node_id"], "node-b");
  for (const char* side : {"initiator", "responder"}) {
    EXPECT_TRUE(report[side].contains("environment_before")) << side;
    EXPECT_GT(report[side]["process_usage_delta"]["max_rss_kib"].get<long>(), 0) << side;
  }
  EXPECT_TRUE(report["initiator"]["tcp_socket_before_stop"].is_object());
  EXPECT_EQ(report["wcomm"]["diagnostics_collected"], true);
  // Both nodes' diagnostics are wired in (their collectors have their own tests).
  for (const char* side : {"initiator", "responder"}) {
    EXPECT_TRUE(report[side]["environment_before"].is_object()) << side;
    EXPECT_TRUE(report[side]["environment_after"].is_object()) << side;
    EXPECT_TRUE(report[side]["kernel_counter_delta"].is_object()) << side;
    EXPECT_TRUE(report[side]["link_samples"].is_array()) << side;
    EXPECT_GE(report[side]["link_samples"].size(), 1u) << side;
  }
  EXPECT_TRUE(report["responder_environment_at_handshake"].is_object());
  for (const char* ping : {"ping_to_responder", "ping_to_initiator"}) {
    EXPECT_TRUE(report[ping].is_object()) << ping;
    EXPECT_TRUE(report[ping]["command"].is_object()) << ping;
  }
}

struct Pair {
  std::shared_ptr<Comm> initiator;
  std::shared_ptr<Comm> responder;
};

// node-b listens on a reserved port whose next one is free too (the responder's load server
// listens there); node-a dials it. node-b's entry for node-a is never dialed (the responder
// answers on the initiator's connection), so its port is a placeholder.
Pair make_pair() {
  Pair p;
  testing::ReservedPort port_and_load_port(2);
  p.responder =
      Comm::create(CommSpec{{"node-b", "127.0.0.1", port_and_load_port.port()}, {{"node-a", "127.0.0.1", 1}}, "", {}});
  p.initiator =
      Comm::create(CommSpec{{"node-a", "127.0.0.1", 0}, {{"node-b", "127.0.0.1", p.responder->port()}}, "", {}});
  return p;
}

// run_responder for the pair on a thread of its own (30 s timeouts); join() before reading
// what it returned or threw.
struct ResponderThread {
  explicit ResponderThread(Pair& p)
      : thread([this, &p] {
          ResponderOptions options;
          options.first_request_timeout = Seconds(30);
          options.operation_timeout = Seconds(30);
          try {
            report = run_responder(*p.responder, p.responder->peer("node-a"), options);
          } catch (const std::exception& e) {
            error = e.what();
          }
        }) {}
  void join() { thread.join(); }

  json report;
  std::string error;
  std::thread thread;  // last: starts once the members it fills exist
};

// The initiator's report against a ResponderThread on the pair ("" and a test failure if it
// threw: the responder is closed so that its wait ends at once).
json run_initiator_for(Pair& p, const InitiatorOptions& options) {
  try {
    return run_initiator(*p.initiator, p.initiator->peer("node-b"), options);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "initiator: " << e.what();
    p.responder->close();
    return nullptr;
  }
}

TEST(BenchEndToEnd, ResponderAndInitiatorThreads) {
  Pair p = make_pair();
  ResponderThread responder(p);
  json report;
  std::vector<std::string> progress;
  try {
    InitiatorOptions options{short_matrix(), "lo", [&](const std::string& line) { progress.push_back(line); }};
    report = run_initiator(*p.initiator, p.initiator->peer("node-b"), options);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "initiator: " << e.what();
    p.responder->close();  // ends the responder's wait at once
  }
  responder.join();
  ASSERT_TRUE(responder.error.empty()) << responder.error;
  ASSERT_FALSE(report.is_null());
  check_report(report);
  // auto, one host: shared memory carried it, whatever V0.1's "transport" key says.
  EXPECT_EQ(report["wcomm"]["carried_by"]["peer"], "node-b");
  EXPECT_EQ(report["wcomm"]["carried_by"]["transport"], "shm");
  const std::string path = report["wcomm"]["carried_by"]["payload_path"];
  EXPECT_TRUE(path == "cma" || path == "ring") << path;
  EXPECT_EQ(report["initiator"]["interface"], "lo");
  EXPECT_EQ(report["responder"], responder.report);
  EXPECT_FALSE(progress.empty());
  // Nothing of the bulk payloads was copied in user space on either side.
  EXPECT_EQ(p.initiator->stats().bytes_copied, 0u);
  EXPECT_EQ(p.responder->stats().bytes_copied, 0u);
}

// Over Unix sockets the Comm phases run as usual; the network-only parts (ICMP, the plain-TCP
// load phase) say they were skipped instead of failing.
TEST(BenchEndToEnd, OverUnixSocketsTheNetworkPartsAreSkipped) {
  char dir[] = "/tmp/wcomm-bench-unix-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const Address a = Address::parse(std::string("unix://") + dir + "/a.sock");
  const Address b = Address::parse(std::string("unix://") + dir + "/b.sock");
  Pair p;
  p.responder = Comm::create(CommSpec{{"node-b", "", 0, {b}}, {{"node-a", "", 0, {a}}}, "", {}});
  p.initiator = Comm::create(CommSpec{{"node-a", "", 0, {a}}, {{"node-b", "", 0, {b}}}, "", {}});
  ResponderThread responder(p);
  BenchSettings settings = short_matrix();
  settings.load_fractions = {0.25};
  const json report = run_initiator_for(p, InitiatorOptions{settings, "", {}});
  responder.join();
  ASSERT_TRUE(responder.error.empty()) << responder.error;
  ASSERT_FALSE(report.is_null());
  EXPECT_EQ(report["transport"], "unix");
  EXPECT_EQ(report["wcomm"]["carried_by"]["transport"], "unix");
  EXPECT_EQ(report["latency"].size(), 2u);
  EXPECT_GT(report["throughput"]["upload"][0]["aggregate_goodput_mbps"]["p50"].get<double>(), 0.0);
  EXPECT_NE(report["ping_to_responder"]["skipped"].get<std::string>().find("no network path"), std::string::npos);
  EXPECT_NE(report["ping_to_initiator"]["skipped"].get<std::string>().find("no network path"), std::string::npos);
  EXPECT_TRUE(report["latency_under_load"].empty());
  p.initiator.reset();
  p.responder.reset();
  std::filesystem::remove_all(dir);
}

// Tensors and latency under load on loopback, with a short matrix; the page renders the run.
TEST(BenchEndToEnd, TensorsAndLatencyUnderLoad) {
  Pair p = make_pair();
  ResponderThread responder(p);
  BenchSettings s = short_matrix();
  s.latency_sizes = {64};
  s.directions = {"upload", "download"};
  s.throughput_target_bytes = 1 << 20;
  s.throughput_trials = 1;
  s.ping_count = 1;
  s.tensor_sizes = {16, 4096};
  s.tensor_rounds = 3;
  s.load_fractions = {0.05};
  s.load_directions = {"upload", "download", "bidirectional"};
  s.load_concurrencies = {1, 2};
  s.load_duration = 0.4;
  s.load_probe_interval = 0.02;
  const json report = run_initiator_for(p, InitiatorOptions{s, "lo", {}, "1.13.1"});
  responder.join();
  ASSERT_TRUE(responder.error.empty()) << responder.error;
  ASSERT_FALSE(report.is_null());

  const json& tensor = report["tensor"];
  ASSERT_TRUE(tensor.is_object());
  EXPECT_EQ(tensor["dtype"], "float32");
  ASSERT_EQ(tensor["round_trips"].size(), 2u);
  EXPECT_EQ(tensor["round_trips"][1]["payload_bytes"], 4096);
  EXPECT_EQ(tensor["round_trips"][1]["elements"], 1024);
  EXPECT_EQ(tensor["round_trips"][1]["samples_ms"].size(), 3u);
  EXPECT_GT(tensor["round_trips"][1]["summary_ms"]["p50"].get<double>(), 0.0);
  ASSERT_EQ(tensor["structures"].size(), 2u);
  for (const auto& check : tensor["structures"]) {
    EXPECT_EQ(check["single"], true);
    EXPECT_EQ(check["tensor_list"], true);
    EXPECT_EQ(check["tensor_dict"], true);
  }
  EXPECT_EQ(tensor["structures_correct"], true);
  // V0.1's keys beside wcomm's, with V0.1's meaning.
  EXPECT_EQ(tensor["torch_version"], "1.13.1");
  EXPECT_EQ(tensor["device"], "cpu");
  EXPECT_EQ(tensor["contiguous"], true);
  EXPECT_EQ(tensor["structure_round_trip"],
            json({{"single_tensor", true}, {"tensor_list", true}, {"tensor_dict", true}}));
  ASSERT_EQ(tensor["round_trip"].size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const json& v01 = tensor["round_trip"][i];
    EXPECT_EQ(keys_of(v01), (std::set<std::string>{"payload_bytes", "elements", "dtype", "rounds", "round_trip_ms",
                                                   "round_trip_goodput_mbps", "samples_ms"}));
    EXPECT_EQ(v01["dtype"], "torch.float32");
    EXPECT_EQ(v01["payload_bytes"], tensor["round_trips"][i]["payload_bytes"]);
    EXPECT_EQ(v01["samples_ms"], tensor["round_trips"][i]["samples_ms"]);
    EXPECT_EQ(v01["round_trip_ms"], tensor["round_trips"][i]["summary_ms"]);
    EXPECT_EQ(keys_of(v01["round_trip_goodput_mbps"]), kSummaryKeys);
    // Goodput of a round trip: the tensor's bytes there and back over its RTT.
    const double bytes = v01["payload_bytes"];
    const double fastest_ms = v01["round_trip_ms"]["min"];
    EXPECT_NEAR(v01["round_trip_goodput_mbps"]["max"].get<double>(), bytes * 2 * 8 / (fastest_ms / 1e3) / 1e6,
                1e-9 * v01["round_trip_goodput_mbps"]["max"].get<double>());
  }

  const json& load = report["latency_under_load"];
  ASSERT_EQ(load.size(), 6u);  // 3 directions x 2 concurrencies x 1 fraction
  for (const auto& scenario : load) {
    for (const char* key : {"direction", "streams", "target_fraction", "target_mbps", "delivered_mbps", "rtt_ms",
                            "samples_ms"})
      EXPECT_TRUE(scenario.contains(key)) << key;
    EXPECT_DOUBLE_EQ(scenario["target_fraction"].get<double>(), 0.05);
    EXPECT_GT(scenario["target_mbps"].get<double>(), 0.0);
    EXPECT_GT(scenario["delivered_mbps"].get<double>(), 0.0) << scenario["direction"];
    EXPECT_FALSE(scenario["samples_ms"].empty());
    EXPECT_EQ(scenario["rtt_ms"]["sample_count"], scenario["samples_ms"].size());
    // V0.1's keys beside wcomm's, with V0.1's meaning.
    EXPECT_EQ(scenario["load_fraction"], scenario["target_fraction"]);
    EXPECT_EQ(scenario["concurrency_per_direction"], scenario["streams"]);
    EXPECT_EQ(scenario["capacity_reference_mbps"], scenario["capacity_mbps"]);
    EXPECT_EQ(scenario["probe_summary_ms"], scenario["rtt_ms"]);
    EXPECT_EQ(scenario["probe_samples_ms"], scenario["samples_ms"]);
    const json& load = scenario["background_load"];
    EXPECT_EQ(keys_of(load), (std::set<std::string>{"direction", "streams", "target_mbps", "elapsed_s",
                                                    "transferred_bytes", "goodput_mbps"}));
    EXPECT_EQ(load["direction"], scenario["direction"]);
    const std::uint64_t one_way = scenario["direction"] == "bidirectional" ? 2 : 1;
    EXPECT_EQ(load["streams"], one_way * scenario["streams"].get<std::uint64_t>());  // connections, as V0.1
    EXPECT_EQ(load["target_mbps"], scenario["target_mbps"]);
    EXPECT_EQ(load["transferred_bytes"].get<std::uint64_t>(),
              scenario["background_bytes_sent"].get<std::uint64_t>() +
                  scenario["background_bytes_received"].get<std::uint64_t>());
    const double goodput = load["goodput_mbps"];
    EXPECT_NEAR(goodput, load["transferred_bytes"].get<double>() * 8 / load["elapsed_s"].get<double>() / 1e6,
                1e-9 * goodput);
    EXPECT_GT(goodput, 0.0);
    EXPECT_NEAR(scenario["delivered_load_fraction"].get<double>(), goodput / scenario["capacity_mbps"].get<double>(),
                1e-12);
  }
  EXPECT_EQ(load[0]["direction"], "upload");
  EXPECT_EQ(load[1]["streams"], 2);
  EXPECT_EQ(load[5]["direction"], "bidirectional");

  // The page plots every scenario of the run.
  const HtmlReport page = render_html_report(report, "run.json");
  EXPECT_NE(page.html.find("load-rtt-vs-delivered"), std::string::npos);
  EXPECT_NE(page.html.find("data-series=\"bidirectional p99\""), std::string::npos);
}

TEST(BenchEndToEnd, ResponderAnswersBadRequestsWithErrorAndGoesOn) {
  Pair p = make_pair();
  ResponderThread responder(p);
  ControlChannel control(*p.initiator, p.initiator->peer("node-b"), Seconds(30));
  try {
    control.send(Dict{{"op", "teleport"}});
    Dict reply = control.receive();
    EXPECT_EQ(op_of(reply), "error");
    EXPECT_NE(string_field(reply, "message").find("teleport"), std::string::npos);
    control.send(Dict{{"op", "hello"}, {"protocol_version", 2}, {"ping_count", 0}, {"latency_under_load", false}});
    EXPECT_EQ(op_of(control.receive()), "error");
    // A ping echoes its payload exactly, including an empty one.
    for (std::string payload : {std::string("abc\0def", 7), std::string()}) {
      control.send(Dict{{"op", "ping"}, {"sequence", 9}, {"payload", Bytes(payload)}});
      Dict pong = control.expect("pong");
      EXPECT_EQ(int_field(pong, "sequence"), 9);
      EXPECT_EQ(bytes_field(pong, "payload").view(), payload);
    }
    control.send(Dict{{"op", "stop"}});
    Dict stopped = control.expect("stopped");
    EXPECT_TRUE(field(stopped, "report").is<Dict>());
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
    p.responder->close();
  }
  responder.join();
}

TEST(BenchControl, ReceiveTimesOutAndLosesNothing) {
  Pair p = make_pair();
  ControlChannel initiator(*p.initiator, p.initiator->peer("node-b"), Seconds(30));
  ControlChannel responder(*p.responder, p.responder->peer("node-a"), Seconds(30));
  const auto start = std::chrono::steady_clock::now();
  try {
    responder.receive(Seconds(0.2));
    ADD_FAILURE() << "receive returned without a message";
  } catch (const OperationTimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("node-a"), std::string::npos) << e.what();
  }
  EXPECT_GE(std::chrono::steady_clock::now() - start, 190ms);
  // The timed-out receive took nothing: the next message goes to the next receive.
  initiator.send(Dict{{"op", "after"}});
  EXPECT_EQ(op_of(responder.receive()), "after");
}

TEST(BenchBulk, ReceiverRefillsItsWindowAndSenderPipelines) {
  Pair p = make_pair();
  const Seconds timeout(30);
  ZeroPayloads zeros;
  // 50 frames through a window of 4 posted receives and at most 3 sends in flight.
  BulkReceiver receiver(*p.responder, p.responder->peer("node-a"), kBulkTag, 1000, 50, timeout, 4);
  send_bulk(*p.initiator, p.initiator->peer("node-b"), zeros, kBulkTag, 1000, 50, timeout,
            SendWindow{.max_messages = 3, .max_bytes = 1 << 20});
  EXPECT_NO_THROW(receiver.wait());
  // A frame of another size is reported, not counted.
  BulkReceiver strict(*p.responder, p.responder->peer("node-a"), kBulkTag, 1000, 1, timeout);
  send_bulk(*p.initiator, p.initiator->peer("node-b"), zeros, kBulkTag, 999, 1, timeout);
  EXPECT_THROW(strict.wait(), BenchProtocolError);
  // Nothing left over: the next phase's receive gets the next frame.
  BulkReceiver next(*p.responder, p.responder->peer("node-a"), kBulkTag, 0, 1, timeout);
  send_bulk(*p.initiator, p.initiator->peer("node-b"), zeros, kBulkTag, 0, 1, timeout);
  EXPECT_NO_THROW(next.wait());
}

// ---- the `wcomm bench` command, two processes ----

using testing::listening_port;
using testing::Process;
using testing::run_process;
using testing::TempDir;

TEST(BenchCommand, ResponderAndInitiatorProcesses) {
  TempDir dir;
  const std::string b_yaml = dir.write("b.yaml",
                                       "local: {node_id: node-b, host: 127.0.0.1, port: 0}\n"
                                       "peers: [{node_id: node-a, host: 127.0.0.1, port: 1}]\n");
  const std::string responder_json = (dir.path() / "responder.json").string();
  const std::string report_json = (dir.path() / "report.json").string();
  auto responder = Process::spawn({WCOMM_CLI, "bench", "--config", b_yaml, "responder", "--peer", "node-a",
                                   "--wait-timeout", "30", "--operation-timeout", "30", "--output", responder_json},
                                  dir.path(), "responder");
  ASSERT_TRUE(responder.wait_for_stderr("listening on", 30s)) << responder.output();
  const int port = listening_port(responder.err());
  ASSERT_GT(port, 0) << responder.output();
  const std::string a_yaml = dir.write("a.yaml", "local: {node_id: node-a, host: 127.0.0.1, port: 0}\n"
                                                 "peers: [{node_id: node-b, host: 127.0.0.1, port: " +
                                                     std::to_string(port) + "}]\n");
  const auto initiator = run_process({WCOMM_CLI, "bench", "initiator", "--config", a_yaml, "--peer", "node-b",
                                      "--latency-sizes", "0,64", "--latency-rounds", "5", "--warmup-rounds", "2",
                                      "--throughput-sizes", "65536", "--throughput-target-bytes", "262144",
                                      "--throughput-trials", "2", "--operation-timeout", "30", "--interface", "lo",
                                      "--quiet", "--output", report_json},
                                     dir.path(), "initiator", 60s);
  EXPECT_EQ(initiator.exit_code, 0) << initiator.err;
  EXPECT_EQ(responder.wait_for(30s), 0) << responder.output();

  std::ifstream in(report_json);
  ASSERT_TRUE(in.good()) << "no report written";
  const json report = json::parse(in);
  check_report(report);
  std::ifstream responder_in(responder_json);
  ASSERT_TRUE(responder_in.good());
  EXPECT_EQ(json::parse(responder_in), report["responder"]);
}

// Nobody listens at the responder's address: the initiator says so and exits 1 as soon as the
// dial gives up (the core's quick retries on a refused connection, about 2 s, as V0.1), not
// after operation_timeout (120 s). Default config: connect_timeout_s stays 30 s.
TEST(BenchCommand, InitiatorWithoutResponderFailsFast) {
  TempDir dir;
  const int port = testing::free_tcp_port();  // bound, then released: nobody listens
  const std::string a_yaml = dir.write("a.yaml", "local: {node_id: node-a, host: 127.0.0.1, port: 0}\n"
                                                 "peers: [{node_id: node-b, host: 127.0.0.1, port: " +
                                                     std::to_string(port) + "}]\n");
  const auto start = std::chrono::steady_clock::now();
  const auto initiator = run_process({WCOMM_CLI, "bench", "--config", a_yaml, "initiator", "--peer", "node-b",
                                      "--timeout", "120", "--ping-count", "1", "--quiet"},
                                     dir.path(), "initiator", 60s);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(initiator.exit_code, 1) << initiator.err;
  EXPECT_NE(initiator.err.find("no benchmark responder reachable at tcp://127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << initiator.err;
  EXPECT_LT(took, 10s);
}

// V0.1 refused an interface this host does not have; so do both roles, before any network work.
TEST(BenchCommand, UnknownInterfaceIsRefused) {
  TempDir dir;
  const std::string yaml = dir.write("a.yaml", "local: {node_id: node-a, host: 127.0.0.1, port: 0}\n"
                                               "peers: [{node_id: node-b, host: 127.0.0.1, port: 1}]\n");
  for (const std::string role : {"initiator", "responder"}) {
    std::vector<std::string> args{WCOMM_CLI, "bench", "--config", yaml, role, "--peer", "node-b", "--interface",
                                  "wcomm-no-such0"};
    if (role == "responder") args.insert(args.end(), {"--wait-timeout", "1"});
    const auto result = run_process(args, dir.path(), role, 30s);
    EXPECT_EQ(result.exit_code, 2) << role << ": " << result.err;
    EXPECT_NE(result.err.find("--interface 'wcomm-no-such0'"), std::string::npos) << result.err;
  }
}

TEST(BenchCommand, UsageErrorsExitTwo) {
  TempDir dir;
  for (std::vector<std::string> args : {
           std::vector<std::string>{WCOMM_CLI, "bench", "initiator", "--peer", "node-b"},  // no --config
           std::vector<std::string>{WCOMM_CLI, "bench", "--config", "x.yaml"},            // no role
           std::vector<std::string>{WCOMM_CLI, "bench", "--config", "x.yaml", "initiator", "--peer", "b",
                                    "--tensor-sizes", "4098"}}) {  // not a whole number of float32
    const auto result = run_process(args, dir.path(), "usage", 30s);
    EXPECT_EQ(result.exit_code, 2) << result.err;
  }
}

}  // namespace
}  // namespace wcomm::bench
