// close() drains: every operation started before it, and every one racing it, completes; no
// callback is lost; a Comm may be destroyed from its own callback. (Run under TSan too.)
#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "comm_fixture.h"

namespace wcomm::testing {
namespace {

TEST(CommClose, CloseRacingSendsRecvsCancelsAndCallbacksLeavesNothingPending) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 40; ++round) {
    auto p = make_pair();
    std::atomic<bool> stop{false};
    std::atomic<int> callbacks_set{0}, callbacks_run{0};
    std::mutex mu;
    std::vector<Future<SendResult>> sends;
    std::vector<Future<Received>> recvs;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; !stop.load(); ++i) {
          auto s = p.a->send(Value(i), p.a->peer("node-b"), {}, {.tag = std::uint32_t(t)});
          auto r = p.a->recv(p.a->peer("node-b"), {.tag = std::uint32_t(t)});
          if (i % 3 == 0) r.cancel();
          if (i % 2 == 0) {
            callbacks_set.fetch_add(1);
            r.then([&](Result<Received>) { callbacks_run.fetch_add(1); });
          }
          if (i % 5 == 0) (void)s.wait_for(std::chrono::milliseconds(1));
          std::lock_guard lock(mu);
          sends.push_back(std::move(s));
          if (i % 2 != 0) recvs.push_back(std::move(r));
        }
      });
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
    p.a->close();
    stop.store(true);
    for (auto& th : threads) th.join();
    for (auto& s : sends) EXPECT_NE(s.wait_for(5s), nullptr) << "a send was left pending in round " << round;
    for (auto& r : recvs) EXPECT_NE(r.wait_for(5s), nullptr) << "a recv was left pending in round " << round;
    for (int i = 0; i < 500 && callbacks_run.load() < callbacks_set.load(); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(callbacks_run.load(), callbacks_set.load()) << "callbacks lost in round " << round;
  }
}

TEST(CommClose, OperationsPendingAtCloseAreCompletedBeforeItReturns) {
  auto p = make_pair();
  std::atomic<int> callbacks{0};
  std::vector<Future<Received>> recvs;
  for (int i = 0; i < 10; ++i) recvs.push_back(p.b->recv(p.b->peer("node-a"), {.tag = std::uint32_t(i)}));
  p.b->recv(p.b->peer("node-a"), {.tag = 99, .timeout = 30s}).then([&](Result<Received>) { callbacks.fetch_add(1); });
  p.b->close();
  for (auto& r : recvs) {
    ASSERT_TRUE(r.ready());
    EXPECT_EQ(r.wait().error().code, ErrorCode::kClosed);
  }
  EXPECT_EQ(callbacks.load(), 1);  // ran on the loop before close returned
}

TEST(CommClose, ACommMayBeDestroyedFromItsOwnCallback) {
  auto p = make_pair();
  std::promise<void> destroyed;
  std::shared_ptr<Comm> b = std::move(p.b);
  Peer a_seen = b->peer("node-a");
  b->recv(a_seen).then([&b, &destroyed](Result<Received> got) {
    EXPECT_TRUE(got.ok());
    b.reset();  // the last reference: ~Comm on its own loop thread
    destroyed.set_value();
  });
  wait_value(p.a->send(Value("bye"), p.a->peer("node-b")));
  ASSERT_EQ(destroyed.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(b, nullptr);
  // node-a sees node-b go away; a later send fails, it does not hang.
  auto r = wait_result(p.a->send(Value("after"), p.a->peer("node-b"), {}, {.timeout = 5s}));
  (void)r;
}

TEST(CommClose, CloseFromACallbackEndsEverythingWithoutDeadlock) {
  auto p = make_pair();
  auto pending = p.b->recv(p.b->peer("node-a"), {.tag = 7});
  std::promise<void> closed;
  p.b->recv(p.b->peer("node-a")).then([&](Result<Received>) {
    p.b->close();  // on the loop thread: no join of itself
    closed.set_value();
  });
  wait_value(p.a->send(Value(1), p.a->peer("node-b")));
  ASSERT_EQ(closed.get_future().wait_for(10s), std::future_status::ready);
  auto r = wait_result(std::move(pending));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kClosed);
  EXPECT_THROW(p.b->send(Value(2), p.b->peer("node-a")).get(), ClosedError);
}

TEST(CommClose, ThenOnAFutureAfterItsCommIsGoneStillRuns) {
  auto p = make_pair();
  auto pending = p.b->recv(p.b->peer("node-a"));
  p.b.reset();  // closes; the recv fails with ClosedError
  std::promise<ErrorCode> got;
  pending.then([&](Result<Received> r) { got.set_value(r.ok() ? ErrorCode::kInvalidArgument : r.error().code); });
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), ErrorCode::kClosed);
}

// A completed send is in the kernel (docs/cpp-api.md); close() must not throw it away there
// (expect_close_keeps_completed_sends, comm_fixture.h). Unix sockets hand bytes straight to
// the peer's queue, so only TCP (and TLS, comm_tls_test.cpp) lost them before.
class CommCloseOver : public ::testing::TestWithParam<std::string> {};

TEST_P(CommCloseOver, SendsCompletedBeforeCloseReachAPeerThatReadsThemLater) {
  CommConfig config;
  config.transport = GetParam();
  expect_close_keeps_completed_sends(config, config);
}

INSTANTIATE_TEST_SUITE_P(Transports, CommCloseOver, ::testing::Values("tcp", "unix"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace wcomm::testing
