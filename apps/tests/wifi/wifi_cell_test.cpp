// Responsiveness on the emulated Wi-Fi cell (issue 30 item 5, docs/wifi.md): one station at
// 802.11ax 40 MHz MCS 7 and the host behind the access point, made by scripts/wifi-cell.sh
// around build/wcomm-wifi-cell (ns-3 in real time). `wcomm bench` saturates the station's
// uplink with 64 MiB tensors over the very Comm connection that 64 B round trips probe; the
// test fails when a probe waits behind a bulk tensor.
// Skips: not root; no TUN in this kernel; wcomm-wifi-cell not built (no libns3-dev at
// configure time); the emulator fell behind real time (its figures are not valid then).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_util.h"

namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// The contract, from what wcomm does on this cell today (docs/wifi.md, "What it measures";
// eight runs of this test, load average 2.1-3.1): unloaded 64 B p99 0.51-0.63 ms (2.47 once);
// under the tensors, with the default chunking (256 KiB chunks, 128 KiB TCP_NOTSENT_LOWAT), p99
// 116-158 ms counted from when each probe was due (44-50 ms closed-loop), at 128-132 Mbit/s of
// tensor load. The cell's own queues give a ping p99 of 24-30 ms under an iperf3 upload; a
// probe also waits for the chunk and unsent bytes ahead of it (384 KiB: 24 ms at 130 Mbit/s),
// and, counted from its schedule, for the probe before it (one in flight, gaps of mean 50 ms).
// With chunking off a probe waits behind the whole tensor in front of it: 64 MiB at ~130 Mbit/s
// is 4.1 s (this test read 4002 ms with --chunk-bytes 0). The bound lies between the two
// outcomes it tells apart, at their geometric middle: 800 ms, a fifth of a tensor's airtime,
// 5x above the worst default run (two more runs on a quiet machine, 2026-12-06: 106-160 ms)
// and 5x below the wait it must catch (4.0-4.1 s); 256 ms, 1.6x above the worst run, was too
// close to the runs. The target (at most 3x the unloaded p99, ~1.8 ms here) is not
// met, by about 75x: the tensor's TCP flow keeps the station's TAP queue and Wi-Fi MAC queue
// full (bufferbloat below wcomm), which pacing the bulk just under the link rate (issue 30
// item 4) is to fix; tighten this bound then.
constexpr double kLoadedP99BoundMs = 800.0;
// The load must saturate the link for the figure to mean anything: iperf3 reads 130-134
// Mbit/s on this cell; half of it is the least a 'saturating' tensor stream may move.
constexpr double kMinLoadMbps = 65.0;
// Mean real-time lag of the simulator, per 1 s report, above which the run is refused.
constexpr double kLagLimitMs = 1.0;

std::string bench_driver(const std::string& cli, const std::string& dir) {
  // Runs inside scripts/wifi-cell.sh: the responder on the host behind the access point, the
  // initiator on the station. Every step bounded.
  std::ostringstream s;
  s << "set -eu\n"
    << "cd '" << dir << "'\n"
    << "timeout 60 ip netns exec \"$WIFI_CELL_AP_NS\" '" << cli
    << "' bench --config b.yaml responder --peer node-a --wait-timeout 30 --operation-timeout 40 2> responder.err &\n"
    << "for i in $(seq 100); do grep -q 'listening on' responder.err && break; sleep 0.1; done\n"
    << "timeout 60 ip netns exec \"$WIFI_CELL_STA_NS_1\" '" << cli
    << "' bench --config a.yaml initiator --peer node-b --quiet"
       " --latency-sizes 64 --latency-rounds 200 --warmup-rounds 10"
       " --throughput-sizes 1048576 --throughput-target-bytes 16777216 --throughput-trials 1 --directions upload"
       " --ping-count 1 --load-fractions 1.0 --load-directions upload --load-backgrounds tensor"
       " --load-tensor-bytes 67108864 --load-duration 10 --load-probe-interval 0.05 --operation-timeout 40"
       " --output report.json\n"
    << "wait\n";
  return s.str();
}

