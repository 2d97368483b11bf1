// tcp_target_queue_delay_us on a link with a deep queue: node-a sends 16 MiB to node-b over a
// 50 Mbit/s tbf veth that queues up to 400 ms (a bloated bottleneck, as an untuned access
// point's), with node-a's TCP reno, a loss-based sender that fills any queue (BBR, this
// kernel's default, mostly keeps a wired veth's queue short by itself; on Wi-Fi it does not:
// docs/wifi.md). While it sends, a ping from node-a's namespace shares the queue and `ss`
// reads node-a's send buffer; once more over TLS. node-a is this test binary run again inside its namespace (the
// SenderRole test, which skips unless started so); node-b is `wcomm node recv`. Needs root
// and `ip netns`; skips otherwise.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "build_features.h"
#include "comm_fixture.h"
#include "netns_util.h"
#include "process_util.h"
#include "wcomm/comm.h"

namespace wcomm::testing {
namespace {

using namespace std::chrono_literals;

TEST(CommQueueBoundNetns, SenderRole) {
  const char* config = std::getenv("WCOMM_QUEUE_BOUND_SENDER_CONFIG");
  if (config == nullptr) GTEST_SKIP() << "node-a's side of ABulkSendKeepsABloatedQueueNearTheTarget";
  auto comm = Comm::create(load_node_config(config));
  // 30 s and 40 s are guards against a hang, not the contract: 16 MiB takes 2.7 s here.
  wait_value(comm->send(Tensor::zeros(DType::kUInt8, {16 << 20}), comm->peer("node-b"), {},
                        {.timeout = 30s, .compress = Compression::kOff}),
             40s);
  std::printf("chunks_sent %llu\n", static_cast<unsigned long long>(comm->stats().chunks_sent));
}

// This test binary started again inside namespace netns as the role test `role` (one of the
// *Role tests here, which skip unless variable is set), with variable=value.
Process spawn_role(const std::string& netns, const std::string& variable, const std::string& value,
                   const std::string& role, const TempDir& dir) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  return Process::spawn({"ip", "netns", "exec", netns, "env", variable + "=" + value, self,
                         "--gtest_filter=CommQueueBoundNetns." + role},
                        dir.path(), role);
}

struct UnderLoad {
  double ping_p50_ms = 0;
  std::uint64_t send_buffer = 0;  // node-a's, as ss reads it (skmem tb)
  std::uint64_t chunks = 0;       // the 16 MiB went in this many chunks
};

// tls: both nodes use TLS, with certificates from scripts/make-test-certs.sh.
UnderLoad send_over_bloated_link(const Namespaces& ns, std::uint64_t target_us, bool tls = false) {
  TempDir dir;
  auto comm = [&](const std::string& node) {
    std::string c = "comm: {tcp_target_queue_delay_us: " + std::to_string(target_us);
    if (tls) {
      const std::string certs = (dir.path() / "certs").string();
      c += ", tls: {cert_file: " + certs + "/" + node + ".pem, key_file: " + certs + "/" + node + ".key, ca_file: " +
           certs + "/ca.pem}";
    }
    return c + "}\n";
  };
  if (tls) EXPECT_EQ(sh("bash " WCOMM_SOURCE_DIR "/scripts/make-test-certs.sh " + (dir.path() / "certs").string() +
                        " node-a node-b"),
                     0);
  const std::string a_yaml = dir.write("a.yaml", "local: {node_id: node-a, host: 192.0.2.1, port: 47301}\n"
                                                 "peers: [{node_id: node-b, host: 192.0.2.2, port: 47302}]\n" +
                                                     comm("node-a"));
  const std::string b_yaml = dir.write("b.yaml", "local: {node_id: node-b, host: 192.0.2.2, port: 47302}\n"
                                                 "peers: [{node_id: node-a, host: 192.0.2.1, port: 47301}]\n" +
                                                     comm("node-b"));
  auto receiver = Process::spawn({"ip", "netns", "exec", ns.b, WCOMM_CLI, "node", "--config", b_yaml, "recv", "--src",
                                  "node-a", "--count", "1", "--timeout", "30"},
                                 dir.path(), "recv");
  auto sender = spawn_role(ns.a, "WCOMM_QUEUE_BOUND_SENDER_CONFIG", a_yaml, "SenderRole", dir);
  // The schedule of the measurement, not a synchronisation: 16 MiB takes 2.7 s at 50 Mbit/s;
  // the queue has formed by 0.7 s, and the pings end by about 1.8 s (checked below).
  std::this_thread::sleep_for(700ms);
  UnderLoad got;
  const std::string ss = command_output("ip netns exec " + ns.a + " ss -tmiH state established 2>/dev/null");
  std::smatch m;
  if (std::regex_search(ss, m, std::regex("tb([0-9]+)"))) got.send_buffer = std::stoull(m[1]);
  const std::string pings = command_output("ip netns exec " + ns.a + " ping -i 0.02 -c 50 -W 2 192.0.2.2 2>&1");
  EXPECT_FALSE(sender.wait_for(0ms).has_value()) << "the 16 MiB had gone before the pings ended: nothing was measured under load";
  std::vector<double> rtts;
  const std::regex time_re("time=([0-9.]+) ms");
  for (auto it = std::sregex_iterator(pings.begin(), pings.end(), time_re); it != std::sregex_iterator(); ++it)
    rtts.push_back(std::stod((*it)[1]));
  EXPECT_GE(rtts.size(), 45u) << pings;
  if (!rtts.empty()) {
    std::sort(rtts.begin(), rtts.end());
    got.ping_p50_ms = rtts[rtts.size() / 2];
  }
  // Guards against a hang (the sender's own send gives up at 30 s), not bounds under test.
  EXPECT_EQ(sender.wait_for(40s), 0) << sender.output();
  EXPECT_EQ(receiver.wait_for(10s), 0) << receiver.output();
  const std::string sender_out = sender.out();
  if (std::regex_search(sender_out, m, std::regex("chunks_sent ([0-9]+)"))) got.chunks = std::stoull(m[1]);
  return got;
}

TEST(CommQueueBoundNetns, ABulkSendKeepsABloatedQueueNearTheTarget) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ip netns, tc)";
  Namespaces ns("wcomm-qbound");
  std::string why;
  if (!ns.create(why, "tbf rate 50mbit burst 32kbit latency 400ms")) GTEST_SKIP() << "no network namespaces here: " << why;
  ASSERT_EQ(sh("ip netns exec " + ns.a + " sysctl -qw net.ipv4.tcp_congestion_control=reno"), 0);
  const UnderLoad unbounded = send_over_bloated_link(ns, 0);
  const UnderLoad bounded = send_over_bloated_link(ns, 2000);
  for (const auto& [name, r] : {std::pair{"unbounded", unbounded}, std::pair{"target 2 ms", bounded}})
    std::printf("%s: ping p50 %.2f ms, send buffer %llu B, %llu chunks\n", name, r.ping_p50_ms,
                static_cast<unsigned long long>(r.send_buffer), static_cast<unsigned long long>(r.chunks));
  // Without the bound the kernel autotunes node-a's send buffer to hold hundreds of KiB
  // (0.95-1.31 MiB seen) and reno keeps the queue full: the ping waits about 20 ms (18.9-21.8
  // ms in eight runs). With a 2 ms target the buffer is about 20 KB (the link's 2 ms plus the
  // bound's 8 KiB share: 3.2 ms of this link) and the ping waits 2.3-4.4 ms (ten runs, TLS's
  // included). 8 ms is about the geometric middle of the two outcomes.
  EXPECT_GT(unbounded.send_buffer, 256u << 10);
  EXPECT_GT(unbounded.ping_p50_ms, 8.0);
  EXPECT_LE(bounded.send_buffer, 64u << 10);
  EXPECT_LT(bounded.ping_p50_ms, 8.0);
  // The chunks follow the bound: 64 of 256 KiB without it, about a thousand of 16 KiB with it.
  EXPECT_LE(unbounded.chunks, 64u);
  EXPECT_GT(bounded.chunks, 256u);
  // TLS over TCP has the same bound (where the build has TLS).
  if (!kHaveTls) return;
  const UnderLoad bounded_tls = send_over_bloated_link(ns, 2000, /*tls=*/true);
  std::printf("target 2 ms, TLS: ping p50 %.2f ms, send buffer %llu B, %llu chunks\n", bounded_tls.ping_p50_ms,
              static_cast<unsigned long long>(bounded_tls.send_buffer),
              static_cast<unsigned long long>(bounded_tls.chunks));
  EXPECT_LE(bounded_tls.send_buffer, 64u << 10);
  EXPECT_LT(bounded_tls.ping_p50_ms, 8.0);
  EXPECT_GT(bounded_tls.chunks, 256u);
}

