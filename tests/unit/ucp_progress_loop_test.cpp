// ProgressLoop (src/ucx): the one thread that drives a UCP worker. Idle, it sleeps until an
// event, a wake() or the bound its owner asks for, and makes no rounds meanwhile (the
// transfer backend's loop used to wake every millisecond).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include "ucx/progress_loop.h"

namespace {

using namespace std::chrono_literals;
using wcomm::ucp::ProgressLoop;
using wcomm::ucp::UcpWorker;

struct CountingLoop {
  explicit CountingLoop(std::chrono::milliseconds sleep_at_most) : worker(UCP_FEATURE_AM) {
    loop.emplace(worker, "test-ucx", 200us, [this, sleep_at_most] {
      std::lock_guard lock(mu);
      ++rounds;
      ucp_worker_progress(worker.worker());
      return ProgressLoop::Round{false, sleep_at_most};
    }, [this] {
      std::lock_guard lock(mu);
      return ucp_worker_arm(worker.worker());
    });
  }
  // Rounds made during `span`, once the loop has had time to fall asleep.
  int rounds_during(std::chrono::milliseconds span) {
    std::this_thread::sleep_for(50ms);
    const int before = rounds.load();
    std::this_thread::sleep_for(span);
    return rounds.load() - before;
  }
  UcpWorker worker;
  std::mutex mu;
  std::atomic<int> rounds{0};
  std::optional<ProgressLoop> loop;
};

TEST(UcpProgressLoop, IdleItSleepsUntilWoken) {
  CountingLoop c(ProgressLoop::kUntilWoken);
  ASSERT_TRUE(c.worker.ok()) << c.worker.error();
  c.loop->start();
  // No event, no wake-up: no round in 300 ms (a 1 ms poll would have made about 300). A
  // spurious wake of the worker's event fd may cost a round or two, never a poll.
  EXPECT_LE(c.rounds_during(300ms), 2);
  const int before = c.rounds.load();
  c.loop->wake();
  for (int i = 0; i < 1000 && c.rounds.load() == before; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_GT(c.rounds.load(), before) << "wake() made no round";
  c.loop->stop();
  EXPECT_FALSE(c.loop->running());
}

TEST(UcpProgressLoop, ItsOwnersBoundEndsItsSleep) {
  CountingLoop c(20ms);
  ASSERT_TRUE(c.worker.ok()) << c.worker.error();
  c.loop->start();
  // One round per 20 ms bound, each followed by 200 us of polling rounds: at least a few
  // wake-ups in 300 ms (a loop that ignored its bound would make none).
  EXPECT_GE(c.rounds_during(300ms), 5);
}

}  // namespace