TEST(WifiCell, ForegroundDoesNotWaitBehindABulkTensor) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ip netns, TAP devices)";
  const int tun = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (tun < 0) GTEST_SKIP() << "this kernel lacks TUN/TAP (/dev/net/tun: " << std::strerror(errno) << ")";
  close(tun);
  if (!std::filesystem::exists(WCOMM_WIFI_CELL))
    GTEST_SKIP() << WCOMM_WIFI_CELL << " is not built: ns-3 (libns3-dev) was not found at configure time";

  const auto started = std::chrono::steady_clock::now();
  wcomm::testing::TempDir dir;
  const std::string comm = "comm: {heartbeat_interval_s: 0}\n";  // as the tbf bench: nothing else on the air
  dir.write("a.yaml", "local: {node_id: node-a, host: 192.0.2.11, port: 0}\n"
                      "peers: [{node_id: node-b, host: 192.0.2.1, port: 47211}]\n" + comm);
  dir.write("b.yaml", "local: {node_id: node-b, host: 192.0.2.1, port: 47211}\n"
                      "peers: [{node_id: node-a, host: 192.0.2.11, port: 1}]\n" + comm);
  const std::string driver = dir.write("driver.sh", bench_driver(WCOMM_CLI, dir.path().string()));
  const std::string log = (dir.path() / "cell.log").string();
  const std::string build = std::filesystem::path(WCOMM_WIFI_CELL).parent_path().string();

  auto script = wcomm::testing::Process::spawn(
      {"bash", WCOMM_SOURCE_DIR "/scripts/wifi-cell.sh", "--build", build, "--log", log, "--timeout", "75",
       "--standard", "ax", "--width", "40", "--mcs", "7", "--report-interval", "1", "--lag-limit-ms",
       std::to_string(kLagLimitMs), "--", "bash", driver},
      dir.path(), "wifi-cell");
  auto exit_code = script.wait_for(100s);
  if (!exit_code) {  // SIGTERM first: the script's trap removes the namespaces and stops the emulator
    script.signal(SIGTERM);
    exit_code = script.wait_for(20s);
  }
  struct {
    int exit_code;
    std::string out, err;
  } run{exit_code.value_or(-1), script.out(), script.err()};
  const std::string cell_log = wcomm::testing::read_text_file(log);
  const std::string context = "--- wifi-cell.sh ---\n" + run.out + run.err + "--- emulator ---\n" + cell_log +
                              "--- responder ---\n" + wcomm::testing::read_text_file(dir.path() / "responder.err");
  if (run.exit_code == 4) GTEST_SKIP() << "this kernel lacks TUN/TAP: " << run.err;
  if (run.exit_code == 3) GTEST_SKIP() << "the emulator fell behind real time (busy machine?): not a valid run\n" << context;
  ASSERT_EQ(run.exit_code, 0) << context;

  // Refuse the figures if the simulator lagged in any report window, not only on average.
  double worst_window_ms = 0.0;
  std::istringstream lines(cell_log);
  for (std::string line; std::getline(lines, line);) {
    const json event = json::parse(line, nullptr, false);
    if (!event.is_discarded() && event.value("event", "") == "lag")
      worst_window_ms = std::max(worst_window_ms, event["mean_ms"].get<double>());
  }
  if (worst_window_ms > kLagLimitMs)
    GTEST_SKIP() << "the emulator's mean lag reached " << worst_window_ms << " ms in a 1 s window (limit "
                 << kLagLimitMs << "): not a valid run\n" << context;

  const json report = json::parse(wcomm::testing::read_text_file(dir.path() / "report.json"));
  const double unloaded_p99 = report["latency"][0]["summary_ms"]["p99"];
  ASSERT_EQ(report["latency_under_load"].size(), 1u);
  const auto& loaded = report["latency_under_load"][0];
  const double loaded_p99 = loaded["rtt_from_schedule_ms"]["p99"];
  const double closed_p99 = loaded["rtt_ms"]["p99"];
  const double load_mbps = loaded["delivered_mbps"];
  std::printf("wifi cell: unloaded 64 B p99 %.3f ms; loaded p99 %.2f ms from schedule (%.2f ms closed-loop, %zu "
              "probes), %.2fx; tensor load %.1f Mbit/s; worst 1 s lag mean %.3f ms\n",
              unloaded_p99, loaded_p99, closed_p99, loaded["samples_ms"].size(), loaded_p99 / unloaded_p99, load_mbps,
              worst_window_ms);

  EXPECT_GE(load_mbps, kMinLoadMbps) << "the tensors did not saturate the cell\n" << context;
  EXPECT_LE(loaded_p99, kLoadedP99BoundMs) << "a 64 B probe waited behind a bulk tensor\n" << context;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 60s);
}

TEST(WifiCell, DistancesAreOneForEveryStationOrOnePerStation) {
  // Unequal links (--distance 5,5,30: Minstrel gives the far station slower rates) are how the
  // cell shows unfairness (docs/wifi.md); a list that names neither every station nor one
  // distance for all is refused before anything is made (no root needed).
  if (!std::filesystem::exists(WCOMM_WIFI_CELL))
    GTEST_SKIP() << WCOMM_WIFI_CELL << " is not built: ns-3 (libns3-dev) was not found at configure time";
  wcomm::testing::TempDir dir;
  const auto run = wcomm::testing::run_process(
      {WCOMM_WIFI_CELL, "--station", "ns1:tap1", "--station", "ns2:tap2", "--distance", "5,6,7"}, dir.path(),
      "wifi-cell", 10s);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("--distance: 3 distances for 2 stations"), std::string::npos) << run.err;
}

}  // namespace
