// Same-host peers over shared memory: transport selection (auto upgrades, V0.1 peers stay on
// TCP), what stats say, cross-memory attach refused (a peer running as another user), a
// writer killed while its memory is read, nothing left behind after close or a crash, and
// shared memory beyond a limit (named in the error; auto falls back to TCP).
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "comm_fixture.h"
#include "process_util.h"
#include "wcomm/codec.h"

namespace wcomm::testing {
namespace {

// Lines of /proc/self/maps and entries of /proc/self/fd that are wcomm shared memory.
int shm_mappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find("memfd:wcomm-shm") != std::string::npos;
  return n;
}
int shm_descriptors() {
  int n = 0;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    n += std::filesystem::read_symlink(fd.path(), ec).string().find("memfd:wcomm-shm") != std::string::npos;
  }
  return n;
}

Tensor pattern(std::size_t bytes, std::uint8_t seed) {
  Tensor t = Tensor::empty(DType::kUInt8, {std::int64_t(bytes)});
  for (std::size_t i = 0; i < bytes; ++i) t.data()[i] = static_cast<std::uint8_t>(i * 31 + seed);
  return t;
}

TEST(CommShm, AutoUsesSharedMemoryOnOneHostAndStatsSayHow) {
  auto p = make_pair();
  const Peer& b = p.a->peer("node-b");
  const Value big(pattern(8u << 20, 7));
  wait_value(p.a->send(big, b));
  EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, big);
  const PeerStats s = p.a->stats().peers.at("node-b");
  EXPECT_TRUE(s.connected);
  EXPECT_EQ(s.transport, "shm");
  EXPECT_EQ(s.payload_path, "cma");  // the peer reads the tensor straight from our memory
  EXPECT_EQ(p.b->stats().peers.at("node-a").transport, "shm");
}

TEST(CommShm, EachTransportCanBeChosenAndAPeerMayOverrideIt) {
  for (const char* transport : {"tcp", "unix", "shm"}) {
    CommConfig c;
    c.transport = transport;
    auto p = make_pair(c, c);
    wait_value(p.a->send(Value(transport), p.a->peer("node-b")));
    EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value(transport));
    const PeerStats s = p.a->stats().peers.at("node-b");
    EXPECT_EQ(s.transport, transport);
    EXPECT_EQ(s.payload_path, std::string(transport) == "shm" ? "cma" : "stream");
  }
  // node-a is auto, but lists node-b as tcp.
  ReservedPort port_a, port_b;
  Peer a{"node-a", "127.0.0.1", port_a.port()}, b{"node-b", "127.0.0.1", port_b.port()};
  Peer b_over_tcp = b;
  b_over_tcp.transport = "tcp";
  auto comm_a = Comm::create({a, {b_over_tcp}, "127.0.0.1", {}});
  CommConfig tcp_only;
  tcp_only.transport = "tcp";
  auto comm_b = Comm::create({b, {a}, "127.0.0.1", tcp_only});
  wait_value(comm_a->send(Value(1), comm_a->peer("node-b")));
  EXPECT_EQ(wait_value(comm_b->recv(comm_b->peer("node-a"))).value, Value(1));
  EXPECT_EQ(comm_a->stats().peers.at("node-b").transport, "tcp");
}

TEST(CommShm, ATransportWithoutAnAddressIsRefusedAtCreate) {
  CommConfig c;
  c.transport = "unix";
  Peer b{"node-b", "", 0, {Address::parse("shm://@somewhere")}};
  try {
    Comm::create({{"node-a", "127.0.0.1", 0}, {b}, "127.0.0.1", c});
    FAIL() << "created";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("no address for transport 'unix'"), std::string::npos) << e.what();
  }
  c.transport = "carrier-pigeon";
  EXPECT_THROW(c.validate(), InvalidArgumentError);
}

TEST(CommShm, PerTagOrderIsKeptForMessagesQueuedBeforeThePeerWasUp) {
  ReservedPort port_a, port_b;
  Peer a{"node-a", "127.0.0.1", port_a.port()}, b{"node-b", "127.0.0.1", port_b.port()};
  // shm, not auto: this test is about the queue kept across the wait, on shm (auto's start
  // order is NodesStartingTogetherOnOneHostMeetOverSharedMemory's).
  CommConfig shm;
  shm.transport = "shm";
  auto comm_a = Comm::create({a, {b}, "127.0.0.1", shm});
  std::vector<Future<SendResult>> sends;
  for (int i = 0; i < 200; ++i) sends.push_back(comm_a->send(Value(i), comm_a->peer("node-b"), {}, {.tag = std::uint32_t(i % 2)}));
  auto comm_b = Comm::create({b, {a}, "127.0.0.1", {}});  // within the 2 s a refused peer is given
  for (auto& s : sends) wait_value(std::move(s));
  for (int tag = 0; tag < 2; ++tag)
    for (int i = tag; i < 200; i += 2)
      ASSERT_EQ(wait_value(comm_b->recv(comm_b->peer("node-a"), {.tag = std::uint32_t(tag)})).value, Value(i));
  EXPECT_EQ(comm_a->stats().peers.at("node-b").transport, "shm");
}

