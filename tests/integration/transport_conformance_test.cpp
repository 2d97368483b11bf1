// The transport conformance suite: every transport Comm runs over passes the same tests of
// ordering, payload shapes, backpressure, the inbound bound, failures and concurrency. A new
// transport joins with one line in kTransports (how to make a test address for it).
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <thread>

#include "comm_fixture.h"
#include "transport/thread_waker.h"
#include "transport/transport.h"
#include "wcomm/codec.h"

namespace wcomm::testing {
namespace {

// Where a test node of each transport listens: a free address, named before the node starts;
// and the peers' `transport`, so that `auto` does not upgrade a same-host TCP pair to shm.
struct TransportCase {
  const char* name;
  const char* transport;
  std::function<Address(const std::string& dir, const std::string& node)> address;
};

const TransportCase kTransports[] = {
    {"tcp", "tcp", [](const std::string&, const std::string&) { return Address::tcp("127.0.0.1", ReservedPort().port()); }},
    {"unix", "unix",
     [](const std::string& dir, const std::string& node) { return Address::parse("unix://" + dir + "/" + node); }},
    {"unix_abstract", "unix",
     [](const std::string& dir, const std::string& node) { return Address::parse("unix://@" + dir + "/" + node); }},
    {"shm", "shm",
     [](const std::string& dir, const std::string& node) { return Address::parse("shm://@" + dir + "/" + node); }},
#ifdef WCOMM_HAVE_UCX  // (a build without UCX has no ucx transport to conform: WCOMM_WITH_UCX)
    {"ucx", "ucx", [](const std::string&, const std::string&) { return Address::parse("ucx://127.0.0.1:" + std::to_string(ReservedPort().port())); }},
#endif
};

// A raw byte stream over wcomm's own transport seam, for transports whose bytes do not go
// through a socket (shm, ucx): what a misbehaving peer could write into the rings or send.
class SeamStream {
 public:
  explicit SeamStream(const Address& address) {
    transport::dial(io_, address, transport::Clock::now() + 5s, {},
                    [this](std::error_code, std::unique_ptr<transport::Connection> c) { connection_ = std::move(c); });
    io_.run();
  }
  ~SeamStream() {
    if (connection_) connection_->close();
  }
  bool connected() const { return connection_ != nullptr; }
  void write(const std::vector<std::uint8_t>& bytes) {
    std::size_t done = 0;
    for (int i = 0; i < 5000 && done < bytes.size(); ++i) {
      std::error_code ec;
      done += connection_->try_write({asio::buffer(bytes.data() + done, bytes.size() - done)}, ec);
      if (ec) return;
      if (done < bytes.size()) std::this_thread::sleep_for(1ms);  // the ring is full: a bounded retry
    }
  }
  // Reads what has arrived; true once the stream ended or failed (within 5 s).
  bool closed_by_peer() {
    const auto deadline = transport::Clock::now() + 5s;
    while (transport::Clock::now() < deadline) {
      std::uint8_t buffer[4096];
      std::error_code ec;
      const std::size_t got = connection_->try_read({asio::buffer(buffer)}, 0, ec);
      if (ec) return true;
      if (got) return false;
      connection_->wait_readable(deadline, transport::this_thread_waker());
    }
    return false;
  }

 private:
  asio::io_context io_;
  std::unique_ptr<transport::Connection> connection_;
};

// A blocking raw client for any address, for hand-made frames.
class RawStream {
 public:
  explicit RawStream(const Address& address) {
    if (address.scheme == "tcp") {
      client_ = std::make_unique<RawClient>(address.port);
      return;
    }
    if (address.scheme == "shm" || address.scheme == "ucx") {
      seam_ = std::make_unique<SeamStream>(address);
      return;
    }
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::size_t offset = address.abstract ? 1 : 0;  // abstract: a leading nul byte
    std::memcpy(addr.sun_path + offset, address.path.data(), address.path.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + offset + address.path.size() +
                                            (address.abstract ? 0 : 1));
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), len) == 0;
  }
  ~RawStream() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return client_ ? client_->connected() : seam_ ? seam_->connected() : connected_; }
  void write(const std::vector<std::uint8_t>& bytes) {
    if (client_) return client_->write(bytes);
    if (seam_) return seam_->write(bytes);
    (void)::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  // Reads (and drops) what the peer sends until it closes; false if it stays open (5 s).
  bool read_until_closed() {
    for (int i = 0; i < 1000; ++i)
      if (closed_by_peer()) return true;
    return false;
  }
  bool closed_by_peer() {
    if (client_) return client_->closed_by_peer();
    if (seam_) return seam_->closed_by_peer();
    std::uint8_t byte;
    ssize_t r = ::recv(fd_, &byte, 1, 0);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
  }

 private:
  std::unique_ptr<RawClient> client_;
  std::unique_ptr<SeamStream> seam_;
  int fd_ = -1;
  bool connected_ = false;
};

