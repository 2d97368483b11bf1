// A Wi-Fi-like link that drops out: node-a and node-b in two network namespaces, the veth
// between them down for 5 s while node-a keeps sending. The session must resume by itself
// with nothing lost, duplicated or reordered. node-a is this test binary run again inside its
// namespace (the SenderRole test, which skips unless started so); node-b is `wcomm node
// echo`. Needs root and `ip netns`; skips otherwise.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "comm_fixture.h"
#include "netns_util.h"
#include "process_util.h"
#include "wcomm/comm.h"

namespace wcomm::testing {
namespace {

using namespace std::chrono_literals;

constexpr int kMessages = 300;
constexpr auto kPace = 20ms;  // 6 s of sending, the outage in the middle of it

// Heartbeats every 4 s: a peer is declared dead after 12 s of silence, well past the 5 s
// outage plus TCP's retransmission backoff (the first segment lost is resent about 6.2 s on).
const char* kComm = "comm: {heartbeat_interval_s: 4}\n";

TEST(CommLinkNetns, SenderRole) {
  const char* config = std::getenv("WCOMM_LINK_SENDER_CONFIG");
  if (config == nullptr) GTEST_SKIP() << "node-a's side of SessionsSurviveALinkDownForFiveSeconds";
  auto comm = Comm::create(load_node_config(config));
  const Peer& b = comm->peer("node-b");
  for (int i = 0; i < kMessages; ++i) {
    wait_value(comm->send(Value(i), b, {}, {.tag = 1, .timeout = 30s}), 40s);
    std::this_thread::sleep_for(kPace);
  }
  for (int i = 0; i < kMessages; ++i) {
    auto got = wait_result(comm->recv(b, {.tag = 1, .timeout = 30s}), 40s);
    ASSERT_TRUE(got.ok()) << "echo " << i << ": " << got.error().message;
    ASSERT_EQ(got.value().value, Value(i)) << "out of order or duplicated";
  }
  auto extra = wait_result(comm->recv(b, {.tag = 1, .timeout = 1s}));
  EXPECT_EQ(extra.error().code, ErrorCode::kOperationTimeout) << "a duplicate arrived";
  std::printf("sender: %d messages echoed in order over a link that went down for 5 s; %llu connection(s) dialed\n",
              kMessages, static_cast<unsigned long long>(comm->stats().connections_dialed));
}

TEST(CommLinkNetns, SessionsSurviveALinkDownForFiveSeconds) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (ip netns)";
  Namespaces ns("wcomm-link");
  std::string why;
  if (!ns.create(why)) GTEST_SKIP() << "no network namespaces here: " << why;
  TempDir dir;
  const std::string a_yaml = dir.write("a.yaml", std::string("local: {node_id: node-a, host: 192.0.2.1, port: 0}\n"
                                                             "peers: [{node_id: node-b, host: 192.0.2.2, port: 47111}]\n") +
                                                     kComm);
  const std::string b_yaml = dir.write("b.yaml", std::string("local: {node_id: node-b, host: 192.0.2.2, port: 47111}\n"
                                                             "peers: [{node_id: node-a, host: 192.0.2.1, port: 1}]\n") +
                                                     kComm);
  auto echo = Process::spawn({"ip", "netns", "exec", ns.b, WCOMM_CLI, "node", "--config", b_yaml, "echo", "--src",
                              "node-a", "--tag", "1", "--count", "0", "--timeout", "60"},
                             dir.path(), "echo");
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  auto sender = Process::spawn({"ip", "netns", "exec", ns.a, "env", "WCOMM_LINK_SENDER_CONFIG=" + a_yaml, self,
                                "--gtest_filter=CommLinkNetns.SenderRole"},
                               dir.path(), "sender");
  std::this_thread::sleep_for(1500ms);  // the schedule of the outage, not a synchronisation
  ASSERT_TRUE(ns.set_link(false));
  std::this_thread::sleep_for(5s);
  ASSERT_TRUE(ns.set_link(true));
  const auto code = sender.wait_for(60s);
  EXPECT_EQ(code, 0) << sender.output();
  EXPECT_NE(sender.output().find("[  PASSED  ] 1 test"), std::string::npos) << sender.output();
  echo.kill();
}

}  // namespace
}  // namespace wcomm::testing