// Nodes of one job start in any order, and a node's dial may find the peer's same-host name
// refused and, a moment later, its TCP address answering (the peer started in between):
// the dialer looks at the same-host name once more before it settles on TCP. The window is
// narrow, so this is a guard over many starts, not a reproduction of one.
TEST(CommShm, NodesStartingTogetherOnOneHostMeetOverSharedMemory) {
  std::mt19937 random{std::random_device{}()};
  for (int start = 0; start < 20; ++start) {
    ReservedPort port_a, port_b;
    Peer a{"node-a", "127.0.0.1", port_a.port()}, b{"node-b", "127.0.0.1", port_b.port()};
    auto comm_a = Comm::create({a, {b}, "127.0.0.1", {}});
    auto sent = comm_a->send(Value(start), comm_a->peer("node-b"));  // dials while node-b is not up
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(random)));
    auto comm_b = Comm::create({b, {a}, "127.0.0.1", {}});
    wait_value(std::move(sent));
    EXPECT_EQ(wait_value(comm_b->recv(comm_b->peer("node-a"))).value, Value(start));
    ASSERT_EQ(comm_a->stats().peers.at("node-b").transport, "shm") << "start " << start;
    ASSERT_EQ(comm_b->stats().peers.at("node-a").transport, "shm") << "start " << start;
  }
}

TEST(CommShm, AV01PeerIsReachedOverTcp) {
  // A V0.1 node listens on TCP only: node-a finds no shared-memory listener and falls back.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  auto a = Comm::create({{"node-a", "127.0.0.1", 0}, {{"node-v01", "127.0.0.1", ntohs(addr.sin_port)}}, "127.0.0.1", {}});
  auto sent = a->send(Value("hello"), a->peer("node-v01"));
  const int fd = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(fd, 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  // Its HELLO, answered as V0.1 does (no features), then the message.
  std::vector<std::uint8_t> head(kHeaderSize);
  ASSERT_EQ(::recv(fd, head.data(), head.size(), MSG_WAITALL), ssize_t(kHeaderSize));
  auto header = parse_header(head.data(), CommConfig{});
  ASSERT_TRUE(header.ok());
  std::vector<std::uint8_t> manifest(header.value().manifest_size);
  ASSERT_EQ(::recv(fd, manifest.data(), manifest.size(), MSG_WAITALL), ssize_t(manifest.size()));
  auto hello = decode_control(header.value(), manifest);
  ASSERT_TRUE(hello.ok());
  auto ack = encode_control(FrameKind::kHelloAck, {"node-v01", hello.value().connection_id, {}, {}});
  ASSERT_EQ(::send(fd, ack.data(), ack.size(), MSG_NOSIGNAL), ssize_t(ack.size()));
  wait_value(std::move(sent));
  EXPECT_EQ(a->stats().peers.at("node-v01").transport, "tcp");
  EXPECT_EQ(a->stats().peers.at("node-v01").payload_path, "stream");
  ::close(fd);
  ::close(listener);
}

TEST(CommShm, NothingIsLeftBehindAfterClose) {
  const int maps_before = shm_mappings(), fds_before = shm_descriptors();
  {
    auto p = make_pair();
    wait_value(p.a->send(Value(pattern(1u << 20, 1)), p.a->peer("node-b")));
    wait_value(p.b->recv(p.b->peer("node-a")));
    EXPECT_GT(shm_mappings(), maps_before);
    EXPECT_EQ(shm_descriptors(), fds_before) << "the memfd is closed once mapped";
    p.a->close();
    p.b->close();
  }
  EXPECT_EQ(shm_mappings(), maps_before);
  EXPECT_EQ(shm_descriptors(), fds_before);
}

// Lowers this process's file size limit (RLIMIT_FSIZE, `ulimit -f`) below the size of the shm
// rings for its lifetime: a real limit that memfd sizing obeys, as a full /dev/shm would refuse.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = bytes;
    EXPECT_EQ(::setrlimit(RLIMIT_FSIZE, &lowered), 0);
  }
  ~FileSizeLimit() { ::setrlimit(RLIMIT_FSIZE, &saved_); }

 private:
  rlimit saved_{};
};

TEST(CommShm, SharedMemoryBeyondALimitNamesItAndAutoFallsBackToTcp) {
  const int maps_before = shm_mappings(), fds_before = shm_descriptors();
  FileSizeLimit limit(1u << 20);  // the rings need 2 MiB and a page
  {
    // auto: the same-host dial fails, the peer's TCP address is dialled at once.
    auto p = make_pair();
    wait_value(p.a->send(Value(pattern(256u << 10, 2)), p.a->peer("node-b")));
    EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value(pattern(256u << 10, 2)));
    EXPECT_EQ(p.a->stats().peers.at("node-b").transport, "tcp");
  }
  {
    // shm alone: the send fails, and its error says which limit.
    CommConfig shm;
    shm.transport = "shm";
    shm.connect_timeout_s = 1;
    auto p = make_pair(shm, shm);
    auto r = wait_result(p.a->send(Value(1), p.a->peer("node-b")));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kConnectionFailed);
    EXPECT_NE(r.error().message.find("RLIMIT_FSIZE"), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(shm_mappings(), maps_before);
  EXPECT_EQ(shm_descriptors(), fds_before) << "a failed set-up leaves no memfd open";
}

