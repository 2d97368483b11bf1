// send_budget_bytes, the rule by which SendQueueBound sizes a connection's send buffer, in a
// model of flows sharing one FIFO bottleneck (an access point sending to several stations):
// each flow is limited by its buffer, so it delivers its budget once per round trip, and the
// round trip is the base RTT plus what all budgets queue beyond the link's pipe. Each look
// sets every budget from the rate its flow delivered since the last one, as
// SendQueueBound::on_write_blocked does every 10 ms. The real flows are checked through a
// real queue in CommQueueBoundNetns and on the emulated cell (docs/wifi.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "transport/tcp/send_queue_bound.h"

namespace wcomm::transport {
namespace {

struct SharedQueue {
  double link = 16e6;        // bytes a second (the cell's 130 Mbit/s)
  double base_us = 1000;     // min RTT
  double target_us = 8000;   // tcp_target_queue_delay_us's default
  double rtt_us = base_us;   // the last round trip

  // One look: budgets from the rates, then the rates those budgets give through the queue.
  std::vector<double> look(const std::vector<double>& rates) {
    std::vector<double> budgets;
    for (double r : rates)
      budgets.push_back(static_cast<double>(send_budget_bytes(static_cast<std::uint64_t>(r),
                                                              static_cast<std::uint64_t>(base_us + target_us))));
    const double in_flight = std::accumulate(budgets.begin(), budgets.end(), 0.0);
    rtt_us = std::max(base_us, in_flight / link * 1e6);  // beyond the pipe, it queues
    std::vector<double> next;
    for (double b : budgets) next.push_back(b / rtt_us * 1e6);
    return next;
  }
};

double slowest_over_fastest(const std::vector<double>& rates) {
  return *std::min_element(rates.begin(), rates.end()) / *std::max_element(rates.begin(), rates.end());
}

TEST(SendQueueBound, BudgetIsTheWindowsBytesPlusTheShareAtLeastTheFloor) {
  EXPECT_EQ(send_budget_bytes(16'000'000, 9000), 144'000 + SendQueueBound::kShareBytes);
  EXPECT_EQ(send_budget_bytes(0, 9000), SendQueueBound::kMinBytes);
  EXPECT_EQ(send_budget_bytes(1'000'000, 2000), SendQueueBound::kMinBytes);  // 2 KB + 8 KiB < 16 KiB
}

// The fan-out unfairness seen on the cell (Jain 0.84 with three flows, one at twice the
// others): with budgets proportional to rates alone, a 3:1 split through one queue is kept
// for ever. The shared constant pulls it even within a second (100 looks).
TEST(SendQueueBound, FlowsThroughOneQueueConvergeToEqualShares) {
  SharedQueue q;
  std::vector<double> rates{0.75 * q.link, 0.25 * q.link};
  for (int i = 0; i < 100; ++i) rates = q.look(rates);
  EXPECT_GT(slowest_over_fastest(rates), 0.99) << rates[0] << " vs " << rates[1];
  // The link stays full, and the queue is the target plus 2 shares' worth (1 ms here).
  EXPECT_NEAR(rates[0] + rates[1], q.link, 0.01 * q.link);
  const double share_us = 2.0 * SendQueueBound::kShareBytes / q.link * 1e6;
  EXPECT_NEAR(q.rtt_us, q.base_us + q.target_us + share_us, 0.05 * share_us);
}

TEST(SendQueueBound, ThreeFlowsFromAnyStartShareEvenly) {
  SharedQueue q;
  for (const auto& start : {std::vector<double>{0.9, 0.05, 0.05}, std::vector<double>{0.5, 0.25, 0.25},
                            std::vector<double>{0.2, 0.2, 0.6}}) {
    std::vector<double> rates;
    for (double s : start) rates.push_back(s * q.link);
    for (int i = 0; i < 100; ++i) rates = q.look(rates);
    EXPECT_GT(slowest_over_fastest(rates), 0.98) << start[0] << "/" << start[1] << "/" << start[2];
  }
}

// A newcomer (its first look at a low rate) gets its share too, and the one flow alone queues
// the target plus one share.
TEST(SendQueueBound, ANewFlowGetsItsShareAndOneFlowQueuesTheTargetPlusOneShare) {
  SharedQueue q;
  std::vector<double> one{q.link};
  for (int i = 0; i < 100; ++i) one = q.look(one);
  const double share_us = SendQueueBound::kShareBytes / q.link * 1e6;
  EXPECT_NEAR(q.rtt_us, q.base_us + q.target_us + share_us, 0.05 * share_us);
  std::vector<double> two{one[0], 0.01 * q.link};
  for (int i = 0; i < 100; ++i) two = q.look(two);
  EXPECT_GT(slowest_over_fastest(two), 0.99) << two[0] << " vs " << two[1];
}

}  // namespace
}  // namespace wcomm::transport
