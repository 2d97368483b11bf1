// Egress pacing: a token bucket that spreads a peer's writes to egress_rate_bytes_per_second,
// in quanta of egress_quantum_bytes with bursts of up to egress_burst_bytes.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include <asio.hpp>

namespace wcomm {

class EgressPacer {
 public:
  using Clock = std::chrono::steady_clock;
  EgressPacer(double rate_bytes_per_second, std::uint64_t burst_bytes)
      : rate_(rate_bytes_per_second), burst_(static_cast<double>(burst_bytes)), tokens_(burst_), last_(Clock::now()) {}

  bool enabled() const { return rate_ > 0; }

  // How long to wait before `bytes` may be written (zero: now).
  Clock::duration delay_for(std::uint64_t bytes) {
    refill();
    double missing = static_cast<double>(bytes) - tokens_;
    if (missing <= 0) return Clock::duration::zero();
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(missing / rate_));
  }
  void consume(std::uint64_t bytes) {
    refill();
    tokens_ -= static_cast<double>(bytes);
  }

 private:
  void refill() {
    auto now = Clock::now();
    tokens_ = std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * rate_);
    last_ = now;
  }
  double rate_, burst_, tokens_;
  Clock::time_point last_;
};

// The next at-most-`limit` bytes of a gather list, starting `offset` bytes in.
inline std::vector<asio::const_buffer> slice_buffers(const std::vector<asio::const_buffer>& all, std::uint64_t offset,
                                                     std::uint64_t limit) {
  std::vector<asio::const_buffer> out;
  for (const auto& b : all) {
    if (limit == 0) break;
    if (offset >= b.size()) {
      offset -= b.size();
      continue;
    }
    std::uint64_t take = std::min<std::uint64_t>(b.size() - offset, limit);
    out.emplace_back(static_cast<const char*>(b.data()) + offset, take);
    offset = 0;
    limit -= take;
  }
  return out;
}

}  // namespace wcomm
