// Helpers for Comm integration tests: pairs of Comms on loopback on reserved ports, and a
// raw TCP client for speaking (or breaking) the protocol by hand.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <set>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "free_port.h"
#include "wcomm/comm.h"

namespace wcomm::testing {

using namespace std::chrono_literals;

struct Pair {
  std::shared_ptr<Comm> a, b;
  Peer peer_a, peer_b;  // as configured on the other side
};

// Two Comms, node-a and node-b, that know each other. Extra peers may be listed on both.
inline Pair make_pair(CommConfig config_a = {}, CommConfig config_b = {}, std::vector<Peer> extra_peers = {}) {
  ReservedPort port_a, port_b;  // held until both listen
  Pair p;
  p.peer_a = {"node-a", "127.0.0.1", port_a.port()};
  p.peer_b = {"node-b", "127.0.0.1", port_b.port()};
  std::vector<Peer> peers_a{p.peer_b}, peers_b{p.peer_a};
  peers_a.insert(peers_a.end(), extra_peers.begin(), extra_peers.end());
  peers_b.insert(peers_b.end(), extra_peers.begin(), extra_peers.end());
  p.a = Comm::create({p.peer_a, peers_a, "127.0.0.1", config_a});
  p.b = Comm::create({p.peer_b, peers_b, "127.0.0.1", config_b});
  return p;
}

// The operation's result, failing the test if it takes longer than limit.
template <class T>
Result<T> wait_result(Future<T> f, std::chrono::seconds limit = 10s) {
  Result<T>* r = f.wait_for(limit);
  if (!r) {
    ADD_FAILURE() << "operation did not complete within " << limit.count() << " s";
    return Error{ErrorCode::kOperationTimeout, "test limit"};
  }
  return *r;
}

template <class T>
T wait_value(Future<T> f, std::chrono::seconds limit = 10s) {
  return wait_result(std::move(f), limit).value();
}

// A blocking raw TCP client for hand-made frames.
class RawClient {
 public:
  explicit RawClient(std::uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() { close(); }
  bool connected() const { return connected_; }
  void write(const std::vector<std::uint8_t>& bytes) { (void)::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  // Reads until EOF, an error or n bytes; returns what it read.
  std::vector<std::uint8_t> read(std::size_t n) {
    std::vector<std::uint8_t> out(n);
    std::size_t got = 0;
    while (got < n) {
      ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    out.resize(got);
    return out;
  }
  // True once the other side has closed the connection (EOF or reset).
  bool closed_by_peer() {
    std::uint8_t byte;
    ssize_t r = ::recv(fd_, &byte, 1, 0);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// A socket that listens on 127.0.0.1 but never accepts: the kernel completes a dialer's TCP
// handshake, and nobody ever answers HELLO (a peer that hangs while dialed).
class MuteListener {
 public:
  MuteListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("MuteListener: cannot listen on 127.0.0.1");
    port_ = ntohs(addr.sin_port);
  }
  ~MuteListener() { ::close(fd_); }
  MuteListener(const MuteListener&) = delete;
  MuteListener& operator=(const MuteListener&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// node-a, whose one peer "mute" is a MuteListener: its dials connect and never complete.
inline std::shared_ptr<Comm> comm_dialing_mute(const MuteListener& mute, double connect_timeout_s,
                                               const ReservedPort& port_a) {
  CommConfig config;
  config.connect_timeout_s = connect_timeout_s;
  return Comm::create({{"node-a", "127.0.0.1", port_a.port()}, {{"mute", "127.0.0.1", mute.port()}}, "127.0.0.1",
                       config});
}

// `read(fd)` on both ends of this process's TCP connections to `port`, read from the sockets
// themselves: the dialer's end (peer port `port`), then the acceptor's end paired with it.
inline std::vector<int> on_both_tcp_ends(std::uint16_t port, const std::function<int(int)>& read) {
  struct End {
    int fd;
    std::uint16_t local, remote;
  };
  std::vector<End> ends;
  std::set<std::filesystem::path> sockets;  // one end per socket (a socket may have several fds)
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    std::error_code ec;
    if (!sockets.insert(std::filesystem::read_symlink(entry.path(), ec)).second || ec) continue;
    sockaddr_in local{}, remote{};
    socklen_t n = sizeof local, m = sizeof remote;
    int type = 0;
    socklen_t t = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &t) != 0 || type != SOCK_STREAM) continue;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &n) != 0 || local.sin_family != AF_INET) continue;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &m) != 0) continue;  // a listener
    ends.push_back({fd, ntohs(local.sin_port), ntohs(remote.sin_port)});
  }
  std::vector<int> out;
  for (const End& dialer : ends) {
    if (dialer.remote != port) continue;
    out.push_back(read(dialer.fd));
    for (const End& acceptor : ends)
      if (acceptor.local == port && acceptor.remote == dialer.local) out.push_back(read(acceptor.fd));
  }
  return out;
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A pair whose connection is up (so that a recv has a connection to read). transport: both
// sides' CommConfig::transport ("auto": a same-host pair is upgraded to shm).
inline Pair connected_pair(CommConfig config_b = {}, const std::string& transport = "auto") {
  CommConfig config_a;
  config_a.transport = config_b.transport = transport;
  auto p = make_pair(config_a, config_b);
  wait_value(p.a->send(Value("hello"), p.a->peer("node-b")));
  EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value("hello"));
  return p;
}

