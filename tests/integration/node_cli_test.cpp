// `wcomm node` as users run it: two real processes echoing over loopback, and the exit codes
// and messages of the CLI's failure paths.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include "process_util.h"

namespace wcomm::testing {
namespace {

using namespace std::chrono_literals;

// Generous: a loaded CI machine may be slow, and every wait is also bounded by ctest's TIMEOUT.
constexpr auto kProcessDeadline = 30s;

std::string node_yaml(const std::string& self, std::uint16_t self_port, const std::string& peer,
                      std::uint16_t peer_port) {
  return "local:\n"
         "  node_id: " + self + "\n"
         "  host: 127.0.0.1\n"
         "  port: " + std::to_string(self_port) + "\n"
         "peers:\n"
         "  - node_id: " + peer + "\n"
         "    host: 127.0.0.1\n"
         "    port: " + std::to_string(peer_port) + "\n";
}

class NodeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ports = free_tcp_ports(2);
    config_a_ = dir_.write("node-a.yaml", node_yaml("node-a", ports[0], "node-b", ports[1]));
    config_b_ = dir_.write("node-b.yaml", node_yaml("node-b", ports[1], "node-a", ports[0]));
  }

  // wcomm node --config <config> <args...>
  std::vector<std::string> node(const std::string& config, std::vector<std::string> args) const {
    std::vector<std::string> argv = {WCOMM_CLI, "node", "--config", config};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  ProcessResult run(const std::vector<std::string>& argv, const std::string& name) {
    return run_process(argv, dir_.path(), name, kProcessDeadline);
  }

  TempDir dir_;
  std::string config_a_, config_b_;
};

TEST_F(NodeCliTest, EchoRoundTrip) {
  Process echo = Process::spawn(
      node(config_b_, {"echo", "--src", "node-a", "--tag", "1", "--count", "1", "--timeout", "20"}), dir_.path(),
      "echo");
  // The sender's dial is retried until the echo node listens, so no start-up wait is needed.
  ProcessResult send = run(node(config_a_, {"send", "--dst", "node-b", "--tag", "1", "--json",
                                            R"({"message":"hello","n":[1,2.5,true,null]})", "--metadata",
                                            R"({"trace_id":"wifi-test-1"})", "--expect-reply", "--timeout", "20"}),
                           "send");
  ASSERT_FALSE(send.timed_out) << send.out << send.err;
  EXPECT_EQ(send.exit_code, 0) << send.out << send.err;
  EXPECT_NE(send.out.find("sent message_id="), std::string::npos) << send.out;
  EXPECT_NE(send.out.find("received from node-b tag=1"), std::string::npos) << send.out;
  EXPECT_NE(send.out.find("hello"), std::string::npos) << send.out;
  EXPECT_NE(send.out.find("wifi-test-1"), std::string::npos) << send.out;

  auto echo_code = echo.wait_for(kProcessDeadline);
  ASSERT_TRUE(echo_code.has_value()) << "echo did not exit\n" << echo.output();
  EXPECT_EQ(*echo_code, 0) << echo.output();
  EXPECT_NE(echo.out().find("received from node-a tag=1"), std::string::npos) << echo.output();
  EXPECT_NE(echo.out().find("echoed to node-a"), std::string::npos) << echo.output();
}

TEST_F(NodeCliTest, TensorPayloadRoundTrip) {
  Process echo = Process::spawn(node(config_b_, {"echo", "--src", "node-a", "--count", "1", "--timeout", "20"}),
                                dir_.path(), "echo");
  ProcessResult send = run(node(config_a_, {"send", "--dst", "node-b", "--tensor-shape", "3,32,32", "--tensor-dtype",
                                            "float16", "--expect-reply", "--timeout", "20"}),
                           "send");
  EXPECT_EQ(send.exit_code, 0) << send.out << send.err;
  EXPECT_NE(send.out.find("received from node-b"), std::string::npos) << send.out;
  EXPECT_NE(send.out.find("float16"), std::string::npos) << send.out;
  EXPECT_EQ(echo.wait_for(kProcessDeadline), 0) << echo.output();
}

// A --count 0 server outlives its peers: two sender processes one after the other (the first
// one's disconnect must not end it), then SIGINT closes it with exit code 0.
TEST_F(NodeCliTest, ServeForeverSurvivesReconnectsAndStopsOnSigint) {
  Process echo = Process::spawn(node(config_b_, {"echo", "--src", "node-a", "--count", "0"}), dir_.path(), "echo");
  for (const char* text : {"first", "second"}) {
    ProcessResult send = run(node(config_a_, {"send", "--dst", "node-b", "--text", text, "--expect-reply",
                                              "--timeout", "20"}),
                             std::string("send-") + text);
    EXPECT_EQ(send.exit_code, 0) << send.out << send.err << echo.output();
    EXPECT_NE(send.out.find(std::string("received from node-b tag=0")), std::string::npos) << send.out;
    EXPECT_NE(send.out.find(text), std::string::npos) << send.out;
  }
  ASSERT_TRUE(echo.running()) << echo.output();
  echo.signal(SIGINT);
  EXPECT_EQ(echo.wait_for(kProcessDeadline), 0) << echo.output();
}

TEST_F(NodeCliTest, BadJsonExits2NamingTheOption) {
  ProcessResult r = run(node(config_a_, {"send", "--dst", "node-b", "--json", "{oops"}), "bad-json");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--json"), std::string::npos) << r.err;
}

TEST_F(NodeCliTest, MetadataMustBeAJsonObject) {
  ProcessResult r = run(node(config_a_, {"send", "--dst", "node-b", "--text", "x", "--metadata", "[1, 2]"}),
                        "bad-metadata");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--metadata"), std::string::npos) << r.err;
}

TEST_F(NodeCliTest, ExactlyOnePayload) {
  ProcessResult none = run(node(config_a_, {"send", "--dst", "node-b"}), "no-payload");
  EXPECT_EQ(none.exit_code, 2) << none.err;
  ProcessResult two = run(node(config_a_, {"send", "--dst", "node-b", "--text", "a", "--json", "1"}), "two-payloads");
  EXPECT_EQ(two.exit_code, 2) << two.err;
  EXPECT_NE(two.err.find("exactly one payload"), std::string::npos) << two.err;
}

TEST_F(NodeCliTest, UnknownDstNamesTheNodeAndTheKnownPeers) {
  ProcessResult r = run(node(config_a_, {"send", "--dst", "node-z", "--text", "hi"}), "unknown-dst");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("node-z"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("node-b"), std::string::npos) << r.err;
}

TEST_F(NodeCliTest, SendToAPeerNobodyListensOnExits1) {
  auto started = std::chrono::steady_clock::now();
  ProcessResult r = run(node(config_a_, {"send", "--dst", "node-b", "--text", "hi", "--timeout", "0.5"}), "silent");
  ASSERT_FALSE(r.timed_out) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("node-b"), std::string::npos) << r.err;
  // Not a performance assertion: only that --timeout is honoured rather than the 30 s dial default.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 15s);
}

TEST_F(NodeCliTest, ConfigMayFollowTheSubcommand) {
  // V0.1 puts --config first; after the sub-command works too (a usage error proves parsing got
  // as far as the payload, i.e. the config was found).
  std::vector<std::string> argv = {WCOMM_CLI, "node", "send", "--config", config_a_, "--dst", "node-b", "--json", "{"};
  ProcessResult r = run(argv, "config-after");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--json"), std::string::npos) << r.err;
}

TEST_F(NodeCliTest, MissingConfigExits2NamingTheFile) {
  std::string missing = (dir_.path() / "nope.yaml").string();
  ProcessResult r = run(node(missing, {"recv", "--src", "node-b"}), "missing-config");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("nope.yaml"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace wcomm::testing
