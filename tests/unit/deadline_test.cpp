// Saturating deadlines (wcomm/deadline.h): a timeout too long for the clock has no end.
#include <gtest/gtest.h>

#include <limits>

#include "wcomm/deadline.h"
#include "wcomm/future.h"

namespace wcomm {
namespace {

using namespace std::chrono_literals;

TEST(Deadline, ATimeoutTooLongForTheClockHasNoEnd) {
  const auto now = SteadyClock::now();
  // 1e10 s is past int64 nanoseconds (about 9.22e9 s): it overflowed to a deadline in the past.
  EXPECT_EQ(deadline_after(std::chrono::duration<double>(1e10), now), SteadyClock::time_point::max());
  EXPECT_EQ(deadline_after(std::chrono::duration<double>(std::numeric_limits<double>::infinity()), now),
            SteadyClock::time_point::max());
  EXPECT_EQ(deadline_after(std::chrono::hours(24 * 365 * 1000), now), SteadyClock::time_point::max());
  EXPECT_EQ(time_left(SteadyClock::time_point::max(), now), SteadyClock::duration::max());
}

TEST(Deadline, OrdinaryTimeoutsMeanWhatTheySay) {
  const auto now = SteadyClock::now();
  EXPECT_EQ(deadline_after(std::chrono::duration<double>(1.5), now), now + 1500ms);
  EXPECT_EQ(deadline_after(std::chrono::duration<double>(0), now), now);
  EXPECT_EQ(deadline_after(-1s, now), now);
  EXPECT_EQ(time_left(now - 1s, now), SteadyClock::duration::zero());
  EXPECT_EQ(time_left(now + 2s, now), std::chrono::duration_cast<SteadyClock::duration>(2s));
}

TEST(Deadline, NaNAndNegativeAreRefusedWithTheReason) {
  EXPECT_NE(timeout_problem(std::numeric_limits<double>::quiet_NaN()).value_or("").find("NaN"), std::string::npos);
  EXPECT_NE(timeout_problem(-1).value_or("").find("negative"), std::string::npos);
  EXPECT_FALSE(timeout_problem(0).has_value());
  EXPECT_FALSE(timeout_problem(1e10).has_value());
  EXPECT_FALSE(timeout_problem(std::numeric_limits<double>::infinity()).has_value());
}

TEST(Deadline, AFutureWaitOfDecadesWaitsInsteadOfReturningAtOnce) {
  Promise<int> promise;
  auto future = promise.future();
  std::thread setter([&] {
    std::this_thread::sleep_for(50ms);
    promise.complete(7);
  });
  // Before: cv.wait_for with 1e10 s overflowed inside the library and returned at once.
  Result<int>* r = future.wait_for(std::chrono::duration<double>(1e10));
  setter.join();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->value(), 7);
}

}  // namespace
}  // namespace wcomm
