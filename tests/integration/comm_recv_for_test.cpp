// Comm::recv_for: a recv whose thread waits for its message first, reading it in place (no
// waiter, no promise) where it can. What it must keep: per-tag order against recvs and
// recv_intos that come while it reads or after its wait, timeouts, and every failure a parked
// recv would see.
#include <future>
#include <string>
#include <thread>

#include "comm_fixture.h"

namespace wcomm::testing {
namespace {

constexpr Seconds kNoEnd{1e9};

Result<Received> result_of(Future<Received> f) { return wait_result(std::move(f)); }

TEST(RecvFor, ReadsItsOwnMessageAndReturnsItReady) {
  for (const std::string transport : {"tcp", "unix", "shm"}) {
    SCOPED_TRACE(transport);
    for (const std::uint64_t busy_us : {0, 1'000'000}) {
      CommConfig config;
      config.recv_busy_poll_us = busy_us;
      auto p = connected_pair(config, transport);
      const auto before = p.b->stats();
      auto got = on_blocked_thread([&] { return p.b->recv_for(p.b->peer("node-a"), kNoEnd); });
      wait_value(p.a->send(Dict{{"n", 7}}, p.a->peer("node-b")));
      ASSERT_EQ(got.wait_for(10s), std::future_status::ready);
      Future<Received> f = got.get();
      ASSERT_TRUE(f.ready()) << "recv_for returned before its message";
      EXPECT_EQ(f.get().value, Value(Dict{{"n", 7}}));
      EXPECT_EQ(p.b->stats().messages_read_by_receivers, before.messages_read_by_receivers + 1);
      if (busy_us > 0)
        EXPECT_EQ(p.b->stats().messages_read_busy_polling, before.messages_read_busy_polling + 1);
      EXPECT_EQ(p.b->stats().peers.at("node-a").transport, transport);
    }
  }
}

TEST(RecvFor, AQueuedMessageComesBackAtOnce) {
  auto p = connected_pair();
  const auto received = p.b->stats().messages_received;
  wait_value(p.a->send(Value("queued"), p.a->peer("node-b")));
  // Nothing waits: the loop reads it into the inbox.
  for (int i = 0; i < 1000 && p.b->stats().messages_received == received; ++i) std::this_thread::sleep_for(5ms);
  auto f = p.b->recv_for(p.b->peer("node-a"), Seconds(0));
  ASSERT_TRUE(f.ready());
  EXPECT_EQ(f.get().value, Value("queued"));
}

TEST(RecvFor, AWaitThatEndsLeavesARecvThatCompletesLater) {
  auto p = connected_pair({}, "shm");
  const auto start = std::chrono::steady_clock::now();
  auto f = p.b->recv_for(p.b->peer("node-a"), Seconds(0.05));
  EXPECT_FALSE(f.ready());
  EXPECT_GE(seconds_since(start), 0.045) << "recv_for did not wait";
  wait_value(p.a->send(Value("later"), p.a->peer("node-b")));
  EXPECT_EQ(wait_value(std::move(f)).value, Value("later"));
}

TEST(RecvFor, ItKeepsItsPlaceAheadOfARecvThatCameWhileItRead) {
  for (const std::string transport : {"tcp", "shm"}) {
    SCOPED_TRACE(transport);
    auto p = connected_pair({}, transport);
    const Peer& a = p.b->peer("node-a");
    // First in line: reads for 300 ms, then goes on as a parked recv.
    auto first = std::async(std::launch::async, [&] { return p.b->recv_for(a, Seconds(0.3)); });
    std::this_thread::sleep_for(100ms);
    auto second = p.b->recv(a);  // came while the first read: behind it
    Future<Received> first_recv = first.get();
    ASSERT_FALSE(first_recv.ready());
    wait_value(p.a->send(Value("1"), p.a->peer("node-b")));
    wait_value(p.a->send(Value("2"), p.a->peer("node-b")));
    EXPECT_EQ(wait_value(std::move(first_recv)).value, Value("1"));
    EXPECT_EQ(wait_value(std::move(second)).value, Value("2"));
  }
}

TEST(RecvFor, ItWaitsBehindARecvThatCameFirst) {
  auto p = connected_pair({}, "shm");
  const Peer& a = p.b->peer("node-a");
  auto earlier = p.b->recv(a);
  auto later = std::async(std::launch::async, [&] { return p.b->recv_for(a, Seconds(10)); });
  std::this_thread::sleep_for(100ms);
  wait_value(p.a->send(Value("1"), p.a->peer("node-b")));
  wait_value(p.a->send(Value("2"), p.a->peer("node-b")));
  EXPECT_EQ(wait_value(std::move(earlier)).value, Value("1"));
  ASSERT_EQ(later.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(wait_value(later.get()).value, Value("2"));
}

TEST(RecvFor, ARecvIntoPostedWhileItReadsDoesNotTakeItsMessage) {
  auto p = connected_pair({}, "shm");
  const Peer& a = p.b->peer("node-a");
  auto reading = on_blocked_thread([&] { return p.b->recv_for(a, kNoEnd); });
  Tensor into = Tensor::zeros(DType::kInt32, {4});
  auto into_recv = p.b->recv_into(a, {into});
  for (std::int32_t n : {1, 2}) {
    Tensor t = Tensor::zeros(DType::kInt32, {4});
    t.data_as<std::int32_t>()[0] = n;
    wait_value(p.a->send(t, p.a->peer("node-b")));
  }
  ASSERT_EQ(reading.wait_for(10s), std::future_status::ready);
  Received first = wait_value(reading.get());
  EXPECT_EQ(first.value.as<Tensor>().data_as<std::int32_t>()[0], 1);
  wait_value(std::move(into_recv));
  EXPECT_EQ(into.data_as<std::int32_t>()[0], 2);
}

TEST(RecvFor, OtherTagsGoToTheirOwnRecvs) {
  auto p = connected_pair({}, "shm");
  const Peer& a = p.b->peer("node-a");
  auto tag2 = p.b->recv(a, {.tag = 2});
  auto tag1 = on_blocked_thread([&] { return p.b->recv_for(a, kNoEnd, {.tag = 1}); });
  wait_value(p.a->send(Value("two"), p.a->peer("node-b"), {}, {.tag = 2}));
  wait_value(p.a->send(Value("one"), p.a->peer("node-b"), {}, {.tag = 1}));
  ASSERT_EQ(tag1.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(wait_value(tag1.get()).value, Value("one"));
  EXPECT_EQ(wait_value(std::move(tag2)).value, Value("two"));
}

TEST(RecvFor, ItsTimeoutFailsItWithOperationTimeout) {
  auto p = connected_pair({}, "shm");
  const Peer& a = p.b->peer("node-a");
  // The timeout ends the wait: failed, and ready.
  auto start = std::chrono::steady_clock::now();
  auto f = p.b->recv_for(a, kNoEnd, {.timeout = Seconds(0.2)});
  ASSERT_TRUE(f.ready());
  EXPECT_GE(seconds_since(start), 0.19);
  EXPECT_THROW(f.get(), OperationTimeoutError);
  // A wait shorter than the timeout leaves the recv, and its timer, to the loop.
  start = std::chrono::steady_clock::now();
  auto g = p.b->recv_for(a, Seconds(0.05), {.timeout = Seconds(0.3)});
  EXPECT_FALSE(g.ready());
  EXPECT_EQ(result_of(std::move(g)).error().code, ErrorCode::kOperationTimeout);
  EXPECT_GE(seconds_since(start), 0.29);
  // Nothing was lost: the next message goes to the next recv.
  wait_value(p.a->send(Value("after"), p.a->peer("node-b")));
  EXPECT_EQ(wait_value(p.b->recv_for(a, kNoEnd)).value, Value("after"));
}

// What a recv_for reading its own message gets when `end` happens to the pair.
ErrorCode recv_for_error_after(const std::function<void(Pair&)>& end, const std::string& transport) {
  auto p = connected_pair({}, transport);
  auto reading = on_blocked_thread([&] { return p.b->recv_for(p.b->peer("node-a"), kNoEnd); });
  end(p);
  if (reading.wait_for(10s) != std::future_status::ready) {
    ADD_FAILURE() << "recv_for did not end";
    std::abort();  // (its thread still reads: leaving would hang)
  }
  auto result = result_of(reading.get());
  if (result.ok()) {
    ADD_FAILURE() << "recv_for got a message";
    return ErrorCode::kInvalidArgument;
  }
  return result.error().code;
}

TEST(RecvFor, APeerThatClosesFailsItWithConnectionClosed) {
  for (const std::string transport : {"tcp", "shm"}) {
    SCOPED_TRACE(transport);
    EXPECT_EQ(recv_for_error_after([](Pair& p) { p.a->close(); }, transport), ErrorCode::kConnectionClosed);
  }
}

TEST(RecvFor, ClosingTheCommFailsItWithClosed) {
  for (const std::string transport : {"tcp", "shm"}) {
    SCOPED_TRACE(transport);
    EXPECT_EQ(recv_for_error_after([](Pair& p) { p.b->close(); }, transport), ErrorCode::kClosed);
  }
}

TEST(RecvFor, RefusesAnUnknownPeerAndAClosedComm) {
  auto p = connected_pair();
  EXPECT_EQ(result_of(p.b->recv_for(Peer{"nobody", "127.0.0.1", 1}, Seconds(1))).error().code,
            ErrorCode::kInvalidArgument);
  const Peer& a = p.b->peer("node-a");
  p.b->close();
  EXPECT_EQ(result_of(p.b->recv_for(a, Seconds(1))).error().code, ErrorCode::kClosed);
}

TEST(RecvFor, BeforeAnyConnectionItWaitsAsWaitForDoes) {
  auto p = make_pair();
  const Peer& a = p.b->peer("node-a");
  auto got = on_blocked_thread([&] { return p.b->recv_for(a, Seconds(10)); });
  wait_value(p.a->send(Value("first"), p.a->peer("node-b")));
  ASSERT_EQ(got.wait_for(10s), std::future_status::ready);
  Future<Received> f = got.get();
  ASSERT_TRUE(f.ready());
  EXPECT_EQ(f.get().value, Value("first"));
}

}  // namespace
}  // namespace wcomm::testing