// close() must not throw away what a completed send handed to the kernel. Linux resets a
// connection closed over unread bytes and drops what it had not sent yet, so close() ends
// each stream gracefully: an end of stream after the data, then it reads (and drops) what the
// peer still sends until that peer ends too. Here node-a closes while node-b still sends to
// it (bytes node-a never reads) and has not read node-a's last messages.
inline void expect_close_keeps_completed_sends(CommConfig config_a, CommConfig config_b) {
  // Each side stops reading at 1 MiB unreceived.
  config_a.max_peer_unreceived_bytes = config_b.max_peer_unreceived_bytes = 1 << 20;
  auto p = make_pair(config_a, config_b);
  const Peer to_a = p.b->peer("node-a"), to_b = p.a->peer("node-b");
  constexpr std::size_t kSize = 256 << 10;
  const auto payload = [](int i) { return std::string(kSize, char('a' + i % 26)); };
  std::vector<Future<SendResult>> from_b;  // node-a never reads these
  for (int i = 0; i < 16; ++i) from_b.push_back(p.b->send(Value(payload(i)), to_a, {}, {.tag = 1}));
  // 32 MiB to node-b, which reads none of it yet: the sends complete until both kernels' buffers
  // are full, then wait. Close node-a once no send has completed for 200 ms (hang guard: 20 s);
  // a slower machine only leaves less in the kernel, which the test does not depend on.
  std::vector<Future<SendResult>> to_b_sends;
  for (int i = 0; i < 128; ++i) to_b_sends.push_back(p.a->send(Value(payload(i)), to_b, {}, {.tag = 2}));
  const auto completed = [&] {
    return std::count_if(to_b_sends.begin(), to_b_sends.end(), [](auto& f) { return f.ready(); });
  };
  ASSERT_NE(to_b_sends.front().wait_for(20s), nullptr) << "node-a's first send never completed";  // (hang guard)
  using Clock = std::chrono::steady_clock;
  for (auto start = Clock::now(), last_change = start; Clock::now() - last_change < 200ms;) {
    ASSERT_LT(Clock::now() - start, 20s) << "node-a's sends never stopped completing";
    const auto before = completed();
    std::this_thread::sleep_for(20ms);
    if (completed() != before) last_change = Clock::now();
  }
  // node-b reads from now on, while node-a closes, until the frame node-a's close cut short
  // (its recv fails) or, if none was cut, nothing has come for 2 s (node-b's recvs would wait
  // for node-a to come back; each message is in node-b's kernel or on its way by then).
  auto reader = std::async(std::launch::async, [&] {
    int got = 0;
    for (;; ++got) {
      auto r = wait_result(p.b->recv(to_a, {.tag = 2, .timeout = 2s}), 20s);
      if (!r.ok()) break;
      EXPECT_EQ(r.value().value, Value(payload(got))) << "message " << got;
    }
    return got;
  });
  p.a->close();
  int ok = 0;
  for (auto& f : to_b_sends) {
    auto r = wait_result(std::move(f));
    if (r.ok()) ++ok;
    else EXPECT_EQ(r.error().code, ErrorCode::kClosed) << r.error().message;
  }
  ASSERT_GT(ok, 0);
  EXPECT_LT(ok, 128) << "node-b's kernel took everything: nothing was left to lose";
  EXPECT_GE(reader.get(), ok) << "sends that completed before close() never reached node-b";
}

// Runs fn on a new thread and returns its future; gives the thread time to block.
template <class Fn>
auto on_blocked_thread(Fn fn) {
  auto result = std::async(std::launch::async, std::move(fn));
  std::this_thread::sleep_for(100ms);
  return result;
}

}  // namespace wcomm::testing
