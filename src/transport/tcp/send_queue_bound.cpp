#include "transport/tcp/send_queue_bound.h"

#include <linux/tcp.h>  // (glibc's tcp_info lacks tcpi_min_rtt and tcpi_delivery_rate)
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <fstream>

namespace wcomm::transport {

std::uint64_t max_send_buffer_bytes() {
  static const std::uint64_t bytes = [] {
    std::uint64_t wmem_max = 212992;  // the kernel's default, if /proc cannot say
    std::ifstream("/proc/sys/net/core/wmem_max") >> wmem_max;
    return 2 * wmem_max;  // the kernel doubles what SO_SNDBUF asks, for its own overhead
  }();
  return bytes;
}

std::uint64_t send_budget_bytes(std::uint64_t rate, std::uint64_t window_us) {
  return std::max<std::uint64_t>(rate * window_us / 1'000'000 + SendQueueBound::kShareBytes, SendQueueBound::kMinBytes);
}

void SendQueueBound::on_write_blocked(int fd) {
  const auto now = std::chrono::steady_clock::now();
  const bool looked = last_ != std::chrono::steady_clock::time_point{};
  if (looked && now < last_ + kInterval) return;
  tcp_info info{};
  socklen_t length = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return;
  // The rate the path delivered since the last look (bytes acknowledged over time): an
  // average, where one delivery-rate sample can read twice the link (ACKs come in bursts on
  // Wi-Fi). A look that follows a pause (an application-limited stretch) starts afresh.
  const auto since = now - last_;
  const std::uint64_t acked = info.tcpi_bytes_acked - last_acked_;
  const bool fresh = looked && since < 4 * kInterval;
  last_ = now;
  last_acked_ = info.tcpi_bytes_acked;
  if (!fresh || info.tcpi_min_rtt == 0 || acked == 0) return;
  const std::uint64_t rate = acked * 1'000'000'000ull / std::chrono::duration_cast<std::chrono::nanoseconds>(since).count();
  const std::uint64_t window_us = info.tcpi_min_rtt + static_cast<std::uint64_t>(target_.count());
  if (bytes() == 0 && info.tcpi_rtt < window_us) return;  // no standing queue on the path
  std::uint64_t budget = send_budget_bytes(rate, window_us);
  if (budget > max_send_buffer_bytes()) {
    if (bytes() == 0) return;  // a path too long to bound without costing goodput
    budget = max_send_buffer_bytes();
  }
  const int asked = static_cast<int>(budget / 2);  // (the kernel doubles it)
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &asked, sizeof asked) == 0) bytes_.store(budget, std::memory_order_relaxed);
}

}  // namespace wcomm::transport
