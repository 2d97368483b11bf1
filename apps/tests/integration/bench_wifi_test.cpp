// `wcomm bench` additions of issue 17 on loopback: the "tensor" background of latency under
// load (tensors over the foreground Comm connection) and the fan-out fairness scenario.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "netbench/fanout.h"
#include "netbench/html_report.h"
#include "netbench/initiator.h"
#include "netbench/responder.h"
#include "netbench/settings.h"
#include "free_port.h"

namespace wcomm::bench {
namespace {

using nlohmann::json;

TEST(BenchFairness, JainIndex) {
  EXPECT_DOUBLE_EQ(jain_index({5, 5, 5, 5}), 1.0);
  EXPECT_DOUBLE_EQ(jain_index({1, 0, 0, 0}), 0.25);
  EXPECT_NEAR(jain_index({1, 2}), 9.0 / 10.0, 1e-12);
  EXPECT_EQ(jain_index({}), 0.0);
}

TEST(BenchSettingsWifi, TheTensorBackgroundIsChecked) {
  BenchSettings s;
  s.load_fractions = {0.5};
  s.load_backgrounds = {"udp"};
  EXPECT_THROW(s.validate(), std::invalid_argument);
  s.load_backgrounds = {"tensor"};
  s.load_directions = {"upload", "download"};
  EXPECT_THROW(s.validate(), std::invalid_argument);  // the tensor background loads upload only
  s.load_directions = {"upload"};
  s.load_tensor_bytes = 10;
  EXPECT_THROW(s.validate(), std::invalid_argument);
  s.load_tensor_bytes = 1 << 20;
  EXPECT_NO_THROW(s.validate());
  EXPECT_EQ(settings_to_json(s)["load_backgrounds"], json({"tensor"}));
  EXPECT_FALSE(settings_to_json(BenchSettings{}).contains("load_backgrounds")) << "V0.1's settings unchanged";
}

TEST(BenchTensorBackground, PingsRunOverTheConnectionTheTensorsLoad) {
  CommConfig config;
  config.transport = "tcp";
  config.chunk_bytes = 64 << 10;
  wcomm::testing::ReservedPort port_and_load_port(2);  // the responder's load server takes port + 1
  auto responder = Comm::create(
      CommSpec{{"node-b", "127.0.0.1", port_and_load_port.port()}, {{"node-a", "127.0.0.1", 1}}, "", config});
  auto initiator =
      Comm::create(CommSpec{{"node-a", "127.0.0.1", 0}, {{"node-b", "127.0.0.1", responder->port()}}, "", config});
  json responder_report;
  std::string responder_error;
  std::thread serve([&] {
    ResponderOptions options;
    options.first_request_timeout = Seconds(30);
    options.operation_timeout = Seconds(30);
    try {
      responder_report = run_responder(*responder, responder->peer("node-a"), options);
    } catch (const std::exception& e) {
      responder_error = e.what();
    }
  });
  BenchSettings s;
  s.latency_sizes = {64};
  s.latency_rounds = 3;
  s.warmup_rounds = 1;
  s.directions = {"upload"};
  s.throughput_sizes = {1 << 20};
  s.throughput_target_bytes = 4 << 20;
  s.throughput_trials = 1;
  s.ping_count = 1;
  s.load_fractions = {0.3};
  s.load_directions = {"upload"};
  s.load_backgrounds = {"tcp", "tensor"};
  s.load_concurrencies = {1};
  s.load_tensor_bytes = 1 << 20;
  s.load_duration = 0.4;
  s.load_probe_interval = 0.02;
  s.comm_chunk_bytes = config.chunk_bytes;
  json report;
  try {
    report = run_initiator(*initiator, initiator->peer("node-b"), InitiatorOptions{s, "lo", {}});
  } catch (const std::exception& e) {
    ADD_FAILURE() << "initiator: " << e.what();
    responder->close();
  }
  serve.join();
  ASSERT_TRUE(responder_error.empty()) << responder_error;
  ASSERT_FALSE(report.is_null());
  const json& load = report["latency_under_load"];
  ASSERT_EQ(load.size(), 2u);
  EXPECT_EQ(load[0]["background"], "tcp");
  const json& tensor = load[1];
  EXPECT_EQ(tensor["background"], "tensor");
  EXPECT_EQ(tensor["direction"], "upload");
  EXPECT_EQ(tensor["tensor_bytes"], 1 << 20);
  EXPECT_EQ(tensor["chunk_bytes"], 64 << 10);
  EXPECT_GT(tensor["background_bytes_sent"].get<std::uint64_t>(), 0u);
  EXPECT_FALSE(tensor["samples_ms"].empty());
  EXPECT_GT(initiator->stats().messages_chunked, 0u) << "the tensors went in chunks";
  EXPECT_TRUE(tensor["rtt_from_schedule_ms"]["p99"].is_number());
  EXPECT_NE(render_html_report(report, "run.json").html.find("upload (tensor)"), std::string::npos);
}

TEST(BenchFanout, EveryPeerGetsItsShareAndTheIndexSaysSo) {
  CommConfig config;
  config.transport = "tcp";
  constexpr int kSinks = 3;
  std::vector<std::shared_ptr<Comm>> sinks;
  std::vector<Peer> sink_peers;
  for (int i = 0; i < kSinks; ++i) {
    sinks.push_back(
        Comm::create(CommSpec{{"sink-" + std::to_string(i), "127.0.0.1", 0}, {{"hub", "127.0.0.1", 1}}, "", config}));
    sink_peers.push_back({"sink-" + std::to_string(i), "127.0.0.1", sinks.back()->port()});
  }
  auto hub = Comm::create(CommSpec{{"hub", "127.0.0.1", 0}, sink_peers, "", config});
  std::vector<std::thread> threads;
  std::vector<std::uint64_t> received(kSinks);
  for (int i = 0; i < kSinks; ++i)
    threads.emplace_back([&, i] { received[i] = run_sink(*sinks[i], sinks[i]->peer("hub"), Seconds(20), Seconds(20)); });
  FanoutOptions options;
  options.message_bytes = 256 << 10;
  options.duration_s = 0.5;
  const json report = run_fanout(*hub, sink_peers, options);
  for (auto& t : threads) t.join();
  ASSERT_EQ(report["per_peer"].size(), 3u);
  double sum = 0;
  for (int i = 0; i < kSinks; ++i) {
    const json& p = report["per_peer"][i];
    EXPECT_EQ(p["peer"], "sink-" + std::to_string(i));
    EXPECT_GT(p["goodput_mbps"].get<double>(), 0.0);
    EXPECT_GE(received[i], p["bytes"].get<std::uint64_t>()) << "the sink read at least what was counted";
    sum += p["goodput_mbps"].get<double>();
  }
  EXPECT_NEAR(report["aggregate_goodput_mbps"].get<double>(), sum, 1e-9 * sum);
  EXPECT_GT(report["jain_index"].get<double>(), 1.0 / kSinks);
  EXPECT_LE(report["jain_index"].get<double>(), 1.0);
}

}  // namespace
}  // namespace wcomm::bench