void PrintTo(const TransportCase& c, std::ostream* out) { *out << c.name; }

class Conformance : public ::testing::TestWithParam<TransportCase> {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/wcomm-conformance-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    peer_a_ = {"node-a", "", 0, {GetParam().address(dir_, "a")}};
    peer_b_ = {"node-b", "", 0, {GetParam().address(dir_, "b")}};
    peer_a_.transport = peer_b_.transport = GetParam().transport;
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::shared_ptr<Comm> start_a(CommConfig config = {}) { return a_ = Comm::create({peer_a_, {peer_b_}, "", config}); }
  std::shared_ptr<Comm> start_b(CommConfig config = {}) { return b_ = Comm::create({peer_b_, {peer_a_}, "", config}); }
  void start_both(CommConfig config_a = {}, CommConfig config_b = {}) {
    start_a(config_a);
    start_b(config_b);
  }
  const Peer& b_from_a() { return a_->peer("node-b"); }
  const Peer& a_from_b() { return b_->peer("node-a"); }

  std::string dir_;
  Peer peer_a_, peer_b_;
  std::shared_ptr<Comm> a_, b_;
};

// Each case runs over its own transport: a same-host TCP pair is not upgraded to shm here.
TEST_P(Conformance, RunsOverItsOwnTransport) {
  start_both();
  wait_value(a_->send(Value("hello"), b_from_a()));
  EXPECT_EQ(wait_value(b_->recv(a_from_b())).value, Value("hello"));
  EXPECT_EQ(a_->stats().peers.at("node-b").transport, GetParam().transport);
  EXPECT_EQ(b_->stats().peers.at("node-a").transport, GetParam().transport);
}

TEST_P(Conformance, PerTagOrderIsKept) {
  start_both();
  for (int i = 0; i < 100; ++i) wait_value(a_->send(Value(i), b_from_a(), {}, {.tag = std::uint32_t(1 + i % 2)}));
  for (int i = 1; i < 100; i += 2) EXPECT_EQ(wait_value(b_->recv(a_from_b(), {.tag = 2})).value, Value(i));
  for (int i = 0; i < 100; i += 2) EXPECT_EQ(wait_value(b_->recv(a_from_b(), {.tag = 1})).value, Value(i));
}

TEST_P(Conformance, EmptyMessagesAndMessagesWithoutSegments) {
  start_both();
  const std::vector<Value> values = {Value(), Value(Dict{}), Value(List{}), Value(std::string()), Value(0),
                                     Value(Bytes{})};
  for (const Value& v : values) wait_value(a_->send(v, b_from_a()));
  for (const Value& v : values) EXPECT_EQ(wait_value(b_->recv(a_from_b())).value, v);
}

TEST_P(Conformance, A64MiBTensorArrivesWhole) {
  start_both();
  Tensor big = Tensor::empty(DType::kInt32, {16 << 20});
  for (std::size_t i = 0; i < 16u << 20; ++i) big.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(i * 2654435761u);
  auto sent = a_->send(Dict{{"t", big}}, b_from_a());
  auto got = wait_value(b_->recv(a_from_b()), 60s);
  wait_value(std::move(sent), 60s);
  EXPECT_EQ(got.value.as<Dict>().items.at(0).second.as<Tensor>(), big);
}

