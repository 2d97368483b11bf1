// How far the simulator's clock falls behind the wall clock. A real-time emulation is only
// valid while it keeps up: behind, every frame is late by the lag on top of the modelled air.
#pragma once

#include <cstdint>
#include <string>

namespace wifi_cell {

struct LagStats {
  uint64_t samples = 0;
  double sum_ms = 0.0;
  double max_ms = 0.0;
  void add(double ms);
  double mean_ms() const { return samples ? sum_ms / samples : 0.0; }
};

class LagMonitor {
 public:
  LagMonitor(double probe_ms, double report_s, double limit_ms);
  // Schedules the probes and reports; call before Simulator::Run.
  void start();
  // The whole run: the JSON line printed at exit, and whether its mean stayed within the limit.
  std::string summary_json() const;
  bool within_limit() const { return total_.mean_ms() <= limit_ms_; }
  const LagStats& total() const { return total_; }

 private:
  void probe();
  void report();
  double cpu_fraction_since(double wall_s, double cpu_s) const;

  double probe_ms_, report_s_, limit_ms_;
  LagStats window_, total_;
  double started_wall_s_ = 0.0, started_cpu_s_ = 0.0;
  double window_wall_s_ = 0.0, window_cpu_s_ = 0.0;
};

// Seconds of wall clock (monotonic) and of this process's CPU time.
double wall_seconds();
double cpu_seconds();

}  // namespace wifi_cell
