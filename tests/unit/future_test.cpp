// Future and Promise (include/wcomm/future.h): what a Future asks of the Operation behind it.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "core/operation.h"
#include "wcomm/future.h"

namespace wcomm {
namespace {

using namespace std::chrono_literals;

// Records what the Future asked of it.
struct RecordingOperation : detail::Operation {
  int cancels = 0, helps = 0, callbacks_set = 0;
  void cancel() override { ++cancels; }
  void help(std::chrono::steady_clock::time_point) override { ++helps; }
  void callback_set() override { ++callbacks_set; }
};

struct Pending {
  Promise<int> promise;
  std::shared_ptr<RecordingOperation> operation = std::make_shared<RecordingOperation>();
  Future<int> future = promise.future();
  Pending() { promise.set_operation(operation); }
};

TEST(Future, ThenOnAPendingOperationTellsItNoThreadWillWait) {
  Pending p;
  int got = 0;
  p.future.then([&](Result<int> r) { got = r.value(); });
  EXPECT_EQ(p.operation->callbacks_set, 1);
  p.promise.complete(7);
  EXPECT_EQ(got, 7);  // no poster: complete() runs the callback at once
}

TEST(Future, ThenOnAFinishedOperationDoesNotBotherIt) {
  Pending p;
  p.promise.complete(7);
  auto got = std::make_shared<std::promise<int>>();  // shared: the callback's thread may outlive the test
  p.future.then([got](Result<int> r) { got->set_value(r.value()); });  // on a thread of its own
  EXPECT_EQ(got->get_future().get(), 7);
  EXPECT_EQ(p.operation->callbacks_set, 0);
}

TEST(Future, WaitingAsksTheOperationForHelpAndCancelIsPassedOn) {
  Pending p;
  EXPECT_EQ(p.future.wait_for(1ms), nullptr);
  EXPECT_EQ(p.operation->helps, 1);
  p.future.cancel();
  EXPECT_EQ(p.operation->cancels, 1);
  p.promise.complete(1);
  p.future.cancel();  // finished: nothing to cancel
  EXPECT_EQ(p.operation->cancels, 1);
  EXPECT_EQ(p.future.get(), 1);
}


// The wake handshake of a helping thread (detail::PromiseAccess).
struct CountingWaker : detail::Waker {
  int wakes = 0;
  void wake() override { ++wakes; }
};

// A Future made complete (ready_future) holds its result itself: everything a Future does
// works on it as on one completed through a Promise, and its callback still runs elsewhere.
TEST(Future, AReadyFutureAnswersAtOnceAndRunsItsCallbackThroughItsPoster) {
  std::vector<std::function<void()>> posted;
  auto poster = std::make_shared<const Poster>([&](std::function<void()> fn) { posted.push_back(std::move(fn)); });
  Future<int> future = ready_future<int>(7, poster);
  EXPECT_TRUE(future.valid());
  EXPECT_TRUE(future.ready());
  ASSERT_NE(future.wait_for(0s), nullptr);
  EXPECT_EQ(future.wait_for(0s)->value(), 7);
  EXPECT_EQ(detail::PromiseAccess::operation(future), nullptr);
  future.cancel();  // too late: changes nothing
  Future<int> copy = future;
  EXPECT_EQ(copy.get(), 7);
  EXPECT_EQ(future.get(), 7);

  int seen = 0;
  future.then([&](Result<int> r) { seen = r.value(); });
  EXPECT_EQ(seen, 0) << "never inline from then()";
  ASSERT_EQ(posted.size(), 1u);
  posted.front()();
  EXPECT_EQ(seen, 7);

  Future<int> failed = ready_future<int>(Error{ErrorCode::kClosed, "closed"}, poster);
  EXPECT_TRUE(failed.ready());
  EXPECT_THROW(failed.get(), ClosedError);
  EXPECT_FALSE(Future<int>().valid());
}

TEST(Future, CompletionWakesARegisteredWakerOnce) {
  Promise<int> promise;
  CountingWaker waker;
  ASSERT_TRUE(detail::PromiseAccess::set_waker(promise, &waker));
  promise.complete(1);
  EXPECT_EQ(waker.wakes, 1);
  promise.complete(2);  // a second completion is ignored and wakes nobody
  EXPECT_EQ(waker.wakes, 1);
}

TEST(Future, AWakerIsNotRegisteredOnACompletedPromise) {
  Promise<int> promise;
  promise.complete(1);
  CountingWaker waker;
  EXPECT_FALSE(detail::PromiseAccess::set_waker(promise, &waker));
  EXPECT_EQ(waker.wakes, 0);
}

TEST(Future, AClearedWakerIsNeverWoken) {
  Promise<int> promise;
  CountingWaker waker;
  ASSERT_TRUE(detail::PromiseAccess::set_waker(promise, &waker));
  detail::PromiseAccess::clear_waker(promise, &waker);
  promise.complete(1);
  EXPECT_EQ(waker.wakes, 0);
}

TEST(Future, EachOfSeveralWakersIsWokenUnlessItClearedItself) {
  // Two threads waiting on one recv (Comm::wait_any beside a blocked get): one leaving must
  // not unregister the other.
  Promise<int> promise;
  CountingWaker stays, leaves;
  ASSERT_TRUE(detail::PromiseAccess::set_waker(promise, &stays));
  ASSERT_TRUE(detail::PromiseAccess::set_waker(promise, &leaves));
  detail::PromiseAccess::clear_waker(promise, &leaves);
  promise.complete(1);
  EXPECT_EQ(stays.wakes, 1);
  EXPECT_EQ(leaves.wakes, 0);
}

// Many rounds of a sleeper registering, checking and clearing against a completer on another
// thread: every round the sleeper either sees the result at registration or is woken.
TEST(Future, WakeHandshakeNeverLosesAWakeUp) {
  for (int round = 0; round < 2000; ++round) {
    Promise<int> promise;
    struct FlagWaker : detail::Waker {
      std::atomic<bool> woken{false};
      void wake() override { woken.store(true); }
    } waker;
    std::thread completer([&] { promise.complete(round); });
    const bool registered = detail::PromiseAccess::set_waker(promise, &waker);
    completer.join();
    detail::PromiseAccess::clear_waker(promise, &waker);
    EXPECT_TRUE(!registered || waker.woken.load()) << "round " << round;
    EXPECT_TRUE(promise.done());
  }
}

}  // namespace
}  // namespace wcomm
