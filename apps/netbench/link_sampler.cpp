// The link sampler thread and one sample.
#include "netbench/link_sampler.h"

#include <time.h>

#include <chrono>
#include <stdexcept>

#include "netbench/diagnostics_proc.h"
#include "netbench/diagnostics_radio.h"

namespace wcomm::bench {
namespace {

double thread_cpu_seconds() {
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0.0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace

nlohmann::json take_link_sample(const std::string& interface, const std::vector<std::string>& irq_names, bool run_iw,
                                const CommandOptions& commands) {
  nlohmann::json sample = nlohmann::json::object();
  sample["captured_at_unix_s"] =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  sample["interface_statistics"] = interface.empty() ? nlohmann::json(nullptr) : read_interface_statistics(interface);
  sample["kernel_network_counters"] = read_kernel_network_counters(irq_names);
  sample["link_fields"] = run_iw ? read_link_fields(interface, commands) : nlohmann::json::object();
  return sample;
}

LinkSampler::LinkSampler(LinkSamplerOptions options) : options_(std::move(options)) {
  if (!(options_.interval_s > 0.0)) throw std::invalid_argument("the sample interval must be positive");
  // Resolved once: neither the interface's device nor the installed tools change during a run.
  irq_names_ = interface_irq_names(options_.interface);
  run_iw_ = !options_.interface.empty() && find_executable("iw", options_.commands.search_path).has_value();
}

LinkSampler::~LinkSampler() { stop(); }

void LinkSampler::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { run(); });
}

nlohmann::json LinkSampler::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  return samples();
}

nlohmann::json LinkSampler::samples() const {
  std::lock_guard lock(mutex_);
  return samples_;
}

void LinkSampler::run() {
  using Clock = std::chrono::steady_clock;
  const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.interval_s));
  auto next = Clock::now();
  for (;;) {
    nlohmann::json sample = take_link_sample(options_.interface, irq_names_, run_iw_, options_.commands);
    cpu_seconds_.store(thread_cpu_seconds());
    std::unique_lock lock(mutex_);
    samples_.push_back(std::move(sample));
    // The next slot on the fixed grid that is still ahead (a slow sample skips slots rather
    // than bunching samples together).
    const auto now = Clock::now();
    do next += period;
    while (next <= now);
    if (wake_.wait_until(lock, next, [this] { return stopping_; })) return;
  }
}

}  // namespace wcomm::bench
