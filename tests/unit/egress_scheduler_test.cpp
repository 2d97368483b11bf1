// EgressScheduler: round robin in quanta, urgent first, one token bucket for all writers,
// the bulk flow cap, and V0.1's checks.
#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <string>
#include <vector>

#include "comm/egress_scheduler.h"
#include "wcomm/errors.h"

namespace wcomm {
namespace {

using Settings = EgressScheduler::Settings;

// Writers that ask again after each grant until their bytes are done; the grant order.
struct Writers {
  asio::io_context io;
  EgressScheduler scheduler;
  std::vector<std::string> order;
  explicit Writers(Settings s) : scheduler(io, s) {}
  void start(const std::string& name, std::uint64_t bytes, bool urgent = false, bool bulk = false) {
    const std::string* who = &names.emplace_back(name);  // a deque: stays where it is
    scheduler.request(who, bytes, urgent, bulk,
                      [this, who, bytes, urgent, bulk](std::uint64_t g) { granted(who, bytes, g, urgent, bulk); });
  }
  void granted(const std::string* who, std::uint64_t left, std::uint64_t g, bool urgent, bool bulk) {
    order.push_back(*who);
    if (left > g)
      scheduler.request(who, left - g, urgent, bulk,
                        [this, who, left, g, urgent, bulk](std::uint64_t next) { granted(who, left - g, next, urgent, bulk); });
    else if (bulk)
      scheduler.end_bulk(who);
  }
  std::deque<std::string> names;
};

TEST(EgressScheduler, WritersAreServedInTurnOneQuantumEach) {
  Writers w(Settings{100});
  w.start("a", 300);
  w.start("b", 200);
  w.io.run();
  EXPECT_EQ(w.order, (std::vector<std::string>{"a", "b", "a", "b", "a"}));
}

TEST(EgressScheduler, UrgentRequestsGoFirst) {
  Writers w(Settings{100});
  w.start("bulk", 300);
  w.start("ping", 10, /*urgent=*/true);
  w.io.run();
  EXPECT_EQ(w.order.front(), "ping");
}

TEST(EgressScheduler, OneTokenBucketCapsAllWritersTogether) {
  // 2 x 50 KB at 200 KB/s for the node: about 0.5 s minus the 10 KB burst (0.25 s per writer alone).
  Writers w(Settings{10000, 200000, 10000});
  const auto start = std::chrono::steady_clock::now();
  w.start("a", 50000);
  w.start("b", 50000);
  w.io.run();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(s, 0.4);
  EXPECT_LT(s, 2.0);
  EXPECT_EQ(w.order.size(), 10u);
}

TEST(EgressScheduler, TheBulkCapHoldsFlowsAndWakesTheNextOne) {
  asio::io_context io;
  EgressScheduler s(io, Settings{100, 0, 0, 1});
  int a = 0, b = 0;
  EXPECT_TRUE(s.bulk_slot_for(&a));
  s.request(&a, 100, false, true, [](std::uint64_t) {});
  io.run();
  EXPECT_EQ(s.bulk_flows(), 1u);
  EXPECT_TRUE(s.bulk_slot_for(&a)) << "a holds the slot";
  EXPECT_FALSE(s.bulk_slot_for(&b));
  bool woken = false;
  s.wake_on_bulk_slot(&b, [&] { woken = true; });
  s.end_bulk(&a);
  EXPECT_TRUE(woken);
  EXPECT_TRUE(s.bulk_slot_for(&b));
}

TEST(EgressScheduler, V01sChecks) {
  asio::io_context io;
  EXPECT_THROW(EgressScheduler(io, Settings{100, 10, 50}), InvalidArgumentError);  // burst < quantum
  EgressScheduler s(io, Settings{100});
  int a = 0;
  EXPECT_THROW(s.request(&a, 0, false, false, [](std::uint64_t) {}), InvalidArgumentError);
  s.request(&a, 10, false, false, [](std::uint64_t) {});
  EXPECT_THROW(s.request(&a, 10, false, false, [](std::uint64_t) {}), InvalidArgumentError) << "one at a time";
  s.cancel(&a);
  bool granted = false;
  s.request(&a, 10, false, false, [&](std::uint64_t g) { granted = g == 10; });
  io.run();
  EXPECT_TRUE(granted);
}

}  // namespace
}  // namespace wcomm