// A send reported complete was delivered, even when its sender closes at once (a node that
// answers and exits): over shm the reader used to drop a large payload it had copied whole
// when the writer's close came between its claim and its look at the writer's give-up flag
// (a Python node's reply failed "while reading the payload: Software caused connection abort").
// The race is narrow: each round is a fresh pair, the reader blocked in its recv.
TEST_P(Conformance, ASendThatCompletedIsDeliveredWhenItsSenderClosesAtOnce) {
  Value payload(Bytes(std::string(1 << 20, 'p')));  // large: over shm a remote record
  for (int round = 0; round < 30; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    start_both();
    wait_value(a_->send(Value("hello"), b_from_a()));  // connected
    wait_value(b_->recv(a_from_b()));
    auto got = b_->recv(a_from_b());
    ASSERT_TRUE(wait_result(a_->send(payload, b_from_a())).ok());
    a_->close();
    auto r = wait_result(std::move(got));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.value().value, payload);
    a_.reset();
    b_.reset();
  }
}

TEST_P(Conformance, ManySegmentsArriveInPlace) {
  start_both();
  List items;
  for (int i = 0; i < 2000; ++i) {
    Tensor t = Tensor::empty(DType::kInt16, {std::int64_t(1 + i % 7)});
    for (std::int64_t j = 0; j < t.shape()[0]; ++j) t.data_as<std::int16_t>()[j] = std::int16_t(i + j);
    items.items.push_back(i % 3 ? Value(t) : Value(Bytes(std::string(std::size_t(i % 5), char(i)))));
  }
  wait_value(a_->send(items, b_from_a()));
  EXPECT_EQ(wait_value(b_->recv(a_from_b())).value, Value(items));
}

TEST_P(Conformance, BackpressureFailFastWaitTimeoutCancel) {
  CommConfig small;
  small.max_peer_queued_messages = 2;
  start_a(small);  // node-b is not there yet: sends queue up while node-a retries its dial
  auto f1 = a_->send(Value(1), b_from_a());
  auto f2 = a_->send(Value(2), b_from_a());
  auto full = wait_result(a_->send(Value(3), b_from_a(), {}, {.wait_for_capacity = false}));
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, ErrorCode::kBackpressure);
  auto timed_out = wait_result(a_->send(Value(4), b_from_a(), {}, {.timeout = 0.05s}));
  ASSERT_FALSE(timed_out.ok());
  EXPECT_EQ(timed_out.error().code, ErrorCode::kOperationTimeout);
  auto cancelled = a_->send(Value(5), b_from_a());
  cancelled.cancel();
  EXPECT_EQ(wait_result(std::move(cancelled)).error().code, ErrorCode::kCancelled);
  auto waiting = a_->send(Value(6), b_from_a());  // waits for capacity
  EXPECT_EQ(waiting.wait_for(20ms), nullptr);
  start_b();
  for (auto* f : {&f1, &f2, &waiting}) wait_value(std::move(*f));
  for (int expected : {1, 2, 6}) EXPECT_EQ(wait_value(b_->recv(a_from_b())).value, Value(expected));
}

TEST_P(Conformance, InboundBoundPushesBackUntilDrained) {
  CommConfig receiver;
  receiver.max_peer_unreceived_messages = 4;
  start_both({}, receiver);
  std::vector<Future<SendResult>> sends;
  for (int i = 0; i < 200; ++i) sends.push_back(a_->send(Value(std::string(4000, char('a' + i % 26))), b_from_a()));
  for (int i = 0; i < 200; ++i)
    EXPECT_EQ(wait_value(b_->recv(a_from_b())).value, Value(std::string(4000, char('a' + i % 26))));
  for (auto& f : sends) wait_value(std::move(f));
}

TEST_P(Conformance, PeerCloseFailsWaitersAndThePeerIsServedAgain) {
  start_both();
  wait_value(a_->send(Value("hello"), b_from_a()));
  EXPECT_EQ(wait_value(b_->recv(a_from_b())).value, Value("hello"));
  auto waiting = b_->recv(a_from_b(), {.tag = 3});
  a_->close();
  auto r = wait_result(std::move(waiting));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kConnectionClosed) << r.error().message;
  start_a();  // node-a restarts at the same address
  wait_value(a_->send(Value("again"), b_from_a()));
  EXPECT_EQ(wait_value(b_->recv(a_from_b())).value, Value("again"));
}

