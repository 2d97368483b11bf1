// Progress of one benchmark phase for the stderr lines: how far (step i of n) and an estimate
// of the time left from the mean time per finished step.
#pragma once

#include <cstdio>
#include <string>

#include "netbench/clock.h"

namespace wcomm::bench {

class PhaseProgress {
 public:
  PhaseProgress(std::string phase, std::size_t steps) : phase_(std::move(phase)), steps_(steps) {}

  // "<phase> i/n, about S s left: <detail>" after step i (1-based) finished.
  std::string line(std::size_t done, const std::string& detail) const {
    const double elapsed = seconds_between(start_, BenchClock::now());
    const double left = done == 0 ? 0.0 : elapsed / static_cast<double>(done) * static_cast<double>(steps_ - done);
    char head[160];
    std::snprintf(head, sizeof head, "%s %zu/%zu, about %.0f s left: ", phase_.c_str(), done, steps_, left);
    return head + detail;
  }

 private:
  std::string phase_;
  std::size_t steps_;
  BenchClock::time_point start_ = BenchClock::now();
};

}  // namespace wcomm::bench
