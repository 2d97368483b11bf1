// Comm::wait_any: one thread waiting for the next message from any of several peers, reading
// their connections itself (ReadOwner::read_any).
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "comm_fixture.h"
#include "free_port.h"

namespace wcomm::testing {
namespace {

// node-a knows node-b and node-c, each connected to it (over `transport`).
struct Trio {
  std::shared_ptr<Comm> a, b, c;
  const Peer& from_b() const { return a->peer("node-b"); }
  const Peer& from_c() const { return a->peer("node-c"); }
};

Trio connected_trio(const std::string& transport) {
  ReservedPort port_a, port_b, port_c;
  const Peer pa{"node-a", "127.0.0.1", port_a.port()}, pb{"node-b", "127.0.0.1", port_b.port()},
      pc{"node-c", "127.0.0.1", port_c.port()};
  CommConfig config;
  config.transport = transport;
  Trio t;
  t.a = Comm::create({pa, {pb, pc}, "127.0.0.1", config});
  t.b = Comm::create({pb, {pa}, "127.0.0.1", config});
  t.c = Comm::create({pc, {pa}, "127.0.0.1", config});
  for (const auto& [comm, from] : {std::pair{t.b, "node-b"}, std::pair{t.c, "node-c"}}) {
    wait_value(comm->send(Value("hello"), comm->peer("node-a")));
    EXPECT_EQ(wait_value(t.a->recv(t.a->peer(from))).value, Value("hello"));
  }
  return t;
}

class WaitAny : public ::testing::TestWithParam<std::string> {};

TEST_P(WaitAny, ReturnsTheRecvWhoseMessageCameAndItsCallerReadIt) {
  Trio t = connected_trio(GetParam());
  std::vector<Future<Received>> recvs{t.a->recv(t.from_b()), t.a->recv(t.from_c())};
  const auto before = t.a->stats().messages_read_by_receivers;
  std::thread sender([&] {
    std::this_thread::sleep_for(50ms);  // wait_any is asleep by then
    wait_value(t.c->send(Value("from c"), t.c->peer("node-a")));
  });
  EXPECT_EQ(t.a->wait_any(recvs, Seconds(10)), std::optional<std::size_t>(1));
  sender.join();
  EXPECT_EQ(wait_value(recvs[1]).value, Value("from c"));
  EXPECT_FALSE(recvs[0].ready());
  EXPECT_EQ(t.a->stats().messages_read_by_receivers, before + 1) << "the loop read it, not the waiting thread";
  // The other peer next; its recv was left waiting.
  recvs[1] = t.a->recv(t.from_c());
  wait_value(t.b->send(Value("from b"), t.b->peer("node-a")));
  EXPECT_EQ(t.a->wait_any(recvs, Seconds(10)), std::optional<std::size_t>(0));
  EXPECT_EQ(wait_value(recvs[0]).value, Value("from b"));
}

TEST_P(WaitAny, KeepsEachPeersOrderOverManyWaits) {
  Trio t = connected_trio(GetParam());
  constexpr int kEach = 300;
  std::thread from_b([&] {
    for (int i = 0; i < kEach; ++i) wait_value(t.b->send(Value(i), t.b->peer("node-a")));
  });
  std::thread from_c([&] {
    for (int i = 0; i < kEach; ++i) wait_value(t.c->send(Value(i), t.c->peer("node-a")));
  });
  std::vector<Future<Received>> recvs{t.a->recv(t.from_b()), t.a->recv(t.from_c())};
  int next[2] = {0, 0};
  while (next[0] < kEach || next[1] < kEach) {
    const auto ready = t.a->wait_any(recvs, Seconds(10));
    ASSERT_TRUE(ready.has_value()) << "nothing came within 10 s at " << next[0] << ", " << next[1];
    EXPECT_EQ(wait_value(recvs[*ready]).value, Value(next[*ready]++));
    recvs[*ready] = t.a->recv(*ready == 0 ? t.from_b() : t.from_c());
  }
  from_b.join();
  from_c.join();
}

TEST_P(WaitAny, ARecvCompletedByTheLoopWakesIt) {
  // A recv with a timeout is completed on the loop, which must wake the waiting thread.
  Trio t = connected_trio(GetParam());
  std::vector<Future<Received>> recvs{t.a->recv(t.from_b()), t.a->recv(t.from_c(), {.timeout = Seconds(30)})};
  std::thread sender([&] {
    std::this_thread::sleep_for(50ms);
    wait_value(t.c->send(Value("timed"), t.c->peer("node-a")));
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(t.a->wait_any(recvs, Seconds(10)), std::optional<std::size_t>(1));
  EXPECT_LT(seconds_since(start), 5.0);
  sender.join();
  EXPECT_EQ(wait_value(recvs[1]).value, Value("timed"));
}

TEST_P(WaitAny, APeerThatGoesAwayEndsTheWaitWithItsRecvsError) {
  Trio t = connected_trio(GetParam());
  std::vector<Future<Received>> recvs{t.a->recv(t.from_b()), t.a->recv(t.from_c())};
  std::thread closer([&] {
    std::this_thread::sleep_for(50ms);
    t.c->close();
  });
  EXPECT_EQ(t.a->wait_any(recvs, Seconds(10)), std::optional<std::size_t>(1));
  closer.join();
  auto r = wait_result(recvs[1]);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kConnectionClosed) << r.error().message;
  // The other peer is still read.
  recvs.pop_back();
  wait_value(t.b->send(Value("still here"), t.b->peer("node-a")));
  EXPECT_EQ(t.a->wait_any(recvs, Seconds(10)), std::optional<std::size_t>(0));
  EXPECT_EQ(wait_value(recvs[0]).value, Value("still here"));
}

INSTANTIATE_TEST_SUITE_P(Transports, WaitAny, ::testing::Values("tcp", "unix", "shm"),
                         [](const auto& info) { return info.param; });

TEST(WaitAnyEnds, AtItsTimeoutAtItsDescriptorAndAtOnceForAReadyRecv) {
  auto p = make_pair();
  wait_value(p.a->send(Value("hello"), p.a->peer("node-b")));
  EXPECT_EQ(wait_value(p.b->recv(p.b->peer("node-a"))).value, Value("hello"));
  std::vector<Future<Received>> recvs{p.b->recv(p.b->peer("node-a"))};
  // The timeout.
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(p.b->wait_any(recvs, Seconds(0.05)), std::nullopt);
  EXPECT_GE(seconds_since(start), 0.045);
  EXPECT_EQ(p.b->wait_any(recvs, Seconds(0)), std::nullopt);
  // A descriptor that becomes readable (not consumed).
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::thread setter([fd] {
    std::this_thread::sleep_for(50ms);
    ::eventfd_write(fd, 1);
  });
  start = std::chrono::steady_clock::now();
  EXPECT_EQ(p.b->wait_any(recvs, Seconds(10), fd), std::nullopt);
  EXPECT_LT(seconds_since(start), 5.0);
  setter.join();
  eventfd_t value = 0;
  EXPECT_EQ(::eventfd_read(fd, &value), 0);
  EXPECT_EQ(value, 1u);
  ::close(fd);
  // A recv that is ready already: at once, whatever the timeout.
  wait_value(p.a->send(Value("there"), p.a->peer("node-b")));
  ASSERT_NE(recvs[0].wait_for(10s), nullptr);
  EXPECT_EQ(p.b->wait_any(recvs), std::optional<std::size_t>(0));
  // No recvs: the timeout alone.
  EXPECT_EQ(p.b->wait_any({}, Seconds(0.01)), std::nullopt);
}

TEST(WaitAnyEnds, ATimeoutOfDecadesMeansNoDeadline) {
  auto p = make_pair();
  std::vector<Future<Received>> recvs{p.b->recv(p.b->peer("node-a"))};
  std::thread sender([&] {
    std::this_thread::sleep_for(50ms);
    wait_value(p.a->send(Value("late"), p.a->peer("node-b")));
  });
  EXPECT_EQ(p.b->wait_any(recvs, Seconds(1e12)), std::optional<std::size_t>(0));  // not an overflowed deadline
  sender.join();
}

TEST(WaitAnyEnds, ItLeavesAnotherThreadWaitingOnTheSameRecvWakeable) {
  // A thread blocked on recv R, and another waiting for R or S that leaves when S comes: R's
  // cancel must still wake the first (one waker slot per promise lost its registration).
  Trio t = connected_trio("tcp");
  Future<Received> r = t.a->recv(t.from_b());
  auto blocked = std::async(std::launch::async, [&] { return r.wait_for(30s) != nullptr; });
  std::this_thread::sleep_for(100ms);  // it reads node-b's connection, asleep
  std::vector<Future<Received>> recvs{r, t.a->recv(t.from_c())};
  wait_value(t.c->send(Value("s"), t.c->peer("node-a")));
  EXPECT_EQ(t.a->wait_any(recvs, Seconds(10)), std::optional<std::size_t>(1));
  const auto start = std::chrono::steady_clock::now();
  r.cancel();
  ASSERT_EQ(blocked.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(blocked.get());
  EXPECT_LT(seconds_since(start), 5.0) << "the blocked thread slept on after the cancel";
  EXPECT_EQ(wait_result(r).error().code, ErrorCode::kCancelled);
}

TEST(WaitAnyEnds, RefusesWhatIsNotARecvOfThisComm) {
  auto p = make_pair();
  std::vector<Future<Received>> other{p.a->recv(p.a->peer("node-b"))};
  try {
    (void)p.b->wait_any(other, Seconds(1));
    FAIL() << "a recv of another Comm was taken";
  } catch (const InvalidArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("recv 0 is not a recv of this Comm"), std::string::npos) << e.what();
  }
  Promise<Received> own;  // a Future of the caller's own, with no recv behind it
  std::vector<Future<Received>> not_a_recv{own.future()};
  EXPECT_THROW((void)p.b->wait_any(not_a_recv, Seconds(1)), InvalidArgumentError);
  std::vector<Future<Received>> empty(1);
  EXPECT_THROW((void)p.b->wait_any(empty, Seconds(1)), InvalidArgumentError);
  EXPECT_THROW((void)p.b->wait_any({}), InvalidArgumentError);  // it would wait forever
}

}  // namespace
}  // namespace wcomm::testing