// Flows from one node through one bounded queue (an access point sending to several
// stations): node-a connects to node-b and node-c (two nodes in one namespace), then sends to
// node-b, and from 1 s on also to node-c, each a stream of 256 KiB tensors with 4 in flight,
// through a 100 Mbit/s tbf queue that holds up to 400 ms, node-a's TCP reno. The rates are
// what each flow completed from 2 s to 4.5 s.
TEST(CommQueueBoundNetns, FanOutSenderRole) {
  const char* config = std::getenv("WCOMM_FAN_OUT_SENDER_CONFIG");
  if (config == nullptr) GTEST_SKIP() << "node-a's side of FlowsFromOneNodeShareTheBoundedQueueEvenly";
  auto comm = Comm::create(load_node_config(config));
  // Every 30 s and 40 s below guards against a hang, not the contract: the run takes 5 s.
  // Both connections first, on the empty queue, so each measures its path's true min RTT
  // (see the test below).
  for (const char* node : {"node-b", "node-c"}) wait_value(comm->send(Value("hello"), comm->peer(node)), 40s);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto window_start = start + 2s, stop = start + 4500ms;
  const Tensor tensor = Tensor::zeros(DType::kUInt8, {256 << 10});
  auto flow = [&](const char* node, std::chrono::milliseconds delay, std::uint64_t& bytes) {
    std::this_thread::sleep_until(start + delay);
    const Peer& to = comm->peer(node);
    std::deque<Future<SendResult>> in_flight;
    auto complete_one = [&] {
      wait_value(std::move(in_flight.front()), 40s);
      in_flight.pop_front();
      const auto now = Clock::now();
      if (now >= window_start && now < stop) bytes += tensor.nbytes();
    };
    while (Clock::now() < stop) {
      in_flight.push_back(comm->send(tensor, to, {}, {.timeout = 30s, .compress = Compression::kOff}));
      if (in_flight.size() == 4) complete_one();
    }
    while (!in_flight.empty()) complete_one();
    wait_value(comm->send(Value("end"), to), 40s);
  };
  std::uint64_t to_b = 0, to_c = 0;
  std::thread first(flow, "node-b", 0ms, std::ref(to_b));
  flow("node-c", 1000ms, to_c);
  first.join();
  const double window_us = std::chrono::duration<double, std::micro>(stop - window_start).count();
  std::printf("flow_mbps %.2f %.2f\n", to_b * 8 / window_us, to_c * 8 / window_us);
}

