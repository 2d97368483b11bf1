// `wcomm node` as users run it: two real processes echoing over loopback, and the exit codes
// and messages of the CLI's failure paths.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "process_util.h"
#include "wcomm/codec.h"
#include "wcomm/comm.h"

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
    port_b_ = ports[1];
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
  std::uint16_t port_b_ = 0;
};

int connect_loopback(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval timeout{.tv_sec = 10, .tv_usec = 0};  // a read must not hang the test
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return fd;
}

bool read_exactly(int fd, std::uint8_t* out, std::size_t n) {
  for (std::size_t got = 0; got < n;) {
    ssize_t r = ::read(fd, out + got, n - got);
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  return true;
}

// Connects to 127.0.0.1:port, writes bytes that are not COMM v1, and hangs up.
void send_garbage(std::uint16_t port) {
  int fd = connect_loopback(port);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  const char junk[] = "GET / HTTP/1.1\r\nHost: node-b\r\n\r\n0123456789012345678901234567890123456789";
  EXPECT_GT(::write(fd, junk, sizeof(junk)), 0);
  ::close(fd);
}

// Completes a real handshake as node_id, then breaks the protocol with a frame header that
// is all 0xff (bad magic): the server sees a ProtocolError from a known peer.
void break_protocol_as(std::uint16_t port, const std::string& node_id) {
  int fd = connect_loopback(port);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  auto hello = encode_control(FrameKind::kHello, {.node_id = node_id, .connection_id = std::string(32, 'a'), .features = {}});
  ASSERT_EQ(::write(fd, hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
  std::uint8_t header[kHeaderSize];
  ASSERT_TRUE(read_exactly(fd, header, sizeof(header))) << "no HELLO_ACK";
  auto parsed = parse_header(header, CommConfig{});
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  ASSERT_EQ(parsed.value().kind, FrameKind::kHelloAck);
  std::vector<std::uint8_t> manifest(parsed.value().manifest_size);
  ASSERT_TRUE(read_exactly(fd, manifest.data(), manifest.size()));
  std::vector<std::uint8_t> junk(kHeaderSize, 0xff);
  EXPECT_EQ(::write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  ::close(fd);
}

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
  // V0.1's lines, the default: Python's repr of the values.
  const std::string line =
      "object={'message': 'hello', 'n': [1, 2.5, True, None]} piggypayload={'trace_id': 'wifi-test-1'}";
  EXPECT_EQ(send.out, "sent " + line + "\nreceived " + line + "\n");

  auto echo_code = echo.wait_for(kProcessDeadline);
  ASSERT_TRUE(echo_code.has_value()) << "echo did not exit\n" << echo.output();
  EXPECT_EQ(*echo_code, 0) << echo.output();
  EXPECT_EQ(echo.out(), "received " + line + "\nechoed " + line + "\n") << echo.output();
}

TEST_F(NodeCliTest, WcommFormatRoundTrip) {
  Process echo = Process::spawn(node(config_b_, {"--format", "wcomm", "echo", "--src", "node-a", "--tag", "1",
                                                 "--count", "1", "--timeout", "20"}),
                                dir_.path(), "echo");
  ProcessResult send = run(node(config_a_, {"send", "--dst", "node-b", "--tag", "1", "--json",
                                            R"({"message":"hello"})", "--expect-reply", "--timeout", "20",
                                            "--format", "wcomm"}),
                           "send");
  EXPECT_EQ(send.exit_code, 0) << send.out << send.err;
  EXPECT_NE(send.out.find("sent message_id="), std::string::npos) << send.out;
  EXPECT_NE(send.out.find("received from node-b tag=1"), std::string::npos) << send.out;
  EXPECT_NE(send.out.find("hello"), std::string::npos) << send.out;
  EXPECT_EQ(echo.wait_for(kProcessDeadline), 0) << echo.output();
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
  EXPECT_NE(send.out.find("received object=Tensor(shape=(3, 32, 32), dtype=torch.float16) piggypayload=None"),
            std::string::npos)
      << send.out;
  EXPECT_EQ(echo.wait_for(kProcessDeadline), 0) << echo.output();
}

// The CLI's --tensor-shape tensor, checked by a Comm in this process acting as node-b: V0.1's
// torch.arange(numel), element i holding i in the tensor's dtype (integers wrap).
TEST_F(NodeCliTest, TensorPatternArrivesIntact) {
  auto node_b = Comm::create(load_node_config(config_b_));
  const Peer& a = node_b->peer("node-a");
  struct Case {
    const char* dtype;
    DType expected;
  };
  const Case cases[] = {{"float32", DType::kFloat32}, {"half", DType::kFloat16}, {"bfloat16", DType::kBFloat16},
                        {"int8", DType::kInt8}, {"bool", DType::kBool}, {"long", DType::kInt64}};
  std::uint32_t tag = 10;
  for (const Case& c : cases) {
    ++tag;
    ProcessResult send = run(node(config_a_, {"send", "--dst", "node-b", "--tag", std::to_string(tag),
                                              "--tensor-shape", "2,130", "--tensor-dtype", c.dtype, "--timeout", "20"}),
                             std::string("send-") + c.dtype);
    ASSERT_EQ(send.exit_code, 0) << send.out << send.err;
    Received got = node_b->recv(a, {.tag = tag, .timeout = 20s, .wait_for_capacity = true}).get();
    ASSERT_TRUE(got.value.is<Tensor>()) << summarize(got.value);
    const Tensor& t = got.value.as<Tensor>();
    EXPECT_EQ(t.dtype(), c.expected) << c.dtype;
    EXPECT_EQ(t.shape(), (Shape{2, 130})) << c.dtype;
    // Elements 1, 2, 250, 255, 256 and 259 (past a uint8 / int8 wrap).
    switch (c.expected) {
      case DType::kFloat32:
        EXPECT_EQ(t.data_as<float>()[2], 2.0f);
        EXPECT_EQ(t.data_as<float>()[250], 250.0f);
        EXPECT_EQ(t.data_as<float>()[259], 259.0f);
        break;
      case DType::kFloat16:  // IEEE half bits: 1.0 = 0x3c00, 2.0 = 0x4000, 250.0 = 0x5bd0, 259.0 = 0x5c0c
        EXPECT_EQ(t.data_as<std::uint16_t>()[1], 0x3c00);
        EXPECT_EQ(t.data_as<std::uint16_t>()[2], 0x4000);
        EXPECT_EQ(t.data_as<std::uint16_t>()[250], 0x5bd0);
        EXPECT_EQ(t.data_as<std::uint16_t>()[259], 0x5c0c);
        break;
      case DType::kBFloat16:  // float32's top half, rounded: 1.0 = 0x3f80, 250.0 = 0x437a, 259 -> 260.0 = 0x4382
        EXPECT_EQ(t.data_as<std::uint16_t>()[1], 0x3f80);
        EXPECT_EQ(t.data_as<std::uint16_t>()[250], 0x437a);
        EXPECT_EQ(t.data_as<std::uint16_t>()[259], 0x4382);
        break;
      case DType::kInt8:  // wraps as torch.arange's int8 does
        EXPECT_EQ(t.data_as<std::int8_t>()[2], 2);
        EXPECT_EQ(t.data_as<std::int8_t>()[250], -6);
        EXPECT_EQ(t.data_as<std::int8_t>()[256], 0);
        EXPECT_EQ(t.data_as<std::int8_t>()[259], 3);
        break;
      case DType::kInt64:
        EXPECT_EQ(t.data_as<std::int64_t>()[259], 259);
        break;
      case DType::kBool:  // torch.arange has no bool; it alternates
        EXPECT_EQ(t.data_as<std::uint8_t>()[0], 0);
        EXPECT_EQ(t.data_as<std::uint8_t>()[1], 1);
        EXPECT_EQ(t.data_as<std::uint8_t>()[2], 0);
        EXPECT_EQ(t.data_as<std::uint8_t>()[259], 1);
        break;
      default:
        break;
    }
  }
  node_b->close();
}

// --json and --metadata arrive as the Values the CLI promises: objects as Dicts keeping the
// key order written, arrays as Lists, integers as ints (up to uint64), floats, bools, null.
TEST_F(NodeCliTest, JsonPayloadArrivesAsValues) {
  auto node_b = Comm::create(load_node_config(config_b_));
  ProcessResult send = run(node(config_a_, {"send", "--dst", "node-b", "--tag", "7", "--timeout", "20", "--json",
                                            R"({"zeta": 1, "alpha": [1.5, true, null, "s"], "big": 18446744073709551615, "neg": -5})",
                                            "--metadata", R"({"trace_id": "t-1", "hops": [1, 2]})"}),
                           "send-json");
  ASSERT_EQ(send.exit_code, 0) << send.out << send.err;
  Received got = node_b->recv(node_b->peer("node-a"), {.tag = 7, .timeout = 20s, .wait_for_capacity = true}).get();
  Value expected = Dict{{"zeta", 1},
                        {"alpha", List{1.5, true, None{}, "s"}},
                        {"big", std::uint64_t{18446744073709551615ull}},
                        {"neg", -5}};
  EXPECT_EQ(got.value, expected) << summarize(got.value);
  Value expected_piggy = Dict{{"trace_id", "t-1"}, {"hops", List{1, 2}}};
  EXPECT_EQ(got.piggypayload, expected_piggy) << summarize(got.piggypayload);
  node_b->close();
}

// A --count 0 server outlives its peers: two sender processes one after the other (the first
// one's disconnect must not end it) with a stranger speaking garbage in between, then SIGINT
// closes it with exit code 0.
TEST_F(NodeCliTest, ServeForeverSurvivesReconnectsAndStopsOnSigint) {
  Process echo = Process::spawn(node(config_b_, {"echo", "--src", "node-a", "--count", "0"}), dir_.path(), "echo");
  for (const char* text : {"first", "second"}) {
    // The first sender proves the server listens, so the garbage goes to the right process.
    if (std::string(text) == "second") send_garbage(port_b_);
    ProcessResult send = run(node(config_a_, {"send", "--dst", "node-b", "--text", text, "--expect-reply",
                                              "--timeout", "20"}),
                             std::string("send-") + text);
    EXPECT_EQ(send.exit_code, 0) << send.out << send.err << echo.output();
    EXPECT_NE(send.out.find("received object='" + std::string(text) + "' piggypayload=None"), std::string::npos)
        << send.out;
    EXPECT_NE(send.out.find(text), std::string::npos) << send.out;
  }
  ASSERT_TRUE(echo.running()) << echo.output();
  echo.signal(SIGINT);
  EXPECT_EQ(echo.wait_for(kProcessDeadline), 0) << echo.output();
}

// Served with --count 0, a peer that breaks the protocol after its handshake costs a note on
// stderr, not the server: the same peer is served when it comes back speaking COMM v1.
TEST_F(NodeCliTest, ServeForeverSurvivesAProtocolError) {
  Process echo = Process::spawn(node(config_b_, {"echo", "--src", "node-a", "--count", "0"}), dir_.path(), "echo");
  ProcessResult first = run(node(config_a_, {"send", "--dst", "node-b", "--text", "before", "--expect-reply",
                                             "--timeout", "20"}),
                            "send-before");
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err << echo.output();
  break_protocol_as(port_b_, "node-a");
  ProcessResult second = run(node(config_a_, {"send", "--dst", "node-b", "--text", "after", "--expect-reply",
                                              "--timeout", "20"}),
                             "send-after");
  EXPECT_EQ(second.exit_code, 0) << second.out << second.err << echo.output();
  EXPECT_NE(second.out.find("after"), std::string::npos) << second.out;
  ASSERT_TRUE(echo.running()) << echo.output();
  echo.signal(SIGTERM);
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

TEST_F(NodeCliTest, NegativeCountIsRefused) {
  ProcessResult r = run(node(config_b_, {"recv", "--src", "node-a", "--count", "-1"}), "negative-count");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--count"), std::string::npos) << r.err;
}

// A second Ctrl-C while the node stops is taken and ignored: the exit code is the documented
// one, never death by the signal (which would show as 128 + SIGINT with no final lines).
TEST_F(NodeCliTest, SecondSigintDoesNotKill) {
  for (const char* count : {"0", "2"}) {
    Process recv = Process::spawn(node(config_b_, {"recv", "--src", "node-a", "--count", count}), dir_.path(),
                                  std::string("recv-") + count);
    // Wait until it listens: the signals must reach the node, not a process still starting.
    auto deadline = std::chrono::steady_clock::now() + kProcessDeadline;
    int fd;
    while ((fd = connect_loopback(port_b_)) < 0) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << recv.output();
      std::this_thread::sleep_for(20ms);
    }
    ::close(fd);
    recv.signal(SIGINT);
    recv.signal(SIGINT);
    const bool forever = std::string(count) == "0";
    EXPECT_EQ(recv.wait_for(kProcessDeadline), forever ? 0 : 130) << recv.output();
    // 130 is also how a death by SIGINT reads: the node's own last line tells them apart.
    if (!forever) EXPECT_NE(recv.output().find("wcomm node: interrupted"), std::string::npos) << recv.output();
  }
}

TEST_F(NodeCliTest, MissingConfigExits2NamingTheFile) {
  std::string missing = (dir_.path() / "nope.yaml").string();
  ProcessResult r = run(node(missing, {"recv", "--src", "node-b"}), "missing-config");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("nope.yaml"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace wcomm::testing