// node-b as a `wcomm node echo` process, optionally as another user.
class EchoProcess {
 public:
  explicit EchoProcess(std::vector<std::string> prefix = {}) : prefix_(std::move(prefix)), ports_(free_tcp_ports(2)) {
    std::filesystem::permissions(dir_.path(), std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                                  std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                                  std::filesystem::perms::others_exec);
    config_ = dir_.write("b.yaml", "local: {node_id: node-b, host: 127.0.0.1, port: " + std::to_string(ports_[1]) +
                                       "}\npeers: [{node_id: node-a, host: 127.0.0.1, port: " +
                                       std::to_string(ports_[0]) + "}]\ncomm: {max_message_bytes: 536870912, max_peer_queued_bytes: 536870912}\n");
    std::vector<std::string> argv = prefix_;
    for (std::string a : {std::string(WCOMM_CLI), std::string("node"), std::string("--config"), config_,
                          std::string("echo"), std::string("--src"), std::string("node-a"), std::string("--tag"),
                          std::string("1"), std::string("--count"), std::string("0"), std::string("--timeout"),
                          std::string("60")})
      argv.push_back(a);
    process_ = Process::spawn(argv, dir_.path(), "echo");
  }
  Peer a() const { return {"node-a", "127.0.0.1", ports_[0]}; }
  Peer b() const { return {"node-b", "127.0.0.1", ports_[1]}; }
  Process& process() { return process_; }

 private:
  std::vector<std::string> prefix_;
  TempDir dir_;
  std::vector<std::uint16_t> ports_;
  std::string config_;
  Process process_;
};

CommConfig big_messages() {
  CommConfig c;
  c.max_message_bytes = c.max_peer_queued_bytes = 512ull << 20;
  return c;
}

TEST(CommShm, APeerThatMayNotReadOurMemoryGetsPayloadsThroughTheRing) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run the peer as another user";
  // node-b runs as nobody: it may not read a root process's memory, and says so; we may
  // read its memory (root may), so its payloads still come by cross-memory attach.
  EchoProcess echo({"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"});
  auto a = Comm::create({echo.a(), {echo.b()}, "127.0.0.1", big_messages()});
  const Peer& b = a->peer("node-b");
  const Value big(pattern(32u << 20, 3));
  auto sent = wait_result(a->send(big, b, {}, {.tag = 1}), 30s);
  ASSERT_TRUE(sent.ok()) << sent.error().message << "\n" << echo.process().output();
  EXPECT_EQ(wait_value(a->recv(b, {.tag = 1, .timeout = 30s}), 40s).value, big);
  const PeerStats s = a->stats().peers.at("node-b");
  EXPECT_EQ(s.transport, "shm");
  EXPECT_EQ(s.payload_path, "ring");
  // Its log says why (written at set-up, before the echo came back).
  EXPECT_NE(echo.process().output().find("cross-memory attach refused"), std::string::npos) << echo.process().output();
}

TEST(CommShm, AWriterKilledWhileItsMemoryIsReadFailsTheReaderCleanly) {
  EchoProcess echo;
  auto a = Comm::create({echo.a(), {echo.b()}, "127.0.0.1", big_messages()});
  const Peer& b = a->peer("node-b");
  const int maps_before = shm_mappings();  // none yet: the first send dials
  // The echo process writes 64 MiB tensors back; node-a reads each straight from its memory.
  // Killed while one is being read, the read fails with a typed error and nothing hangs.
  const Value big(pattern(64u << 20, 5));
  std::vector<Future<SendResult>> sends;
  for (int i = 0; i < 4; ++i) sends.push_back(a->send(big, b, {}, {.tag = 1}));
  EXPECT_EQ(wait_value(a->recv(b, {.tag = 1, .timeout = 30s}), 40s).value, big);
  auto next = a->recv(b, {.tag = 1, .timeout = 30s});
  ASSERT_TRUE(echo.process().kill().has_value());
  auto r = wait_result(std::move(next), 40s);
  if (r.ok()) {
    EXPECT_EQ(r.value().value, big) << "a message read from a dying writer must be whole or fail";
  } else {
    EXPECT_TRUE(r.error().code == ErrorCode::kConnectionClosed || r.error().code == ErrorCode::kProtocol)
        << r.error().message;
  }
  for (auto& s : sends) wait_result(std::move(s), 40s);  // each completes, one way or the other
  // The dead peer's connection is gone, and its shared memory with it.
  for (int i = 0; i < 500 && shm_mappings() > maps_before; ++i) std::this_thread::sleep_for(10ms);  // bounded poll
  EXPECT_EQ(shm_mappings(), maps_before) << "the dead peer's rings are still mapped";
  EXPECT_EQ(shm_descriptors(), 0);
}

}  // namespace
}  // namespace wcomm::testing