// Two nodes in node-b's namespace take what node-a sends until its "end".
TEST(CommQueueBoundNetns, FanOutReceiversRole) {
  const char* configs = std::getenv("WCOMM_FAN_OUT_RECEIVER_CONFIGS");
  if (configs == nullptr) GTEST_SKIP() << "node-b's and node-c's side of FlowsFromOneNodeShareTheBoundedQueueEvenly";
  const std::string both = configs;
  std::vector<std::thread> receivers;
  for (const std::string path : {both.substr(0, both.find(',')), both.substr(both.find(',') + 1)})
    receivers.emplace_back([path] {
      auto comm = Comm::create(load_node_config(path));
      // 40 s: a guard against a hang (node-a's run takes 5 s), not the contract.
      wait_value(comm->recv(comm->peer("node-a")), 40s);  // the hello
      while (wait_value(comm->recv(comm->peer("node-a")), 40s).value != Value("end")) {
      }
    });
  for (auto& r : receivers) r.join();
}

TEST(CommQueueBoundNetns, FlowsFromOneNodeShareTheBoundedQueueEvenly) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ip netns, tc)";
  Namespaces ns("wcomm-qshare");
  std::string why;
  if (!ns.create(why, "tbf rate 100mbit burst 32kbit latency 400ms")) GTEST_SKIP() << "no network namespaces here: " << why;
  ASSERT_EQ(sh("ip netns exec " + ns.a + " sysctl -qw net.ipv4.tcp_congestion_control=reno"), 0);
  TempDir dir;
  auto node = [&](const std::string& id, const std::string& host, int port, const std::string& peers) {
    return dir.write(id + ".yaml", "local: {node_id: " + id + ", host: " + host + ", port: " + std::to_string(port) +
                                       "}\npeers: [" + peers + "]\n");
  };
  const std::string a = node("node-a", "192.0.2.1", 47301,
                             "{node_id: node-b, host: 192.0.2.2, port: 47302}, {node_id: node-c, host: 192.0.2.2, port: 47303}");
  const std::string from_a = "{node_id: node-a, host: 192.0.2.1, port: 47301}";
  const std::string b = node("node-b", "192.0.2.2", 47302, from_a), c = node("node-c", "192.0.2.2", 47303, from_a);
  auto receivers = spawn_role(ns.b, "WCOMM_FAN_OUT_RECEIVER_CONFIGS", b + "," + c, "FanOutReceiversRole", dir);
  auto sender = spawn_role(ns.a, "WCOMM_FAN_OUT_SENDER_CONFIG", a, "FanOutSenderRole", dir);
  // Guards against a hang (each send gives up at 30 s), not bounds under test.
  ASSERT_EQ(sender.wait_for(60s), 0) << sender.output();
  ASSERT_EQ(receivers.wait_for(20s), 0) << receivers.output();
  std::smatch m;
  const std::string out = sender.out();
  ASSERT_TRUE(std::regex_search(out, m, std::regex("flow_mbps ([0-9.]+) ([0-9.]+)"))) << out;
  const double first = std::stod(m[1]), latecomer = std::stod(m[2]);
  std::printf("first flow %.1f Mbit/s, latecomer %.1f Mbit/s\n", first, latecomer);
  // Jain's index, issue 30's fairness measure, at its target 0.9 (for two flows: the slower
  // at least 0.54x the faster). Seen: 0.93-1.00x, in Release and under TSan, quiet or beside
  // two or three busy loops. On this veth the split also evens out without
  // SendQueueBound::kShareBytes (0.93-1.00x, six runs): the rule's own check is
  // unit.SendQueueBound.*, and the Wi-Fi cell's fan-out shows what it changes (docs/wifi.md).
  // Connecting node-c only when its flow starts, behind node-b's standing queue, gives node-c
  // a min RTT that holds that queue and so a larger budget: then the slower flow got
  // 0.68-0.88x of the faster on a quiet machine and 0.28-0.88x under TSan beside busy loops
  // (with the constant; 0.15-0.34x without, node-c the faster), the latecomer's advantage of
  // any delay-based bound (docs/wifi.md, "Not yet here").
  // 80 Mbit/s of 100 says the link stayed busy: 95-96 seen, quiet or beside busy loops, 86-91
  // beside a two-job compile.
  const double jain = (first + latecomer) * (first + latecomer) / (2 * (first * first + latecomer * latecomer));
  EXPECT_GE(jain, 0.9);
  EXPECT_GT(first + latecomer, 80.0);
}

}  // namespace
}  // namespace wcomm::testing
