#include "lag.h"

#include "output.h"

#include <time.h>

#include <algorithm>
#include <cstdio>

#include <ns3/realtime-simulator-impl.h>
#include <ns3/simulator.h>

namespace wifi_cell {

void LagStats::add(double ms) {
  ++samples;
  sum_ms += ms;
  max_ms = std::max(max_ms, ms);
}

double wall_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

LagMonitor::LagMonitor(double probe_ms, double report_s, double limit_ms)
    : probe_ms_(probe_ms), report_s_(report_s), limit_ms_(limit_ms) {}

void LagMonitor::start() {
  started_wall_s_ = window_wall_s_ = wall_seconds();
  started_cpu_s_ = window_cpu_s_ = cpu_seconds();
  ns3::Simulator::Schedule(ns3::MilliSeconds(probe_ms_), &LagMonitor::probe, this);
  ns3::Simulator::Schedule(ns3::Seconds(report_s_), &LagMonitor::report, this);
}

// A probe due at simulated time t runs when the wall clock has reached t or later; how much
// later is the lag every frame event near it suffered too.
void LagMonitor::probe() {
  auto impl = ns3::DynamicCast<ns3::RealtimeSimulatorImpl>(ns3::Simulator::GetImplementation());
  const double lag_ms = (impl->RealtimeNow() - ns3::Simulator::Now()).GetSeconds() * 1e3;
  const double clamped = std::max(0.0, lag_ms);
  window_.add(clamped);
  total_.add(clamped);
  ns3::Simulator::Schedule(ns3::MilliSeconds(probe_ms_), &LagMonitor::probe, this);
}

double LagMonitor::cpu_fraction_since(double wall_s, double cpu_s) const {
  const double wall = wall_seconds() - wall_s;
  return wall > 0 ? (cpu_seconds() - cpu_s) / wall : 0.0;
}

void LagMonitor::report() {
  emit(format(
      "{\"event\":\"lag\",\"t_s\":%.3f,\"mean_ms\":%.4f,\"max_ms\":%.3f,\"samples\":%llu,"
      "\"run_mean_ms\":%.4f,\"run_max_ms\":%.3f,\"cpu\":%.3f,\"ok\":%s}",
      ns3::Simulator::Now().GetSeconds(), window_.mean_ms(), window_.max_ms,
      static_cast<unsigned long long>(window_.samples), total_.mean_ms(), total_.max_ms,
      cpu_fraction_since(window_wall_s_, window_cpu_s_), window_.mean_ms() <= limit_ms_ ? "true" : "false"));
  window_ = {};
  window_wall_s_ = wall_seconds();
  window_cpu_s_ = cpu_seconds();
  ns3::Simulator::Schedule(ns3::Seconds(report_s_), &LagMonitor::report, this);
}

std::string LagMonitor::summary_json() const {
  return format("{\"event\":\"exit\",\"t_s\":%.3f,\"lag_mean_ms\":%.4f,\"lag_max_ms\":%.3f,\"samples\":%llu,"
                "\"lag_limit_ms\":%.3f,\"cpu\":%.3f,\"ok\":%s}",
                ns3::Simulator::Now().GetSeconds(), total_.mean_ms(), total_.max_ms,
                static_cast<unsigned long long>(total_.samples), limit_ms_,
                cpu_fraction_since(started_wall_s_, started_cpu_s_), within_limit() ? "true" : "false");
}

}  // namespace wifi_cell
