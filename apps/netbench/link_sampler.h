// The periodic link sampler of a benchmark node: a thread that records V0.1's link_samples
// (interface statistics, kernel network counters and iw link fields over time) while the run
// goes on. It must not perturb what it observes: it reads /proc and /sys directly and runs
// `iw` only when it is installed, so one sample costs well under a millisecond of CPU.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "diagnostics_commands.h"  // sibling-relative: the tests include apps/netbench headers by path

namespace wcomm::bench {

struct LinkSamplerOptions {
  std::string interface;        // "" records null interface statistics and {} link fields
  double interval_s = 1.0;      // --sample-interval
  CommandOptions commands;      // for iw (timeout, PATH)
};

// One link_samples entry, taken now: {captured_at_unix_s, interface_statistics,
// kernel_network_counters, link_fields}. `irq_names` as interface_irq_names(interface);
// `run_iw` false skips the iw call (link_fields {}).
nlohmann::json take_link_sample(const std::string& interface, const std::vector<std::string>& irq_names, bool run_iw,
                                const CommandOptions& commands = {});

class LinkSampler {
 public:
  explicit LinkSampler(LinkSamplerOptions options);
  ~LinkSampler();  // stops the thread (the samples are dropped if stop() was not called)
  LinkSampler(const LinkSampler&) = delete;
  LinkSampler& operator=(const LinkSampler&) = delete;

  // Starts the thread: the first sample is taken at once, then one every interval_s (on a
  // fixed schedule, so slow samples do not make the period drift). Call once.
  void start();

  // Stops the thread (waking it at once) and returns the samples as a JSON array, oldest
  // first. Later calls return the same samples.
  nlohmann::json stop();

  // A copy of the samples taken so far.
  nlohmann::json samples() const;

  // CPU time the sampler thread has used so far (CLOCK_THREAD_CPUTIME_ID), seconds: the
  // evidence that sampling stays cheap (an iw child's own CPU is not in it).
  double cpu_seconds() const { return cpu_seconds_.load(); }

 private:
  void run();

  LinkSamplerOptions options_;
  std::vector<std::string> irq_names_;
  bool run_iw_ = false;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  nlohmann::json samples_ = nlohmann::json::array();
  std::atomic<double> cpu_seconds_{0.0};
  std::thread thread_;
};

}  // namespace wcomm::bench
