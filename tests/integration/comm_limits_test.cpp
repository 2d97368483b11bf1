// Limits before and after the handshake, with real sockets and processes on loopback: 2000
// idle sockets, a slow-loris HELLO, a flood from one source address, connections that each
// hold most of a large frame, and a node at its descriptor limit.
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "comm_fixture.h"
#include "process_util.h"
#include "wcomm/codec.h"

namespace wcomm::testing {
namespace {

// A TCP connection to 127.0.0.1:port from source (a loopback address), non-blocking writes
// bounded by a send timeout.
int connect_from(const char* source, std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
    ::close(fd);
    return -1;
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// True once the other side has closed fd (EOF or reset), false if it is still open after the
// socket's receive timeout.
bool closed_by_peer(int fd) {
  char byte;
  while (true) {
    const ssize_t r = ::recv(fd, &byte, 1, 0);
    if (r > 0) continue;  // (a HELLO_ACK)
    return r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }
}

std::uint64_t rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  std::uint64_t kb = 0;
  while (in >> key)
    if (key == "VmRSS:" && in >> kb) break;
  return kb * 1024;
}

double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string skip;
  for (int i = 0; i < 11; ++i) fields >> skip;  // state .. cmajflt
  double utime = 0, stime = 0;
  fields >> utime >> stime;
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

CommConfig tcp_config() {
  CommConfig c;
  c.transport = "tcp";
  return c;
}

TEST(CommLimits, TwoThousandIdleSocketsDoNotStopARealPeerFromConnecting) {
  auto p = make_pair(tcp_config(), tcp_config());  // default bounds: 256 pending, 32 per source
  std::vector<int> idle;
  for (int i = 0; i < 2000; ++i) {
    const int fd = connect_from("127.0.0.1", p.b->port());
    ASSERT_GE(fd, 0) << "connection " << i;
    idle.push_back(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  wait_value(p.a->send(Value("real"), p.a->peer("node-b")), 30s);
  EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a")), 30s).value, Value("real"));
  EXPECT_LT(seconds_since(start), 20.0);
  for (int i = 0; i < 500 && p.b->stats().connections_rejected < 1000; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GE(p.b->stats().connections_rejected, 1000u) << "the idle sockets were not dropped";
  for (int fd : idle) ::close(fd);
}

TEST(CommLimits, ASlowLorisHelloIsClosedAtTheDeadline) {
  CommConfig guarded = tcp_config();
  guarded.handshake_timeout_s = 0.5;
  auto p = make_pair(tcp_config(), guarded);
  const int fd = connect_from("127.0.0.1", p.b->port());
  ASSERT_GE(fd, 0);
  const auto hello = encode_control(FrameKind::kHello, {"node-a", std::string(32, '1'), {}});
  // One byte every 50 ms: the whole HELLO would take 50 ms x its size, far past the deadline.
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  for (std::size_t i = 0; i < hello.size() && !closed; ++i) {
    if (::send(fd, &hello[i], 1, MSG_NOSIGNAL) != 1) closed = true;
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 50) > 0) closed = closed_by_peer(fd);
  }
  const double after = seconds_since(start);
  EXPECT_TRUE(closed) << "still open after the whole HELLO, slowly";
  EXPECT_GE(after, 0.4);
  EXPECT_LT(after, 2.0);
  for (int i = 0; i < 200 && p.b->stats().connections_rejected == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GE(p.b->stats().connections_rejected, 1u);  // (counted once the close has run its course)
  ::close(fd);
}

TEST(CommLimits, AFloodFromOneSourceDoesNotEvictAnotherSourcesHandshake) {
  CommConfig guarded = tcp_config();
  guarded.max_pending_handshakes_per_source = 4;
  guarded.handshake_timeout_s = 30;
  auto p = make_pair(tcp_config(), guarded);
  const int other = connect_from("127.0.0.3", p.b->port());  // waits first, from elsewhere
  ASSERT_GE(other, 0);
  std::vector<int> flood;
  for (int i = 0; i < 50; ++i) flood.push_back(connect_from("127.0.0.2", p.b->port()));
  for (int i = 0; i < 500 && p.b->stats().connections_rejected < 46; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(p.b->stats().connections_rejected, 46u) << "the flood beyond 4 pending from 127.0.0.2 is dropped";
  EXPECT_FALSE(closed_by_peer(other)) << "127.0.0.3's pending handshake was evicted by 127.0.0.2's flood";
  for (int fd : flood) ::close(fd);
  ::close(other);
}

TEST(CommLimits, FramesBeingReadCountAgainstTheInboundBound) {
  // Ten connections naming node-a (no cluster key: anyone may), each sending a 100 MiB frame
  // but its last byte. Without the partly read frames counted, node-b would hold 1 GB.
  CommConfig bounded = tcp_config();
  bounded.max_peer_unreceived_bytes = 64ull << 20;
  auto p = make_pair(tcp_config(), bounded);
  const std::uint64_t before = rss_bytes();
  const std::size_t frame_payload = 100ull << 20;
  auto frame = encode_data(Tensor::empty(DType::kUInt8, {std::int64_t(frame_payload)}), {}, 0, 1);
  ASSERT_TRUE(frame.ok());
  std::vector<char> chunk(1 << 20, 7);
  std::vector<int> fds;
  std::vector<std::thread> senders;
  std::atomic<std::uint64_t> sent_total{0};
  for (int i = 0; i < 10; ++i) {
    const int fd = connect_from("127.0.0.1", p.b->port());
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
    senders.emplace_back([&, fd, i] {
      auto hello = encode_control(FrameKind::kHello, {"node-a", std::string(31, 'a') + "0123456789"[i], {}});
      if (::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) != ssize_t(hello.size())) return;
      const auto& head = frame.value().head;
      if (::send(fd, head.data(), head.size(), MSG_NOSIGNAL) != ssize_t(head.size())) return;
      std::size_t left = frame_payload - 1;
      while (left > 0) {  // until node-b stops reading (1 s send timeout) or all but one byte
        const ssize_t n = ::send(fd, chunk.data(), std::min(left, chunk.size()), MSG_NOSIGNAL);
        if (n <= 0) return;
        left -= static_cast<std::size_t>(n);
        sent_total += static_cast<std::uint64_t>(n);
      }
    });
  }
  for (auto& t : senders) t.join();
  const std::uint64_t grown = rss_bytes() > before ? rss_bytes() - before : 0;
#if !defined(__SANITIZE_THREAD__)  // (TSan's shadow memory is several times what it shadows)
  EXPECT_LT(grown, 400ull << 20) << "node-b holds " << (grown >> 20) << " MiB of partly read frames";
#endif
  EXPECT_LT(sent_total.load(), 600ull << 20) << "node-b read on past its inbound bound";
  for (int fd : fds) ::close(fd);
}

TEST(CommLimits, AtTheDescriptorLimitTheListenerBacksOffAndRecovers) {
  TempDir dir;
  const auto ports = free_tcp_ports(2);
  const auto yaml = [](const char* self, std::uint16_t self_port, const char* peer, std::uint16_t peer_port) {
    return std::string("local: {node_id: ") + self + ", host: 127.0.0.1, port: " + std::to_string(self_port) +
           "}\npeers:\n  - {node_id: " + peer + ", host: 127.0.0.1, port: " + std::to_string(peer_port) +
           "}\ncomm: {transport: tcp, max_pending_handshakes_per_source: 1000}\n";
  };
  const std::string config_b = dir.write("node-b.yaml", yaml("node-b", ports[1], "node-a", ports[0]));
  // node-b runs with 48 descriptors: a few dozen sockets exhaust them (its per-source bound
  // is lifted: the bounds would otherwise keep it under the limit). Under UBSan it does not
  // halt on a report: UBSan checks a vtable's memory through a pipe, which cannot be made at
  // the limit, and then reports a virtual call on a live object as one on an "invalid vptr".
  Process node = Process::spawn({"bash", "-c", std::string("export UBSAN_OPTIONS=\"${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}") +
                                                   "halt_on_error=0\"; ulimit -n 48 && exec " + WCOMM_CLI +
                                                   " node --config " + config_b +
                                                   " echo --src node-a --count 1 --timeout 60"},
                                dir.path(), "node-b");
  std::vector<int> idle;
  for (int i = 0; i < 400 && idle.empty(); ++i) {
    const int fd = connect_from("127.0.0.1", ports[1]);
    if (fd >= 0) idle.push_back(fd);
    else std::this_thread::sleep_for(25ms);
  }
  ASSERT_FALSE(idle.empty()) << "node-b did not listen\n" << node.output();
  for (int i = 0; i < 100; ++i) {
    const int fd = connect_from("127.0.0.1", ports[1]);  // beyond 48 they wait in the backlog
    if (fd >= 0) idle.push_back(fd);
  }
  // (spdlog's default logger writes to stdout.)
  for (int i = 0; i < 500 && node.out().find("accepting on") == std::string::npos; ++i) std::this_thread::sleep_for(20ms);
  ASSERT_NE(node.out().find("accepting on"), std::string::npos)
      << "node-b never hit its descriptor limit (" << idle.size() << " connections)\n" << node.output();
  // At the limit: no spinning, and one log line (rate-limited to one every 10 s).
  const double cpu_before = cpu_seconds(node.pid());
  std::this_thread::sleep_for(2s);
  const double cpu = cpu_seconds(node.pid()) - cpu_before;
  EXPECT_LT(cpu, 0.3) << "node-b used " << cpu << " s of CPU in 2 s at its descriptor limit";
  std::size_t lines = 0;
  const std::string log = node.out();
  for (std::size_t at = 0; (at = log.find("accepting on", at)) != std::string::npos; ++at) ++lines;
  EXPECT_LE(lines, 2u) << log;
  // Descriptors free up: node-b accepts again, and the real node-a gets its echo.
  for (int fd : idle) ::close(fd);
  CommConfig a_config = tcp_config();
  a_config.connect_timeout_s = 30;
  auto a = Comm::create({{"node-a", "127.0.0.1", ports[0]}, {{"node-b", "127.0.0.1", ports[1]}}, "127.0.0.1", a_config});
  wait_value(a->send(Value("real"), a->peer("node-b")), 40s);
  EXPECT_EQ(wait_value(a->recv(a->peer("node-b")), 40s).value, Value("real")) << node.output();
  EXPECT_EQ(node.wait_for(20s), std::optional<int>(0)) << node.output();
}

}  // namespace
}  // namespace wcomm::testing