TEST_P(Conformance, GarbageIsRejectedWhileThePeerIsServed) {
  start_both();
  RawStream raw(b_->addresses().at(0));
  ASSERT_TRUE(raw.connected());
  raw.write(std::vector<std::uint8_t>(64, 0xAB));
  EXPECT_TRUE(raw.closed_by_peer());
  for (int i = 0; i < 3; ++i) {
    wait_value(a_->send(Value(i), b_from_a()));
    EXPECT_EQ(wait_value(b_->recv(a_from_b())).value, Value(i));
  }
  EXPECT_EQ(b_->stats().connections_rejected, 1u);
}

TEST_P(Conformance, GarbageAfterTheHandshakeFailsOnlyThatConnection) {
  start_both();
  auto waiting = b_->recv(a_from_b(), {.tag = 1});
  {
    RawStream raw(b_->addresses().at(0));  // pretends to be node-a
    ASSERT_TRUE(raw.connected());
    raw.write(encode_control(FrameKind::kHello, {"node-a", "00000000000000000000000000000001", {}}));
    raw.write(std::vector<std::uint8_t>(64, 0xCD));
    EXPECT_TRUE(raw.read_until_closed());  // after HELLO_ACK
  }
  auto r = wait_result(std::move(waiting));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kProtocol) << r.error().message;
  wait_value(a_->send(Value("real"), b_from_a()));
  EXPECT_EQ(wait_value(b_->recv(a_from_b())).value, Value("real"));
}

TEST_P(Conformance, EightThreadsSendingAtOnceKeepEachThreadsOrder) {
  start_both();
  constexpr int kThreads = 8, kEach = 150;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) a_->send(List{t, i}, b_from_a(), {}, {.tag = 9}).get();
    });
  std::vector<int> next(kThreads, 0);
  for (int n = 0; n < kThreads * kEach; ++n) {
    auto got = wait_value(b_->recv(a_from_b(), {.tag = 9}));
    const auto& items = got.value.as<List>().items;
    const int t = static_cast<int>(items[0].as<std::int64_t>());
    EXPECT_EQ(items[1], Value(next[t]));
    next[t] += 1;
  }
  for (auto& th : threads) th.join();
}

TEST_P(Conformance, SimultaneousDialsConverge) {
  for (int round = 0; round < 3; ++round) {
    SetUp();
    start_both();
    auto fa = a_->send(Value("from a"), b_from_a());
    auto fb = b_->send(Value("from b"), a_from_b());
    wait_value(std::move(fa));
    wait_value(std::move(fb));
    EXPECT_EQ(wait_value(b_->recv(a_from_b())).value, Value("from a"));
    EXPECT_EQ(wait_value(a_->recv(b_from_a())).value, Value("from b"));
    for (int i = 0; i < 20; ++i) wait_value(a_->send(Value(i), b_from_a()));
    for (int i = 0; i < 20; ++i) EXPECT_EQ(wait_value(b_->recv(a_from_b())).value, Value(i));
    TearDown();
  }
}

TEST_P(Conformance, ACallbackMayWaitOnAnotherRecvOfTheSamePeer) {
  // Completions run with no wcomm lock held: a callback on the loop thread that blocks on a
  // second recv of the same peer reads that message itself.
  start_both();
  std::promise<Value> second;
  b_->recv(a_from_b(), {.tag = 1}).then([&](Result<Received> first) {
    auto next = b_->recv(a_from_b(), {.tag = 2});
    Result<Received>* got = next.wait_for(10s);
    second.set_value(got && got->ok() ? got->value().value : Value("missing"));
  });
  wait_value(a_->send(Value("first"), b_from_a(), {}, {.tag = 1}));
  wait_value(a_->send(Value("second"), b_from_a(), {}, {.tag = 2}));
  auto done = second.get_future();
  ASSERT_EQ(done.wait_for(15s), std::future_status::ready);
  EXPECT_EQ(done.get(), Value("second"));
}

TEST_P(Conformance, ReceiverThreadsReadTheirOwnMessages) {
  start_both();
  for (int i = 0; i < 50; ++i) {
    auto pending = b_->recv(a_from_b());
    wait_value(a_->send(Value(i), b_from_a()));
    EXPECT_EQ(wait_value(std::move(pending)).value, Value(i));
  }
  EXPECT_EQ(b_->stats().messages_received, 50u);
}

INSTANTIATE_TEST_SUITE_P(Transports, Conformance, ::testing::ValuesIn(kTransports),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace wcomm::testing
