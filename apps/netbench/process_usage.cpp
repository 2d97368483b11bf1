// getrusage snapshots and their difference, for the initiator and responder sections.
#include "netbench/process_usage.h"

#include <sys/resource.h>

namespace wcomm::bench {
namespace {

double seconds_of(const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; }

}  // namespace

ProcessUsage sample_process_usage() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  ProcessUsage out;
  out.user_cpu_s = seconds_of(usage.ru_utime);
  out.system_cpu_s = seconds_of(usage.ru_stime);
  out.max_rss_kib = usage.ru_maxrss;  // Linux reports KiB
  out.voluntary_context_switches = usage.ru_nvcsw;
  out.involuntary_context_switches = usage.ru_nivcsw;
  out.taken_at = std::chrono::steady_clock::now();
  return out;
}

void add_process_usage(nlohmann::json& section, const ProcessUsage& before, const ProcessUsage& after) {
  const double duration = std::chrono::duration<double>(after.taken_at - before.taken_at).count();
  const double user = after.user_cpu_s - before.user_cpu_s;
  const double system = after.system_cpu_s - before.system_cpu_s;
  const long voluntary = after.voluntary_context_switches - before.voluntary_context_switches;
  const long involuntary = after.involuntary_context_switches - before.involuntary_context_switches;
  section["process_observation_duration_s"] = duration;
  section["process_usage_delta"] = {
      {"involuntary_context_switches", involuntary},
      {"max_rss_kib", after.max_rss_kib},
      {"system_cpu_s", system},
      {"user_cpu_s", user},
      {"voluntary_context_switches", voluntary},
  };
  const double per_s = duration > 0.0 ? 1.0 / duration : 0.0;
  section["process_usage_rates_per_s"] = {
      {"involuntary_context_switches", static_cast<double>(involuntary) * per_s},
      {"system_cpu_s", system * per_s},
      {"user_cpu_s", user * per_s},
      {"voluntary_context_switches", static_cast<double>(voluntary) * per_s},
  };
}

}  // namespace wcomm::bench
